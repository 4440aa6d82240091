"""ORDER BY … LIMIT (top-k) against recompute on random change batches.

The buffer is cut to its least (SLACK 0: the view's rows plus as many again), so deletes
and updates drain it often and it refills from the whole input; sort keys hold NULLs and
ties, and duplicate rows take one place each; a per-group top-k refills its partitions one
by one.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from ivm_assets.delta.write import update_rows, write
from ivm_assets.rules import top_k
from tests.conftest import assert_engine, assert_oracle, output_rows
from tests.rules.harness import property_settings, run_random_batches


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


def test_change_that_cancels_out_keeps_every_row(builder, engine):
    """A no-op UPDATE (delta-rs rewrites the file: every row deleted and inserted again) and an
    insert a WHERE drops leave the top-k's input change empty; with fewer rows than the LIMIT
    the buffer refills from the whole input, which an empty change used to read as nothing:
    the view was emptied (issue 23)."""
    builder.source("customer", pa.table({"c_custkey": pa.array([1, 2], pa.int64()), "c_name": ["alice", "bob"]}))
    builder.view("v", "SELECT c_custkey, c_name FROM customer ORDER BY c_custkey LIMIT 100")
    builder.view("w", "SELECT c_custkey FROM customer WHERE c_name <> 'zed' ORDER BY c_name DESC LIMIT 5")
    project = builder.load()
    project.refresh()
    update_rows(builder.uri("customer"), set_sql={"c_name": "'alice'"}, predicate="c_custkey = 1")
    assert_engine(project.refresh(), engine)
    assert output_rows(project, "v") == [(1, "alice"), (2, "bob")]
    write(builder.uri("customer"), pa.table({"c_custkey": pa.array([3], pa.int64()), "c_name": ["zed"]}), mode="append")
    assert_engine(project.refresh(), engine)
    assert output_rows(project, "w") == [(1,), (2,)]
    assert_oracle(project)
