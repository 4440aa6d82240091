"""GROUP BY and global aggregates against recompute on random change batches."""

from __future__ import annotations

from ivm_assets.delta.write import write
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import assert_oracle, output_rows, small_epochs
from tests.rules.harness import property_settings, run_random_batches


@property_settings
@given(data=st.data())
def test_grouped_aggregates(spark, data):
    run_random_batches(
        spark,
        data,
        {
            "grouped": "SELECT k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, AVG(v) AS av, SUM(x) AS sx, "
            "MIN(v) AS mn, MAX(s) AS mx, COUNT(DISTINCT v) AS dv FROM t GROUP BY k HAVING COUNT(*) > 0",
        },
    )


@property_settings
@given(data=st.data())
def test_global_aggregate(spark, data):
    run_random_batches(
        spark,
        data,
        {"overall": "SELECT COUNT(*) AS n, SUM(v) AS sv, MIN(x) AS mn, AVG(x) AS ax FROM t WHERE v > 1"},
    )


@property_settings
@given(data=st.data())
def test_grouped_aggregates_over_small_state_read_whole(spark, data):
    """Without MIN/MAX/COUNT DISTINCT a small group state is read whole (see
    spark_binding.WHOLE_TABLE_ROWS); the test above keeps covering the lookup of touched groups."""
    run_random_batches(
        spark,
        data,
        {"sums": "SELECT k, COUNT(*) AS n, SUM(v) AS sv, AVG(x) AS ax, COUNT(s) AS ns FROM t GROUP BY k"},
    )


def test_a_small_group_state_costs_one_job_and_stores_only_touched_groups(builder):
    """The epoch in Spark (it would run in process). A SUM over BIGINT: one over DOUBLE keeps
    its values, and its groups are read by the change's keys."""
    builder.source("t", {"k": pa.array([1, 1, 2, 3], pa.int64()), "v": pa.array([15, 20, 30, 40], pa.int64())})
    builder.view("sums", "SELECT k, SUM(v) AS sv, COUNT(*) AS n FROM t WHERE v > 0 GROUP BY k")
    project = builder.load()
    project.refresh()
    write(builder.uri("t"), pa.table({"k": pa.array([2], pa.int64()), "v": pa.array([25], pa.int64())}), mode="append")
    with small_epochs("spark"):
        [result] = project.refresh()
    assert result.mode == "incremental"
    assert result.stats["spark_jobs"] == 1  # input change, new groups and output in one job
    assert result.stats["state_rows_written"] == 1  # group 2 only
    assert output_rows(project, "sums") == [(1, 35, 2), (2, 55, 2), (3, 40, 1)]
    assert_oracle(project)


def test_full_build_of_global_aggregates_over_no_rows_has_their_one_row(builder):
    """A full build reads its input once, unmaterialized, when no value table needs it twice;
    a global aggregate still has its one row when the input is empty (COUNT 0, SUM NULL)."""
    builder.source("t", {"k": pa.array([1, 2], pa.int64()), "v": pa.array([1.5, 2.0])})
    builder.view("plain", "SELECT COUNT(*) AS n, SUM(v) AS sv, AVG(v) AS av FROM t WHERE v > 10")
    builder.view("with_min", "SELECT COUNT(*) AS n, MIN(v) AS mn FROM t WHERE v > 10")
    project = builder.load()
    assert {r.mode for r in project.refresh()} == {"full"}
    assert output_rows(project, "plain") == [(0, None, None)]
    assert output_rows(project, "with_min") == [(0, None)]
    write(builder.uri("t"), pa.table({"k": pa.array([3], pa.int64()), "v": pa.array([12.5])}), mode="append")
    assert {r.mode for r in project.refresh()} == {"incremental"}
    assert output_rows(project, "plain") == [(1, 12.5, 12.5)]
    assert output_rows(project, "with_min") == [(1, 12.5)]
    assert_oracle(project)
