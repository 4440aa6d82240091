"""Operators' bindings (:mod:`ivm_assets.operators.binding`) run by Spark: change sets are
lazy DataFrames, a keyed change is materialized once (:func:`materialize`: a small one comes
to the driver as Arrow, in the job of every other small change computed before its first
use), state is read by :meth:`StateTable.read` and rules are rendered as DataFrames."""

from __future__ import annotations

from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.epoch_context import EpochContext, FromContext
from ivm_assets.operators.base import Operator, consolidate, input_change
from ivm_assets.rules.not_in import NULL
from ivm_assets.rules import render_spark
from ivm_assets.rules.rel import Rel
from ivm_assets.spark.arrow import to_spark
from ivm_assets.spark.batches import Batch, col, materialize, nothing, unforced
from ivm_assets.sql.plan import q
from ivm_assets.state.arrangement import StateTable
from ivm_assets.state.layout import default_hash_types, hash_type, with_bucket
from ivm_assets.zset import BUCKET, WEIGHT

# NOT IN's second bucket column, over a change's group keys (see not_in_changes).
_GROUP_BUCKET = "__bucket_g"

# A state table of up to this many rows is read whole in an incremental epoch (reads_whole),
# instead of the keys the change touches: finding those needs the change computed first, a
# Spark job of its own (~0.15 s). Then the change, the new state and the output change are
# one job, as for a global aggregate; but that job computes the output row of every group
# twice (retracted, re-inserted) to let the untouched ones cancel, which outgrows the job
# saved past a few thousand groups (TPC-H Q10's 38,000 customers: 2.5 s -> 3.2 s a refresh).
WHOLE_TABLE_ROWS = 5_000


class SparkBinding(FromContext):
    """An epoch in Spark, as an operator's binding sees it."""

    def __init__(self, ctx: EpochContext) -> None:
        self.ctx = ctx
        self._hash_types: dict[str, list] = {}  # per state table: how its keys were hashed

    def source(self, relation: str) -> DataFrame:
        return self.ctx.changes[relation]

    def change(self, op: Operator) -> DataFrame:
        return op.step(self.ctx)

    def held(self, op: Operator) -> bool:
        return False  # DataFrames are plans: a chain bound into one rule is the same plan

    def unions_alike(self, changes: tuple) -> None:
        return None  # Spark widens them itself

    def aggregated(self, op: Operator, *, fused: bool) -> DataFrame:
        return input_change(self.ctx, op)

    def constant(self, change: DataFrame, name: str, value: int) -> DataFrame:
        return change.withColumn(name, F.lit(value))

    def type_name(self, change: DataFrame | Batch, column: str) -> str:
        return _frame(change).schema[column].dataType.simpleString()

    def columns(self, change: DataFrame | Batch) -> tuple[str, ...]:
        return tuple(_frame(change).columns)

    def aggregates_alike(self, change: DataFrame, rule, values: tuple[int, ...]) -> None:
        return None  # Spark's own sums and order

    def stored(self, change: DataFrame, table: StateTable, columns: tuple[str, ...]) -> DataFrame:
        return change  # Spark writes its own types, which the commit checks against the table's

    def reads_whole(self, table: StateTable) -> bool:
        rows = table.rows_read_on_driver(self.ctx)
        return rows is not None and rows <= WHOLE_TABLE_ROWS

    def empty(self, change: DataFrame | Batch) -> bool:
        return False  # a lazy change is known empty only by computing it (see keyed, rows)

    def consolidated(self, op: Operator, columns: tuple[str, ...]) -> DataFrame:
        return consolidate(op.step(self.ctx), columns)

    def tagged(self, ops: tuple[Operator, ...], columns: tuple[str, ...], tag: str) -> DataFrame:
        parts = []
        for index, op in enumerate(ops):
            df = op.step(self.ctx).toDF(*columns, WEIGHT)
            if op.unchanged(self.ctx):
                df = df.limit(0)  # known empty: no Spark work for this input
            parts.append(df.withColumn(tag, F.lit(index)))
        return consolidate(reduce(DataFrame.unionAll, parts), (*columns, tag))

    def keyed(self, change: DataFrame, keys: tuple[str, ...], table: StateTable, inputs: tuple[Operator, ...]) -> Batch:
        # Each key hashed by its own type, unless a pair's types were set for the table.
        types = self._hash_types.setdefault(table.table_name, default_hash_types(change, keys))
        batch = with_bucket(change, keys, self.ctx.buckets, types)
        if inputs and all(i.unchanged(self.ctx) for i in inputs):
            return nothing(batch)
        return materialize(batch, small=self.ctx.small)

    def kept(self, change: DataFrame) -> Batch:
        return materialize(change, small=True)

    def copies(self, kept: Batch) -> int:
        return sum(kept.table.column(WEIGHT).to_pylist())

    def distinct(self, keyed: Batch, columns: tuple[str, ...]) -> DataFrame:
        return keyed.df.select(*[col(c) for c in columns]).distinct()

    def orders_alike(self, change: DataFrame, columns: tuple[str, ...], what: str) -> None:
        return None  # Spark's own order

    def pair(self, op) -> tuple[Batch, Batch, dict[str, DataFrame]]:
        dl, dr, left_nulls, right_nulls, types = op.split_changes(self.ctx)
        self._hash_types[op.left_state.table_name] = self._hash_types[op.right_state.table_name] = types
        return dl, dr, {"left": left_nulls.drop(BUCKET), "right": right_nulls.drop(BUCKET)}

    def not_in_changes(self, op) -> tuple[Batch, Batch, DataFrame, Batch, Batch]:
        ctx = self.ctx
        left = consolidate(op.left.step(ctx), op.left.columns)
        right = consolidate(op.right.step(ctx), op.right.columns).withColumn(NULL, col(op.c).isNull())
        types = key_types(left, right, op.left_keys, op.right_keys)
        for table, hashes in ((op.left_state, types), (op.values, types), (op.left_groups, types[:-1]), (op.groups, types[:-1])):
            self._hash_types[table.table_name] = hashes
        # Each change keyed once by (group, value) and by group together, then split: one
        # materialized change serves the two tables keyed differently (rebucket).
        dl = self._two_buckets(op.left, left, op.left_keys, op.left_groups_keys, types)
        dr = self._two_buckets(op.right, right, op.right_keys, op.right_group_keys, types)
        dl_grouped, dl_no_group = split_null_keys(ctx.spark, dl, op.left_groups_keys)
        dr_grouped, _ = split_null_keys(ctx.spark, dr, op.right_group_keys)  # a NULL group is in no group
        return (
            split_null_keys(ctx.spark, dl_grouped, (op.x,))[0], rebucket(ctx.spark, dl_grouped, _GROUP_BUCKET),
            dl_no_group.drop(BUCKET, _GROUP_BUCKET),
            split_null_keys(ctx.spark, dr_grouped, (op.c,))[0], rebucket(ctx.spark, dr_grouped, _GROUP_BUCKET),
        )

    def _two_buckets(self, op: Operator, change: DataFrame, pair_keys: tuple[str, ...], group_keys: tuple[str, ...], types: list) -> Batch:
        """``change`` bucketed by group (``__bucket_g``) and by (group, value) (``__bucket``)."""
        by_group = with_bucket(change, group_keys, self.ctx.buckets, types[:-1]).withColumnRenamed(BUCKET, _GROUP_BUCKET)
        return keyed_change(self.ctx, op, by_group, pair_keys, types)

    def probe(self, change: DataFrame, keys: tuple[str, ...], table: StateTable) -> Batch:
        return materialize(with_bucket(change, keys, self.ctx.buckets, self._hash_types[table.table_name]), small=True)

    def present(self, keyed: Batch, keys: tuple[str, ...]) -> Batch:
        return split_null_keys(self.ctx.spark, keyed, keys)[0]

    def rows(self, keyed: Batch) -> int:
        return keyed.rows

    def unkeyed(self, keyed: Batch, columns: tuple[str, ...] | None = None, *, lazily: bool = False) -> DataFrame:
        df = (unforced(keyed) if lazily else keyed.df).drop(BUCKET)
        return df if columns is None else df.select(*[col(c) for c in columns], col(WEIGHT))

    def lookup(
        self, table: StateTable, keyed: Batch | None, keys: tuple[str, ...], *, like=None, reused: bool = False,
    ) -> DataFrame | None:
        raw = table.read(self.ctx, keyed, keys)
        if raw is None:
            return None
        current = table.current(raw)
        if reused and not raw.local:
            return materialize(current, small=self.ctx.small).df  # read once, used twice
        return current

    def lookup_keys(self, table: StateTable, parts: list[tuple[Batch, tuple[str, ...]]]) -> DataFrame | None:
        return lookup(self.ctx, table, parts)

    def compute(self, node: Rel, inputs: dict[str, DataFrame], columns: tuple[str, ...] | None = None, like: tuple = ()) -> DataFrame:
        # Left lazy: whoever consumes a change set materializes it once, and a second
        # materialization here would cost one more Spark job per epoch.
        return render_spark.render(node, {name: x.df if isinstance(x, Batch) else x for name, x in inputs.items()})

    def append(self, table: StateTable, keyed: Batch) -> None:
        table.write(self.ctx, keyed, self._hash_types[table.table_name])


def _frame(change: DataFrame | Batch) -> DataFrame:
    return change.df if isinstance(change, Batch) else change


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


# --- keying in Spark: what the keyed operators share ---------------------------------------
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
