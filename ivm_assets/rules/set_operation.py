"""The rule of INTERSECT / EXCEPT (with or without ALL), written once for both engines (its
derivation is :mod:`ivm_assets.operators.set_operation`'s module doc).

The epoch binds ``change``, both inputs' change sets in one, consolidated and tagged with
their side (``__side`` 0 for the left, 1 for the right), and ``old``, the counts' current
rows for the rows the change touches (when there are any).
"""

from __future__ import annotations

from typing import Literal

from ivm_assets.rules import rel
from ivm_assets.rules.rel import Call, Case, Col, Lit, keep, sub
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
