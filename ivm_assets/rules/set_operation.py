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
operator of its own: it is DISTINCT over UNION ALL.

The rule (:func:`rule`) reads ``change``, both inputs' change sets in one, consolidated and tagged with
their side (``__side`` 0 for the left, 1 for the right), and ``old``, the counts' current
rows for the rows the change touches (when there are any).
"""

from __future__ import annotations

from typing import Literal

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Call, Case, Col, Lit, keep, sub
from ivm_assets.rules.binding import Change, EpochBinding
from ivm_assets.rules.operator import Operator
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import WEIGHT


SIDE = "__side"
Kind = Literal["intersect", "except"]


def multiplicity(kind: Kind, all: bool, left: rel.Expr, right: rel.Expr) -> rel.Expr:
    """The output multiplicity of a row whose counts are ``left`` and ``right``."""
    zero, one = Lit(0), Lit(1)
    if kind == "intersect" and all:
        return Call("greatest", (Call("least", (left, right)), zero))
    if kind == "except" and all:
        return Call("greatest", (sub(left, right), zero))
    if kind == "intersect":
        return Case(Call("and", (rel.gt(left, zero), rel.gt(right, zero))), one, zero)
    return Case(Call("and", (rel.gt(left, zero), Call("<=", (right, zero)))), one, zero)


def rule(columns: tuple[str, ...], kind: Kind, all: bool, present: set[str]) -> rel.Rel:
    """Per touched row, with l, r its counts before the change: Δout = f(l', r') − f(l, r)."""
    tagged_columns = columns + (SIDE, WEIGHT)
    tagged: rel.Rel = keep(rel.Input("change", tagged_columns), columns + (SIDE,), __d=Col(WEIGHT), __o=Lit(0))
    if "old" in present:
        old = keep(rel.Input("old", tagged_columns), columns + (SIDE,), __d=Lit(0), __o=Col(WEIGHT))
        tagged = rel.Union_((tagged, old))

    def on_side(side: int, what: str) -> rel.Expr:
        return Case(Call("=", (Col(SIDE), Lit(side))), Col(what), Lit(0))

    totals = tuple((f"{what}{side}", on_side(side, what)) for what in ("__o", "__d") for side in (0, 1))
    per_row = rel.group_sum(tagged, columns, totals)
    l_old, r_old = Col("__o0"), Col("__o1")
    l_new, r_new = rel.add(l_old, Col("__d0")), rel.add(r_old, Col("__d1"))
    weight = sub(multiplicity(kind, all, l_new, r_new), multiplicity(kind, all, l_old, r_old))
    out = keep(per_row, columns, **{WEIGHT: weight})
    return rel.Select(out, tuple((c, Col(c)) for c in (*columns, WEIGHT)), Call("<>", (Col(WEIGHT), Lit(0))))


Kind = Literal["intersect", "except"]

_RULES = {
    ("intersect", True): "min(l, r)",
    ("intersect", False): "[l > 0 ∧ r > 0]",
    ("except", True): "max(l − r, 0)",
    ("except", False): "[l > 0 ∧ r = 0]",
}


class SetOperationOp(Operator):
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
        out = cx.compute(self.rule_on(set(inputs)), inputs, self.columns, like=(change,))
        cx.append(self.counts, keyed)
        return out

    def rule_on(self, present: set[str]) -> rel.Rel:
        """This operation's rule on changes (:func:`rule`) over ``present``."""
        return rule(self.columns, self.kind, self.all, present)

    def describe(self) -> str:
        name = f"{self.kind} all" if self.all else self.kind
        return f"{name}: per touched row, Δout = f(l', r') − f(l, r) with f = {_RULES[(self.kind, self.all)]}"
