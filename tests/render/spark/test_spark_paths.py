"""The Spark paths for state lookups and output changes, which large reads take.

Small state and outputs are read on the driver by pyarrow (the other tests exercise that);
here the size limit is lowered so every lookup and every output change goes through Spark,
and the same views must still equal their recompute.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ivm_assets.engine import output
from ivm_assets.state import arrangement
from tests.rules.harness import property_settings, run_random_batches


# One example: the driver paths get the deep search in the other files; this one checks
# that the Spark paths give the same answers.
@settings(property_settings, max_examples=1)
@given(data=st.data())
def test_join_aggregate_distinct_through_spark_reads(spark, data, monkeypatch):
    monkeypatch.setattr(arrangement, "DRIVER_READ_BYTES", -1)
    monkeypatch.setattr(output, "DRIVER_READ_BYTES", -1)
    run_random_batches(
        spark,
        data,
        {
            "joined": "SELECT t.id, u.id AS uid, t.v FROM t JOIN u ON t.k = u.k",
            "totals": "SELECT k, COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo FROM t GROUP BY k",
            "kinds": "SELECT DISTINCT k FROM t",
            # The operators of outer, semi and anti joins and set operations look state up
            # through the same code; one view takes each through the Spark path.
            "breadth": "SELECT t.id, w.id AS wid FROM t LEFT JOIN u AS w ON w.k = t.k AND w.v > t.v "
            "WHERE t.v NOT IN (SELECT u.v FROM u WHERE u.s = t.s) AND EXISTS (SELECT 1 FROM u WHERE u.k = t.k) "
            "UNION SELECT id, id FROM u INTERSECT SELECT id, id FROM t",
            # A window's partition rows and a top-k's buffer and refill read through Spark.
            "ranked": "SELECT k, v, RANK() OVER (PARTITION BY k ORDER BY v) AS r FROM t ORDER BY v DESC, k LIMIT 3",
        },
        tables=("t", "u"),
    )
