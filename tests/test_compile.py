"""Compiling views: Spark's analysis recorded with each epoch and reused by later processes
(no Spark started for a small refresh), and one compiled view per view name."""

from __future__ import annotations

import pyarrow as pa

from ivm_assets import IvmProject
from ivm_assets.delta.write import write
from tests.conftest import assert_oracle


def test_views_with_the_same_sql_compile_each_as_itself(builder):
    builder.source("t", {"id": [1, 2]})
    builder.view("a", "SELECT id FROM t")
    builder.view("b", "SELECT id FROM t")
    compiled = builder.load().compile()
    assert {name: view.name for name, view in compiled.items()} == {"a": "a", "b": "b"}


def test_a_later_project_compiles_from_the_record_without_spark(builder):
    uri = builder.source("t", {"id": [1, 2], "k": [1, 1]})
    builder.view("n", "SELECT k, COUNT(*) AS c FROM t GROUP BY k")
    builder.load().refresh()  # analyzed by Spark; the analysis is recorded with the epoch
    fresh = IvmProject.load(builder.root)  # its own session, started on first use
    write(uri, pa.table({"id": [3], "k": [2]}), mode="append")
    (result,) = fresh.refresh()
    assert result.mode == "incremental" and result.engine == "in process"
    assert not fresh._spark.started
    builder.view("n", "SELECT k, COUNT(*) AS c, MAX(id) AS top FROM t GROUP BY k")  # new SQL: analyzed again
    changed = IvmProject.load(builder.root)
    assert changed.refresh()[0].mode == "full" and changed._spark.started
    assert_oracle(changed)
