"""Rewrite rule: keep only the columns some ancestor uses.

Lowering scans every column of a table; a join then stores every one of them in its state.
Pruning before incrementalization keeps state tables as narrow as the query allows.

Example:
    >>> from ivm_assets.sql.plan import Plan, Project, Scan
    >>> plan = Plan(Project(Scan("t", ("a", "b"), ("x", "y")), (("p", "`x`"),)), ("a",))
    >>> prune_columns(plan).root.input.columns
    ('x',)
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp

from ivm_assets.sql.dialect import DIALECT
from ivm_assets.sql.plan import (
    Aggregate, Distinct, Except, Filter, Intersect, Join, Node, OuterJoin, Plan, Project, Scan, SemiJoin, TopK, UnionAll,
    Window, q,
)


@lru_cache(maxsize=4096)
def references(sql: str) -> frozenset[str]:
    """The column names a Spark SQL expression reads."""
    return frozenset(c.name for c in sqlglot.parse_one(sql, read=DIALECT).find_all(exp.Column))


def _prune(node: Node, needed: frozenset[str]) -> Node:
    if isinstance(node, Scan):
        keep = [(s, c) for s, c in zip(node.source_columns, node.columns) if c in needed] or [
            (node.source_columns[0], node.columns[0])  # a scan must produce a row count
        ]
        return Scan(node.relation, tuple(s for s, _ in keep), tuple(c for _, c in keep))
    if isinstance(node, Project):
        exprs = tuple((n, e) for n, e in node.exprs if n in needed) or node.exprs[:1]
        below = frozenset().union(*(references(e) for _, e in exprs))
        return Project(_prune(node.input, below), exprs)
    if isinstance(node, Filter):
        filtered = Filter(_prune(node.input, needed | references(node.predicate)), node.predicate)
        if set(filtered.columns) <= needed:
            return filtered
        # Columns only the filter reads end here: an operator above (a join) would store them.
        kept = [c for c in filtered.columns if c in needed] or [filtered.columns[0]]
        return Project(filtered, tuple((c, q(c)) for c in kept))
    if isinstance(node, (Join, OuterJoin)):
        uses = needed | set(node.left_keys) | set(node.right_keys)
        if node.residual:
            uses |= references(node.residual)
        left = _prune(node.left, frozenset(c for c in node.left.columns if c in uses))
        right = _prune(node.right, frozenset(c for c in node.right.columns if c in uses))
        if isinstance(node, OuterJoin):
            return OuterJoin(left, right, node.side, node.left_keys, node.right_keys, node.residual)
        return Join(left, right, node.left_keys, node.right_keys, node.residual)
    if isinstance(node, SemiJoin):
        reads = references(node.residual) if node.residual else frozenset()
        uses = frozenset(c for c in node.left.columns if c in needed or c in node.left_keys or c in reads)
        right = _prune(node.right, frozenset(node.right.columns))  # its keys, and what the residual reads
        return SemiJoin(_prune(node.left, uses), right, node.kind, node.left_keys, node.right_keys, node.residual)
    if isinstance(node, Aggregate):
        uses = frozenset(node.keys) | frozenset(a.arg for a in node.aggs if a.arg)
        return Aggregate(_prune(node.input, uses), node.keys, node.aggs)
    if isinstance(node, Distinct):
        return Distinct(_prune(node.input, frozenset(node.input.columns)))
    if isinstance(node, UnionAll):
        return UnionAll(tuple(_prune(i, frozenset(i.columns)) for i in node.inputs), node.columns)
    if isinstance(node, (Intersect, Except)):
        # Every column takes part in a row's identity.
        left, right = (_prune(n, frozenset(n.columns)) for n in (node.left, node.right))
        return type(node)(left, right, node.all)
    if isinstance(node, TopK):
        # The order is total over every input column: all of them decide which rows are in.
        below = _prune(node.input, frozenset(node.input.columns))
        return TopK(below, node.order, node.limit, node.offset, node.partition, node.position)
    if isinstance(node, Window):
        calls = tuple((n, e) for n, e in node.calls if n in needed)
        uses = (needed & frozenset(node.input.columns)) | frozenset(node.partition)
        uses = uses.union(*(references(e) for _, e in calls))
        below = _prune(node.input, uses)
        if calls and set(below.columns) - uses:
            # Rows that differ only in columns nothing above reads (a join's keys, say) are
            # one row to the window. Ties are broken by the columns read above (order_ties),
            # so a function that depends on the order among ties (LEAD, ROW_NUMBER) gives
            # such rows their values in an order a recompute of the partition may not repeat;
            # the rule retracts W(old rows) as computed again, which must be the rows it
            # emitted before. Found by random views: a LEAD over a join kept stale rows.
            below = Project(below, tuple((c, q(c)) for c in below.columns if c in uses))
        return Window(below, node.partition, calls) if calls else below
    raise TypeError(f"No pruning rule for {type(node).__name__}")


def prune_columns(plan: Plan) -> Plan:
    """``plan`` with unused columns removed below the root (the root keeps all of its own)."""
    return Plan(_prune(plan.root, frozenset(plan.root.columns)), plan.output_names)
