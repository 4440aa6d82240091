"""The two engines leave the same state: every SQL step fixture (tests/fixtures/steps) run twice
side by side, every epoch in Spark in one project and in process (where it can) in the other,
and after each step every state table of every view holds the same current content in both.
The Spark project's first builds are written by the executors, the other's are small builds
(computed in process where they can, and written by delta-rs): both ways of building state
meet too, down to the layout each table records (how its keys are bucketed).

Run with ``IVM_STATE_PARITY=all`` for every fixture (the suite runs the ones in COMPARED).
The oracle checks each engine's output; this checks what the next epoch will read, so a rule
whose two copies drift (a type, a rounding, a bucket, a weight) shows up at the step where it
drifts, even before an output differs. An epoch may run in either engine and hand its state
to the other, which only works if both write the same.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from ivm_assets.delta.handles import is_delta_table
from ivm_assets.delta.read import read_small
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.settings import DEFAULT_SMALL_BUILD_ROWS, SMALL_BUILD_ROWS_ENV
from ivm_assets.rules.incrementalize import operators
from ivm_assets.zset import EPOCH, WEIGHT
from tests.conftest import ProjectBuilder, small_epochs
from tests.test_sql_steps import FILES, FileRun, _apply_step, _build, load_spec
from ivm_assets.state import arrangement

ENGINES = {"spark": "spark", "in process": "auto"}


def _current(uri: str, kind: str, keys: tuple[str, ...]) -> list[tuple]:
    """A state table's current content as sorted rows: a z-set's rows with their summed
    weights (zeros dropped), a latest-value table's newest row per key."""
    if not is_delta_table(uri):
        return []
    table = read_small(uri)
    columns = [c for c in table.column_names if c not in (WEIGHT, EPOCH)]
    rows = table.to_pylist()
    if kind == "zset":
        summed: dict[tuple, int] = defaultdict(int)
        for row in rows:
            summed[tuple(_comparable(row[c]) for c in columns)] += row[WEIGHT]
        return sorted(((*k, w) for k, w in summed.items() if w != 0), key=repr)
    newest: dict[tuple, dict] = {}
    for row in rows:
        key = tuple(_comparable(row[k]) for k in keys)
        if key not in newest or row[EPOCH] > newest[key][EPOCH]:
            newest[key] = row
    return sorted((tuple(_comparable(r[c]) for c in columns) for r in newest.values()), key=repr)


def _comparable(value):
    """NaN equal to NaN, and −0.0 to 0.0, as state lookups compare them."""
    if isinstance(value, float):
        return "NaN" if value != value else value + 0.0
    return value


def _states(run: FileRun) -> dict[str, tuple[pa.Schema | None, str | None, list[tuple]]]:
    """Per state table: its types, its recorded layout (how its keys are bucketed) and its
    current rows."""
    project = run.project
    found = {}
    for name, view in project.compile().items():
        root = project.location(name).state_root
        for op in operators(view.root) if view.root is not None else ():
            for table in op.state_tables:
                uri = table.uri(root)
                schema = arrow_schema(uri) if is_delta_table(uri) else None
                layout = (arrangement.head_layout(table, root) or (None, None))[1]
                found[f"{name}/{table.table_name}"] = (schema, layout and layout.to_json(), _current(uri, table.layout_kind, table.keys))
    return found


# One fixture per operator family whose epochs run in process (aggregates with and without
# MIN/MAX and COUNT DISTINCT, a global aggregate, subqueries, joins, top-k, NULL keys): the
# suite's time goes to these, not to fixtures whose epochs all run in Spark anyway (see the
# skips of `IVM_STATE_PARITY=all`, which runs every fixture).
COMPARED = ("aggregate_min_max", "join_inner", "top_k", "nulls")


def _compared(path: Path) -> bool:
    spec = load_spec(path)
    wanted = os.environ.get("IVM_STATE_PARITY") == "all" or path.stem in COMPARED
    return wanted and not spec.get("xfail") and bool(spec.get("steps"))


def _refresh(run: FileRun, engine: str, monkeypatch):
    with monkeypatch.context() as env, small_epochs(ENGINES[engine]):
        env.setenv(SMALL_BUILD_ROWS_ENV, "0" if engine == "spark" else str(DEFAULT_SMALL_BUILD_ROWS))
        return run.project.refresh()


@pytest.mark.parametrize("path", [p for p in FILES if _compared(p)], ids=lambda p: p.stem)
def test_both_engines_leave_the_same_state(path: Path, tmp_path, spark, monkeypatch):
    local = FileRun(load_spec(path))
    _build(local, ProjectBuilder(tmp_path / "in_process", spark))
    views = local.project.compile()
    if all(v.root is None for v in views.values()):
        pytest.skip("no view of this fixture is maintained incrementally")
    _refresh(local, "in process", monkeypatch)
    steps = local.spec["steps"]
    # The first step tells whether any epoch runs in process (expressions and types allow it
    # or not, whatever the step): only then is the Spark twin worth building.
    _apply_step(local, steps[0])
    first = {r.view: r.engine for r in _refresh(local, "in process", monkeypatch)}
    if "in process" not in first.values():
        pytest.skip(f"no epoch runs in process ({'; '.join(sorted({e for e in first.values() if e}))[:300]}): nothing to compare")
    twin = FileRun(load_spec(path))
    _build(twin, ProjectBuilder(tmp_path / "spark", spark))
    _refresh(twin, "spark", monkeypatch)
    for index, step in enumerate(steps):
        if index:
            _apply_step(local, step)
            ran = {r.view: r.engine for r in _refresh(local, "in process", monkeypatch)}
        else:
            ran = first
        _apply_step(twin, step)
        _refresh(twin, "spark", monkeypatch)
        spark_state, local_state = _states(twin), _states(local)
        problems = [
            f"{table}: {_what_differs(spark_state[table], local_state.get(table))} differ\n"
            f"    in Spark:   {spark_state[table]}\n    in process: {local_state.get(table)}"
            for table in spark_state
            if spark_state[table] != local_state.get(table)
        ]
        assert not problems, f"after step {index + 1} ({step.get('name')}; in process: {ran}):\n" + "\n".join(problems)


def _what_differs(spark: tuple, local: tuple | None) -> str:
    if local is None:
        return "tables"
    return next(what for what, a, b in zip(("types", "layouts", "rows"), spark, local) if a != b)
