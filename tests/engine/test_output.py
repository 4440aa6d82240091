"""Applying a view's change set to its output table (ivm_assets.engine.output)."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tests.conftest import assert_engine, assert_oracle


def _bits(project, view: str, column: str) -> list[int]:
    values = DeltaTable(project.location(view).output).to_pyarrow_table(columns=[column]).column(column)
    return sorted(values.combine_chunks().view(pa.int64()).to_pylist())


def test_a_zero_arrives_as_0_0_whichever_engine_ran(builder, engine):
    """Consolidation outputs 0.0 for −0.0 (ivm_assets.state.consolidate); DuckDB stored the
    −0.0 it saw first, where Spark stores 0.0."""
    uri = builder.source("src", {"a": [1], "b": [0.0]})
    builder.view("v", "SELECT a, b FROM src")
    project = builder.load()
    project.refresh()
    write_deltalake(uri, pa.table({"a": [2, 3], "b": [-0.0, float("-nan")]}), mode="append")
    assert_engine(project.refresh(), engine)
    assert _bits(project, "v", "b") == sorted([0, 0, 0x7FF8000000000000])


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
