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


def test_small_epochs_compile_no_generated_code(spark):
    """Compiling a generated class costs ~40 ms, more than interpreting a small change set:
    a plan never seen before (a literal no other test uses, so no cached class fits) runs
    in a small epoch without one compilation, and right."""
    import random

    from pyspark.sql import functions as F

    from ivm_assets.spark.session import tuned_for

    codegen = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    salt = random.randrange(10**12, 10**13)
    table = pa.table({"k": pa.array([1, 2, 2, 3], pa.int64()), "w": pa.array([1, 1, -1, 1], pa.int64())})
    with tuned_for(spark, small=True):
        before = codegen.METRIC_COMPILATION_TIME().getCount()
        frame = to_spark(spark, table)
        plan = frame.filter(F.col("k") * salt > salt).groupBy("k").agg(F.sum("w").alias("w")).orderBy("k")
        rows = [tuple(r) for r in plan.collect()]
        assert codegen.METRIC_COMPILATION_TIME().getCount() == before
    assert rows == [(2, 0), (3, 1)]


def test_a_timestamp_without_time_zone_stays_one_in_any_session_zone(spark):
    """A TIMESTAMP_NTZ column enters Spark as TIMESTAMP_NTZ with its wall time, whatever the
    session time zone (pyspark's own inference made it a TIMESTAMP shifted from the zone)."""
    import datetime as dt

    from pyspark.sql import types as T

    wall = dt.datetime(2024, 7, 1, 12, 30)
    table = pa.table({"ntz": pa.array([wall], pa.timestamp("us")), "ltz": pa.array([wall], pa.timestamp("us", tz="UTC"))})
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = to_spark(spark, table)
        assert [f.dataType for f in df.schema.fields] == [T.TimestampNTZType(), T.TimestampType()]
        assert df.selectExpr("CAST(ntz AS STRING)", "CAST(ltz AS STRING)").first() == ("2024-07-01 12:30:00", "2024-07-01 08:30:00")
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
