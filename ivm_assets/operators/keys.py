"""What the operators that look state up by the keys of two inputs share (inner, outer, semi
and anti joins): their two keyed state tables and their binding, written once for both
engines (:meth:`KeyedPair.epoch`): both changes bucketed alike, rows with a NULL key set
apart, each state read for the keys of the changes the operator names.

Spark's side of it works on change sets already materialized
(:func:`~ivm_assets.spark.batches.materialize`): a small one has an Arrow copy on the
driver, which is split or combined there without another Spark job. Spark's state lookup
for the keys of several changes is :func:`ivm_assets.operators.spark_binding.lookup`.
"""

from __future__ import annotations

from abc import abstractmethod

import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets.epoch_context import EpochContext
from ivm_assets.operators.base import Operator, input_change
from ivm_assets.operators.binding import BoundOperator, Change, EpochBinding
from ivm_assets.rules.rel import Rel
from ivm_assets.spark.arrow import to_spark
from ivm_assets.spark.batches import Batch, col, materialize, nothing
from ivm_assets.state.arrangement import StateTable
from ivm_assets.state.layout import hash_type, with_bucket
from ivm_assets.zset import BUCKET


class KeyedPair(BoundOperator):
    """Two inputs matched on key columns. Each input's rows are kept as a z-set keyed by its
    keys (state tables ``left`` and ``right``); each epoch both changes are bucketed alike.

    The binding (:meth:`epoch`) is one for every such operator and both engines: both
    changes keyed, each state read for the keys :attr:`lookups` names, the rule over what is
    present, both changes appended. What differs between operators is declared here."""

    # Per rule input read from state: (the side whose table is read, the sides whose
    # change's keys are looked up in it, the table's own side first).
    lookups: dict[str, tuple[str, tuple[str, ...]]] = {
        "old_right": ("right", ("right", "left")), "old_left": ("left", ("right",)),
    }
    # Per rule input of rows with a NULL key (which match nothing and need no state): its side.
    null_inputs: dict[str, str] = {"nulls": "left"}

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

    @abstractmethod
    def rule_on(self, present: set[str]) -> Rel:
        """This operator's rule on changes over the rule inputs in ``present``."""

    def epoch(self, cx: EpochBinding) -> Change:
        dl, dr, nulls = cx.pair(self)
        inputs = {"dl": cx.unkeyed(dl), "dr": cx.unkeyed(dr)} | {name: nulls[side] for name, side in self.null_inputs.items()}
        present = {name for name, keyed in (("dl", dl), ("dr", dr)) if cx.rows(keyed)}
        if present:
            changes = {"left": (dl, self.left_keys), "right": (dr, self.right_keys)}
            tables = {"left": self.left_state, "right": self.right_state}
            for name, (side, probes) in self.lookups.items():
                if (rows := cx.lookup_keys(tables[side], [changes[p] for p in probes])) is not None:
                    inputs[name] = rows
                    present.add(name)
        out = cx.compute(self.rule_on(present), inputs, self.columns, like=(dl, dr))
        cx.append(self.left_state, dl)
        cx.append(self.right_state, dr)
        return out

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
