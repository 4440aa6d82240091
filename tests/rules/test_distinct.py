"""SELECT DISTINCT against recompute on random change batches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.rules.harness import property_settings, run_random_batches


@property_settings
@given(data=st.data())
def test_distinct(spark, data):
    run_random_batches(spark, data, {"kinds": "SELECT DISTINCT k, s FROM t"})
