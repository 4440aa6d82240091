"""EXISTS, IN, NOT IN (correlated and not) and LEFT ANTI JOIN against recompute on random
batches (NOT EXISTS is the same operator as LEFT ANTI JOIN; tests/fixtures/steps has it).

The compared columns and the correlation keys hold NULLs and duplicates, so NOT IN meets
a NULL in its subquery, NULL probe values, and groups that empty and fill again.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rules.harness import property_settings, run_random_batches


@settings(property_settings, max_examples=max(1, property_settings.max_examples // 3))
@given(data=st.data())
def test_semi_and_anti_joins(spark, data):
    run_random_batches(
        spark,
        data,
        {
            # Two branches in one view: each view costs a refresh and an oracle check per batch.
            "semi_and_anti": "SELECT 'semi' AS test, t.id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.v > 0) "
            "AND t.v IN (SELECT u.v FROM u WHERE u.s = t.s) AND EXISTS (SELECT 1 FROM u WHERE u.s = 'a') "
            "UNION ALL SELECT 'anti', t.id FROM t LEFT ANTI JOIN u AS w ON w.s = t.s "
            "WHERE t.v NOT IN (SELECT u.v FROM u WHERE u.k = 1)",
            "not_in_correlated": "SELECT t.id, t.v FROM t WHERE t.v NOT IN (SELECT u.v FROM u WHERE u.k = t.k)",
        },
        tables=("t", "u"),
    )


@settings(property_settings, max_examples=max(1, property_settings.max_examples // 3))
@given(data=st.data())
def test_residual_and_multi_column_semi_joins(spark, data):
    run_random_batches(
        spark,
        data,
        {
            # EXISTS / NOT EXISTS correlated by an equality and an inequality (TPC-H Q21's
            # shape, here a self-correlation of t), and IN over two columns.
            "residual": "SELECT 'exists' AS test, t.id FROM t WHERE EXISTS (SELECT 1 FROM t AS t2 WHERE t2.k = t.k AND t2.id <> t.id) "
            "AND NOT EXISTS (SELECT 1 FROM u WHERE u.s = t.s AND u.v > t.v) "
            "UNION ALL SELECT 'in', t.id FROM t WHERE (t.k, t.v) IN (SELECT u.k, u.v + 1 FROM u)",
        },
        tables=("t", "u"),
    )
