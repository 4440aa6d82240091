"""INTERSECT, EXCEPT and their ALL forms, maintained with per-row counts of both inputs.

A set operation decides each distinct row on its own, from the row's multiplicity in the
left input (l) and in the right input (r); NULLs compare equal, as in Spark:

    INTERSECT ALL  min(l, r)          EXCEPT ALL  max(l − r, 0)
    INTERSECT      [l > 0 ∧ r > 0]    EXCEPT      [l > 0 ∧ r = 0]

Rule on changes: for every row the change touches (in either input), with l, r its counts
before the change and l' = l + Δl, r' = r + Δr after,

    Δout(row) = f(l', r') − f(l, r).

State: ``counts``, one z-set of both inputs' rows tagged with their side (``__side`` 0 for
the left, 1 for the right), bucketed by a hash of the whole row. A change reads the
counts of just the rows it touches, both sides in one lookup. ``UNION`` (distinct) needs no
operator of its own: it is DISTINCT over UNION ALL. The rule is written once, in
:mod:`ivm_assets.rules.set_operation`, and rendered by Spark here and by DuckDB for epochs
computed in process.
"""

from __future__ import annotations

from typing import Literal

from ivm_assets.operators.base import Operator
from ivm_assets.operators.binding import BoundOperator, Change, EpochBinding
from ivm_assets.rules import set_operation as set_rule
from ivm_assets.rules.set_operation import SIDE
from ivm_assets.state.arrangement import StateTable

Kind = Literal["intersect", "except"]

_RULES = {
    ("intersect", True): "min(l, r)",
    ("intersect", False): "[l > 0 ∧ r > 0]",
    ("except", True): "max(l − r, 0)",
    ("except", False): "[l > 0 ∧ r = 0]",
}


class SetOperationOp(BoundOperator):
    """INTERSECT / EXCEPT, with or without ALL (see module doc for the rule)."""

    def __init__(self, op_id: str, left: Operator, right: Operator, kind: Kind, all: bool) -> None:
        self.id, self.left, self.right, self.kind, self.all = op_id, left, right, kind, all
        self.columns = left.columns
        self.counts = StateTable(
            operator_id=op_id, name="counts", columns=self.columns + (SIDE,), keys=self.columns, layout="zset"
        )

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.left, self.right)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.counts,)

    def epoch(self, cx: EpochBinding) -> Change:
        keyed = cx.keyed(cx.tagged(self.inputs, self.columns, SIDE), self.columns, self.counts, self.inputs)
        if cx.rows(keyed) == 0:
            if cx.full:
                cx.append(self.counts, keyed)  # a build lays the table out, empty
            return cx.unkeyed(keyed, self.columns)
        change = cx.unkeyed(keyed)
        inputs = {"change": change}
        if (old := cx.lookup(self.counts, keyed, self.columns)) is not None:
            inputs["old"] = old
        out = cx.compute(self.rule(set(inputs)), inputs, self.columns, like=(change,))
        cx.append(self.counts, keyed)
        return out

    def rule(self, present: set[str]):
        """This operation's rule on changes (:mod:`ivm_assets.rules.set_operation`) over ``present``."""
        return set_rule.rule(self.columns, self.kind, self.all, present)

    def describe(self) -> str:
        name = f"{self.kind} all" if self.all else self.kind
        return f"{name}: per touched row, Δout = f(l', r') − f(l, r) with f = {_RULES[(self.kind, self.all)]}"
