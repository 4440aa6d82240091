"""Small change sets materialized together: one Spark job for all batches pending at first use."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from ivm_assets.spark.batches import discard_pending, materialize
from ivm_assets.spark.metrics import counting_jobs
from ivm_assets.spark.session import tuned_for


def test_pending_batches_are_computed_in_one_job_with_their_own_names_and_types(spark):
    left = spark.createDataFrame([(1, "a", Decimal("1.50")), (2, None, Decimal("2.25"))], "k bigint, s string, d decimal(10,2)")
    right = spark.createDataFrame([(1.5, 7), (2.5, 8), (3.5, 9)], "k double, n int not null")
    # As in an incremental epoch: without adaptive execution, whose stages are jobs of their own.
    with tuned_for(spark, small=True), counting_jobs(spark) as jobs:
        a = materialize(left.filter(F.col("k") > 0), small=True)
        b = materialize(right.groupBy("k").agg(F.sum("n").alias("n")), small=True)
        empty = materialize(right.filter(F.col("n") > 100), small=True)
        assert (a.rows, b.rows, empty.rows) == (2, 3, 0)
    if jobs.value is not None:  # not countable over Spark Connect
        assert jobs.value == 1
    assert a.table.to_pylist() == [{"k": 1, "s": "a", "d": Decimal("1.50")}, {"k": 2, "s": None, "d": Decimal("2.25")}]
    assert sorted(b.table.to_pylist(), key=lambda r: r["k"]) == [{"k": 1.5, "n": 7}, {"k": 2.5, "n": 8}, {"k": 3.5, "n": 9}]
    assert a.df.schema == left.schema and empty.df.schema["n"].dataType == right.schema["n"].dataType
    assert empty.table.schema.names == ["k", "n"]


def test_a_failing_batch_fails_every_batch_computed_with_it(spark):
    good = materialize(spark.range(3), small=True)
    bad = materialize(spark.range(3).select(F.raise_error(F.lit("boom")).alias("x")), small=True)
    with pytest.raises(Exception, match="boom"):
        good.rows  # noqa: B018 - the first use computes both
    with pytest.raises(Exception, match="boom"):
        bad.rows  # noqa: B018
    discard_pending()
