"""Lowering: a qualified sqlglot statement becomes a relational :class:`~ivm_assets.sql.plan.Plan`.

Input is the output of sqlglot's ``qualify`` (every column carries its table alias, stars
are expanded, USING is rewritten to ON), already checked by Spark's analyzer and by
:mod:`ivm_assets.sql.constructs`. FROM items and inner-join/WHERE conjuncts are folded into a
left-deep join tree: a conjunct goes to the lowest point where all its tables are present
but never below an outer join that pads one of its tables with NULLs (see
:func:`_placement`), equalities between the two sides of a join become its keys, the rest a
residual predicate. An outer join keeps its own ON conditions. ``[NOT] EXISTS`` and
``[NOT] IN (subquery)`` conditions of WHERE become semi and anti joins with the subquery's
distinct keys, applied after the other WHERE conditions (see :meth:`_Lowering.subquery_test`).
Window functions of a SELECT list become Window nodes under its projection (one per
PARTITION BY); ``ORDER BY … LIMIT`` a TopK over it, with the ties ordered first.

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
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from ivm_assets.sql.constructs import SUPPORTED_AGGREGATES
from ivm_assets.sql.order_ties import order_ties
from ivm_assets.sql.plan import (
    AggCall, Aggregate, Distinct, Except, Filter, Intersect, Join, Node, OuterJoin, Plan, Project, Scan, SemiJoin,
    SortKey, TopK, UnionAll, Window, q,
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
            rel = self.set_operation(node, self.with_clause(node, ctes))
            return _Rel(self.top_k(node, rel.node, rel.names, ()), rel.names) if node.args.get("limit") else rel
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
        items = [_FromItem(from_.this, "first", ())]
        items += [_FromItem(j.this, _join_kind(j), tuple(_conjuncts(j.args.get("on")))) for j in select.args.get("joins") or []]
        scope: dict[tuple[str, str], str] = {}
        where = _conjuncts(select.args.get("where"))
        tests = [t for t in map(_subquery_test, where) if t is not None]
        node = self.join_tree(items, [c for c in where if _subquery_test(c) is None], scope, ctes)
        for kind, query, value in tests:
            node = self.subquery_test(node, kind, query, value, scope, ctes)
        projections = select.expressions
        has_aggregate = bool(select.args.get("group")) or any(
            _aggregates(p) for p in projections + [select.args.get("having")] if p is not None
        )
        hidden: tuple[tuple[str, str], ...] = ()
        if has_aggregate:
            if select.args.get("qualify") or any(p.find(exp.Window) for p in projections):
                raise LoweringError("No lowering rule for window functions over GROUP BY or aggregates in the same SELECT")
            node, outputs = self.aggregate(select, node, scope)
        else:
            # QUALIFY (its aliases already expanded by qualify) filters after the windows.
            qualify = [select.args["qualify"].this] if select.args.get("qualify") else []
            if any(p.find(exp.Window) for p in projections + qualify):
                node, replaced = self.windows(node, projections + qualify, scope)
                projections, qualify = replaced[: len(projections)], replaced[len(projections) :]
            if qualify:
                node = Filter(node, _render(qualify[0], scope))
            exprs = tuple((self.fresh(p.alias_or_name), _render(p.unalias(), scope)) for p in projections)
            if select.args.get("limit"):
                hidden = self.hidden_sort_keys(select, scope)
            node = Project(node, exprs + hidden)
            outputs = tuple(p.alias_or_name for p in projections)
        if select.args.get("distinct"):
            if hidden:
                raise LoweringError("No lowering rule for SELECT DISTINCT ordered by a column it does not select")
            node = Distinct(node)
        if select.args.get("limit"):
            node = self.top_k(select, node, outputs, hidden)
        return _Rel(node, outputs)

    # --- ORDER BY … LIMIT, window functions ----------------------------------------------------
    def hidden_sort_keys(self, select: exp.Select, scope: dict) -> tuple[tuple[str, str], ...]:
        """Sort keys of a SELECT's ORDER BY that are not among its outputs, as extra columns."""
        outputs = tuple(p.alias_or_name for p in select.expressions)
        return tuple(
            (self.fresh("sort"), _render(o.this, scope))
            for o in select.args["order"].expressions
            if _output_position(o.this, select, outputs) is None
        )

    def top_k(self, query: exp.Expression, node: Node, outputs: tuple[str, ...], hidden) -> Node:
        """``ORDER BY … LIMIT n [OFFSET m]`` over ``node``, whose first columns are the query's
        outputs and whose last are the ``hidden`` sort keys (dropped again above the top-k).

        The order is total: :func:`~ivm_assets.sql.order_ties.order_ties` appended every output
        column, and a hidden sort key is a column of its own.
        """
        extra = iter(name for name, _ in hidden)
        keys: list[SortKey] = []
        for ordered in query.args["order"].expressions:
            position = _output_position(ordered.this, query, outputs)
            name = node.columns[position] if position is not None else next(extra, None)
            if name is None:
                raise LoweringError(f"No lowering rule for ORDER BY {ordered.this.sql('spark')} (not an output column)")
            desc = bool(ordered.args.get("desc"))
            nulls_first = ordered.args.get("nulls_first")
            if name not in {k for k, _, _ in keys}:  # a repeated key cannot change the order
                keys.append((name, desc, (not desc) if nulls_first is None else bool(nulls_first)))
        offset = query.args.get("offset")
        top = TopK(node, tuple(keys), int(query.args["limit"].expression.this), int(offset.expression.this) if offset else 0)
        if hidden:
            return Project(top, tuple((c, q(c)) for c in node.columns[: len(outputs)]))
        return top

    def windows(self, node: Node, projections: list[exp.Expression], scope: dict) -> tuple[Node, list[exp.Expression]]:
        """The window functions of ``projections`` (SELECT list and QUALIFY) as one Window
        node per PARTITION BY (partition expressions computed as columns first), and the
        expressions with each function replaced by its column."""
        pre: list[tuple[str, str]] = []
        groups: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        replaced: list[tuple[exp.Expression, str]] = []
        for window in (w for p in projections for w in p.find_all(exp.Window)):
            if any(window == seen for seen, _ in replaced):
                continue
            keys = []
            for e in window.args.get("partition_by") or []:
                if isinstance(e, exp.Column):
                    keys.append(scope[(e.table.lower(), e.name.lower())])
                else:
                    keys.append(self.fresh("part"))
                    pre.append((keys[-1], _render(e, scope)))
            spec = window.copy()
            spec.set("partition_by", [exp.column(k, quoted=True) for k in keys])
            name = self.fresh(window.this.sql_name().lower() if isinstance(window.this, exp.Func) else "window")
            groups.setdefault(tuple(keys), []).append((name, _render(spec, scope)))
            replaced.append((window, name))
        if pre:
            node = Project(node, tuple((c, q(c)) for c in node.columns) + tuple(pre))
        for keys, calls in groups.items():
            node = Window(node, keys, tuple(calls))

        def replace(e: exp.Expression) -> exp.Expression:
            found = next((name for seen, name in replaced if isinstance(e, exp.Window) and e == seen), None)
            return exp.column(found, quoted=True) if found else e

        return node, [p.transform(replace) for p in projections]

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

    def join_tree(self, items: list[_FromItem], where: list[exp.Expression], scope: dict, ctes) -> Node:
        """The FROM items joined left to right, with every condition placed (see
        :func:`_placement`): filters on one item, inner join conditions, filters above an
        outer join, and a filter on top."""
        placed, outer_on = _placement(items, where)
        acc: Node | None = None
        aliases = [i.alias for i in items]
        for pos, item in enumerate(items):
            node, alias = self.relation(item.expression, ctes, scope)
            if placed[("own", pos)]:
                node = Filter(node, _render(_and(placed[("own", pos)]), scope))
            if acc is None:
                acc = node
            else:
                if placed[("pre", pos)]:
                    acc = Filter(acc, _render(_and(placed[("pre", pos)]), scope))
                present = set(aliases[:pos])
                if item.kind in _OUTER:
                    acc = self.outer_join(acc, node, item.kind, present, alias, outer_on[pos], scope)
                elif item.kind in ("semi", "anti"):
                    acc = self.semi_join_item(acc, node, item.kind, present, alias, outer_on[pos], scope)
                else:
                    acc = self.join(acc, node, present, alias, placed[("on", pos)], scope)
            if placed[("after", pos)]:
                acc = Filter(acc, _render(_and(placed[("after", pos)]), scope))
        assert acc is not None
        if placed[("end",)]:
            acc = Filter(acc, _render(_and(placed[("end",)]), scope))
        return acc

    def join(self, left: Node, right: Node, present: set[str], alias: str, conds, scope) -> Node:
        left_keys, right_keys, residual = _split_keys(conds, present, alias)
        left, lcols = self.key_columns(left, left_keys, scope)
        right, rcols = self.key_columns(right, right_keys, scope)
        return Join(left, right, lcols, rcols, _render(_and(residual), scope) if residual else None)

    def outer_join(self, left: Node, right: Node, side: str, present: set[str], alias: str, conds, scope) -> Node:
        left_keys, right_keys, residual = _split_keys(conds, present, alias)
        left, lcols = self.key_columns(left, left_keys, scope)
        right, rcols = self.key_columns(right, right_keys, scope)
        return OuterJoin(left, right, side, lcols, rcols, _render(_and(residual), scope) if residual else None)

    def semi_join_item(self, left: Node, right: Node, kind: str, present: set[str], alias: str, conds, scope) -> Node:
        """``LEFT SEMI / ANTI JOIN item ON …``: equalities with the items before become keys,
        conditions on the item alone filter it; anything else has no rule."""
        left_keys, right_keys, rest = _split_keys(conds, present, alias)
        own = [c for c in rest if _tables(c) == {alias}]
        if len(own) != len(rest) or not left_keys:
            raise LoweringError(
                f"No lowering rule for a {kind.upper()} JOIN without ON equalities or with other conditions across both sides"
            )
        if own:
            right = Filter(right, _render(_and(own), scope))
        right = Project(right, tuple((self.fresh("key"), _render(k, scope)) for k in right_keys))
        left, lcols = self.key_columns(left, left_keys, scope)
        return SemiJoin(left, Distinct(right), kind, lcols, right.columns)

    # --- subqueries in WHERE: [NOT] EXISTS, [NOT] IN ------------------------------------------
    def subquery_test(self, node: Node, kind: str, query: exp.Expression, value, scope: dict, ctes) -> Node:
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
        if isinstance(value, exp.Tuple):
            raise LoweringError("No lowering rule for IN with several columns")
        outer_keys: list[exp.Expression] = []
        if refs:
            query, outer_keys = _decorrelate(query, inner, outer, value is not None)
            rel = self.query(query, ctes)
            right_exprs = [(self.fresh("key"), q(c)) for c in rel.node.columns]
        else:
            rel = self.query(query, ctes)
            right_exprs = [(self.fresh("key"), q(rel.node.columns[0]))] if value is not None else []
            if kind == "not_in" or value is None:  # one group: the whole subquery
                right_exprs.insert(0, (self.fresh("key"), "1"))
                outer_keys = [exp.Literal.number(1)]
        if value is not None:
            outer_keys.append(value)
        right = Distinct(Project(rel.node, tuple(right_exprs)))
        left, lcols = self.key_columns(node, outer_keys, scope)
        return SemiJoin(left, right, kind, lcols, right.columns)

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


_OUTER = ("left", "right", "full")


@dataclass(frozen=True)
class _FromItem:
    """One FROM item: the relation, how it joins the items before it, its ON conjuncts."""

    expression: exp.Expression
    kind: str  # "first", "inner", "left", "right", "full", "semi" or "anti"
    on: tuple[exp.Expression, ...]

    @property
    def alias(self) -> str:
        return self.expression.alias_or_name.lower()


def _join_kind(join: exp.Join) -> str:
    if join.args.get("method") or join.args.get("using"):
        raise LoweringError(f"No lowering rule for {join.args.get('method') or 'USING'} JOIN")
    side, kind = (join.args.get("side") or "").lower(), (join.args.get("kind") or "").lower()
    if kind in ("semi", "anti"):
        return kind
    return side if side in _OUTER else "inner"


def _subquery_test(cond: exp.Expression) -> tuple[str, exp.Expression, exp.Expression | None] | None:
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


def _decorrelate(query: exp.Expression, inner: set[str], outer: set[str], with_value: bool):
    """A correlated subquery as (an uncorrelated one selecting its correlation columns, and
    the compared value when ``with_value``; the outer side of each correlation)."""
    if not isinstance(query, exp.Select) or query.args.get("group") or query.args.get("having") or any(
        _aggregates(p) for p in query.expressions
    ):
        raise LoweringError(
            "No lowering rule for a correlated subquery other than a plain SELECT (no GROUP BY or aggregates)"
        )
    keep: list[exp.Expression] = []
    inner_keys: list[exp.Expression] = []
    outer_keys: list[exp.Expression] = []
    for cond in _conjuncts(query.args.get("where")):
        tables = _tables(cond)
        if tables <= inner:
            keep.append(cond)
            continue
        sides = ((cond.this, cond.expression), (cond.expression, cond.this)) if isinstance(cond, exp.EQ) else ()
        pair = next(
            ((m, t) for m, t in sides if _tables(m) and _tables(m) <= inner and _tables(t) and _tables(t) <= outer - inner), None
        )
        if pair is None:
            raise LoweringError(f"No lowering rule for the correlated condition {cond.sql('spark')} (equalities only)")
        inner_keys.append(pair[0].copy()), outer_keys.append(pair[1].copy())
    rest = query.copy()
    rest.set("where", exp.Where(this=_and(keep)) if keep else None)
    selected = [k.as_(f"k{i}") for i, k in enumerate(inner_keys)]
    if with_value:
        selected.append(query.expressions[0].unalias().copy().as_("v"))
    rest.set("expressions", selected)
    rest.set("distinct", None)
    if any(c.table and c.table.lower() not in inner for c in rest.find_all(exp.Column)):
        raise LoweringError("No lowering rule for a subquery referring to the outer query outside its WHERE equalities")
    return rest, outer_keys


def _placement(items: list[_FromItem], where: list[exp.Expression]):
    """Where each condition goes in the left-deep join tree of ``items``.

    A condition applies at the lowest point where all its tables are present, except that
    it never moves below an outer join that pads one of its tables with NULLs (a LEFT
    JOIN pads its new item, a RIGHT JOIN the items before it, FULL both): WHERE conditions
    on a padded item stay above that join, and so do an inner join's ON conditions below
    which such a join lies within their scope. At its point a condition on one item alone
    filters that item, one across items joins them (inner join) or filters the result
    (outer join). An outer join's own ON conditions stay with it, except those on its
    padded side alone (LEFT: the new item; RIGHT: the items before), which filter that
    side first; a SEMI or ANTI JOIN keeps all of its own. Returns (position → conditions,
    outer/semi/anti join position → its ON conditions);
    positions are ("own", i), ("pre", i) (the items before i), ("on", i), ("after", i),
    ("end",).
    """
    aliases = [i.alias for i in items]
    index = {a: i for i, a in enumerate(aliases)}
    pads = [
        ({a} if i.kind in ("left", "full") else set()) | (set(aliases[:n]) if i.kind in ("right", "full") else set())
        for n, (a, i) in enumerate(zip(aliases, items))
    ]
    any_outer = any(i.kind in _OUTER for i in items)
    placed: dict[tuple, list[exp.Expression]] = defaultdict(list)
    outer_on: dict[int, list[exp.Expression]] = defaultdict(list)

    def place(cond: exp.Expression, scope_end: int, is_where: bool) -> None:
        tables = _tables(cond)
        if not tables <= set(index):
            raise LoweringError(f"No lowering rule for a condition on tables outside its FROM: {cond.sql('spark')}")
        if not tables:
            placed[("on", scope_end) if any_outer and not is_where else ("end",)].append(cond)
            return
        barrier = max((n for n in range(1, scope_end + 1) if pads[n] & tables), default=-1)
        pos = max(max(index[t] for t in tables), barrier)
        if tables == {aliases[pos]} and aliases[pos] not in pads[pos]:
            placed[("own", pos)].append(cond)
        elif items[pos].kind in _OUTER:
            placed[("after", pos)].append(cond)
        else:
            placed[("on", pos)].append(cond)

    for cond in where:
        place(cond, len(items) - 1, True)
    for pos, item in enumerate(items):
        for cond in item.on:
            tables = _tables(cond)
            if item.kind in ("semi", "anti"):
                outer_on[pos].append(cond)
            elif item.kind not in _OUTER:
                place(cond, pos, False)
            elif tables and item.kind == "left" and tables <= {aliases[pos]}:
                placed[("own", pos)].append(cond)
            elif tables and item.kind == "right" and tables <= set(aliases[:pos]):
                placed[("pre", pos)].append(cond)
            else:
                outer_on[pos].append(cond)
    return placed, outer_on


def _split_keys(conds, present: set[str], alias: str):
    """Join conditions as (left key expressions, right key expressions, the rest):
    equalities between the items ``present`` and the new item ``alias`` become keys."""
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
    return left_keys, right_keys, residual


def _output_position(expr: exp.Expression, query: exp.Expression, outputs: tuple[str, ...]) -> int | None:
    """Which output column an ORDER BY expression names: by position (``ORDER BY 2``), by
    alias, or by repeating a SELECT expression; None for anything else."""
    if isinstance(expr, exp.Literal) and not expr.is_string:
        return int(expr.this) - 1
    if isinstance(expr, exp.Column) and not expr.table:
        lowered = [o.lower() for o in outputs]
        if expr.name.lower() in lowered:
            return lowered.index(expr.name.lower())
    if isinstance(query, exp.Select):
        return next((i for i, p in enumerate(query.expressions) if p.unalias() == expr), None)
    return None


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

    What is lowered is the query with its ties ordered (:func:`~ivm_assets.sql.order_ties.order_ties`),
    the one every refresh and the oracle compute. Raises :class:`LoweringError` for anything
    without a rule (callers fall back to recompute).
    """
    rel = _Lowering(relations).query(order_ties(statement), {})
    return Plan(rel.node, rel.names)


__all__ = ["LoweringError", "lower", "SUPPORTED_AGGREGATES"]
