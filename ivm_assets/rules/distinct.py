"""SELECT DISTINCT's rule on changes, written once for both engines (its derivation is
:mod:`ivm_assets.operators.distinct`'s module doc).

The epoch binds ``delta``, the input's change (consolidated), and ``old``, the counts'
current rows for the rows it touches (when there are any).
"""

from __future__ import annotations

from ivm_assets.rules import rel
from ivm_assets.rules.rel import Call, Case, Col, Lit, add, gt, keep
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
