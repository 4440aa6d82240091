"""What the operators that look state up by the keys of two inputs share (outer, semi and
anti joins): rows with a NULL key set apart, and one lookup batch for the keys of both
inputs' change sets.

Both work on change sets already materialized (:func:`~ivm_assets.operators.base.materialize`):
a small one has an Arrow copy on the driver, which is split or combined there without
another Spark job.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets.operators.base import Batch, col
from ivm_assets.spark.arrow import to_spark
from ivm_assets.state.arrangement import BUCKET


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
    mask = pc.and_(*[pc.is_valid(batch.table.column(k)) for k in keys]) if len(keys) > 1 else pc.is_valid(batch.table.column(keys[0]))
    keyed, nulls = batch.table.filter(mask), batch.table.filter(pc.invert(mask))
    keyed_batch = batch if nulls.num_rows == 0 else Batch(to_spark(spark, keyed), keyed.num_rows, keyed)
    null_df = batch.df.limit(0) if nulls.num_rows == 0 else to_spark(spark, nulls)
    return keyed_batch, null_df


def touched_keys(spark: SparkSession, parts: list[tuple[Batch, tuple[str, ...]]], names: tuple[str, ...]) -> Batch:
    """The keys of several change sets (each with ``__bucket`` over its keys, hashed alike)
    as one batch whose key columns are called ``names``: one state lookup for all of them.

    Arrow copies are combined on the driver, key types cast to the first part's (an INT
    key beside a BIGINT one); parts that cannot be (no Arrow copy, types that do not
    cast) are combined by Spark instead, which costs the lookup its driver-side path.
    """
    frames = [b.df.select(*[col(k).alias(n) for k, n in zip(keys, names)], col(BUCKET)) for b, keys in parts]
    parts = [(b, keys) for b, keys in parts if b.rows]
    if not parts:
        return Batch(frames[0].limit(0), 0)
    frames = [b.df.select(*[col(k).alias(n) for k, n in zip(keys, names)], col(BUCKET)) for b, keys in parts]
    rows = sum(b.rows for b, _ in parts)
    df = frames[0]
    for other in frames[1:]:
        df = df.unionAll(other)
    if any(b.table is None for b, _ in parts):
        return Batch(df, rows)
    tables = [b.table.select([*keys, BUCKET]).rename_columns([*names, BUCKET]) for b, keys in parts]
    try:
        table = pa.concat_tables([t.cast(tables[0].schema) for t in tables])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return Batch(df, rows)
    return Batch(to_spark(spark, table), table.num_rows, table)
