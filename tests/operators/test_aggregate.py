"""GROUP BY and global aggregates against recompute on random change batches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.operators.harness import property_settings, run_random_batches


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
