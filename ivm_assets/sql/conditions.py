"""Helpers over SQL conditions and expressions that lowering shares: AND-ed conditions split
and joined, the tables an expression reads, the aggregate calls that belong to it."""

from __future__ import annotations

from sqlglot import exp


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, (exp.Where, exp.Paren)) and not isinstance(node, exp.And):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


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
