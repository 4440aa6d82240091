"""SELECT DISTINCT, maintained with per-row counts.

Rule on changes: with c the row's multiplicity before the change and c' = c + Δw after,
    Δout = +1 if c ≤ 0 < c',   −1 if c' ≤ 0 < c,   nothing otherwise.
State: the integrated input as a z-set bucketed by a hash of the whole row; a change reads
the counts of just the rows it touches.

The rule (:func:`rule`) reads ``delta``, the input's change (consolidated), and ``old``,
the counts' current rows for the rows it touches (when there are any); its binding
(:meth:`DistinctOp.epoch`) is the same in both engines.
"""

from __future__ import annotations

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Call, Case, Col, Lit, add, gt, keep
from ivm_assets.rules.binding import Change, EpochBinding
from ivm_assets.rules.operator import Operator
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import WEIGHT


def rule(columns: tuple[str, ...], present: set[str]) -> rel.Rel:
    """Per touched row, with c its count before the change and c' after: Δout = +1 when
    c ≤ 0 < c', −1 when c' ≤ 0 < c. Without stored counts (a first build) c = 0 for every
    row. Rows are counted as Spark's DISTINCT groups them (−0.0 with 0.0, output as 0.0),
    which the change's consolidation does not do (:mod:`ivm_assets.zset`)."""
    delta = rel.Input("delta", columns + (WEIGHT,))
    rows: rel.Rel = keep(delta, columns, __o=Lit(0), __d=Col(WEIGHT))
    if "old" in present:
        rows = rel.Union_((rows, keep(rel.Input("old", columns + (WEIGHT,)), columns, __o=Col(WEIGHT), __d=Lit(0))))
    per_row = rel.group_sum(rows, columns, (("__o", Col("__o")), ("__d", Col("__d"))))
    before, after = Col("__o"), add(Col("__o"), Col("__d"))
    zero = Lit(0)
    enters = Call("and", (Call("<=", (before, zero)), gt(after, zero)))
    leaves = Call("and", (gt(before, zero), Call("<=", (after, zero))))
    flip = Case(enters, Lit(1), Case(leaves, Lit(-1), zero))
    out = keep(per_row, columns, **{WEIGHT: flip})
    return rel.Select(out, tuple((c, Col(c)) for c in (*columns, WEIGHT)), Call("<>", (Col(WEIGHT), zero)))


class DistinctOp(Operator):
    """Each distinct row once (see module doc for the rule)."""

    def __init__(self, op_id: str, input: Operator) -> None:
        self.id, self.input, self.columns = op_id, input, input.columns
        self.counts = StateTable(operator_id=op_id, name="counts", columns=self.columns, keys=self.columns, layout="zset")

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.counts,)

    def epoch(self, cx: EpochBinding) -> Change:
        keyed = cx.keyed(cx.consolidated(self.input, self.columns), self.columns, self.counts, self.inputs)
        delta = cx.unkeyed(keyed)
        if cx.rows(keyed) == 0:
            if cx.full:
                cx.append(self.counts, keyed)  # a build lays the table out, empty
            return delta
        inputs = {"delta": delta}
        if (old := cx.lookup(self.counts, keyed, self.columns)) is not None:
            inputs["old"] = old
        out = cx.compute(rule(self.columns, set(inputs)), inputs, self.columns, like=(delta,))
        cx.append(self.counts, keyed)
        return out

    def describe(self) -> str:
        return "distinct: a row enters when its count rises above 0, leaves when it falls to 0"
