"""Lowering of set operations, outer joins and subqueries: the plan's shape (no Spark).

What these plans compute is checked against recompute elsewhere (tests/operators,
tests/fixtures/steps); here the placement decisions are pinned down: which conditions
stay with an outer join, which go above it, what a subquery becomes.
"""

from __future__ import annotations

import sqlglot
from sqlglot.optimizer.qualify import qualify

from ivm_assets.sql.lower import lower
from ivm_assets.sql.plan import Distinct, Except, Intersect, Node, Project, UnionAll, walk

SCHEMA = {"t": {"id": "bigint", "k": "bigint", "v": "bigint"}, "u": {"id": "bigint", "k": "bigint", "w": "bigint"}}


def plan_of(sql: str) -> Node:
    statement = qualify(sqlglot.parse_one(sql, read="spark"), schema=SCHEMA, dialect="spark", quote_identifiers=False)
    return lower(statement, {name: tuple(cols) for name, cols in SCHEMA.items()}).root


def kinds(node: Node) -> list[str]:
    return [type(n).__name__ for n in walk(node)]


def test_union_chain_is_one_distinct_over_one_union_all():
    root = plan_of("SELECT k FROM t UNION SELECT k FROM u UNION ALL SELECT v FROM t")
    assert isinstance(root, UnionAll) and isinstance(root.inputs[0], Distinct)
    assert len(root.inputs[0].input.inputs) == 2  # the ALL branch stays outside the DISTINCT
    root = plan_of("SELECT k FROM t UNION SELECT k FROM u UNION SELECT v FROM t")
    assert isinstance(root, Distinct) and len(root.input.inputs) == 3


def test_intersect_binds_tighter_than_except():
    root = plan_of("SELECT k FROM t EXCEPT ALL SELECT k FROM u INTERSECT SELECT v FROM t")
    assert isinstance(root, Except) and root.all
    assert isinstance(root.right, Intersect) and not root.right.all
    assert kinds(root).count("Scan") == 3 and all(isinstance(n, Project) for n in (root.left, root.right.left))
