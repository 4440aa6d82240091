"""Lowering: a qualified sqlglot statement becomes a relational :class:`~ivm_assets.sql.plan.Plan`.

Input is the output of sqlglot's ``qualify`` (every column carries its table alias, stars
are expanded, USING is rewritten to ON), already checked by Spark's analyzer and by
:mod:`ivm_assets.sql.constructs`. FROM items and inner-join/WHERE conjuncts are folded into a
left-deep join tree, with the one-table conditions an OR across tables implies (see
:func:`~ivm_assets.sql.conditions.implied_filters`): a conjunct goes to the lowest point
where all its tables are present but never below an outer join that pads one of its
tables with NULLs (see
:func:`placement`), equalities between the two sides of a join become its keys, the rest a
residual predicate. An outer join keeps its own ON conditions. ``[NOT] EXISTS`` and
``[NOT] IN (subquery)`` conditions of WHERE become semi and anti joins with the subquery's
distinct keys, applied after the other WHERE conditions (see :func:`~ivm_assets.sql.lower_subqueries.subquery_join`).
Window functions of a SELECT list become Window nodes under its projection (one per
PARTITION BY); ``ORDER BY … LIMIT`` a TopK over it, with the ties ordered first (see
:mod:`~ivm_assets.sql.lower_ordering`).
A scalar subquery (in WHERE, SELECT or HAVING) becomes an aggregate joined to the rows it
is evaluated for: without keys when uncorrelated, on its correlation otherwise (see
:func:`~ivm_assets.sql.lower_subqueries.scalar_values`).

Example:
    >>> import sqlglot
    >>> from sqlglot.optimizer.qualify import qualify
    >>> stmt = qualify(sqlglot.parse_one("SELECT a FROM t WHERE a > 1", read="spark"),
    ...                schema={"t": {"a": "int"}}, dialect="spark")
    >>> type(lower(stmt, {"t": ("a",)}).root).__name__
    'Project'
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types

from ivm_assets.errors import LoweringError
from ivm_assets.sql.conditions import aggregates, and_, conjuncts, implied_filters, tables_of
from ivm_assets.sql.constructs import SUPPORTED_AGGREGATES
from ivm_assets.sql.dialect import DIALECT
from ivm_assets.sql.from_clause import OUTER, FromItem, connected_order, join_kind, placement, split_keys
from ivm_assets.sql.grouped_windows import split_grouped_windows
from ivm_assets.sql.order_ties import order_ties
from ivm_assets.sql.plan import (
    AggCall, Aggregate, Distinct, Except, Filter, Intersect, Join, Node, OuterJoin, Plan, Project, Scan, SemiJoin, UnionAll, q,
)
from ivm_assets.sql.lower_ordering import hidden_sort_keys, top_k, windows
from ivm_assets.sql.lower_subqueries import scalar_values, subquery_join
from ivm_assets.sql.render import render
from ivm_assets.sql.subqueries import scalar_subqueries, subquery_test


@dataclass(frozen=True)
class _Rel:
    """A lowered query: its node and its visible column names, by position."""

    node: Node
    names: tuple[str, ...]


class Lowering:
    def __init__(self, relations: Mapping[str, tuple[str, ...]]) -> None:
        # Spark resolves names case-insensitively (and sqlglot's qualify lower-cases them),
        # so every lookup here goes through lower case; scans keep the declared spelling.
        self.relations = {name.lower(): name for name in relations}
        self.columns = relations
        self.counter = itertools.count()
        self.scans = itertools.count()

    def fresh(self, hint: str) -> str:
        return f"c{next(self.counter)}_{hint}"[:60]

    def scan_names(self, columns: tuple[str, ...]) -> tuple[str, ...]:
        """Names for one scan's columns: the scan's number and the column's name, without
        the shared counter, so that columns a table gains or loses (and pruning then drops)
        leave every other name of the plan, hence its state tables, as they were."""
        n = next(self.scans)
        names = (f"s{n}_{c}" for c in columns)
        return tuple(x if len(x) <= 60 else f"{x[:51]}_{hashlib.sha256(x.encode()).hexdigest()[:8]}" for x in names)

    # --- queries ---------------------------------------------------------------------------
    def query(self, node: exp.Expression, ctes: dict[str, _Rel]) -> _Rel:
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
        if isinstance(node, exp.SetOperation):
            rel = self.set_operation(node, self.with_clause(node, ctes))
            return _Rel(top_k(node, rel.node, rel.names, (), self.fresh), rel.names) if node.args.get("limit") else rel
        if isinstance(node, exp.Select):
            return self.select(node, self.with_clause(node, ctes))
        raise LoweringError(f"No lowering rule for {type(node).__name__}")

    def set_operation(self, node: exp.SetOperation, ctes: dict[str, _Rel]) -> _Rel:
        """UNION ALL flattens into one node; UNION is DISTINCT over it (a distinct union
        below a distinct union flattens too); INTERSECT and EXCEPT keep their two inputs."""
        distinct = bool(node.args.get("distinct"))
        left, right = (self.query(side, ctes) for side in (node.this, node.expression))
        if isinstance(node, exp.Union):
            inputs: list[Node] = []
            for part in (left.node, right.node):
                if distinct and isinstance(part, Distinct) and isinstance(part.input, UnionAll):
                    part = part.input
                inputs.extend(part.inputs if isinstance(part, UnionAll) else [part])
            union = UnionAll(tuple(inputs), left.node.columns)
            return _Rel(Distinct(union) if distinct else union, left.names)
        cls = Intersect if isinstance(node, exp.Intersect) else Except
        return _Rel(cls(left.node, right.node, all=not distinct), left.names)

    def with_clause(self, node: exp.Expression, ctes: dict[str, _Rel]) -> dict[str, _Rel]:
        with_ = node.args.get("with_") or node.args.get("with")
        if not with_:
            return ctes
        ctes = dict(ctes)
        for cte in with_.expressions:
            ctes[cte.alias_or_name.lower()] = self.query(cte.this, ctes)
        return ctes

    def select(self, select: exp.Select, ctes: dict[str, _Rel]) -> _Rel:
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise LoweringError("No lowering rule for SELECT without FROM")
        projections = select.expressions
        has_aggregate = bool(select.args.get("group")) or any(
            aggregates(p) for p in projections + [select.args.get("having")] if p is not None
        )
        if has_aggregate and (select.args.get("qualify") or any(p.find(exp.Window) for p in projections)):
            return self.select(split_grouped_windows(select), ctes)
        items = [FromItem(from_.this, "first", ())]
        items += [FromItem(j.this, join_kind(j), tuple(conjuncts(j.args.get("on")))) for j in select.args.get("joins") or []]
        scope: dict[tuple[str, str], str] = {}
        where = conjuncts(select.args.get("where"))
        tests = [t for t in map(subquery_test, where) if t is not None]
        plain = [c for c in where if subquery_test(c) is None]
        # Conditions with a scalar subquery apply once its value is joined to every row.
        with_scalars = [c for c in plain if scalar_subqueries(c)]
        joined = [c for c in plain if not scalar_subqueries(c)]
        joined += implied_filters(joined, {i.alias for i in items})
        node = self.join_tree(items, joined, scope, ctes)
        if with_scalars:
            node, conds = scalar_values(self, node, with_scalars, scope, ctes, filtering=True)
            node = Filter(node, render(and_(conds), scope))
        for kind, query, value in tests:
            node = subquery_join(self, node, kind, query, value, scope, ctes)
        hidden: tuple[tuple[str, str], ...] = ()
        if has_aggregate:
            node, outputs = self.aggregate(select, node, scope, ctes)
        else:
            # QUALIFY (its aliases already expanded by qualify) filters after the windows.
            qualify = [select.args["qualify"].this] if select.args.get("qualify") else []
            # Scalar subqueries first: a window may then take their values as arguments.
            node, values = scalar_values(self, node, [p.unalias() for p in projections] + qualify, scope, ctes, filtering=False)
            if any(v.find(exp.Window) for v in values):
                node, values = windows(node, values, scope, self.fresh)
            values, qualify = values[: len(projections)], values[len(projections) :]
            if qualify:
                node = Filter(node, render(qualify[0], scope))
            exprs = tuple((self.fresh(p.alias_or_name), render(v, scope)) for p, v in zip(projections, values))
            if select.args.get("limit"):
                hidden = hidden_sort_keys(select, scope, self.fresh)
            node = Project(node, exprs + hidden)
            outputs = tuple(p.alias_or_name for p in projections)
        if select.args.get("distinct"):
            if hidden:
                raise LoweringError("No lowering rule for SELECT DISTINCT ordered by a column it does not select")
            node = Distinct(node)
        if select.args.get("limit"):
            node = top_k(select, node, outputs, hidden, self.fresh)
        return _Rel(node, outputs)

    # --- FROM / JOIN / WHERE -------------------------------------------------------------
    def relation(self, item: exp.Expression, ctes: dict[str, _Rel], scope: dict) -> tuple[Node, str]:
        alias = item.alias_or_name.lower()
        if isinstance(item, exp.Table) and not item.args.get("db"):
            name = item.name.lower()
            if name in ctes:
                inner = ctes[name]
                return self.rename(inner, alias, scope), alias
            if name in self.relations:
                declared = self.relations[name]
                cols = self.columns[declared]
                fresh = self.scan_names(cols)
                scope.update({(alias, c.lower()): f for c, f in zip(cols, fresh)})
                return Scan(declared, cols, fresh), alias
            raise LoweringError(f"unknown relation {name}")
        if isinstance(item, exp.Subquery):
            return self.rename(self.query(item.this, ctes), alias, scope), alias
        raise LoweringError(f"No lowering rule for {type(item).__name__} in FROM")

    def rename(self, rel: _Rel, alias: str, scope: dict) -> Node:
        fresh = tuple(self.fresh(n) for n in rel.names)
        scope.update({(alias, n.lower()): f for n, f in zip(rel.names, fresh)})
        return Project(rel.node, tuple((f, q(c)) for f, c in zip(fresh, rel.node.columns)))

    def join_tree(self, items: list[FromItem], where: list[exp.Expression], scope: dict, ctes) -> Node:
        """The FROM items joined left to right, with every condition placed (see
        :func:`placement`): filters on one item, inner join conditions, filters above an
        outer join, and a filter on top. Inner joins alone are first put in an order
        without avoidable cross products (see :func:`connected_order`)."""
        if all(i.kind in ("first", "inner") for i in items):
            items, where = connected_order(items, where)
        placed, outer_on = placement(items, where)
        acc: Node | None = None
        aliases = [i.alias for i in items]
        for pos, item in enumerate(items):
            node, alias = self.relation(item.expression, ctes, scope)
            if placed[("own", pos)]:
                node = Filter(node, render(and_(placed[("own", pos)]), scope))
            if acc is None:
                acc = node
            else:
                if placed[("pre", pos)]:
                    acc = Filter(acc, render(and_(placed[("pre", pos)]), scope))
                present = set(aliases[:pos])
                if item.kind in OUTER:
                    acc = self.outer_join(acc, node, item.kind, present, alias, outer_on[pos], scope)
                elif item.kind in ("semi", "anti"):
                    acc = self.semi_join_item(acc, node, item.kind, present, alias, outer_on[pos], scope)
                else:
                    acc = self.join(acc, node, present, alias, placed[("on", pos)], scope)
            if placed[("after", pos)]:
                acc = Filter(acc, render(and_(placed[("after", pos)]), scope))
        assert acc is not None
        if placed[("end",)]:
            acc = Filter(acc, render(and_(placed[("end",)]), scope))
        return acc

    def join(self, left: Node, right: Node, present: set[str], alias: str, conds, scope) -> Node:
        left_keys, right_keys, residual = split_keys(conds, present, alias)
        left, lcols = self.key_columns(left, left_keys, scope)
        right, rcols = self.key_columns(right, right_keys, scope)
        return Join(left, right, lcols, rcols, render(and_(residual), scope) if residual else None)

    def outer_join(self, left: Node, right: Node, side: str, present: set[str], alias: str, conds, scope) -> Node:
        left_keys, right_keys, residual = split_keys(conds, present, alias)
        left, lcols = self.key_columns(left, left_keys, scope)
        right, rcols = self.key_columns(right, right_keys, scope)
        return OuterJoin(left, right, side, lcols, rcols, render(and_(residual), scope) if residual else None)

    def semi_join_item(self, left: Node, right: Node, kind: str, present: set[str], alias: str, conds, scope) -> Node:
        """``LEFT SEMI / ANTI JOIN item ON …``: equalities with the items before become keys,
        conditions on the item alone filter it; anything else has no rule."""
        left_keys, right_keys, rest = split_keys(conds, present, alias)
        own = [c for c in rest if tables_of(c) == {alias}]
        if len(own) != len(rest) or not left_keys:
            raise LoweringError(
                f"No lowering rule for a {kind.upper()} JOIN without ON equalities or with other conditions across both sides"
            )
        if own:
            right = Filter(right, render(and_(own), scope))
        right = Project(right, tuple((self.fresh("key"), render(k, scope)) for k in right_keys))
        left, lcols = self.key_columns(left, left_keys, scope)
        return SemiJoin(left, Distinct(right), kind, lcols, right.columns)

    def key_columns(self, node: Node, keys: list[exp.Expression], scope) -> tuple[Node, tuple[str, ...]]:
        """Join keys as columns of ``node``: plain columns as they are, expressions computed."""
        names: list[str] = []
        extra: list[tuple[str, str]] = []
        for key in keys:
            if isinstance(key, exp.Column):
                names.append(scope[(key.table.lower(), key.name.lower())])
            else:
                name = self.fresh("key")
                extra.append((name, render(key, scope)))
                names.append(name)
        if extra:
            node = Project(node, tuple((c, q(c)) for c in node.columns) + tuple(extra))
        return node, tuple(names)

    # --- GROUP BY / aggregates / HAVING ---------------------------------------------------
    def aggregate(self, select: exp.Select, node: Node, scope: dict, ctes) -> tuple[Node, tuple[str, ...]]:
        group = select.args.get("group")
        group_exprs = list(group.expressions) if group else []
        pre: list[tuple[str, str]] = []
        keys: list[str] = []
        replacements: list[tuple[exp.Expression, str]] = []
        for g in group_exprs:
            name = self.fresh("key")
            pre.append((name, render(g, scope)))
            keys.append(name)
            replacements.append((g, name))
        calls: list[AggCall] = []
        having = select.args.get("having")
        found = [a for p in select.expressions + ([having.this] if having else []) for a in aggregates(p)]
        for agg in found:
            if any(agg == seen for seen, _ in replacements):
                continue
            func, arg = _agg_parts(agg)
            arg_name = None
            if arg is not None:
                arg_name = self.fresh("arg")
                pre.append((arg_name, render(arg, scope)))
            name = self.fresh(func)
            calls.append(AggCall(name, func, arg_name, agg.sql(dialect=DIALECT), exact=_exact(arg)))
            replacements.append((agg, name))
        agg_node = Aggregate(Project(node, tuple(pre)), tuple(keys), tuple(calls))

        def replace(e: exp.Expression) -> exp.Expression:
            for original, name in replacements:
                if e == original:
                    return exp.column(name, quoted=True)
            return e

        # Scalar subqueries of HAVING and SELECT join the groups; the scope is empty as the
        # rows they could correlate with are grouped away (a correlated one has no rule).
        evaluated = [having.this if having else exp.true(), *[p.unalias() for p in select.expressions]]
        result, (having_expr, *projections) = scalar_values(self, agg_node, evaluated, {}, ctes, filtering=False)
        if having:
            result = Filter(result, render(having_expr.transform(replace), {}))
        exprs = tuple(
            (self.fresh(p.alias_or_name), render(v.transform(replace), {})) for p, v in zip(select.expressions, projections)
        )
        return Project(result, exprs), tuple(p.alias_or_name for p in select.expressions)


def _agg_parts(agg: exp.AggFunc) -> tuple[str, exp.Expression | None]:
    distinct = isinstance(agg.this, exp.Distinct)
    arg = agg.this.expressions[0] if distinct else agg.this
    if isinstance(agg, exp.Count):
        if isinstance(arg, exp.Star) or arg is None:
            return "count_star", None
        return ("count_distinct" if distinct else "count"), arg
    return {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}[type(agg)], arg


_EXACT_TYPES = exp.DataType.INTEGER_TYPES | {exp.DataType.Type.DECIMAL}


def _exact(arg: exp.Expression | None) -> bool:
    """Whether sqlglot typed ``arg`` as an integer or DECIMAL (not typed: not known to be).
    Its typing only decides whether a SUM keeps its values (:class:`~ivm_assets.sql.plan.AggCall`):
    a DECIMAL typed DOUBLE costs a value table, a DOUBLE typed exact a recompute where a
    value leaves; the sum's own type is Spark's, at each epoch."""
    return arg is not None and arg.type is not None and arg.type.this in _EXACT_TYPES


def lower(statement: exp.Expression, relations: Mapping[str, tuple[str, ...]], types: Mapping[str, Mapping[str, str]] | None = None) -> Plan:
    """The plan of a qualified ``statement``; ``relations`` maps table names to their columns,
    ``types`` (given) to their columns' Spark types, which type the aggregates' arguments.

    What is lowered is the query with its ties ordered (:func:`~ivm_assets.sql.order_ties.order_ties`),
    the one every refresh and the oracle compute. Raises :class:`LoweringError` for anything
    without a rule (callers fall back to recompute).
    """
    statement = order_ties(statement)
    if types is not None:
        try:
            statement = annotate_types(statement, schema=types, dialect=DIALECT)
        except SqlglotError:
            pass  # untyped: every SUM/AVG keeps its values
    rel = Lowering(relations).query(statement, {})
    return Plan(rel.node, rel.names)


__all__ = ["LoweringError", "lower", "SUPPORTED_AGGREGATES"]
