"""SQL step fixtures: views refreshed incrementally through scripted source edits.

Each ``tests/fixtures/steps/*.yaml`` file declares sources (schema + rows), views (SQL) and a
list of steps. One project is built per file and shared by the file's tests, which run in
order: ``initial`` (first build, a full refresh) and then one test per step. A step applies
source edits (delta-rs commits), refreshes the project once, and checks

* each view's refresh mode (``incremental`` unless the fixture or the step says otherwise;
  ``unchanged`` is accepted when none of the view's inputs moved),
* the view's full contents against ``expect:`` (bags: order-free; numbers compared after
  rounding, so DECIMAL/DOUBLE results can be written as plain YAML numbers),
* the correctness oracle (every view equals its query recomputed from scratch).

Fixture format::

    sources:
      orders:
        schema: {id: bigint, cust: bigint, amount: "decimal(10,2)", note: string}
        rows: [[1, 10, 5.00, a], ...]
    views:
      v: SELECT ...                  # or {sql: ..., refresh: auto|incremental|full}
    mode: {v: full}                  # optional: expected mode of every step (default incremental)
    initial: {v: [[...], ...]}       # optional: expected contents after the first build
    xfail: "reason"                  # optional: the whole file is a known engine bug
    steps:
      - name: ...
        delete: {orders: "id = 3"}                       # DataFusion predicate(s)
        insert: {orders: [[9, 11, 1.50, x]]}
        update: {orders: {set: {amount: "amount + 1"}, where: "id = 1"}}
        actions:                                         # or: a list applied in order
          - update: {orders: {set: {...}, where: ...}}
          - delete: {orders: "..."}
        expect: {v: [[...], ...]}
        mode: {v: incremental}                           # optional override
        xfail: "reason"                                  # optional: this step is a known engine bug

The edits of one step are applied in the order their keys are written (``actions`` entries
in list order; a list under ``delete``/``update`` in list order), each as its own Delta
commit, and the project is refreshed once after all of them. Steps without ``expect:`` are
still checked against the oracle.

A step (or file) marked ``xfail`` runs under ``pytest.mark.xfail(strict=True)``: it must
fail, so a fixed bug shows up as XPASS and the mark is removed. When a step fails, the next
step first rebuilds the project's outputs and state from scratch (drops the warehouse and
refreshes), so one engine bug does not cascade into the following steps.

``IVM_STEP_FIXTURES=/some/folder pytest tests/test_sql_steps.py`` runs the fixtures of
another folder instead (handy for trying out a new one).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from tests.conftest import assert_oracle
from tests.rules.harness import epochs_alternating

# IVM_STEP_FIXTURES points the runner at another folder of fixtures (to try one out).
STEPS_DIR = Path(os.environ.get("IVM_STEP_FIXTURES") or Path(__file__).parent / "fixtures" / "steps")
FILES = sorted(STEPS_DIR.glob("*.yaml"))

# --- fixture parsing ---------------------------------------------------------------------
_SIMPLE_TYPES = {
    "bigint": pa.int64(),
    "long": pa.int64(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "smallint": pa.int16(),
    "double": pa.float64(),
    "float": pa.float32(),
    "string": pa.string(),
    "date": pa.date32(),
    "boolean": pa.bool_(),
    "bool": pa.bool_(),
}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$", re.IGNORECASE)


def arrow_type(name: str) -> pa.DataType:
    name = name.strip().lower()
    if name in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[name]
    m = _DECIMAL.match(name)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    raise ValueError(f"unsupported fixture type {name!r}")


def arrow_schema(schema: dict[str, str]) -> pa.Schema:
    return pa.schema([pa.field(col, arrow_type(t), nullable=True) for col, t in schema.items()])


def _cell(value, dtype: pa.DataType):
    if value is None:
        return None
    if pa.types.is_decimal(dtype):
        return Decimal(str(value)).quantize(Decimal(1).scaleb(-dtype.scale))
    if pa.types.is_date(dtype):
        return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
    if pa.types.is_string(dtype):
        return str(value)
    if pa.types.is_floating(dtype):
        return float(value)
    if pa.types.is_integer(dtype):
        return int(value)
    if pa.types.is_boolean(dtype):
        return bool(value)
    return value


def arrow_rows(schema: pa.Schema, rows: list[list]) -> pa.Table:
    """A pyarrow table of ``rows`` (lists in schema column order) with exactly ``schema``."""
    for row in rows:
        if len(row) != len(schema):
            raise ValueError(f"row {row!r} has {len(row)} values; schema has {len(schema)} columns {schema.names}")
    columns = [pa.array([_cell(row[i], f.type) for row in rows], type=f.type) for i, f in enumerate(schema)]
    return pa.Table.from_arrays(columns, schema=schema)


# --- comparing rows ----------------------------------------------------------------------
def _norm(value):
    """A value in a comparable form: DECIMAL and DOUBLE as floats rounded to 9 significant digits."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, (float, Decimal)):
        x = float(value)
        if x == 0 or math.isnan(x) or math.isinf(x):
            return x
        return round(x, 8 - int(math.floor(math.log10(abs(x)))))
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def _sort_key(row: tuple):
    return tuple(
        (0, 0, "") if v is None else (1, 0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 1, str(v))
        for v in row
    )


def normalized_bag(rows) -> list[tuple]:
    return sorted((tuple(_norm(v) for v in row) for row in rows), key=_sort_key)


# --- one file's run ----------------------------------------------------------------------
@dataclass
class FileRun:
    """A fixture file's project, and how far its steps have got."""

    spec: dict
    project: object = None
    schemas: dict[str, pa.Schema] = field(default_factory=dict)
    done: int = -1  # index of the last step applied (-1: only the first build)
    broken: bool = False  # the last step failed: rebuild before the next one


def load_spec(path: Path) -> dict:
    spec = yaml.safe_load(path.read_text())
    unknown = set(spec) - {"sources", "views", "steps", "initial", "mode", "xfail", "description"}
    assert not unknown, f"{path.name}: unknown keys {unknown}"
    for i, step in enumerate(spec.get("steps") or []):
        unknown = set(step) - {"name", "delete", "insert", "update", "actions", "expect", "mode", "xfail"}
        assert not unknown, f"{path.name} step {i}: unknown keys {unknown}"
    return spec


def _cases():
    for path in FILES:
        spec = load_spec(path)
        file_xfail = spec.get("xfail")
        marks = [pytest.mark.xfail(reason=file_xfail, strict=True)] if file_xfail else []
        yield pytest.param(path, -1, id=f"{path.stem}::initial", marks=marks)
        for i, step in enumerate(spec.get("steps") or []):
            reason = step.get("xfail") or file_xfail
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            name = re.sub(r"[^A-Za-z0-9]+", "_", step.get("name", "")).strip("_")
            yield pytest.param(path, i, id=f"{path.stem}::{i + 1:02d}_{name}", marks=marks)


@pytest.fixture(scope="session")
def step_runs() -> dict[Path, FileRun]:
    return {}


def _build(run: FileRun, builder) -> None:
    spec = run.spec
    for name, source in spec["sources"].items():
        schema = arrow_schema(source["schema"])
        run.schemas[name] = schema
        builder.source(name, arrow_rows(schema, source.get("rows") or []))
    for name, view in spec["views"].items():
        if isinstance(view, str):
            builder.view(name, view)
        else:
            settings = {k: v for k, v in view.items() if k != "sql"}
            builder.view(name, view["sql"], **settings)
    run.project = builder.load()


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _apply(run: FileRun, kind: str, edits: dict) -> None:
    from ivm_assets.delta.write import delete_rows, update_rows, write

    for source, spec in edits.items():
        uri = run.project.sources[source]
        if kind == "delete":
            for predicate in _as_list(spec):
                delete_rows(uri, predicate)
        elif kind == "insert":
            write(uri, arrow_rows(run.schemas[source], spec), mode="append")
        elif kind == "update":
            for upd in _as_list(spec):
                update_rows(uri, set_sql={k: str(v) for k, v in upd["set"].items()}, predicate=upd["where"])
        else:
            raise ValueError(f"unknown action {kind!r}")


def _apply_step(run: FileRun, step: dict) -> None:
    for key, value in step.items():
        if key in ("delete", "insert", "update"):
            _apply(run, key, value)
        elif key == "actions":
            for action in value:
                for kind, edits in action.items():
                    _apply(run, kind, edits)


def _moved(result) -> bool:
    return any(a != b for a, b in result.source_versions.values())


def _output_rows(project, view: str) -> list[tuple]:
    """The view's output as tuples, read by delta-rs (the fixtures' types need no Spark)."""
    from ivm_assets.delta.read import read_arrow

    table = read_arrow(project.location(view).output)
    return list(zip(*(table.column(n).to_pylist() for n in table.column_names))) if table.num_rows else []


def _check(run: FileRun, results, expect: dict | None, modes: dict[str, str], default_mode: str, *, rebuilt: bool = False) -> None:
    """Modes, contents and the oracle (of every view when the step ``rebuilt`` them);
    every problem found is reported in one failure."""
    project = run.project
    problems: list[str] = []
    by_view = {r.view: r for r in results}
    if set(by_view) != set(project.views):
        problems.append(f"refreshed {sorted(by_view)}, expected {sorted(project.views)}")
    for view, result in by_view.items():
        want = modes.get(view, default_mode)
        if result.mode == "unchanged" and not _moved(result) and want != "full":
            continue  # none of its inputs moved in this step
        if result.mode != want:
            problems.append(f"{view}: refresh mode {result.mode!r} ({result.reason}), expected {want!r}")
    for view, rows in (expect or {}).items():
        actual = normalized_bag(_output_rows(project, view))
        expected = normalized_bag(tuple(r) for r in rows)
        if actual != expected:
            problems.append(f"{view}: contents differ\n    actual:   {actual}\n    expected: {expected}")
    # A view none of whose inputs moved was compared at the step that last changed it (or
    # at the first build), and nothing has been written to it since.
    compared = [v for v in project.order if rebuilt or not (v in by_view and by_view[v].mode == "unchanged" and not _moved(by_view[v]))]
    try:
        if compared:
            assert_oracle(project, compared)
    except AssertionError as exc:
        problems.append(f"oracle: {str(exc).splitlines()[0]}")
    assert not problems, "\n".join(problems)


def _run_step(run: FileRun, index: int) -> None:
    """Apply step ``index`` (after catching up on earlier ones) and check it."""
    steps = run.spec.get("steps") or []
    modes = run.spec.get("mode") or {}
    while run.done < index - 1:  # earlier steps not run in this session (deselected): apply unchecked
        run.done += 1
        _apply_step(run, steps[run.done])
        run.project.refresh()
    assert run.done == index - 1, f"steps must run in order; last applied {run.done}, asked for {index}"
    rebuilt = run.broken
    if rebuilt:
        # The previous step failed: rebuild outputs and state from scratch, so this step
        # starts from a correct view (with its first build) whatever the earlier bug left.
        shutil.rmtree(run.project.warehouse, ignore_errors=True)
        run.project.refresh()
        run.broken = False
    step = steps[index]
    run.done = index
    run.broken = True
    _apply_step(run, step)
    with epochs_alternating(index):
        results = run.project.refresh()
    _check(run, results, step.get("expect"), {**modes, **(step.get("mode") or {})}, "incremental", rebuilt=rebuilt)
    run.broken = False


@pytest.mark.parametrize(("path", "index"), list(_cases()))
def test_step(path: Path, index: int, step_runs: dict[Path, FileRun], builder) -> None:
    run = step_runs.get(path)
    if run is None:
        run = step_runs[path] = FileRun(load_spec(path))
        run.broken = True
        _build(run, builder)  # a failure leaves run.project None: the file's later steps fail fast
        results = run.project.refresh()
        if index == -1:
            _check(run, results, run.spec.get("initial"), {}, "full")
            run.broken = False
            return
        run.broken = False
    elif index == -1:
        pytest.fail("the initial build ran already")
    elif run.project is None:
        pytest.fail(f"{path.name}: the project could not be built (see the initial test)")
    _run_step(run, index)


def test_fixture_files_exist() -> None:
    assert FILES, f"no step fixtures in {STEPS_DIR}"
