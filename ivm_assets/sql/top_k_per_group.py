"""Rewrite rule: ``ROW_NUMBER() OVER (PARTITION BY g ORDER BY …)`` compared with ``<= k``
(``< k``, ``= 1``) above the window becomes a top-k per partition.

A window operator recomputes every partition a change touches whole; a per-group top-k
keeps a buffer of each partition's first rows and reads a partition whole only when
deletes drain its buffer. The rewrite applies when the comparison is a conjunct of a filter
(an outer query's WHERE, or QUALIFY) whose column reaches the window through projections
and filters only (they act row by row, so rows past the k-th can go at the window), the
window computes nothing else, and its ORDER BY is plain columns. The filter stays: it no
longer removes anything. Runs after :mod:`ivm_assets.sql.prune_columns`: the window's
remaining input columns, appended to its ORDER BY to make the top-k's order total, are
then columns the SELECT list references, by which :mod:`ivm_assets.sql.order_ties` orders
the ties already (or partition columns, equal within a partition).

Example:
    >>> from ivm_assets.sql.plan import Filter, Plan, Scan, Window
    >>> w = Window(Scan("t", ("g", "v"), ("g", "v")), ("g",), (("rn", "ROW_NUMBER() OVER (PARTITION BY `g` ORDER BY `v`)"),))
    >>> plan = top_k_per_group(Plan(Filter(w, "`rn` <= 2"), ("g", "v", "rn")))
    >>> top = plan.root.input
    >>> (type(top).__name__, top.partition, top.limit, top.position)
    ('TopK', ('g',), 2, 'rn')
"""

from __future__ import annotations

from dataclasses import fields, replace

import sqlglot
from sqlglot import exp

from ivm_assets.sql.dialect import DIALECT
from ivm_assets.sql.plan import Filter, Node, Plan, Project, SortKey, TopK, Window


def top_k_per_group(plan: Plan) -> Plan:
    """``plan`` with every bounded ROW_NUMBER window turned into a per-partition top-k."""
    return Plan(_rewrite(plan.root), plan.output_names)


def _rewrite(node: Node) -> Node:
    if isinstance(node, Filter):
        for column, k in _bounds(node.predicate):
            cut = _cut(node.input, column, k)
            if cut is not None:
                return Filter(cut, node.predicate)
    children = tuple(_rewrite(c) for c in node.children)
    if children == node.children:
        return node
    names = [f.name for f in fields(node) if f.init and isinstance(getattr(node, f.name), (Node, tuple))]
    if "inputs" in names:
        return replace(node, inputs=children)
    if "left" in names:
        return replace(node, left=children[0], right=children[1])
    return replace(node, input=children[0])


def _cut(node: Node, column: str, k: int) -> Node | None:
    """``node`` with the window computing ``column`` replaced by a top-k per partition;
    None when ``column`` does not come from such a window through projections and filters."""
    if isinstance(node, Project):
        source = _plain_column(dict(node.exprs).get(column))
        below = _cut(node.input, source, k) if source else None
        return Project(below, node.exprs) if below is not None else None
    if isinstance(node, Filter):
        below = _cut(node.input, column, k)
        return Filter(below, node.predicate) if below is not None else None
    if isinstance(node, Window) and len(node.calls) == 1 and node.calls[0][0] == column:
        order = _row_number_order(node.calls[0][1])
        if order is None:
            return None
        named = {c for c, _, _ in order}
        order += tuple((c, False, True) for c in node.input.columns if c not in named)
        return TopK(_rewrite(node.input), order, k, 0, node.partition, column)
    return None


def _bounds(predicate: str) -> list[tuple[str, int]]:
    """(column, k) for each conjunct ``column <= k``, ``column < k + 1`` or ``column = 1``."""
    parsed = sqlglot.parse_one(predicate, read=DIALECT)
    found = []
    for cond in parsed.flatten() if isinstance(parsed, exp.And) else [parsed]:
        cond = cond.unnest()
        if not isinstance(cond, (exp.LTE, exp.LT, exp.EQ)) or not isinstance(cond.this, exp.Column):
            continue
        bound = cond.expression
        if not (isinstance(bound, exp.Literal) and not bound.is_string and bound.this.isdigit()):
            continue
        k = int(bound.this) - (1 if isinstance(cond, exp.LT) else 0)
        if isinstance(cond, exp.EQ) and k != 1:
            continue
        found.append((cond.this.name, k))
    return found


def _plain_column(sql: str | None) -> str | None:
    """The column name when ``sql`` is just a column reference."""
    if sql is None:
        return None
    parsed = sqlglot.parse_one(sql, read=DIALECT)
    return parsed.name if isinstance(parsed, exp.Column) and not parsed.table else None


def _row_number_order(sql: str) -> tuple[SortKey, ...] | None:
    """The ORDER BY of a ``ROW_NUMBER() OVER (…)`` of plain columns; None for anything else."""
    window = sqlglot.parse_one(sql, read=DIALECT)
    if not isinstance(window, exp.Window) or not isinstance(window.this, exp.RowNumber) or window.args.get("order") is None:
        return None
    order: list[SortKey] = []
    for ordered in window.args["order"].expressions:
        if not isinstance(ordered.this, exp.Column) or ordered.this.table:
            return None
        desc = bool(ordered.args.get("desc"))
        nulls_first = ordered.args.get("nulls_first")
        if ordered.this.name not in {c for c, _, _ in order}:
            order.append((ordered.this.name, desc, (not desc) if nulls_first is None else bool(nulls_first)))
    return tuple(order)
