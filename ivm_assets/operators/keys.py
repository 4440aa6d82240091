"""What the operators that look state up by the keys of two inputs share (inner, outer, semi
and anti joins): their two keyed state tables, both changes bucketed alike, rows with a NULL
key set apart, and one state lookup for the keys of both inputs' change sets.

Both work on change sets already materialized (:func:`~ivm_assets.operators.base.materialize`):
a small one has an Arrow copy on the driver, which is split or combined there without
another Spark job.
"""

from __future__ import annotations

from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.operators.base import Batch, EpochContext, Operator, col, input_change, materialize, nothing
from ivm_assets.spark.arrow import to_spark
from ivm_assets.sql.plan import q
from ivm_assets.state.arrangement import StateTable
from ivm_assets.state.layout import hash_type, with_bucket
from ivm_assets.zset import BUCKET


class KeyedPair(Operator):
    """Two inputs matched on key columns. Each input's rows are kept as a z-set keyed by its
    keys (state tables ``left`` and ``right``); each epoch both changes are bucketed alike."""

    def __init__(
        self, op_id: str, left: Operator, right: Operator, left_keys: tuple[str, ...], right_keys: tuple[str, ...],
        columns: tuple[str, ...],
    ) -> None:
        self.id, self.left, self.right, self.columns = op_id, left, right, columns
        self.left_keys, self.right_keys = left_keys, right_keys
        self.left_state = StateTable(operator_id=op_id, name="left", columns=left.columns, keys=left_keys, layout="zset")
        self.right_state = StateTable(operator_id=op_id, name="right", columns=right.columns, keys=right_keys, layout="zset")

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.left, self.right)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.left_state, self.right_state)

    def changes(self, ctx: EpochContext) -> tuple[DataFrame, DataFrame, list]:
        """Both inputs' changes (see :func:`~ivm_assets.operators.base.input_change`), and how
        each key pair is hashed."""
        left, right = input_change(ctx, self.left), input_change(ctx, self.right)
        return left, right, key_types(left, right, self.left_keys, self.right_keys)

    def split_changes(self, ctx: EpochContext) -> tuple[Batch, Batch, DataFrame, DataFrame, list]:
        """Both changes bucketed (each materialized once), their rows with a NULL key set
        apart (they match nothing: left, right), and how each key pair is hashed."""
        left, right, types = self.changes(ctx)
        dl = keyed_change(ctx, self.left, left, self.left_keys, types)
        dr = keyed_change(ctx, self.right, right, self.right_keys, types)
        dl, left_nulls = split_null_keys(ctx.spark, dl, self.left_keys)
        dr, right_nulls = split_null_keys(ctx.spark, dr, self.right_keys)
        return dl, dr, left_nulls, right_nulls, types


def key_types(left: DataFrame, right: DataFrame, left_keys: tuple[str, ...], right_keys: tuple[str, ...]) -> list:
    """Each key pair hashed as one type, so equal keys of both inputs share a bucket."""
    return [hash_type(left.schema[a].dataType, right.schema[b].dataType) for a, b in zip(left_keys, right_keys)]


def keyed_change(
    ctx: EpochContext, op: Operator, change: DataFrame, keys: tuple[str, ...], types: list, store: StateTable | None = None
) -> Batch:
    """``op``'s change with ``__bucket`` over ``keys``, materialized once (or known empty);
    staged into ``store`` when the whole change is what that state table will hold
    (:meth:`StateTable.stage`)."""
    change = with_bucket(change, keys, ctx.buckets, types)
    if op.unchanged(ctx):
        return nothing(change)
    return store.stage(ctx, change, types) if store is not None else materialize(change, small=ctx.small)


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


# Change sets with the names of their key columns, e.g. [(left change, left keys), …].
Parts = list[tuple[Batch, tuple[str, ...]]]


def lookup(ctx: EpochContext, table: StateTable, parts: Parts) -> DataFrame | None:
    """The current rows of ``table`` whose key equals a key of some row of ``parts`` (change
    sets, each with ``__bucket`` over its keys, hashed alike); None when the state is empty.

    Keys of one kind (same types, or numbers) are combined into one lookup, named as the
    first part's keys: put the table's own side first. A string key beside a number or a
    date compares through Spark's casts ('5.0' = 5), which combining the keys in one
    column would change: then each part looks up on its own, and rows a later part finds
    again are left out, so every row comes once.
    """
    parts = [(b, keys) for b, keys in parts if b.rows]
    if not parts:
        return None
    first_types = [parts[0][0].df.schema[k].dataType for k in parts[0][1]]
    if all(_alike(b.df.schema[k].dataType, t) for b, keys in parts for k, t in zip(keys, first_types)):
        raw = table.read(ctx, _combined(ctx, parts), parts[0][1])
        return table.current(raw) if raw is not None else None
    rows: DataFrame | None = None
    for i, (batch, keys) in enumerate(parts):
        raw = table.read(ctx, batch, keys)
        if raw is None:
            return None  # no state yet
        found = raw.df
        for earlier, earlier_keys in parts[:i]:
            seen = earlier.df.select(*[col(k) for k in earlier_keys]).distinct()
            same = [found[q(a)] == seen[q(b)] for a, b in zip(table.keys, earlier_keys)]
            found = found.join(seen, reduce(lambda x, y: x & y, same), "left_anti")
        rows = found if rows is None else rows.unionByName(found)
    return table.current_rows(rows) if rows is not None else None


def _alike(a: T.DataType, b: T.DataType) -> bool:
    """Keys whose values compare the same in one column of either type: same types, or numbers."""
    return a == b or (isinstance(a, T.NumericType) and isinstance(b, T.NumericType))


def _combined(ctx: EpochContext, parts: Parts) -> Batch:
    """The keys of ``parts`` (with their buckets) as one batch, named as the first part's.

    Arrow copies are combined on the driver, key types cast to the first part's (an INT
    key beside a BIGINT one); without Arrow copies, or for values the first part's type
    cannot hold, Spark combines them (widening the types).
    """
    names = parts[0][1]
    frames = [b.df.select(*[col(k).alias(n) for k, n in zip(keys, names)], col(BUCKET)) for b, keys in parts]
    df = reduce(DataFrame.unionAll, frames)
    rows = sum(b.rows for b, _ in parts)
    if any(b.table is None for b, _ in parts):
        return Batch(df, rows)
    tables = [b.table.select([*keys, BUCKET]).rename_columns([*names, BUCKET]) for b, keys in parts]
    try:
        table = pa.concat_tables([t.cast(tables[0].schema) for t in tables])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return Batch(df, rows)
    return Batch.of_table(ctx.spark, table)
