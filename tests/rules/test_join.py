"""Inner joins (equi, residual, self, cross with filter) against recompute on random batches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.rules.harness import property_settings, run_random_batches


@property_settings
@given(data=st.data())
def test_equi_join_with_residual(spark, data):
    run_random_batches(
        spark,
        data,
        {
            "joined": "SELECT t.id, u.id AS uid, t.v, u.s FROM t JOIN u ON t.k = u.k AND t.v <= u.v + 2",
            "self_joined": "SELECT a.id, b.id AS other FROM t a JOIN t b ON a.k = b.k AND a.id < b.id",
        },
        tables=("t", "u"),
    )


@property_settings
@given(data=st.data())
def test_cross_join_with_filter(spark, data):
    run_random_batches(spark, data, {"crossed": "SELECT t.id, u.id AS uid FROM t, u WHERE t.v > u.v AND u.k = 1"}, tables=("t", "u"))
