"""LEFT, RIGHT and FULL outer joins against recompute on random change batches.

Keys and values hold NULLs and duplicates; updates move rows between keys, so keys gain
their first match and lose their last. The views cover a residual ON condition, a WHERE
above the padded rows, two-column keys, keys of different types and an aggregate over a
full join.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rules.harness import property_settings, run_random_batches


@settings(property_settings, max_examples=max(1, property_settings.max_examples // 3))
@given(data=st.data())
def test_outer_joins(spark, data):
    run_random_batches(
        spark,
        data,
        {
            # Two joins in one view: each view costs a refresh and an oracle check per batch.
            "left_and_right": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON t.k = u.k AND t.v <= u.v + 1 "
            "WHERE u.id IS NULL OR t.v > 0 "
            "UNION ALL SELECT t.id, u.id FROM t RIGHT JOIN u ON t.v = u.v AND t.s = u.s",
            # A STRING key beside a BIGINT one: Spark compares them through a cast.
            "full_counted": "SELECT t.k, COUNT(u.id) AS n, COUNT(*) AS c FROM t FULL JOIN u ON CAST(t.k AS STRING) = u.k "
            "GROUP BY t.k",
        },
        tables=("t", "u"),
    )
