"""Applying a view's change set to its output table (ivm_assets.engine.output)."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tests.conftest import assert_engine, assert_oracle


def _bits(project, view: str, column: str) -> list[int]:
    values = DeltaTable(project.location(view).output).to_pyarrow_table(columns=[column]).column(column)
    return sorted(values.combine_chunks().view(pa.int64()).to_pylist())


def test_a_zero_keeps_its_sign_and_a_nan_arrives_canonical_whichever_engine_ran(builder, engine):
    """Consolidation keeps −0.0 apart from 0.0 and makes every NaN the canonical one
    (ivm_assets.state.consolidate); DuckDB once stored the NaN it saw first."""
    uri = builder.source("src", {"a": [1], "b": [0.0]})
    builder.view("v", "SELECT a, b FROM src")
    project = builder.load()
    project.refresh()
    write_deltalake(uri, pa.table({"a": [2, 3], "b": [-0.0, float("-nan")]}), mode="append")
    assert_engine(project.refresh(), engine)
    assert _bits(project, "v", "b") == sorted([0, -(2**63), 0x7FF8000000000000])


def test_a_view_that_stored_zeros_unsigned_is_rebuilt_once(builder):
    """An epoch recorded before zeros kept their sign rebuilds a view that stores a FLOAT
    or DOUBLE column (its output or a state table), with the reason; a view of other types
    carries on, and the next epoch records that its zeros are signed. Level 1 (recorded as
    true: MIN/MAX's value tables still unsigned) rebuilds too; level 2 (windows gave 0.0 for
    −0.0) rebuilds a window view only."""
    from ivm_assets.engine.refresh import SIGNED_ZEROS, SIGNED_ZEROS_LEVEL, _unsigned_zeros

    builder.source("src", {"a": [1], "b": [0.0]})
    builder.view("out", "SELECT a, b FROM src")
    builder.view("kept", "SELECT s.a, t.b > s.b AS up FROM src s JOIN src t ON s.a = t.a")
    builder.view("ints", "SELECT a, COUNT(*) AS n FROM src GROUP BY a")
    builder.view("windowed", "SELECT a, b, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) AS n FROM src")
    project = builder.load()
    project.refresh()
    compiled = project.compile(["out", "kept", "ints", "windowed"])
    before = {SIGNED_ZEROS: False}
    assert "rebuilt to keep the sign of zeros" in _unsigned_zeros(compiled["out"], project.location("out"), before)
    assert "rebuilt to keep the sign of zeros" in _unsigned_zeros(compiled["kept"], project.location("kept"), before)
    assert _unsigned_zeros(compiled["ints"], project.location("ints"), before) is None
    assert "rebuilt to keep the sign of zeros" in _unsigned_zeros(compiled["out"], project.location("out"), {SIGNED_ZEROS: True})
    assert _unsigned_zeros(compiled["out"], project.location("out"), {SIGNED_ZEROS: SIGNED_ZEROS_LEVEL}) is None
    assert _unsigned_zeros(compiled["out"], project.location("out"), {SIGNED_ZEROS: 2}) is None
    assert "rebuilt to keep the sign of zeros" in _unsigned_zeros(compiled["windowed"], project.location("windowed"), {SIGNED_ZEROS: 2})
    assert _unsigned_zeros(compiled["windowed"], project.location("windowed"), {SIGNED_ZEROS: SIGNED_ZEROS_LEVEL}) is None


def test_an_array_column_loses_a_row(builder):
    """Not compared on the driver (arrays have no Arrow codes): the Spark path counts the
    old copies."""
    uri = builder.source("src", {"a": [1, 2, 2], "b": [1.0, 2.0, 2.0]})
    builder.view("v", "SELECT array(a) AS xs, b FROM src")
    project = builder.load()
    project.refresh()
    DeltaTable(uri).delete("a = 2")
    project.refresh()
    assert_oracle(project)


def _last_commit(uri: str) -> tuple[str, dict]:
    entry = DeltaTable(uri).history(1)[0]
    return entry["operation"], entry.get("operationParameters") or {}


def _feed(uri: str, version: int) -> list[tuple]:
    """The change feed of one commit, consolidated: sorted (row..., weight) tuples."""
    from ivm_assets.delta.read import read_changes
    from ivm_assets.state.consolidate import in_arrow
    from ivm_assets.zset import WEIGHT

    changes = read_changes(uri, after=version - 1, upto=version)
    netted = in_arrow(changes, [n for n in changes.column_names if n != WEIGHT])
    return sorted(tuple(row.values()) for row in netted.to_pylist())


def test_a_change_that_replaces_every_row_is_written_without_a_merge(builder, engine):
    """A change that removes every stored row (a global aggregate's one row; duplicates
    losing one copy) overwrites the output with the rows it keeps: the same rows and change
    feed as a MERGE, and a view reading the output stays incremental. A change that keeps
    some stored rows, or only adds rows, is still a MERGE."""
    uri = builder.source("src", {"k": pa.array([1, 2, 3], pa.int64()), "g": ["a", "a", "b"]})
    builder.view("total", "SELECT COUNT(*) AS n, SUM(k) AS s FROM src")
    builder.view("groups", "SELECT g FROM src")  # a bag: "a" twice
    builder.view("doubled", "SELECT n * 2 AS n2 FROM total")
    builder.view("per_group", "SELECT g, COUNT(*) AS n FROM groups GROUP BY g")  # reads every kind of commit below
    project = builder.load()
    project.refresh()
    replaced, merged = project.location("total").output, project.location("groups").output

    write_deltalake(uri, pa.table({"k": pa.array([4], pa.int64()), "g": ["c"]}), mode="append")
    results = project.refresh()
    assert_engine(results, engine)
    assert {r.view: r.mode for r in results} == dict.fromkeys(["total", "groups", "doubled", "per_group"], "incremental")
    version = DeltaTable(replaced).version()
    assert _feed(replaced, version) == [(3, 6, -1), (4, 10, 1)]
    if engine == "in process":
        assert _last_commit(replaced) == ("WRITE", {"mode": "Overwrite", "predicate": "true"})
        assert _last_commit(merged)[0] == "MERGE"  # only adds a row
    assert_oracle(project)

    DeltaTable(uri).delete("k = 1")  # "a" loses one of its two copies: every stored "a" goes, one comes back
    project.refresh(["groups"])
    if engine == "in process":
        assert _last_commit(merged)[0] == "MERGE"  # "b" and "c" stay
    DeltaTable(uri).delete("k <> 2")
    project.refresh(["groups"])
    version = DeltaTable(merged).version()
    assert _feed(merged, version) == [("b", -1), ("c", -1)]
    write_deltalake(uri, pa.table({"k": pa.array([5], pa.int64()), "g": ["a"]}), mode="append")
    project.refresh(["groups"])
    DeltaTable(uri).delete("k = 2")  # one of the only two rows, both "a": rewritten as one "a"
    project.refresh(["groups"])
    if engine == "in process":
        assert _last_commit(merged)[0] == "WRITE"
    assert _feed(merged, DeltaTable(merged).version()) == [("a", -1)]
    assert DeltaTable(merged).to_pyarrow_table().column("g").to_pylist() == ["a"]
    DeltaTable(uri).delete("k = 5")  # the last row goes: the output is empty
    assert_engine(project.refresh(), engine)
    if engine == "in process":
        assert _last_commit(merged)[0] == "WRITE"
    assert DeltaTable(merged).to_pyarrow_table().num_rows == 0
    assert DeltaTable(project.location("per_group").output).to_pyarrow_table().num_rows == 0
    assert_oracle(project)
