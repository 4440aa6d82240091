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

The rule is written once, in :mod:`ivm_assets.rules.aggregate`, and rendered by Spark here
and by DuckDB for epochs computed in process; which state is read, and how, is the engine's.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm_assets.epoch_context import EpochContext
from ivm_assets.operators.base import Operator, input_change
from ivm_assets.rules import rel, render_spark
from ivm_assets.rules.aggregate import COUNT, GLOBAL, TOUCHED, VALUE_AGGS, AggregateRule, partial_names
from ivm_assets.spark.batches import Batch, col, materialize, nothing, unforced
from ivm_assets.sql.plan import AggCall, q
from ivm_assets.state.arrangement import StateRead, StateTable
from ivm_assets.state.layout import default_hash_types, with_bucket
from ivm_assets.zset import BUCKET

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
        self.group_keys = keys or (GLOBAL,)
        self.partials = partial_names(aggs)
        self.groups = StateTable(
            operator_id=op_id, name="groups", columns=self.group_keys + self.partials, keys=self.group_keys, layout="latest",
            # A global aggregate's single row exists even at count 0: never drop it.
            alive_column=COUNT if keys else None,
        )
        self.values = {
            i: StateTable(operator_id=op_id, name=f"values{i}", columns=self.group_keys + ("v",), keys=self.group_keys, layout="zset")
            for i, a in enumerate(aggs)
            if a.func in VALUE_AGGS
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

    def rule(self, arg_types: tuple[str | None, ...], ansi: bool) -> AggregateRule:
        """This aggregate's rule on changes (:mod:`ivm_assets.rules.aggregate`), its
        arguments typed as Spark names types (``simpleString``)."""
        return AggregateRule(self.keys, self.aggs, arg_types, ansi)

    def _reads_whole_groups(self, ctx: EpochContext) -> bool:
        """Whether this incremental epoch reads the group state whole (see WHOLE_GROUPS_ROWS):
        grouped, no MIN/MAX/COUNT DISTINCT (their value tables are looked up by the touched
        groups), and few group rows, read on the driver."""
        if ctx.full or not self.keys or self.values or self.input.unchanged(ctx):
            return False
        rows = self.groups.rows_read_on_driver(ctx)
        return rows is not None and rows <= WHOLE_GROUPS_ROWS

    def step(self, ctx: EpochContext) -> DataFrame:
        delta = input_change(ctx, self.input)
        if not self.keys:
            delta = delta.withColumn(GLOBAL, F.lit(0))
        types = default_hash_types(delta, self.group_keys)
        keyed = with_bucket(delta, self.group_keys, ctx.buckets, types)
        touched: Batch | None = None  # the change with its buckets, where its keys select the state
        whole = self._reads_whole_groups(ctx)
        if self.input.unchanged(ctx):
            touched = nothing(keyed)
        elif (self.keys and not whole and not ctx.full) or (ctx.full and self.values):
            touched = materialize(keyed, small=ctx.small)
        # else: a global aggregate's one group, or a small group state, is found without the
        # change's keys, so the change is not computed on its own; it runs inside the job that
        # computes the new groups and the output. A full refresh reads no state: its input is
        # materialized only when the value tables read it too (else the checkpoint of the
        # whole input, and the count after it, would cost more than the one scan they save).
        if touched is not None:
            delta = touched.df.drop(BUCKET)
        rule = self.rule(tuple(delta.schema[a.arg].dataType.simpleString() if a.arg else None for a in self.aggs), ctx.ansi)
        delta_rel = rel.Input("delta", tuple(delta.columns))
        change = render_spark.render(rule.partials(delta_rel), {"delta": delta})
        if touched is not None and touched.rows == 0 and not (ctx.full and not self.keys):
            return render_spark.render(rel.empty(rule.output({"new"})), {"new": change})
        if ctx.full and not self.keys:
            # A global aggregate's one row exists over no rows too: a row of NULL partials
            # (summed as 0) makes the group whatever the input holds.
            change = change.unionByName(
                ctx.spark.createDataFrame([(0,)], f"{q(GLOBAL)} int").select(
                    col(GLOBAL), *[F.lit(None).cast(change.schema[p].dataType).alias(p) for p in self.partials]
                ),
                allowMissingColumns=True,
            )
        # The old rows feed both the new values and the retractions (see _once).
        raw = self.groups.read(ctx, touched, self.group_keys)
        old = _once(self.groups.current(raw), raw, ctx) if raw is not None else None
        groups_rel = rel.Input("old", self.group_keys + self.partials) if old is not None else None
        view = ctx.epoch.metadata.get("ivm.view", "")
        combined = render_spark.render(
            rule.combined(rel.Input("change", tuple(change.columns)), groups_rel, checked=not ctx.full, view=view),
            {"change": change, **({"old": old} if old is not None else {})},
        )
        # Reading the groups whole, only the touched ones are stored again; the retractions
        # and insertions of all others cancel in the output's consolidation (their new row
        # is computed from their old partials alone, so it is the old row exactly).
        stored = combined.filter(col(TOUCHED) == 1) if whole else combined
        new = materialize(with_bucket(stored.drop(TOUCHED), self.group_keys, ctx.buckets, types), small=ctx.small)
        inputs = {"new": combined.drop(TOUCHED) if whole else unforced(new).drop(BUCKET)}
        if old is not None:
            inputs["old"] = old
        # The output is planned over the new groups and value changes without computing
        # them: the state commits compute them later, in the job that computes the output.
        value_changes: dict[int, Batch] = {}
        for i, table in self.values.items():
            dv = render_spark.render(rule.values(delta_rel, i), {"delta": delta})
            value_changes[i] = materialize(with_bucket(dv, self.group_keys, ctx.buckets, types), small=ctx.small)
            inputs[f"dv{i}"] = unforced(value_changes[i]).drop(BUCKET)
            raw_values = table.read(ctx, touched, self.group_keys)
            if raw_values is not None:
                inputs[f"old_values{i}"] = _once(table.current(raw_values), raw_values, ctx)
        out = render_spark.render(rule.output(set(inputs)), inputs)  # lazy: its consumer materializes it once
        self.groups.write(ctx, new, types)
        for i, table in self.values.items():
            table.write(ctx, value_changes[i], types)
        return out

    def describe(self) -> str:
        funcs = ", ".join(f"{a.func}({a.arg or '*'})" for a in self.aggs)
        by = f" GROUP BY {', '.join(self.keys)}" if self.keys else " (global)"
        return f"aggregate {funcs}{by}: per touched group −old row +new row"


def _once(rows: DataFrame, read: StateRead, ctx: EpochContext) -> DataFrame:
    """State rows used twice (new values and retractions): materialized when read by Spark,
    so the files are scanned once; left lazy when read on the driver, as evaluating a small
    local relation twice costs less than the Spark job a materialization is."""
    return rows if read.local else materialize(rows, small=ctx.small).df


