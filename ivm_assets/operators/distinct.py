"""SELECT DISTINCT, maintained with per-row counts.

Rule on changes: with c the row's multiplicity before the change and c' = c + Δw after,
    Δout = +1 if c ≤ 0 < c',   −1 if c' ≤ 0 < c,   nothing otherwise.
State: the integrated input as a z-set bucketed by a hash of the whole row; a change reads
the counts of just the rows it touches. The rule is written once, in
:mod:`ivm_assets.rules.distinct`, and rendered by Spark here and by DuckDB for epochs
computed in process; the binding below is the same in both (:mod:`ivm_assets.operators.binding`).
"""

from __future__ import annotations

from ivm_assets.operators.base import Operator
from ivm_assets.operators.binding import BoundOperator, Change, EpochBinding
from ivm_assets.rules import distinct as distinct_rule
from ivm_assets.state.arrangement import StateTable


class DistinctOp(BoundOperator):
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
        out = cx.compute(self.rule(set(inputs)), inputs, self.columns, like=(delta,))
        cx.append(self.counts, keyed)
        return out

    def rule(self, present: set[str]):
        """This operator's rule on changes (:mod:`ivm_assets.rules.distinct`) over ``present``."""
        return distinct_rule.rule(self.columns, present)

    def describe(self) -> str:
        return "distinct: a row enters when its count rises above 0, leaves when it falls to 0"
