"""Keying change sets in Spark: what the keyed operators' bindings share (buckets over key
columns hashed alike on both sides, rows with a NULL key set apart). A materialized change
(:func:`~ivm_assets.spark.batches.materialize`) that is small has an Arrow copy on the
driver, which is split there without another Spark job."""

from __future__ import annotations

import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets.epoch_context import EpochContext
from ivm_assets.rules.operator import Operator
from ivm_assets.spark.arrow import to_spark
from ivm_assets.spark.batches import Batch, col, materialize, nothing
from ivm_assets.state.spec import StateTable
from ivm_assets.state.layout import hash_type, with_bucket
from ivm_assets.zset import BUCKET
from ivm_assets.state import arrangement


def key_types(left: DataFrame, right: DataFrame, left_keys: tuple[str, ...], right_keys: tuple[str, ...]) -> list:
    """Each key pair hashed as one type, so equal keys of both inputs share a bucket."""
    return [hash_type(left.schema[a].dataType, right.schema[b].dataType) for a, b in zip(left_keys, right_keys)]


def keyed_change(
    ctx: EpochContext, op: Operator, change: DataFrame, keys: tuple[str, ...], types: list, store: StateTable | None = None
) -> Batch:
    """``op``'s change with ``__bucket`` over ``keys``, materialized once (or known empty);
    staged into ``store`` when the whole change is what that state table will hold
    (:func:`~ivm_assets.state.arrangement.stage`)."""
    change = with_bucket(change, keys, ctx.buckets, types)
    if op.unchanged(ctx):
        return nothing(change)
    return arrangement.stage(store, ctx, change, types) if store is not None else materialize(change, small=ctx.small)


def all_present(keys: tuple[str, ...]) -> Column:
    """True where no key column is NULL (always true without keys)."""
    cond = F.lit(True)
    for k in keys:
        cond = cond & col(k).isNotNull()
    return cond


def split_null_keys(spark: SparkSession, batch: Batch, keys: tuple[str, ...]) -> tuple[Batch, DataFrame]:
    """``batch`` as (its rows whose keys are all present, its rows with a NULL key).

    A NULL key never equals anything, so those rows need no state; the first part keeps
    the batch's Arrow copy (filtered on the driver) so it can be stored and looked up as
    it is. Without an Arrow copy (a full refresh) the row count of the first part is the
    whole batch's: an upper bound, which only decides whether some work can be skipped.
    """
    if not keys:
        return batch, batch.df.limit(0)
    if batch.table is None:
        return Batch(batch.df.filter(all_present(keys)), batch.rows), batch.df.filter(~all_present(keys))
    mask = pc.is_valid(batch.table.column(keys[0]))
    for k in keys[1:]:
        mask = pc.and_(mask, pc.is_valid(batch.table.column(k)))
    keyed, nulls = batch.table.filter(mask), batch.table.filter(pc.invert(mask))
    keyed_batch = batch if nulls.num_rows == 0 else Batch.of_table(spark, keyed)
    null_df = batch.df.limit(0) if nulls.num_rows == 0 else to_spark(spark, nulls)
    return keyed_batch, null_df


def rebucket(spark: SparkSession, batch: Batch, column: str) -> Batch:
    """``batch`` with ``column``, a second bucket column computed along with it (over other
    keys), as its ``__bucket``: one materialized change stored in tables keyed differently."""
    if batch.table is not None:
        table = batch.table.drop_columns([BUCKET])
        table = table.rename_columns([BUCKET if n == column else n for n in table.column_names])
        return Batch.of_table(spark, table)
    return Batch(batch.df.drop(BUCKET).withColumnRenamed(column, BUCKET), batch.rows)
