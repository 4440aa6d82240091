"""Scalar subqueries against recompute on random change batches: uncorrelated (a one-row
aggregate joined to every row) and correlated by equalities (a grouped aggregate joined on
them), in WHERE, SELECT and HAVING.

Correlation keys hold NULLs (a row in no group) and groups empty and fill again, so COUNT
meets empty groups (0, not NULL) and the other aggregates NULL; the uncorrelated values
move with every change to ``u``, so many rows flip at once.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rules.harness import property_settings, run_random_batches


@settings(property_settings, max_examples=max(1, property_settings.max_examples // 3))
@given(data=st.data())
def test_scalar_subqueries(spark, data):
    run_random_batches(
        spark,
        data,
        {
            # WHERE: uncorrelated; correlated and compared (an inner join). SELECT: a missing
            # group still has its row (an outer join), its COUNT 0.
            "in_where_and_select": "SELECT t.id, (SELECT COUNT(*) FROM u WHERE u.k = t.k) AS n, "
            "(SELECT MAX(u.s) FROM u WHERE u.k = t.k AND u.v > 0) AS m FROM t "
            "WHERE t.v >= (SELECT AVG(u.v) FROM u) - 1 AND t.x < (SELECT 0.5 * SUM(u.x) + 2 FROM u WHERE u.s = t.s)",
            # A correlated COUNT under OR (an outer join: a missing group counts 0), and HAVING.
            "in_having": "SELECT t.k, SUM(t.v) AS sv FROM t WHERE (SELECT COUNT(u.v) FROM u WHERE u.k = t.k) = 0 OR t.v > 1 "
            "GROUP BY t.k HAVING SUM(t.v) >= (SELECT MIN(u.v) FROM u)",
        },
        tables=("t", "u"),
    )
