"""TPC-H: all 22 queries as views over small generated data, kept equal to their recompute
through TPC-H-style refresh batches, the way issue 23's wrong answers were found from outside.

Each batch is RF1 (existing orders copied with their lineitems under new keys), RF2 (orders
drawn at random deleted with their lineitems) and dimension updates of customers, suppliers
and parts, a third of which set the value the row already has (delta-rs then rewrites the
row, and the change feed reports an update that changes nothing). Epochs alternate between
Spark and in process, so both ways of running every operator meet these batches; after
every epoch each view equals its query recomputed on the same source versions (the first
build is checked through the first epoch's comparison).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from ivm_assets import IvmProject
from ivm_assets.tpch import create_sources, generate_parquet, make_batches
from tests.conftest import assert_oracle
from tests.rules.harness import epochs_alternating

pytestmark = pytest.mark.slow

QUERIES = Path(__file__).resolve().parents[1] / "benchmarks" / "tpch"
# 3,000 orders, 12,000 lineitems: every query has rows to keep, and a batch (1 %: 30 orders,
# 5 customers, 5 suppliers, 2 parts) touches most views. Two batches, one in Spark and one in
# process; IVM_TPCH_EPOCHS=10 searches deeper (~6 min).
SCALE = 0.002
EPOCHS = int(os.environ.get("IVM_TPCH_EPOCHS", "2"))


def test_tpch_views_equal_their_recompute(tmp_path, spark):
    sources = create_sources(generate_parquet(SCALE, tmp_path / "data"), tmp_path / "sources")
    root = tmp_path / "project"
    (root / "views").mkdir(parents=True)
    (root / "ivm.yaml").write_text(yaml.safe_dump({"sources": sources, "state_buckets": 4}))
    for query in sorted(QUERIES.glob("q*.sql")):
        shutil.copy(query, root / "views" / query.name)
    project = IvmProject.load(root, spark=spark)
    assert len(project.views) == 22
    # The first build is not compared on its own, for the suite's time: a wrong build stays
    # wrong through an epoch that changes ~1 % of the orders, and the oracle after the first
    # batch compares every view.
    project.refresh()
    batches = make_batches(spark, sources, 0.01, seed=23, dim_updates=5)
    for epoch in range(EPOCHS):
        batches.apply()
        with epochs_alternating(epoch):
            results = project.refresh()
        assert all(r.mode == "incremental" for r in results), [r.summary() for r in results if r.mode != "incremental"]
        try:
            assert_oracle(project)
        except AssertionError as exc:
            raise AssertionError(f"after batch {epoch + 1}: {exc}") from exc
