"""Filter, project and UNION ALL against recompute on random change batches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.operators.harness import property_settings, run_random_batches


@property_settings
@given(data=st.data())
def test_filter_project_union_all(spark, data):
    run_random_batches(
        spark,
        data,
        {
            "projected": "SELECT id, v * 2 + 1 AS v2, COALESCE(s, 'none') AS s, CASE WHEN x > 1 THEN 'big' ELSE 'small' END AS size "
            "FROM t WHERE v > 0 OR k IS NULL",
            "unioned": "SELECT k, v FROM t WHERE k = 1 UNION ALL SELECT k, v FROM u",
        },
        tables=("t", "u"),
    )
