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
  emitted before, floating point included. A DECIMAL sum past 38 digits (stored as NULL,
  Spark's answer) cannot be carried on exactly: it stops the epoch with
  :class:`InexactAggregate`, and the view is recomputed.
- ``values<i>`` (z-set) per MIN / MAX / COUNT(DISTINCT): the multiset of non-NULL argument
  values per group. Deleting the current minimum is answered from the remaining values of
  the touched groups only. Per SUM/AVG whose argument the SQL front end did not type as an
  integer or DECIMAL (:attr:`~ivm_assets.sql.plan.AggCall.exact`) too: a DOUBLE running
  sum keeps the rounding of values that left (1e30 + 0.1 − 1e30 is 0.0), so where a value
  leaves a group and a bound on the running sum's error (two more columns of ``groups``)
  reaches 2⁻³⁶ of it, its sum is summed again from the values it holds: only those groups'
  values are read (the statistic ``double_sum_recounts`` counts them). A DOUBLE sum without
  values (typed exact, but DOUBLE to Spark) stops the epoch with :class:`InexactAggregate`
  where a value leaves, and the view is recomputed.
A group exists while its row count is positive; a global aggregate (no GROUP BY) always
has its one row: COUNT is 0 and SUM/AVG/MIN/MAX are NULL over an empty input, as in Spark.

Which groups are read: those the change touches, or, where the engine finds it cheaper
(Spark, for a small group state without value tables), all of them: every group is then
retracted and re-inserted, untouched ones with the same row, which cancels.

The rule is written once, in :mod:`ivm_assets.rules.aggregate_steps`, and so is its binding
(:meth:`AggregateOp.epoch`, :mod:`ivm_assets.rules.binding`): both engines run the same
three steps over the same state reads.
"""

from __future__ import annotations

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Call, Col, Lit
from ivm_assets.rules.aggregate_steps import COUNT, GLOBAL, TOUCHED, VALUE_AGGS, AggregateRule, partial_names
from ivm_assets.rules.binding import Change, EpochBinding
from ivm_assets.rules.operator import Operator
from ivm_assets.sql.plan import AggCall
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import WEIGHT


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
            if a.func in VALUE_AGGS or (a.func in ("sum", "avg") and not a.exact)
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
        # rounded once into its type, inexact sums detected (see the module doc). DOUBLE
        # sums recounted from their values add state tables, which change the fingerprint.
        return 2 if any(a.func in ("sum", "avg") for a in self.aggs) else 1

    def rule(self, arg_types: tuple[str | None, ...], ansi: bool) -> AggregateRule:
        """This aggregate's rule on changes (:mod:`ivm_assets.rules.aggregate_steps`), its
        arguments typed as Spark names types (``simpleString``)."""
        valued = tuple(i for i in self.values if self.aggs[i].func in ("sum", "avg"))
        return AggregateRule(self.keys, self.aggs, arg_types, ansi, valued)

    def epoch(self, cx: EpochBinding) -> Change:
        keys, names = self.group_keys, self.group_keys + self.partials
        # The change as it is read once: where its rows feed the value tables too, they are
        # computed on their own; else the engine may fold their consolidation into the partials.
        delta = cx.aggregated(self.input, fused=not self.values)
        if not self.keys:
            delta = cx.constant(delta, GLOBAL, 0)  # the value tables' group, and a change keyed by it
        rule = self.rule(tuple(cx.type_name(delta, a.arg) if a.arg else None for a in self.aggs), cx.ansi)
        cx.aggregates_alike(delta, rule, tuple(self.values))
        whole = bool(self.keys) and not self.values and not cx.full and not cx.unchanged(self.input) and cx.reads_whole(self.groups)
        touched: Change | None = None  # keyed by group, where its groups select the state read
        if self.values and (self.keys or cx.full):
            # Read by the partials and the values; its keys typed as stored, as it probes the state.
            touched = cx.keyed(cx.stored(delta, self.groups, keys), keys, self.groups, self.inputs)
            delta = cx.unkeyed(touched)
        delta_rel = rel.Input("delta", cx.columns(delta))
        change = cx.stored(cx.compute(rule.partials(delta_rel, build=cx.full), {"delta": delta}), self.groups, names)
        if self.keys and not self.values and not whole and not cx.full:
            touched = cx.keyed(change, keys, self.groups, self.inputs)
            change = cx.unkeyed(touched)
        # A global aggregate's build has its one row whatever the input holds.
        empty = touched is not None and cx.rows(touched) == 0 and not (cx.full and not self.keys)
        if cx.unchanged(self.input) or empty or cx.empty(change):
            return cx.compute(rel.empty(rule.output({"new"})), {"new": change})
        # The old rows feed both the new values and the retractions. A global aggregate's
        # one group, or a group state read whole, is found without the change's keys: the
        # change is then not computed on its own, but in the job that computes the output.
        inputs = {"change": change}
        if (old := cx.lookup(self.groups, touched, keys, like=change, reused=True)) is not None:
            inputs["old"] = old
        change_rel, old_rel = rel.Input("change", cx.columns(change)), rel.Input("old", names) if old is not None else None
        # A DOUBLE sum's values are read only for the groups whose sum is recounted (a value
        # leaves, and its error bound wants it): most deletes leave the running sum as it is.
        # (Not in a build: no value leaves.)
        recounting = None
        if rule.recounted and not cx.full and old is not None:
            recounting = cx.compute(rule.combined(change_rel, old_rel, checked=False, recounting=True), inputs)
        # The value tables' changes and touched groups' rows, read by the output (MIN, MAX,
        # COUNT(DISTINCT)) or by the new groups (a DOUBLE sum recounted where it wants it).
        value_changes: dict[int, Change] = {}
        values: dict[int, dict[str, Change]] = {}
        recounts: dict[str, Change] = {}
        for i, table in self.values.items():
            dv = cx.stored(cx.compute(rule.values(delta_rel, i), {"delta": delta}), table, (*keys, "v", WEIGHT))
            value_changes[i] = cx.keyed(dv, keys, table, ())
            recounted = i in rule.recounted  # computed for the new groups, not lazily for the output
            values[i] = {f"dv{i}": cx.unkeyed(value_changes[i], lazily=not recounted)}
            probe = touched
            if recounted and recounting is not None:
                probe = cx.keyed(recounting, keys, table, ())
                cx.count("double_sum_recounts", groups := cx.rows(probe))
                if groups == 0:
                    continue  # no group's sum is recounted: its values are only appended to
                probe = probe if self.keys else None
            if (rows := cx.lookup(table, probe, keys, like=dv, reused=True)) is not None:
                values[i][f"old_values{i}"] = rows
            if recounted and not cx.full:
                recounts |= values[i]
        inputs |= recounts
        combined = rule.combined(change_rel, old_rel, checked=not cx.full, view=cx.view, bound=frozenset(recounts))
        # Reading the groups whole, only the touched ones are stored again; the retractions
        # and insertions of all others cancel in the output's consolidation (their new row
        # is computed from their old partials alone, so it is the old row exactly).
        items = tuple((c, Col(c)) for c in names)
        stored = rel.Select(combined, items, Call("=", (Col(TOUCHED), Lit(1))) if whole else None)
        new = cx.keyed(cx.stored(cx.compute(stored, inputs), self.groups, names), keys, self.groups, ())
        # The output is planned over the new groups and value changes without computing them
        # (in Spark, the job that computes the output computes them for the state commits).
        outputs = {"new": cx.compute(rel.Select(combined, items), inputs) if whole else cx.unkeyed(new, lazily=True)}
        if old is not None:
            outputs["old"] = old
        for i, rows in values.items():
            if self.aggs[i].func in VALUE_AGGS:
                outputs |= rows
        out = cx.compute(rule.output(set(outputs)), outputs)  # lazy in Spark: its consumer materializes it once
        cx.append(self.groups, new)
        for i, table in self.values.items():
            cx.append(table, value_changes[i])
        return out

    def describe(self) -> str:
        funcs = ", ".join(f"{a.func}({a.arg or '*'})" for a in self.aggs)
        by = f" GROUP BY {', '.join(self.keys)}" if self.keys else " (global)"
        return f"aggregate {funcs}{by}: per touched group −old row +new row"

