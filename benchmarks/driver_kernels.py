"""The driver's two grouping kernels against Arrow's hash group_by doing the same work.

An epoch in process consolidates changes on the driver (``state.driver_rows.sum_weights``:
the rows once per distinct tuple, with the sum of their weights) and, before each state
lookup, lists a change's distinct keys per bucket (``state.arrangement._by_bucket``). Both
were Arrow's ``Table.group_by``; they are now numpy adds indexed by the tuples' codes, and a
sort by bucket with ``pc.unique`` per bucket. This times each against the ``group_by`` it
replaced, on scattered random keys (half as many distinct tuples as rows; weights −1, 1 and
2; four buckets), checks that both give the same rows in the same order, and prints and
saves the medians. Printed, not asserted.

    python benchmarks/driver_kernels.py [--rows 1500,100000,6000000] [--repeats 5]

Results go to benchmarks/results/driver_kernels.md and .json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ivm_assets.state import driver_rows  # noqa: E402
from ivm_assets.state.arrangement import _by_bucket  # noqa: E402
from ivm_assets.zset import BUCKET, value_runs  # noqa: E402

RESULTS = HERE / "results"


def hash_sum_weights(rows: pa.Table, columns: tuple[str, ...], weight: str, codes: pa.Array) -> pa.Table:
    """``sum_weights`` as it was written with Arrow's hash aggregate (until 2026-12-03)."""
    sums = (
        pa.table({"code": codes, "w": rows.column(weight), "row": pa.array(range(rows.num_rows), pa.int64())})
        .group_by("code", use_threads=False)
        .aggregate([("w", "sum"), ("row", "min")])
    )
    live = sums.filter(pc.not_equal(sums.column("w_sum"), 0))
    first = rows.select(list(columns)).take(live.column("row_min"))
    field = rows.schema.field(weight)
    return pa.Table.from_arrays([*first.columns, live.column("w_sum").cast(field.type)], schema=first.schema.append(field))


def hash_by_bucket(touched: pa.Table, key: str) -> dict[str, pa.Array]:
    """``_by_bucket`` as it was written with Arrow's hash group_by (until 2026-12-03)."""
    pairs = touched.select([key, BUCKET]).group_by([BUCKET, key]).aggregate([]).sort_by(BUCKET)
    runs = value_runs(pairs.column(BUCKET))
    values = pairs.column(key).combine_chunks()
    return {bucket: values.slice(offset, length) for bucket, (offset, length) in runs.items()}


def _median_ms(call, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1500,100000,6000000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(20261203)
    rows_out = []
    for n in (int(v) for v in args.rows.split(",")):
        rows = pa.table({"k": pa.array(rng.integers(0, max(n // 2, 1), n)), "__w": pa.array(rng.choice([-1, 1, 2], n).astype(np.int64))})
        codes = driver_rows.tuple_codes([(rows, ("k",))])[0]
        ours_ms, ours = _median_ms(lambda: driver_rows.sum_weights(rows, ("k",), "__w", codes), args.repeats)
        hash_ms, theirs = _median_ms(lambda: hash_sum_weights(rows, ("k",), "__w", codes), args.repeats)
        assert ours.equals(theirs), f"sum_weights differs from the hash aggregate at {n} rows"
        touched = pa.table({"k": rows.column("k"), BUCKET: pa.array(rng.integers(0, 4, n).astype(np.int32))})
        keys_ms, keys = _median_ms(lambda: _by_bucket(touched, "k"), args.repeats)
        hash_keys_ms, hash_keys = _median_ms(lambda: hash_by_bucket(touched, "k"), args.repeats)
        assert {b: sorted(v.to_pylist()) for b, v in keys.items()} == {b: sorted(v.to_pylist()) for b, v in hash_keys.items()}
        rows_out.append({"rows": n, "groups": ours.num_rows, "sum_weights_ms": ours_ms, "hash_sum_weights_ms": hash_ms,
                         "by_bucket_ms": keys_ms, "hash_by_bucket_ms": hash_keys_ms})
    save(args, rows_out)


def save(args, rows: list[dict]) -> None:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# The driver's grouping kernels against Arrow's hash group_by ({when}, medians of {args.repeats})", "",
        "| rows | groups | sum_weights ms | hash aggregate ms | keys by bucket ms | hash group_by ms |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['rows']:,} | {r['groups']:,} | {r['sum_weights_ms']:.2f} | {r['hash_sum_weights_ms']:.2f} | "
                     f"{r['by_bucket_ms']:.2f} | {r['hash_by_bucket_ms']:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "driver_kernels.md").write_text(text)
    (RESULTS / "driver_kernels.json").write_text(json.dumps({"when": when, "args": vars(args), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
