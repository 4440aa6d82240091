"""Lowering: a qualified sqlglot statement becomes a relational :class:`~ivm_assets.sql.plan.Plan`.

Input is the output of sqlglot's ``qualify`` (every column carries its table alias, stars
are expanded, USING is rewritten to ON), already checked by Spark's analyzer and by
:mod:`ivm_assets.sql.constructs`. FROM items and inner-join/WHERE conjuncts are folded into a
left-deep join tree: a conjunct goes to the lowest point where all its tables are present,
equalities between the two sides of a join become its keys, the rest a residual predicate.

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

from ivm_assets.sql.constructs import SUPPORTED_AGGREGATES
from ivm_assets.sql.plan import (
    AggCall, Aggregate, Distinct, Except, Filter, Intersect, Join, Node, Plan, Project, Scan, UnionAll, q,
)


class LoweringError(Exception):
    """A construct has no lowering rule (the view is then refreshed by full recompute)."""


@dataclass(frozen=True)
class _Rel:
    """A lowered query: its node and its visible column names, by position."""

    node: Node
    names: tuple[str, ...]


class _Lowering:
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
            return self.set_operation(node, self.with_clause(node, ctes))
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
        items = [from_.this] + [j.this for j in select.args.get("joins") or []]
        conjuncts = _conjuncts(select.args.get("where"))
        for join in select.args.get("joins") or []:
            conjuncts += _conjuncts(join.args.get("on"))
        scope: dict[tuple[str, str], str] = {}
        node = self.join_tree(items, conjuncts, scope, ctes)
        projections = select.expressions
        has_aggregate = bool(select.args.get("group")) or any(
            _aggregates(p) for p in projections + [select.args.get("having")] if p is not None
        )
        if has_aggregate:
            node, outputs = self.aggregate(select, node, scope)
        else:
            exprs = tuple((self.fresh(p.alias_or_name), _render(p.unalias(), scope)) for p in projections)
            node = Project(node, exprs)
            outputs = tuple(p.alias_or_name for p in projections)
        if select.args.get("distinct"):
            node = Distinct(node)
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

    def join_tree(self, items, conjuncts, scope, ctes) -> Node:
        pending = [(c, _tables(c)) for c in conjuncts]
        acc: Node | None = None
        present: set[str] = set()
        for item in items:
            node, alias = self.relation(item, ctes, scope)
            own = [c for c, t in pending if t == {alias}]
            pending = [(c, t) for c, t in pending if t != {alias}]
            if own:
                node = Filter(node, _render(_and(own), scope))
            if acc is None:
                acc, present = node, {alias}
                continue
            ready = [(c, t) for c, t in pending if t and t <= present | {alias} and alias in t]
            pending = [(c, t) for c, t in pending if not (t and t <= present | {alias} and alias in t)]
            acc = self.join(acc, node, present, alias, [c for c, _ in ready], scope)
            present.add(alias)
        assert acc is not None
        if pending:
            acc = Filter(acc, _render(_and([c for c, _ in pending]), scope))
        return acc

    def join(self, left: Node, right: Node, present: set[str], alias: str, conds, scope) -> Node:
        left_keys: list[exp.Expression] = []
        right_keys: list[exp.Expression] = []
        residual: list[exp.Expression] = []
        for cond in conds:
            if isinstance(cond, exp.EQ):
                lt, rt = _tables(cond.this), _tables(cond.expression)
                if lt and rt and lt <= present and rt == {alias}:
                    left_keys.append(cond.this), right_keys.append(cond.expression)
                    continue
                if lt and rt and rt <= present and lt == {alias}:
                    left_keys.append(cond.expression), right_keys.append(cond.this)
                    continue
            residual.append(cond)
        left, lcols = self.key_columns(left, left_keys, scope)
        right, rcols = self.key_columns(right, right_keys, scope)
        return Join(left, right, lcols, rcols, _render(_and(residual), scope) if residual else None)

    def key_columns(self, node: Node, keys: list[exp.Expression], scope) -> tuple[Node, tuple[str, ...]]:
        """Join keys as columns of ``node``: plain columns as they are, expressions computed."""
        names: list[str] = []
        extra: list[tuple[str, str]] = []
        for key in keys:
            if isinstance(key, exp.Column):
                names.append(scope[(key.table.lower(), key.name.lower())])
            else:
                name = self.fresh("key")
                extra.append((name, _render(key, scope)))
                names.append(name)
        if extra:
            node = Project(node, tuple((c, q(c)) for c in node.columns) + tuple(extra))
        return node, tuple(names)

    # --- GROUP BY / aggregates / HAVING ---------------------------------------------------
    def aggregate(self, select: exp.Select, node: Node, scope: dict) -> tuple[Node, tuple[str, ...]]:
        group = select.args.get("group")
        group_exprs = list(group.expressions) if group else []
        pre: list[tuple[str, str]] = []
        keys: list[str] = []
        replacements: list[tuple[exp.Expression, str]] = []
        for g in group_exprs:
            name = self.fresh("key")
            pre.append((name, _render(g, scope)))
            keys.append(name)
            replacements.append((g, name))
        calls: list[AggCall] = []
        having = select.args.get("having")
        found = [a for p in select.expressions + ([having.this] if having else []) for a in _aggregates(p)]
        for agg in found:
            if any(agg == seen for seen, _ in replacements):
                continue
            func, arg = _agg_parts(agg)
            arg_name = None
            if arg is not None:
                arg_name = self.fresh("arg")
                pre.append((arg_name, _render(arg, scope)))
            name = self.fresh(func)
            calls.append(AggCall(name, func, arg_name))
            replacements.append((agg, name))
        agg_node = Aggregate(Project(node, tuple(pre)), tuple(keys), tuple(calls))

        def replace(e: exp.Expression) -> exp.Expression:
            for original, name in replacements:
                if e == original:
                    return exp.column(name, quoted=True)
            return e

        result: Node = agg_node
        if having:
            result = Filter(result, _render(having.this.transform(replace), {}))
        exprs = tuple(
            (self.fresh(p.alias_or_name), _render(p.unalias().transform(replace), {})) for p in select.expressions
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


def _aggregates(node: exp.Expression) -> list[exp.AggFunc]:
    return [a for a in node.find_all(exp.AggFunc) if not isinstance(a.parent, exp.Window)] if node else []


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, (exp.Where, exp.Paren)) and not isinstance(node, exp.And):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _and(nodes: list[exp.Expression]) -> exp.Expression:
    return exp.and_(*[exp.paren(n.copy(), copy=False) for n in nodes]) if len(nodes) > 1 else nodes[0]


def _tables(node: exp.Expression) -> set[str]:
    return {c.table.lower() for c in node.find_all(exp.Column) if c.table}


def _render(node: exp.Expression, scope: Mapping[tuple[str, str], str]) -> str:
    """Spark SQL text of ``node`` with every qualified column replaced by its internal name."""

    def swap(e: exp.Expression) -> exp.Expression:
        if isinstance(e, exp.Column) and e.table:
            return exp.column(scope[(e.table.lower(), e.name.lower())], quoted=True)
        return e

    return node.copy().transform(swap).sql(dialect="spark")


def lower(statement: exp.Expression, relations: Mapping[str, tuple[str, ...]]) -> Plan:
    """The plan of a qualified ``statement``; ``relations`` maps table names to their columns.

    Raises :class:`LoweringError` for anything without a rule (callers fall back to recompute).
    """
    rel = _Lowering(relations).query(statement, {})
    return Plan(rel.node, rel.names)


__all__ = ["LoweringError", "lower", "SUPPORTED_AGGREGATES"]
