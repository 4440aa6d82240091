"""State tables: a small change reads only the files of the buckets (and key range) it touches."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import functions as F

from ivm_assets.delta.commit import Epoch
from ivm_assets.delta.snapshot import snapshot_files
from ivm_assets.epoch_context import EpochContext
from ivm_assets.spark.batches import materialize
from ivm_assets.state import arrangement
from ivm_assets.state.arrangement import ROW_GROUP_ROWS
from ivm_assets.state.layout import with_bucket
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import BUCKET, WEIGHT


def _context(spark, root: str, *, full: bool, versions: dict | None = None, epoch: int = 1) -> EpochContext:
    return EpochContext(spark, Epoch("ivm:test", epoch, {}), full, root, 8, {}, versions or {})


def _written(table: StateTable, ctx: EpochContext, rows, types: list) -> None:
    """Write ``rows`` and make the commit (a refresh makes it after the operators ran)."""
    arrangement.write(table, ctx, rows, types)
    for append in ctx.writes:
        append.commit(ctx)


def test_small_change_reads_only_touched_buckets(spark, tmp_path):
    table = StateTable(operator_id="join_0", name="left", columns=("k", "v"), keys=("k",), layout="zset")
    rows = spark.range(20_000).select(F.col("id").alias("k"), (F.col("id") * 2).alias("v"), F.lit(1).cast("bigint").alias(WEIGHT))
    _written(table, _context(spark, str(tmp_path), full=True), materialize(with_bucket(rows, ("k",), 8), small=True), [None])
    versions = {table.table_name: 0}

    touched_rows = spark.createDataFrame(pa.table({"k": pa.array([42], pa.int64()), WEIGHT: pa.array([1], pa.int64())}))
    touched = materialize(with_bucket(touched_rows, ("k",), 8), small=True)
    ctx = _context(spark, str(tmp_path), full=False, versions=versions, epoch=2)
    read = arrangement.read(table, ctx, touched, ("k",))

    bucket = touched.values(BUCKET)[0]
    uri = table.uri(str(tmp_path))
    one_bucket = snapshot_files(uri, version=0, partition_filters=[(BUCKET, "in", [str(bucket)])]).bytes
    assert ctx.stats["state_bytes_scanned"] == one_bucket < snapshot_files(uri, version=0).bytes
    assert ctx.stats["state_reads_on_driver"] == 1  # small: read by pyarrow, no Spark scan
    assert [tuple(r) for r in read.df.collect()] == [(42, 84, 1)]
    assert not read.large


def test_a_one_key_lookup_decodes_one_row_group_of_state_spark_wrote(spark, tmp_path):
    """A full build's state is written by Spark in row groups of ROW_GROUP_ROWS rows sorted
    by key (parquet-java would make one group of a whole bucket): a key costs its group."""
    table = StateTable(operator_id="join_0", name="left", columns=("k", "v"), keys=("k",), layout="zset")
    rows = spark.range(100_000).select(F.col("id").alias("k"), F.lit(1).cast("bigint").alias("v"), F.lit(1).cast("bigint").alias(WEIGHT))
    _written(table, _context(spark, str(tmp_path), full=True), materialize(with_bucket(rows, ("k",), 8), small=False), [None])

    touched_rows = spark.createDataFrame(pa.table({"k": pa.array([77_777], pa.int64()), WEIGHT: pa.array([1], pa.int64())}))
    touched = materialize(with_bucket(touched_rows, ("k",), 8), small=True)
    ctx = _context(spark, str(tmp_path), full=False, versions={table.table_name: 0}, epoch=2)
    read = arrangement.read(table, ctx, touched, ("k",))
    assert [tuple(r) for r in read.df.collect()] == [(77_777, 1, 1)]
    assert ctx.stats["state_row_groups_read"] == 1
    assert ctx.stats["state_rows_read"] <= ROW_GROUP_ROWS < 100_000 // 8
    assert ctx.stats["state_bytes_read"] < ctx.stats["state_bytes_scanned"]


def test_scattered_keys_in_files_over_the_driver_budget_are_read_on_the_driver(spark, tmp_path, monkeypatch):
    """The driver budget counts the row groups that may hold a touched key, not the touched
    buckets' files: a few keys scattered over a large table are still read by pyarrow,
    decoding one row group each; too many row groups for the budget go to Spark."""
    from ivm_assets.state import arrangement

    table = StateTable(operator_id="join_0", name="left", columns=("k", "v"), keys=("k",), layout="zset")
    rows = spark.range(1_000_000).select(F.col("id").alias("k"), F.lit(1).cast("bigint").alias("v"), F.lit(1).cast("bigint").alias(WEIGHT))
    _written(table, _context(spark, str(tmp_path), full=True), materialize(with_bucket(rows, ("k",), 8), small=False), [None])
    keys = [3, 250_001, 620_017, 999_999]  # spread over the whole key range
    touched_rows = spark.createDataFrame(pa.table({"k": pa.array(keys, pa.int64()), WEIGHT: pa.array([1] * 4, pa.int64())}))
    touched = materialize(with_bucket(touched_rows, ("k",), 8), small=True)
    scanned = snapshot_files(table.uri(str(tmp_path)), version=0, partition_filters=[(BUCKET, "in", [str(b) for b in touched.values(BUCKET)])]).bytes
    budget = scanned // 3  # the touched buckets' files (~30 row groups each) are over it, four row groups are not
    monkeypatch.setattr(arrangement, "DRIVER_READ_BYTES", budget)

    ctx = _context(spark, str(tmp_path), full=False, versions={table.table_name: 0}, epoch=2)
    read = arrangement.read(table, ctx, touched, ("k",))
    assert sorted(tuple(r) for r in read.df.collect()) == [(k, 1, 1) for k in keys]
    assert ctx.stats["state_reads_on_driver"] == 1
    assert ctx.stats["state_row_groups_read"] == 4
    assert ctx.stats["state_bytes_read"] <= budget < ctx.stats["state_bytes_scanned"]

    monkeypatch.setattr(arrangement, "DRIVER_READ_BYTES", ctx.stats["state_bytes_read"] - 1)
    ctx = _context(spark, str(tmp_path), full=False, versions={table.table_name: 0}, epoch=2)
    read = arrangement.read(table, ctx, touched, ("k",))
    assert sorted(tuple(r) for r in read.df.collect()) == [(k, 1, 1) for k in keys]
    assert ctx.stats.get("state_reads_on_driver", 0) == 0 and ctx.stats["state_reads_in_spark"] == 1


def test_null_keys_are_found_with_the_key_range(spark, tmp_path):
    """The key-range filter must keep NULL keys, which form a group of their own."""
    table = StateTable(operator_id="aggregate_0", name="values0", columns=("k", "v"), keys=("k",), layout="zset")
    data = pa.table({"k": pa.array([None, 1, 2], pa.int64()), "v": pa.array([7, 8, 9], pa.int64()), WEIGHT: pa.array([1, 1, 1], pa.int64())})
    _written(table, _context(spark, str(tmp_path), full=True), materialize(with_bucket(spark.createDataFrame(data), ("k",), 8), small=True), [None])
    touched_rows = spark.createDataFrame(pa.table({"k": pa.array([None, 2], pa.int64()), WEIGHT: pa.array([1, 1], pa.int64())}))
    touched = materialize(with_bucket(touched_rows, ("k",), 8), small=True)
    read = arrangement.read(table, _context(spark, str(tmp_path), full=False, versions={table.table_name: 0}, epoch=2), touched, ("k",))
    assert sorted((r["k"] is None, r["v"]) for r in read.df.collect()) == [(False, 9), (True, 7)]
