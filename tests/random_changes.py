"""Random change batches for property tests: inserts (with duplicates and NULLs), deletes
and updates of existing rows, applied to real Delta sources through delta-rs."""

from __future__ import annotations

import itertools

from ivm_assets.delta.write import delete_rows, update_rows, write
import pyarrow as pa
from hypothesis import strategies as st


SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.int64()), ("x", pa.float64()), ("s", pa.string())])

keys = st.sampled_from([0, 1, 2, None])
values = st.one_of(st.none(), st.integers(-2, 5))
floats = st.sampled_from([0.5, 1.25, 3.0, -2.5, None])
strings = st.sampled_from(["a", "b", "c", None])


def initial_table(ids: itertools.count, n: int = 6) -> pa.Table:
    rows = [{"id": next(ids), "k": i % 3 if i % 4 else None, "v": i - 1, "x": 0.5 * i, "s": "abc"[i % 3]} for i in range(n)]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def apply_random_batch(data, uri: str, ids: itertools.count, live: list[int]) -> None:
    """Draw and apply one batch of changes to the table at ``uri``; ``live`` tracks ids present."""
    for _ in range(data.draw(st.integers(1, 3), label="actions")):
        kind = data.draw(st.sampled_from(["insert", "delete", "update"] if live else ["insert"]), label="kind")
        if kind == "insert":
            row = {"id": next(ids), "k": data.draw(keys), "v": data.draw(values), "x": data.draw(floats), "s": data.draw(strings)}
            copies = data.draw(st.integers(1, 2), label="copies")  # identical rows: bag semantics
            write(uri, pa.Table.from_pylist([row] * copies, schema=SCHEMA), mode="append")
            live.append(row["id"])
        elif kind == "delete":
            victim = data.draw(st.sampled_from(live), label="delete id")
            delete_rows(uri, f"id = {victim}")
            live.remove(victim)
        else:
            target = data.draw(st.sampled_from(live), label="update id")
            column, value = data.draw(
                st.one_of(
                    st.tuples(st.just("v"), values.map(lambda v: "NULL" if v is None else str(v))),
                    st.tuples(st.just("k"), keys.map(lambda v: "NULL" if v is None else str(v))),
                ),
                label="update",
            )
            update_rows(uri, set_sql={column: value}, predicate=f"id = {target}")
