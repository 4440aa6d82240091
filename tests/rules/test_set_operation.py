"""INTERSECT, EXCEPT (with and without ALL) and UNION against recompute on random batches.

The random columns hold NULLs and duplicates, so rows compare NULL-equal across sides and
multiplicities cross zero both ways. Two views cover the five operations between them.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rules.harness import property_settings, run_random_batches


@settings(property_settings, max_examples=max(1, property_settings.max_examples // 3))
@given(data=st.data())
def test_set_operations(spark, data):
    run_random_batches(
        spark,
        data,
        {
            "bags": "(SELECT k, s FROM t INTERSECT ALL SELECT k, s FROM u) "
            "UNION ALL (SELECT k, s FROM t EXCEPT ALL SELECT k, s FROM u)",
            "sets": "(SELECT k, v FROM t INTERSECT SELECT k, v FROM u) UNION (SELECT v, k FROM u EXCEPT SELECT k, v FROM t)",
        },
        tables=("t", "u"),
    )
