"""Window functions against recompute on random change batches: updates move rows between
partitions (k, with NULLs), deletes empty partitions; ROW_NUMBER and LAG over ties, RANK,
DENSE_RANK, a ROWS frame, a RANGE frame over one partition, and a per-group top-k."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.operators.harness import property_settings, run_random_batches


@property_settings
@given(data=st.data())
def test_windows(spark, data):
    run_random_batches(
        spark,
        data,
        {
            "ranked": "SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn, "
            "DENSE_RANK() OVER (PARTITION BY k ORDER BY v) AS dr, LAG(s, 1, 'none') OVER (PARTITION BY k ORDER BY v) AS prev FROM t",
            "framed": "SELECT k, s, SUM(v) OVER (PARTITION BY s ORDER BY v ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS near, "
            "MIN(v) OVER (ORDER BY k) AS low FROM t",
            "top_per_k": "SELECT k, id FROM (SELECT k, id, RANK() OVER (PARTITION BY k ORDER BY v DESC) AS r FROM t) WHERE r <= 2",
        },
    )
