"""Subqueries in conditions and expressions: which tests ([NOT] EXISTS, [NOT] IN) a condition
holds, decorrelation of a correlated subquery into an uncorrelated one plus its correlation,
and the scalar subqueries of an expression with their NULL behaviour."""

from __future__ import annotations

from sqlglot import exp

from ivm_assets.errors import LoweringError
from ivm_assets.sql.conditions import aggregates, and_, conjuncts, nested, tables_of


def subquery_test(cond: exp.Expression) -> tuple[str, exp.Expression, exp.Expression | None] | None:
    """(kind, subquery, compared value) when ``cond`` is [NOT] EXISTS / [NOT] IN (subquery)."""
    negated = False
    while isinstance(cond, exp.Paren):
        cond = cond.this
    if isinstance(cond, exp.Not):
        negated, cond = True, cond.this
        while isinstance(cond, exp.Paren):
            cond = cond.this
    if isinstance(cond, exp.Exists):
        return ("anti" if negated else "semi"), cond.this, None
    if isinstance(cond, exp.In) and cond.args.get("query") is not None:
        query = cond.args["query"]
        return ("not_in" if negated else "semi"), query.this if isinstance(query, exp.Subquery) else query, cond.this
    return None


def decorrelate(query: exp.Expression, inner: set[str], outer: set[str], values: int, residual_ok: bool):
    """A correlated subquery as (an uncorrelated one selecting its correlation columns, the
    first ``values`` selected columns, then the inner columns the residual reads; the outer
    side of each correlation; the residual: the other correlated conditions, allowed when
    ``residual_ok`` and at least one equality correlates; the (alias, column) of the inner
    columns the residual reads, in their selected order)."""
    if not isinstance(query, exp.Select) or query.args.get("group") or query.args.get("having") or any(
        aggregates(p) for p in query.expressions
    ):
        raise LoweringError(
            "No lowering rule for a correlated subquery other than a plain SELECT (no GROUP BY or aggregates)", query
        )
    keep, inner_keys, outer_keys, residual = split_correlation(query, inner, outer)
    if residual and not (residual_ok and inner_keys):
        raise LoweringError(
            f"No lowering rule for the correlated condition {residual[0].sql('spark')} "
            + ("(NOT IN: equalities only)" if not residual_ok else "(needs an equality beside it)"),
            residual[0],
        )
    columns = (c for r in residual for c in r.find_all(exp.Column) if c.table.lower() in inner)
    reads = list(dict.fromkeys((c.table.lower(), c.name.lower()) for c in columns))
    rest = query.copy()
    rest.set("where", exp.Where(this=and_(keep)) if keep else None)
    selected = [k.as_(f"k{i}") for i, k in enumerate(inner_keys)]
    selected += [p.unalias().copy().as_(f"v{i}") for i, p in enumerate(query.expressions[:values])]
    selected += [exp.column(c, table=t).as_(f"r{i}") for i, (t, c) in enumerate(reads)]
    rest.set("expressions", selected)
    rest.set("distinct", None)
    if any(c.table and c.table.lower() not in inner for c in rest.find_all(exp.Column)):
        raise LoweringError("No lowering rule for a subquery referring to the outer query outside its WHERE", query)
    return rest, outer_keys, residual, reads


def split_correlation(query: exp.Select, inner: set[str], outer: set[str]):
    """The subquery's WHERE conjuncts as (those on its own tables; the inner and the outer
    side of each equality with the outer query; the other correlated conditions)."""
    keep: list[exp.Expression] = []
    inner_keys: list[exp.Expression] = []
    outer_keys: list[exp.Expression] = []
    residual: list[exp.Expression] = []
    for cond in conjuncts(query.args.get("where")):
        tables = tables_of(cond)
        if tables <= inner:
            keep.append(cond)
            continue
        if not tables <= inner | outer:
            raise LoweringError("No lowering rule for a subquery referring to tables of an enclosing query further out", cond)
        if cond.find(exp.Query):
            # Neither a key nor a residual: a residual is evaluated per pair of rows, as SQL text.
            raise LoweringError("No lowering rule for a correlated condition holding a subquery", cond)
        sides = ((cond.this, cond.expression), (cond.expression, cond.this)) if isinstance(cond, exp.EQ) else ()
        pair = next(
            ((m, t) for m, t in sides if tables_of(m) and tables_of(m) <= inner and tables_of(t) and tables_of(t) <= outer - inner), None
        )
        if pair is None:
            residual.append(cond)
        else:
            inner_keys.append(pair[0].copy()), outer_keys.append(pair[1].copy())
    return keep, inner_keys, outer_keys, residual


def scalar_subqueries(node: exp.Expression) -> list[exp.Subquery]:
    """The scalar subqueries of ``node``: not those of [NOT] IN or EXISTS, nor any nested
    in another subquery (that one's lowering handles them)."""
    return [
        s for s in node.find_all(exp.Subquery)
        if not isinstance(s.parent, (exp.In, exp.Exists)) and not nested(s, node)
    ]


COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def null_rejected(sub: exp.Subquery) -> bool:
    """Whether a row whose correlation group is missing can never pass the condition that
    ``sub`` is in: the condition is a comparison with ``sub`` (the whole condition), and
    the subquery's value over no rows is NULL."""
    parent = sub.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return isinstance(parent, COMPARISONS) and parent.parent is None and null_over_no_rows(sub.this.expressions[0].unalias())


def null_over_no_rows(e: exp.Expression) -> bool:
    """Whether ``e`` is NULL when its aggregates run over no rows: an aggregate other than
    COUNT, or arithmetic with such an operand."""
    if isinstance(e, exp.AggFunc):
        return not isinstance(e, exp.Count)
    if isinstance(e, (exp.Paren, exp.Neg, exp.Cast)):
        return null_over_no_rows(e.this)
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
        return null_over_no_rows(e.this) or null_over_no_rows(e.expression)
    return False
