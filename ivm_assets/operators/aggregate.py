"""GROUP BY with COUNT(*), COUNT, SUM, AVG, MIN, MAX, COUNT(DISTINCT).

Rule on changes: for every group the change touches, retract the group's old output row
(−1) and insert its new one (+1); rows that did not change cancel when consolidated.

State:
- ``groups`` (latest value per group): the row count and, per COUNT/SUM/AVG, the count of
  non-NULL arguments and their sum: in SUM's own type (a BIGINT sum wraps as Spark's does
  with ANSI off, a DECIMAL one is exact), and for AVG over integers exact as DECIMAL(38, 0)
  (Spark's AVG sums in DOUBLE; a BIGINT sum would wrap). New values are old + the change's
  partial sums, so these aggregates never look at the group's rows again. Because the old
  values are read back exactly (never re-summed), a retraction always equals the row
  emitted before, floating point included. A sum that cannot be carried on exactly — a
  DECIMAL sum past 38 digits (stored as NULL, Spark's answer), or a row leaving a DOUBLE
  sum that holds NaN or ±Infinity — stops the epoch with :class:`InexactAggregate`, and
  the view is recomputed.
- ``values<i>`` (z-set) per MIN / MAX / COUNT(DISTINCT): the multiset of non-NULL argument
  values per group. Deleting the current minimum is answered from the remaining values of
  the touched groups only.
A group exists while its row count is positive; a global aggregate (no GROUP BY) always
has its one row: COUNT is 0 and SUM/AVG/MIN/MAX are NULL over an empty input, as in Spark.

Which groups are read: those the change touches (found by computing the change first), or,
for a small group state without value tables, all of them (see WHOLE_GROUPS_ROWS): every
group is then retracted and re-inserted, untouched ones with the same row, which cancels.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets import decimal_rules

from ivm_assets.errors import InexactAggregate
from ivm_assets.operators.base import (
    Batch, EpochContext, Operator, col, consolidate, copies, input_change, materialize, nothing, null_safe_match, unforced,
)
from ivm_assets.sql.plan import AggCall, q
from ivm_assets.state.arrangement import StateRead, StateTable, default_hash_types, with_bucket
from ivm_assets.zset import BUCKET, WEIGHT

_GLOBAL = "__g"
_COUNT = "__cnt"
_SIGN = "__s"
_TOUCHED = "__t"
_VALUE_AGGS = ("min", "max", "count_distinct")
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FLOATING = (T.FloatType, T.DoubleType)

# Group state of up to this many rows is read whole in an incremental epoch, instead of the
# groups the change touches: finding those needs the input change computed first, a Spark
# job of its own (~0.15 s). Then the input change, the new groups and the output change are
# one job, as for a global aggregate; but that job computes the output row of every group
# twice (retracted, re-inserted) to let the untouched ones cancel, which outgrows the job
# saved past a few thousand groups (TPC-H Q10's 38,000 customers: 2.5 s -> 3.2 s a refresh).
WHOLE_GROUPS_ROWS = 5_000


class AggregateOp(Operator):
    """Grouped or global aggregation (see module doc for the rule and the state)."""

    def __init__(self, op_id: str, input: Operator, keys: tuple[str, ...], aggs: tuple[AggCall, ...]) -> None:
        self.id, self.input, self.keys, self.aggs = op_id, input, keys, aggs
        self.columns = keys + tuple(a.name for a in aggs)
        self.group_keys = keys or (_GLOBAL,)
        partials = [_COUNT]
        for i, a in enumerate(aggs):
            if a.func in ("count", "sum", "avg"):
                partials.append(f"n{i}")
            if a.func in ("sum", "avg"):
                partials.append(f"s{i}")
        self.partials = tuple(partials)
        self.groups = StateTable(
            operator_id=op_id, name="groups", columns=self.group_keys + self.partials, keys=self.group_keys, layout="latest",
            # A global aggregate's single row exists even at count 0: never drop it.
            alive_column=_COUNT if keys else None,
        )
        self.values = {
            i: StateTable(operator_id=op_id, name=f"values{i}", columns=self.group_keys + ("v",), keys=self.group_keys, layout="zset")
            for i, a in enumerate(aggs)
            if a.func in _VALUE_AGGS
        }

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.groups, *self.values.values())

    @property
    def version(self) -> int:
        # 2: AVG over integers summed exactly (was BIGINT, which wraps), AVG over DECIMAL
        # rounded once into its type, inexact sums detected (see the module doc).
        return 2 if any(a.func in ("sum", "avg") for a in self.aggs) else 1

    def _sums(self) -> list[int]:
        return [i for i, a in enumerate(self.aggs) if a.func in ("sum", "avg")]

    # --- partial sums of a change -------------------------------------------------------
    def _partials(self, delta: DataFrame) -> DataFrame:
        """Per touched group: Σ signs, and per COUNT/SUM/AVG the non-NULL count and sum;
        per SUM/AVG also (not stored, for :meth:`_inexact`) ``__v<i>``, the rows with a
        value, and ``__d<i>``, 1 when one of them leaves.

        Rows are repeated |w| times with a sign, so SUM keeps Spark's own result type
        (a DECIMAL(p,s) times a weight would widen and could lose scale).
        """
        signed = delta.withColumn(_SIGN, F.when(col(WEIGHT) > 0, 1).otherwise(-1).cast("bigint")).withColumn(
            "__rep", F.explode(F.array_repeat(F.lit(1), copies(F.abs(col(WEIGHT)))))
        )
        exprs = [F.sum(col(_SIGN)).alias(_COUNT)]
        for i, a in enumerate(self.aggs):
            if a.func in ("count", "sum", "avg"):
                exprs.append(F.sum(F.when(col(a.arg).isNotNull(), col(_SIGN)).otherwise(0)).alias(f"n{i}"))
            if a.func in ("sum", "avg"):
                value = col(a.arg)
                if a.func == "avg" and isinstance(delta.schema[a.arg].dataType, _INTEGRAL):
                    value = value.cast(T.DecimalType(38, 0))
                present = col(a.arg).isNotNull()
                exprs += [
                    F.sum(F.when(col(_SIGN) > 0, value).otherwise(-value)).alias(f"s{i}"),
                    F.sum(F.when(present, 1).otherwise(0)).cast("bigint").alias(f"__v{i}"),
                    F.max(F.when(present & (col(_SIGN) < 0), 1).otherwise(0)).alias(f"__d{i}"),
                ]
        if not self.keys:
            # Grouped by an expression that is always 0 but not a literal: Spark would turn an
            # aggregate grouped by a constant into a scalar subquery, a Spark job of its own.
            return signed.groupBy((col(_SIGN) * 0).cast("int").alias(_GLOBAL)).agg(*exprs)
        return signed.groupBy(*[col(k) for k in self.group_keys]).agg(*exprs)

    def _combine(self, old: DataFrame | None, change: DataFrame, *, checked: bool) -> DataFrame:
        """New partials = old + change per group, typed like the change (the state's fixed
        schema), and ``__t``: 1 where the change touched the group. Summed over the union of
        both, not joined: a join of a global aggregate's one-row sides has no equality left
        to join on and would cost Spark a broadcast job. A sum that is NULL over values on
        either side (a DECIMAL sum past 38 digits) stays NULL, Spark's answer. ``checked``
        (incremental epochs): a touched group whose sums cannot be carried on exactly fails
        the job (:meth:`_inexact`)."""
        names = [*self.group_keys, *self.partials]
        sums = self._sums()
        checks = [f"__{c}{i}" for i in sums for c in "vdo"] if checked else []
        zero = F.lit(0).cast("bigint")

        def side(df: DataFrame, touched: int, values: dict[str, Column]) -> DataFrame:
            flags = [*checks, *(f"__x{i}" for i in sums)]
            return df.select(*[col(c) for c in names], *[values.get(c, zero).alias(c) for c in flags], F.lit(touched).alias(_TOUCHED))

        def lost(count: str, i: int) -> Column:
            return F.when((col(count) > 0) & col(f"s{i}").isNull(), 1).otherwise(0)

        both = side(change, 1, {**{c: col(c) for c in checks if not c.startswith("__o")}, **{f"__x{i}": lost(f"__v{i}", i) for i in sums}})
        if old is not None:
            flags = {f"__x{i}": lost(f"n{i}", i) for i in sums}
            if checked:
                flags.update({f"__o{i}": F.when(self._unknown(old, i), 1).otherwise(0) for i in sums})
            both = both.unionByName(side(old, 0, flags))
        summed = both.groupBy(*[col(k) for k in self.group_keys]).agg(
            *[F.sum(F.coalesce(col(p), F.lit(0))).alias(p) for p in self.partials],
            *[F.max(col(c)).alias(c) for c in (*checks, *(f"__x{i}" for i in sums))], F.max(col(_TOUCHED)).alias(_TOUCHED),
        )
        typed = {p: col(p).cast(change.schema[p].dataType) for p in self.partials}
        for i in sums:
            typed[f"s{i}"] = F.when(col(f"__x{i}") > 0, F.lit(None)).otherwise(typed[f"s{i}"]).cast(change.schema[f"s{i}"].dataType)
        if checked:
            typed[_COUNT] = self._inexact(typed[_COUNT], change)  # the row count: every use of the groups reads it
        return summed.select(*[col(k) for k in self.group_keys], *[typed[p].alias(p) for p in self.partials], col(_TOUCHED))

    def _floating(self, change: DataFrame, i: int) -> bool:
        return isinstance(change.schema[f"s{i}"].dataType, _FLOATING)

    def _unknown(self, old: DataFrame, i: int) -> Column:
        """Whether a group's stored sum ``s<i>`` is not an exact running total: NULL over
        values (a DECIMAL sum past 38 digits), or for DOUBLE NaN or ±Infinity."""
        n, s = col(f"n{i}"), col(f"s{i}")
        unknown = (n > 0) & s.isNull()
        if self._floating(old, i):
            unknown = unknown | F.isnan(s) | s.isin(float("inf"), float("-inf"))
        return unknown

    def _inexact(self, count: Column, change: DataFrame) -> Column:
        """``count``, unless a group's new sums would be wrong: the change's own DECIMAL sum
        overflowed (NULL over values), or the old sum is unknown (:meth:`_unknown`) and the
        change touches it (DECIMAL) or removes a value from it (DOUBLE: NaN and ±Infinity
        stay as long as their rows do). Then the job fails with the marker of
        :class:`~ivm_assets.errors.InexactAggregate`, and the view is recomputed."""
        for i in self._sums():
            floating = self._floating(change, i)
            overflow = F.lit(False) if floating else (col(f"__v{i}") > 0) & col(f"s{i}").isNull()
            carried = (col(f"__o{i}") > 0) & (col(_TOUCHED) == 1)
            if floating:
                carried = carried & (col(f"__d{i}") > 0)
            agg = self.aggs[i]
            kind = "double" if floating else "decimal"
            failure = F.raise_error(F.lit(f"{InexactAggregate.MARKER}: {agg.text or agg.func} {kind};"))
            count = F.when(overflow | carried, failure).otherwise(count)
        return count

    def _reads_whole_groups(self, ctx: EpochContext) -> bool:
        """Whether this incremental epoch reads the group state whole (see WHOLE_GROUPS_ROWS):
        grouped, no MIN/MAX/COUNT DISTINCT (their value tables are looked up by the touched
        groups), and few group rows, read on the driver."""
        if ctx.full or not self.keys or self.values or self.input.unchanged(ctx):
            return False
        rows = self.groups.rows_read_on_driver(ctx)
        return rows is not None and rows <= WHOLE_GROUPS_ROWS

    # --- output rows ----------------------------------------------------------------------
    def _value_aggs(self, rows: DataFrame | None, i: int, func: str) -> DataFrame | None:
        if rows is None:
            return None
        present = rows.filter(col(WEIGHT) > 0)
        agg = {"min": F.min(col("v")), "max": F.max(col("v")), "count_distinct": F.count(col("v"))}[func]
        return present.groupBy(*[col(k) for k in self.group_keys]).agg(agg.alias(f"m{i}"))

    def _output(
        self, groups: DataFrame, values: dict[int, DataFrame | None], arg_types: dict[int, T.DataType], ansi: bool
    ) -> DataFrame:
        for i, agg_rows in values.items():
            if agg_rows is None:
                groups = groups.withColumn(f"m{i}", F.lit(None))
                continue
            renamed = agg_rows.select(*[col(k).alias(f"v_{k}") for k in self.group_keys], col(f"m{i}"))
            cond = null_safe_match(groups, renamed, [(k, f"v_{k}") for k in self.group_keys])
            groups = groups.join(renamed, cond, "left").drop(*[f"v_{k}" for k in self.group_keys])
        out = [col(k) for k in self.keys]
        out += [self._final(i, a, arg_types.get(i), ansi).alias(a.name) for i, a in enumerate(self.aggs)]
        return groups.select(*out)

    @staticmethod
    def _final(i: int, agg: AggCall, arg_type: T.DataType | None, ansi: bool):
        """The aggregate's value from the group's state columns."""
        if agg.func == "count_star":
            return col(_COUNT)
        if agg.func == "count":
            return col(f"n{i}")
        if agg.func == "sum":
            return F.when(col(f"n{i}") > 0, col(f"s{i}"))
        if agg.func == "avg":
            return F.when(col(f"n{i}") > 0, _average(col(f"s{i}"), col(f"n{i}"), arg_type, ansi))
        if agg.func == "count_distinct":
            return F.coalesce(col(f"m{i}"), F.lit(0)).cast("bigint")
        return col(f"m{i}")  # min, max

    def step(self, ctx: EpochContext) -> DataFrame:
        delta = input_change(ctx, self.input)
        if not self.keys:
            delta = delta.withColumn(_GLOBAL, F.lit(0))
        types = default_hash_types(delta, self.group_keys)
        keyed = with_bucket(delta, self.group_keys, ctx.buckets, types)
        touched: Batch | None = None  # the change with its buckets, where its keys select the state
        whole = self._reads_whole_groups(ctx)
        if self.input.unchanged(ctx):
            touched = nothing(keyed)
        elif (self.keys and not whole and not ctx.full) or (ctx.full and self.values):
            touched = materialize(keyed, small=not ctx.full)
        # else: a global aggregate's one group, or a small group state, is found without the
        # change's keys, so the change is not computed on its own; it runs inside the job that
        # computes the new groups and the output. A full refresh reads no state: its input is
        # materialized only when the value tables read it too (else the checkpoint of the
        # whole input, and the count after it, would cost more than the one scan they save).
        if touched is not None:
            delta = touched.df.drop(BUCKET)
        arg_types = {i: delta.schema[a.arg].dataType for i, a in enumerate(self.aggs) if a.arg}
        if touched is not None and touched.rows == 0 and not (ctx.full and not self.keys):
            return self._output(self._partials(delta), {i: None for i in self.values}, arg_types, ctx.ansi).withColumn(
                WEIGHT, F.lit(0).cast("bigint")
            ).limit(0)
        change = self._partials(delta)
        if ctx.full and not self.keys:
            # A global aggregate's one row exists over no rows too: a row of NULL partials
            # (summed as 0) makes the group whatever the input holds.
            change = change.unionByName(
                ctx.spark.createDataFrame([(0,)], f"{q(_GLOBAL)} int").select(
                    col(_GLOBAL), *[F.lit(None).cast(change.schema[p].dataType).alias(p) for p in self.partials]
                ),
                allowMissingColumns=True,
            )
        # The old rows feed both the new values and the retractions (see _once).
        raw = self.groups.read(ctx, touched, self.group_keys)
        old = _once(self.groups.current(raw), raw, ctx) if raw is not None else None
        combined = self._combine(old, change, checked=not ctx.full)
        # Reading the groups whole, only the touched ones are stored again; the retractions
        # and insertions of all others cancel in the output's consolidation (their new row
        # is computed from their old partials alone, so it is the old row exactly).
        stored = combined.filter(col(_TOUCHED) == 1) if whole else combined
        new = materialize(with_bucket(stored.drop(_TOUCHED), self.group_keys, ctx.buckets, types), small=not ctx.full)
        old_values: dict[int, DataFrame | None] = {}
        new_values: dict[int, DataFrame | None] = {}
        value_changes: dict[int, Batch] = {i: self._value_change(ctx, delta, i, types) for i in self.values}
        # The output is planned over the new groups and value changes without computing
        # them: the state commits compute them later, in the job that computes the output.
        for i, table in self.values.items():
            dv = unforced(value_changes[i]).drop(BUCKET)
            raw_values = table.read(ctx, touched, self.group_keys)
            old_rows = _once(table.current(raw_values), raw_values, ctx) if raw_values is not None else None
            new_rows = consolidate(old_rows.unionByName(dv) if old_rows is not None else dv, self.group_keys + ("v",))
            old_values[i] = self._value_aggs(old_rows, i, self.aggs[i].func)
            new_values[i] = self._value_aggs(new_rows, i, self.aggs[i].func)
        new_groups = combined.drop(_TOUCHED) if whole else unforced(new).drop(BUCKET)
        parts = []
        if old is not None:
            alive = old if not self.keys else old.filter(col(_COUNT) > 0)
            parts.append(self._output(alive, old_values, arg_types, ctx.ansi).withColumn(WEIGHT, F.lit(-1).cast("bigint")))
        alive_new = new_groups if not self.keys else new_groups.filter(col(_COUNT) > 0)
        parts.append(self._output(alive_new, new_values, arg_types, ctx.ansi).withColumn(WEIGHT, F.lit(1).cast("bigint")))
        result = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        out = consolidate(result, self.columns)  # lazy: its consumer materializes it once
        self.groups.write(ctx, new, types)
        for i, table in self.values.items():
            table.write(ctx, value_changes[i], types)
        return out

    def _value_change(self, ctx: EpochContext, delta: DataFrame, i: int, types: list) -> Batch:
        """The change of aggregate ``i``'s value table (MIN/MAX/COUNT DISTINCT): its non-NULL
        argument values per group, with weights."""
        values = delta.filter(col(self.aggs[i].arg).isNotNull()).select(
            *[col(k) for k in self.group_keys], col(self.aggs[i].arg).alias("v"), col(WEIGHT)
        )
        keyed = with_bucket(consolidate(values, self.group_keys + ("v",)), self.group_keys, ctx.buckets, types)
        return materialize(keyed, small=not ctx.full)

    def describe(self) -> str:
        funcs = ", ".join(f"{a.func}({a.arg or '*'})" for a in self.aggs)
        by = f" GROUP BY {', '.join(self.keys)}" if self.keys else " (global)"
        return f"aggregate {funcs}{by}: per touched group −old row +new row"


def _once(rows: DataFrame, read: StateRead, ctx: EpochContext) -> DataFrame:
    """State rows used twice (new values and retractions): materialized when read by Spark,
    so the files are scanned once; left lazy when read on the driver, as evaluating a small
    local relation twice costs less than the Spark job a materialization is."""
    return rows if read.local else materialize(rows, small=not ctx.full).df


def _average(s: Column, n: Column, arg_type: T.DataType, ansi: bool) -> Column:
    """AVG from the sum and count: over DECIMAL the exact quotient rounded once into AVG's
    type, as Spark's AVG does (:mod:`ivm_assets.decimal_rules`; SQL's ``/`` would round
    twice); otherwise in double precision."""
    if isinstance(arg_type, T.DecimalType):
        return _decimal_average(*decimal_rules.average_type(arg_type.precision, arg_type.scale), ansi)(s, n)
    return s.cast("double") / n.cast("double")


@lru_cache(maxsize=64)
def _decimal_average(precision: int, scale: int, ansi: bool):
    """A Spark function computing ``s / n`` into DECIMAL(precision, scale) by
    :func:`ivm_assets.decimal_rules.divide` (no SQL expression divides a DECIMAL without
    first rounding to a scale of its own choosing). Evaluated in Python workers, once per
    output row of a group. A quotient too wide for the type is NULL, or under ANSI mode an
    error named as Spark names its own."""

    def average(s: Decimal | None, n: int | None) -> Decimal | None:
        if s is None or not n:
            return None
        quotient = decimal_rules.divide(s, Decimal(n), precision, scale)
        if quotient is None and ansi:
            raise ArithmeticError(f"[{decimal_rules.OVERFLOW}] the average {s} / {n} cannot be represented as Decimal({precision}, {scale})")
        return quotient

    return F.udf(average, T.DecimalType(precision, scale), useArrow=True)
