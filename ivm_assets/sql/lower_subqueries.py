"""Lowering of subqueries, for :mod:`ivm_assets.sql.lower`: a WHERE conjunct ``[NOT] EXISTS
(query)`` or ``value [NOT] IN (query)`` becomes a semi or anti join with the subquery's
distinct keys (:func:`subquery_join`); a scalar subquery (in WHERE, SELECT or HAVING) an
aggregate joined to the rows it is evaluated for, without keys when uncorrelated, on its
correlation otherwise (:func:`scalar_values`). Both lower the subquery itself, and compute
join keys, with the :class:`~ivm_assets.sql.lower.Lowering` that calls them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from ivm_assets.errors import LoweringError
from ivm_assets.sql.conditions import aggregates, and_
from ivm_assets.sql.plan import Distinct, Join, Node, OuterJoin, Project, SemiJoin, q
from ivm_assets.sql.render import render
from ivm_assets.sql.subqueries import decorrelate, null_rejected, scalar_subqueries, split_correlation

if TYPE_CHECKING:
    from ivm_assets.sql.lower import Lowering


def subquery_join(lowering: Lowering, node: Node, kind: str, query: exp.Expression, value, scope: dict, ctes) -> Node:
    """A WHERE conjunct ``[NOT] EXISTS (query)`` or ``value [NOT] IN (query)`` as a semi
    join of ``node`` with the distinct keys of ``query``.

    Correlated conditions must be equalities between the subquery and the outer query,
    conjuncts of the subquery's WHERE: they become keys (and, for NOT IN, the group a
    row is compared with). An uncorrelated EXISTS or NOT IN gets a constant key.
    """
    inner = {t.alias_or_name.lower() for t in query.find_all(exp.Table, exp.Subquery) if t.alias_or_name}
    outer = {alias for alias, _ in scope}
    refs = [c for c in query.find_all(exp.Column) if c.table and c.table.lower() not in inner]
    if any(c.table.lower() not in outer for c in refs):
        raise LoweringError("No lowering rule for a subquery referring to tables of an enclosing query further out")
    values = list(value.expressions) if isinstance(value, exp.Tuple) else [value] if value is not None else []
    if len(values) > 1 and kind == "not_in":
        raise LoweringError("No lowering rule for NOT IN with several columns", value)
    outer_keys: list[exp.Expression] = []
    residual: list[exp.Expression] = []
    if refs:
        query, outer_keys, residual, reads = decorrelate(query, inner, outer, len(values), kind != "not_in")
        rel = lowering.query(query, ctes)
        right_exprs = [(lowering.fresh("key"), q(c)) for c in rel.node.columns]
    else:
        rel = lowering.query(query, ctes)
        right_exprs = [(lowering.fresh("key"), q(c)) for c in rel.node.columns[: len(values)]]
        if kind == "not_in" or not values:  # one group: the whole subquery
            right_exprs.insert(0, (lowering.fresh("key"), "1"))
            outer_keys = [exp.Literal.number(1)]
    outer_keys.extend(values)
    left, lcols = lowering.key_columns(node, outer_keys, scope)
    if residual:
        # The right keeps its rows (keys, then the columns the residual reads): whether
        # one matches depends on more than the keys. Inner columns shadow outer ones of
        # the same alias, as in SQL's scoping.
        right = Project(rel.node, tuple(right_exprs))
        inner_scope = {ref: right.columns[len(lcols) + i] for i, ref in enumerate(reads)}
        cond = render(and_(residual), {**scope, **inner_scope})
        return SemiJoin(left, right, kind, lcols, right.columns[: len(lcols)], cond)
    right = Distinct(Project(rel.node, tuple(right_exprs)))
    return SemiJoin(left, right, kind, lcols, right.columns)

def scalar_values(lowering: Lowering, node: Node, exprs: list[exp.Expression], scope: dict, ctes, *, filtering: bool):
    """``node`` with the value of every scalar subquery in ``exprs`` joined to its rows,
    and copies of ``exprs`` that read those values as columns.

    The subquery must be an aggregate without GROUP BY (constructs.py checks it), so it
    has one row: uncorrelated, it joins every row without keys. Correlated by
    equalities in its WHERE, it becomes an aggregate grouped by its side of them,
    joined on them: an outer join, as a row whose group is missing still sees a value
    (over no rows: COUNT is 0, the others NULL). A comparison in a WHERE (``filtering``)
    with an aggregate that is NULL over no rows can never hold for such a row, so
    there an inner join is enough. The aggregates come out of the subquery as they
    are and its SELECT expression is computed above the join, so a missing group's
    value is the expression over COUNTs of 0 and NULLs, as over an empty group.
    """
    out: list[exp.Expression] = []
    for expr in exprs:
        expr = expr.copy()
        for sub in scalar_subqueries(expr):
            node, value = _scalar_value(lowering, node, sub, scope, ctes, filtering and null_rejected(sub))
            column = exp.column(value, quoted=True)
            expr = column if sub is expr else expr
            sub.replace(column)
        out.append(expr)
    return node, out

def _scalar_value(lowering: Lowering, node: Node, sub: exp.Subquery, scope: dict, ctes, null_rejected: bool) -> tuple[Node, str]:
    """``node`` joined with the one value of ``sub`` per row, and the value's column."""
    query = sub.this
    if not isinstance(query, exp.Select) or query.args.get("group") or len(query.expressions) != 1:
        raise LoweringError("No lowering rule for a scalar subquery other than one aggregate without GROUP BY", sub)
    expr = query.expressions[0].unalias()
    aggs = aggregates(expr)
    if not aggs or any(_outside_aggregates(c, expr) for c in expr.find_all(exp.Column)):
        raise LoweringError("No lowering rule for a scalar subquery whose value is not computed from aggregates", sub)
    inner = {t.alias_or_name.lower() for t in query.find_all(exp.Table, exp.Subquery) if t.alias_or_name}
    outer = {alias for alias, _ in scope}
    if not scope and any(c.table and c.table.lower() not in inner for c in query.find_all(exp.Column)):
        raise LoweringError(
            "No lowering rule for a correlated scalar subquery in the SELECT or HAVING of a grouped query", sub
        )
    keep, inner_keys, outer_keys, residual = split_correlation(query, inner, outer)
    if residual:
        raise LoweringError(
            f"No lowering rule for the correlated condition {residual[0].sql('spark')} in a scalar subquery (equalities only)",
            residual[0],
        )
    grouped = query.copy()
    grouped.set("where", exp.Where(this=and_(keep)) if keep else None)
    keys = [k.as_(f"k{i}") for i, k in enumerate(inner_keys)]
    grouped.set("expressions", keys + [a.copy().as_(f"a{i}") for i, a in enumerate(aggs)])
    if inner_keys:
        grouped.set("group", exp.Group(expressions=[k.copy() for k in inner_keys]))
    if any(c.table and c.table.lower() not in inner for c in grouped.find_all(exp.Column)):
        raise LoweringError("No lowering rule for a scalar subquery referring to the outer query outside its WHERE", sub)
    rel = lowering.query(grouped, ctes)
    agg_columns = rel.node.columns[len(inner_keys):]
    if not inner_keys:
        node = Join(node, rel.node, (), ())
    else:
        left, lcols = lowering.key_columns(node, outer_keys, scope)
        rkeys = rel.node.columns[: len(inner_keys)]
        node = Join(left, rel.node, lcols, rkeys) if null_rejected else OuterJoin(left, rel.node, "left", lcols, rkeys)
    replacements = {id(a): c for a, c in zip(aggs, agg_columns)}

    def read(e: exp.Expression) -> exp.Expression:
        if id(e) not in replacements:
            return e
        column = exp.column(replacements[id(e)], quoted=True)
        return exp.func("coalesce", column, exp.Literal.number(0)) if inner_keys and isinstance(e, exp.Count) else column

    value = lowering.fresh("scalar")
    rendered = render(expr.transform(read, copy=False), {})
    return Project(node, tuple((c, q(c)) for c in node.columns) + ((value, rendered),)), value


def _outside_aggregates(e: exp.Expression, top: exp.Expression) -> bool:
    """Whether ``e`` (within ``top``) is outside every aggregate call of ``top``."""
    while e is not None and e is not top:
        if isinstance(e, exp.AggFunc):
            return False
        e = e.parent
    return not isinstance(top, exp.AggFunc)

