"""Semi and anti joins: what EXISTS, IN, NOT EXISTS and NOT IN (subquery) become.

Lowering decorrelates a subquery into the distinct keys it can match (its correlation
columns, and the compared column for IN / NOT IN); an uncorrelated EXISTS / NOT IN gets a
constant key on both sides. The output is the left input's rows that pass, unchanged.

**Semi / anti join** (EXISTS and IN / NOT EXISTS). A left row with key k passes when
m(k) = [count_R(k) > 0] (semi) or when it does not (anti); a NULL key never matches (never
passes a semi join, always passes an anti join, and is not stored). With m, m' before and
after the change:

    Δout = Σ_ΔL w·pass(m'(k))  +  Σ_{L_old(k), k ∈ keys(ΔR)} w·(pass(m'(k)) − pass(m(k)))

State: ``left``, the left rows by key; ``right``, the right rows by key (a count per key:
the right input is distinct, so every key of ΔR is one whose m flips). A change reads the
counts of its keys and the left rows of just the keys ΔR touches.

**NOT IN** (``x NOT IN (SELECT c …)``, SQL's NULL rules). The right rows are (g, c): the
correlation keys g (a constant when uncorrelated) and the value c. A group's status is
EMPTY (no rows), NULLS (a NULL c among them) or VALUES. A left row (g, x) passes when its
group is EMPTY, or when it is VALUES and x is not NULL and no c equals x; a NULL g means an
empty group (the correlation never holds), so such a row always passes and is not stored.

    Δout = Σ_ΔL w·pass'(row) + Σ_{L_old rows of flipped groups, or of (g, c) in ΔR} w·(pass'(row) − pass(row))

State: ``values`` (right rows with a value, by (g, c)), ``groups`` (per right row g and
whether c is NULL, by g: the group's row and NULL counts), ``left`` (left rows with g and x,
by (g, x): the rows one value change touches) and ``left_groups`` (left rows with g, by g:
the rows a status change touches). A status flips only when a group gains its first row or
NULL, or loses its last: only then are the group's left rows read whole (for an
uncorrelated NOT IN, the whole left input). A change to the subquery costs one more Spark
job (finding the flipped groups), and one more when some group flips (looking up its
rows' values).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ivm_assets.operators.base import Batch, EpochContext, Operator, col, consolidate, materialize
from ivm_assets.operators.keys import KeyedPair, Parts, key_types, keyed_change, lookup, rebucket, split_null_keys
from ivm_assets.sql.plan import q
from ivm_assets.state.arrangement import StateTable, with_bucket
from ivm_assets.zset import BUCKET, WEIGHT

_NULL = "__null"
_GROUP_BUCKET = "__bucket_g"
_EMPTY, _NULLS, _VALUES = 0, 1, 2


def _eq(left: DataFrame, right: DataFrame, pairs) -> Column:
    return reduce(lambda a, b: a & b, [left[q(a)] == right[q(b)] for a, b in pairs])


class SemiJoinOp(KeyedPair):
    """Rows of the left input with (semi) or without (anti) a right row of equal keys."""

    def __init__(
        self, op_id: str, left: Operator, right: Operator, anti: bool, left_keys: tuple[str, ...], right_keys: tuple[str, ...]
    ) -> None:
        super().__init__(op_id, left, right, left_keys, right_keys, left.columns)
        self.anti = anti

    def _passes(self, count: Column) -> Column:
        matched = F.coalesce(count, F.lit(0)) > 0
        return F.when(~matched if self.anti else matched, 1).otherwise(0).cast("bigint")

    def step(self, ctx: EpochContext) -> DataFrame:
        dl, dr, left_nulls, _, types = self.split_changes(ctx)
        left, right = dl.df.drop(BUCKET), dr.df.drop(BUCKET)
        parts: list[DataFrame] = [left_nulls.drop(BUCKET)] if self.anti else []
        if dl.rows or dr.rows:
            counts = self._counts(ctx, [(dr, self.right_keys), (dl, self.left_keys)], right)
            pairs = [(a, f"__c_{b}") for a, b in zip(self.left_keys, self.right_keys)]
            keep = [col(c) for c in self.columns]
            if dl.rows:
                joined = left.join(counts, _eq(left, counts, pairs), "left")
                parts.append(joined.select(*keep, (col(WEIGHT) * self._passes(col("__n"))).alias(WEIGHT)))
            raw = self.left_state.read(ctx, dr, self.right_keys) if dr.rows else None
            if raw is not None:
                old = self.left_state.current(raw)
                joined = old.join(counts, _eq(old, counts, pairs), "inner")
                flip = self._passes(col("__n")) - self._passes(col("__o"))
                parts.append(joined.select(*keep, (col(WEIGHT) * flip).alias(WEIGHT)))
        # Lazy: its consumer materializes it once.
        out = consolidate(reduce(DataFrame.unionAll, parts), self.columns) if parts else left.limit(0)
        self.left_state.write(ctx, dl, types)
        self.right_state.write(ctx, dr, types)
        return out

    def _counts(self, ctx: EpochContext, touched: Parts, right_change: DataFrame) -> DataFrame:
        """Per touched key: the right rows before (``__o``) and after (``__n``) the change."""
        return _before_after(ctx, self.right_state, touched, right_change, self.right_keys, "__o", "__n")

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys))
        name, passes = ("anti join", "no match") if self.anti else ("semi join", "a match")
        return (
            f"{name} ON {on} (rows with {passes}): Δout = ΔL·pass(m') + L_old(keys of ΔR)·(pass(m') − pass(m)), "
            "m = a right row with the key exists"
        )


class NotInOp(Operator):
    """``x NOT IN (subquery)`` with SQL's NULL rules, per correlation group (module doc)."""

    def __init__(
        self, op_id: str, left: Operator, right: Operator, left_keys: tuple[str, ...], right_keys: tuple[str, ...]
    ) -> None:
        self.id, self.left, self.right = op_id, left, right
        self.left_keys, self.right_keys = left_keys, right_keys
        self.left_groups_keys, self.right_group_keys = left_keys[:-1], right_keys[:-1]
        self.x, self.c = left_keys[-1], right_keys[-1]
        self.columns = left.columns

        def table(name: str, columns: tuple[str, ...], keys: tuple[str, ...]) -> StateTable:
            return StateTable(operator_id=op_id, name=name, columns=columns, keys=keys, layout="zset")

        self.left_state = table("left", left.columns, left_keys)
        self.left_groups = table("left_groups", left.columns, self.left_groups_keys)
        self.values = table("values", right.columns, right_keys)
        self.groups = table("groups", self.right_group_keys + (_NULL,), self.right_group_keys)

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.left, self.right)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.left_state, self.left_groups, self.values, self.groups)

    # --- lookups ----------------------------------------------------------------------------
    def _status(self, ctx: EpochContext, touched: Parts, groups_change: DataFrame) -> DataFrame:
        """Per touched group: its status before (``__so``) and after (``__sn``) the change."""
        keys = [col(k) for k in self.right_group_keys]
        zero = F.lit(0).cast("bigint")
        rows = groups_change.select(*keys, col(_NULL), zero.alias("__o"), col(WEIGHT).alias("__d"))
        old = lookup(ctx, self.groups, touched)
        if old is not None:
            rows = rows.unionByName(old.select(*keys, col(_NULL), col(WEIGHT).alias("__o"), zero.alias("__d")))
        nulls = lambda c: F.sum(F.when(col(_NULL), col(c)).otherwise(zero))  # noqa: E731
        summed = rows.groupBy(*keys).agg(
            F.sum("__o").alias("__no"), F.sum("__d").alias("__nd"), nulls("__o").alias("__zo"), nulls("__d").alias("__zd")
        )

        def status(n: Column, z: Column) -> Column:
            return F.when(n <= 0, _EMPTY).when(z > 0, _NULLS).otherwise(_VALUES)

        # Renamed: the status and the value counts both come from the right change, and
        # columns of one lineage joined twice would be ambiguous to Spark.
        return summed.select(
            *[col(k).alias(f"__s_{k}") for k in self.right_group_keys],
            status(col("__no"), col("__zo")).alias("__so"),
            status(col("__no") + col("__nd"), col("__zo") + col("__zd")).alias("__sn"),
        )

    def _value_counts(self, ctx: EpochContext, touched: Parts, values_change: DataFrame) -> DataFrame:
        """Per touched (g, value): right rows before (``__co``) and after (``__cn``)."""
        return _before_after(ctx, self.values, touched, values_change, self.right_keys, "__co", "__cn")

    def _passes(self, status: Column, count: Column) -> Column:
        s = F.coalesce(status, F.lit(_EMPTY))
        free = col(self.x).isNotNull() & (F.coalesce(count, F.lit(0)) <= 0)
        return F.when(s == _EMPTY, 1).when(s == _NULLS, 0).when(free, 1).otherwise(0).cast("bigint")

    def _weighted(self, rows: DataFrame, status: DataFrame, counts: DataFrame, *, change: bool) -> DataFrame:
        """``rows`` (left rows with a group) weighted by pass' (``change``: ΔL rows) or by
        pass' − pass (stored rows whose group or value a change touched)."""
        groups = [(a, f"__s_{b}") for a, b in zip(self.left_groups_keys, self.right_group_keys)]
        joined = rows.join(status, _eq(rows, status, groups), "left")
        pairs = [(a, f"__c_{b}") for a, b in zip(self.left_keys, self.right_keys)]
        joined = joined.join(counts, _eq(joined, counts, pairs), "left")
        weight = self._passes(col("__sn"), col("__cn"))
        if not change:
            weight = weight - self._passes(col("__so"), col("__co"))
        return joined.select(*[col(c) for c in self.columns], (col(WEIGHT) * weight).alias(WEIGHT))

    # --- one epoch ----------------------------------------------------------------------------
    def _two_buckets(self, ctx: EpochContext, op: Operator, df: DataFrame, pair_keys, group_keys, types) -> Batch:
        """The change bucketed by group (``__bucket_g``) and by (group, value) (``__bucket``)."""
        by_group = with_bucket(df, group_keys, ctx.buckets, types[:-1]).withColumnRenamed(BUCKET, _GROUP_BUCKET)
        return keyed_change(ctx, op, by_group, pair_keys, types)

    def step(self, ctx: EpochContext) -> DataFrame:
        left_change = consolidate(self.left.step(ctx), self.left.columns)
        right_change = consolidate(self.right.step(ctx), self.right.columns).withColumn(_NULL, col(self.c).isNull())
        types = key_types(left_change, right_change, self.left_keys, self.right_keys)
        dl = self._two_buckets(ctx, self.left, left_change, self.left_keys, self.left_groups_keys, types)
        dr = self._two_buckets(ctx, self.right, right_change, self.right_keys, self.right_group_keys, types)
        dl_grouped, dl_no_group = split_null_keys(ctx.spark, dl, self.left_groups_keys)
        dl_pairs, _ = split_null_keys(ctx.spark, dl_grouped, (self.x,))
        dl_groups = rebucket(ctx.spark, dl_grouped, _GROUP_BUCKET)
        dr_grouped, _ = split_null_keys(ctx.spark, dr, self.right_group_keys)  # a NULL g is in no group
        dr_pairs, _ = split_null_keys(ctx.spark, dr_grouped, (self.c,))
        dr_groups = rebucket(ctx.spark, dr_grouped, _GROUP_BUCKET)
        parts = [dl_no_group.select(*[col(c) for c in self.columns], col(WEIGHT))]  # an empty group: passes
        if dl_groups.rows or dr_groups.rows:
            status = self._status(ctx, [(dr_groups, self.right_group_keys), (dl_groups, self.left_groups_keys)], dr_groups.df)
            counts = self._value_counts(ctx, [(dr_pairs, self.right_keys), (dl_pairs, self.left_keys)], dr_pairs.df)
            if dl_grouped.rows:
                parts.append(self._weighted(dl_grouped.df, status, counts, change=True))
            if dr_grouped.rows and not ctx.full:  # a full refresh has no stored rows to flip
                parts.extend(self._flips(ctx, status, counts, dr_pairs, types))
        # Lazy: its consumer materializes it once.
        out = consolidate(reduce(DataFrame.unionAll, parts), self.columns)
        self.left_state.write(ctx, dl_pairs, types)
        self.left_groups.write(ctx, dl_groups, types[:-1])
        self.values.write(ctx, dr_pairs, types)
        self.groups.write(ctx, dr_groups, types[:-1])
        return out

    def _flips(self, ctx: EpochContext, status: DataFrame, counts: DataFrame, dr_pairs: Batch, types: list) -> list[DataFrame]:
        """The stored left rows whose result a right change can alter: all rows of the
        groups whose status flips, and the rows of the (g, value) pairs it touches."""
        parts: list[DataFrame] = []
        flipped = status.filter(col("__so") != col("__sn")).select(*[col(f"__s_{k}").alias(k) for k in self.right_group_keys])
        flipped = materialize(with_bucket(flipped, self.right_group_keys, ctx.buckets, types[:-1]), small=True)
        if flipped.rows:
            raw = self.left_groups.read(ctx, flipped, self.right_group_keys)
            if raw is not None:
                rows = self.left_groups.current(raw)
                # Their values were not among the touched pairs: look them up too.
                rows_pairs, _ = split_null_keys(
                    ctx.spark, materialize(with_bucket(rows, self.left_keys, ctx.buckets, types), small=True), (self.x,)
                )
                their_counts = counts
                if rows_pairs.rows:
                    their_counts = self._value_counts(ctx, [(rows_pairs, self.left_keys)], dr_pairs.df)
                parts.append(self._weighted(rows, status, their_counts, change=False))
        if dr_pairs.rows:
            raw = self.left_state.read(ctx, dr_pairs, self.right_keys)
            if raw is not None:
                rows = self.left_state.current(raw)
                if flipped.rows:  # those groups' rows are all counted above
                    f = flipped.df.drop(BUCKET)
                    rows = rows.join(f, _eq(rows, f, list(zip(self.left_groups_keys, self.right_group_keys))), "left_anti")
                parts.append(self._weighted(rows, status, counts, change=False))
        return parts

    def describe(self) -> str:
        corr = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_groups_keys, self.right_group_keys))
        return (
            f"not in: {self.x} NOT IN ({self.c}) per group {corr}: a row passes when its group is empty, or has no NULL "
            "and no equal value; Δout = ΔL·pass' + (rows of flipped groups and touched values)·(pass' − pass)"
        )


def _before_after(
    ctx: EpochContext, table: StateTable, touched: Parts, change: DataFrame, keys: tuple[str, ...], before: str, after: str
) -> DataFrame:
    """Per touched key of ``table`` (a z-set keyed by ``keys``): its rows' total weight before
    (column ``before``) and after (``after``) ``change``, the keys renamed ``__c_<key>`` to
    stay unambiguous beside the left input's."""
    by = [col(k) for k in keys]
    zero = F.lit(0).cast("bigint")
    rows = change.select(*by, zero.alias(before), col(WEIGHT).alias("__d"))
    old = lookup(ctx, table, touched)
    if old is not None:
        rows = rows.unionByName(old.select(*by, col(WEIGHT).alias(before), zero.alias("__d")))
    summed = rows.groupBy(*by).agg(F.sum(before).alias(before), F.sum("__d").alias("__d"))
    return summed.select(*[col(k).alias(f"__c_{k}") for k in keys], col(before), (col(before) + col("__d")).alias(after))
