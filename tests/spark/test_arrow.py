"""Arrow ↔ Spark conversions keep every row; small epochs make one-partition frames."""

from __future__ import annotations

import pyarrow as pa

from ivm_assets.spark.arrow import to_spark


def test_an_empty_chunk_in_the_middle_loses_no_rows(spark):
    """pyspark 4.3's createDataFrame drops the record batches after an empty one; a pyarrow
    dataset read (one batch per file) or a change feed read produces exactly that."""
    table = pa.concat_tables([pa.table({"a": [1, 2]}), pa.table({"a": pa.array([], pa.int64())}), pa.table({"a": [3]})])
    assert table.column("a").num_chunks == 3
    assert sorted(r.a for r in to_spark(spark, table).collect()) == [1, 2, 3]


def test_small_epochs_make_one_partition_frames_that_join_and_group_without_a_shuffle(spark):
    from ivm_assets.spark.session import tuned_for

    table = pa.table({"k": pa.array([1, 2, 2, 3], pa.int64()), "w": pa.array([1, 1, -1, 1], pa.int64())})
    with tuned_for(spark, small=True):
        left, right = to_spark(spark, table), to_spark(spark, table).withColumnRenamed("k", "k2")
        assert left.rdd.getNumPartitions() == 1
        plan = left.unionAll(left).join(right, left.k == right.k2).groupBy("k").count()
        assert "Exchange" not in plan._jdf.queryExecution().executedPlan().toString()
        assert sorted(tuple(r) for r in plan.collect()) == [(1, 2), (2, 8), (3, 2)]
