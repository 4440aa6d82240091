"""ORDER BY … LIMIT (top-k) against recompute on random change batches.

The buffer is cut to its least (SLACK 0: the view's rows plus as many again), so deletes
and updates drain it often and it refills from the whole input; sort keys hold NULLs and
ties, and duplicate rows take one place each; a per-group top-k refills its partitions one
by one.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ivm_assets.operators import top_k
from tests.operators.harness import property_settings, run_random_batches


@property_settings
@given(data=st.data())
def test_top_k(spark, data, monkeypatch):
    monkeypatch.setattr(top_k, "SLACK", 0)
    run_random_batches(
        spark,
        data,
        {
            "top": "SELECT k, v, s FROM t ORDER BY v DESC, k LIMIT 2",
            # A sort key the view does not show, an OFFSET, and a top-k over an aggregate.
            "paged": "SELECT id, x FROM t ORDER BY s NULLS LAST, x DESC LIMIT 3 OFFSET 1",
            "top_groups": "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM t GROUP BY k ORDER BY n DESC LIMIT 2",
            # Per-group top-k (ROW_NUMBER bounded in an outer WHERE), NULL partition keys.
            "per_k": "SELECT k, id, v, rn FROM (SELECT k, id, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn "
            "FROM t) WHERE rn <= 2",
        },
    )
