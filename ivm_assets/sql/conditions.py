"""Helpers over SQL conditions and expressions that lowering shares: AND-ed conditions split
and joined, the single-table conditions an OR across tables implies, the tables an
expression reads, the aggregate calls that belong to it."""

from __future__ import annotations

from sqlglot import exp

from ivm_assets.sql.constructs import nondeterministic


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, (exp.Where, exp.Paren)) and not isinstance(node, exp.And):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def disjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Paren):
        return disjuncts(node.this)
    if isinstance(node, exp.Or):
        return disjuncts(node.this) + disjuncts(node.expression)
    return [node]


def implied_filters(conds: list[exp.Expression], tables: set[str]) -> list[exp.Expression]:
    """Conditions on one table each that the OR-conditions among ``conds`` imply, so that
    they can filter that table before it is joined (as Spark's optimizer does).

    ``(a.x = 1 AND b.y = 2) OR (a.x = 3 AND b.z = 4)`` implies ``a.x = 1 OR a.x = 3``: a row
    the OR keeps satisfies one branch, so that branch's conditions on ``a`` alone; a table
    some branch does not constrain gets nothing. Conditions every branch has in common
    come out on their own (TPC-H Q19's ``l_shipmode IN (…)``). The original condition stays,
    so adding these changes no result, NULLs included (a filter keeps rows whose condition
    is true, and the implied one is true wherever the original is). Conditions with a
    subquery or a nondeterministic call imply nothing here.
    """
    implied: list[exp.Expression] = []
    for cond in conds:
        branches = disjuncts(cond)
        # A copy of a condition that calls a non-deterministic function is not the same condition.
        if len(branches) < 2 or cond.find(exp.Query) or any(nondeterministic(n) for n in cond.walk()):
            continue
        parts = [conjuncts(b) for b in branches]
        for table in sorted(tables_of(cond) & tables):
            own = [[c for c in part if tables_of(c) == {table}] for part in parts]
            if not all(own):
                continue
            common = [c for c in own[0] if all(c in other for other in own[1:])]
            rest = [[c for c in branch if c not in common] for branch in own]
            found = [c.copy() for c in common]
            if all(rest):
                found.append(exp.or_(*[exp.paren(and_([c.copy() for c in r]), copy=False) for r in rest], copy=False))
            implied += [c for c in found if c not in conds and c not in implied]
    return implied


def and_(nodes: list[exp.Expression]) -> exp.Expression:
    return exp.and_(*[exp.paren(n.copy(), copy=False) for n in nodes]) if len(nodes) > 1 else nodes[0]


def tables_of(node: exp.Expression) -> set[str]:
    return {c.table.lower() for c in node.find_all(exp.Column) if c.table}


def aggregates(node: exp.Expression) -> list[exp.AggFunc]:
    """The aggregate calls of ``node`` itself: not those of window functions or of subqueries in it."""
    if not node:
        return []
    return [a for a in node.find_all(exp.AggFunc) if not isinstance(a.parent, exp.Window) and not nested(a, node)]


def nested(e: exp.Expression, top: exp.Expression) -> bool:
    """Whether ``e`` lies in a subquery within ``top``."""
    if e is top:
        return False
    parent = e.parent
    while parent is not None and parent is not top:
        if isinstance(parent, exp.Query):
            return True
        parent = parent.parent
    return False
