"""Operators' bindings (:mod:`ivm_assets.rules.binding`) run by Spark: change sets are
lazy DataFrames, a keyed change is materialized once (:func:`materialize`: a small one comes
to the driver as Arrow, in the job of every other small change computed before its first
use), state is read by :func:`~ivm_assets.state.arrangement.read` and rules are rendered as DataFrames
(:mod:`ivm_assets.render.spark.rel`). :func:`spark_change` is an operator's change in Spark:
its binding run by :class:`SparkBinding`, but for the inner join, whose Spark step is its
own (:mod:`ivm_assets.render.spark.inner_join`)."""

from __future__ import annotations

from functools import reduce

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.epoch_context import EpochContext, FromContext
from ivm_assets.ir.rel import Rel
from ivm_assets.render.spark import rel as render_spark
from ivm_assets.render.spark.inner_join import inner_join
from ivm_assets.render.spark.keying import key_types, keyed_change, rebucket, split_null_keys
from ivm_assets.rules.join import JoinOp
from ivm_assets.rules.not_in import NULL
from ivm_assets.rules.operator import Operator
from ivm_assets.spark.batches import Batch, col, materialize, nothing, unforced
from ivm_assets.sql.plan import q
from ivm_assets.state.spec import StateTable
from ivm_assets.state.consolidate import in_spark as consolidate
from ivm_assets.state.layout import default_hash_types, with_bucket
from ivm_assets.zset import BUCKET, WEIGHT
from ivm_assets.state import arrangement

# NOT IN's second bucket column, over a change's group keys (see not_in_changes).
_GROUP_BUCKET = "__bucket_g"

# A state table of up to this many rows is read whole in an incremental epoch (reads_whole),
# instead of the keys the change touches: finding those needs the change computed first, a
# Spark job of its own (~0.15 s). Then the change, the new state and the output change are
# one job, as for a global aggregate; but that job computes the output row of every group
# twice (retracted, re-inserted) to let the untouched ones cancel, which outgrows the job
# saved past a few thousand groups (TPC-H Q10's 38,000 customers: 2.5 s -> 3.2 s a refresh).
WHOLE_TABLE_ROWS = 5_000


def spark_change(ctx: EpochContext, op: Operator) -> DataFrame:
    """``op``'s change set this epoch, as a lazy DataFrame (its state appends queued)."""
    if type(op) is JoinOp:  # not an outer join: those take the shared binding
        return inner_join(ctx, op, input_change(ctx, op.left), input_change(ctx, op.right))
    return op.epoch(SparkBinding(ctx))


def input_change(ctx: EpochContext, op: Operator) -> DataFrame:
    """``op``'s change as joins (of every kind) and aggregates take it: consolidated in an
    incremental epoch, so that a row inserted and deleted again cancels before it costs a
    state lookup; as it is in a full refresh, where every weight is positive, these
    operators treat two copies of a row as one row of weight 2, and consolidating would
    group the whole input by all its columns."""
    change = spark_change(ctx, op)
    return change if ctx.full else consolidate(change, op.columns)


class SparkBinding(FromContext):
    """An epoch in Spark, as an operator's binding sees it."""

    def __init__(self, ctx: EpochContext) -> None:
        self.ctx = ctx
        self._hash_types: dict[str, list] = {}  # per state table: how its keys were hashed

    def source(self, relation: str) -> DataFrame:
        return self.ctx.changes[relation]

    def change(self, op: Operator) -> DataFrame:
        return spark_change(self.ctx, op)

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
        rows = arrangement.rows_read_on_driver(table, self.ctx)
        return rows is not None and rows <= WHOLE_TABLE_ROWS

    def empty(self, change: DataFrame | Batch) -> bool:
        return False  # a lazy change is known empty only by computing it (see keyed, rows)

    def consolidated(self, op: Operator, columns: tuple[str, ...]) -> DataFrame:
        return consolidate(spark_change(self.ctx, op), columns)

    def tagged(self, ops: tuple[Operator, ...], columns: tuple[str, ...], tag: str) -> DataFrame:
        parts = []
        for index, op in enumerate(ops):
            df = spark_change(self.ctx, op).toDF(*columns, WEIGHT)
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
        # Both changes bucketed (each materialized once), their rows with a NULL key set
        # apart (they match nothing), each key pair hashed alike.
        left, right = input_change(self.ctx, op.left), input_change(self.ctx, op.right)
        types = key_types(left, right, op.left_keys, op.right_keys)
        dl = keyed_change(self.ctx, op.left, left, op.left_keys, types)
        dr = keyed_change(self.ctx, op.right, right, op.right_keys, types)
        dl, left_nulls = split_null_keys(self.ctx.spark, dl, op.left_keys)
        dr, right_nulls = split_null_keys(self.ctx.spark, dr, op.right_keys)
        self._hash_types[op.left_state.table_name] = self._hash_types[op.right_state.table_name] = types
        return dl, dr, {"left": left_nulls.drop(BUCKET), "right": right_nulls.drop(BUCKET)}

    def not_in_changes(self, op) -> tuple[Batch, Batch, DataFrame, Batch, Batch]:
        ctx = self.ctx
        left = consolidate(spark_change(ctx, op.left), op.left.columns)
        right = consolidate(spark_change(ctx, op.right), op.right.columns).withColumn(NULL, col(op.c).isNull())
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
        raw = arrangement.read(table, self.ctx, keyed, keys)
        if raw is None:
            return None
        current = arrangement.current(table, raw)
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
        arrangement.write(table, self.ctx, keyed, self._hash_types[table.table_name])


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
        raw = arrangement.read(table, ctx, _combined(ctx, parts), parts[0][1])
        return arrangement.current(table, raw) if raw is not None else None
    rows: DataFrame | None = None
    for i, (batch, keys) in enumerate(parts):
        raw = arrangement.read(table, ctx, batch, keys)
        if raw is None:
            return None  # no state yet
        found = raw.df
        for earlier, earlier_keys in parts[:i]:
            seen = earlier.df.select(*[col(k) for k in earlier_keys]).distinct()
            same = [found[q(a)] == seen[q(b)] for a, b in zip(table.keys, earlier_keys)]
            found = found.join(seen, reduce(lambda x, y: x & y, same), "left_anti")
        rows = found if rows is None else rows.unionByName(found)
    return arrangement.current_rows(table, rows) if rows is not None else None


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
