"""Lowering of set operations, outer joins and subqueries: the plan's shape (no Spark).

What these plans compute is checked against recompute elsewhere (tests/rules,
tests/fixtures/steps); here the placement decisions are pinned down: which conditions
stay with an outer join, which go above it, what a subquery becomes.
"""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot.optimizer.qualify import qualify

from ivm_assets.sql.constructs import find_non_incremental
from ivm_assets.sql.lower import LoweringError, lower
from ivm_assets.sql.prune_columns import prune_columns
from ivm_assets.sql.top_k_per_group import top_k_per_group
from ivm_assets.sql.plan import (
    Aggregate, Distinct, Except, Filter, Intersect, Join, Node, OuterJoin, Project, SemiJoin, TopK, UnionAll, Window, walk,
)

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


def only(root: Node, cls):
    (found,) = [n for n in walk(root) if isinstance(n, cls)]
    return found


def test_left_join_keeps_where_on_the_padded_side_above_it():
    root = plan_of(
        "SELECT t.id FROM t LEFT JOIN u ON t.k = u.k AND u.w > 1 AND t.v = 2 WHERE u.w IS NULL AND t.v > 0"
    )
    join = only(root, OuterJoin)
    assert join.side == "left" and len(join.left_keys) == 1
    assert join.residual is not None and "= 2" in join.residual  # an ON condition on the preserved side stays in ON
    assert isinstance(join.right, Filter) and "> 1" in join.right.predicate  # pushed into the padded side
    assert isinstance(join.left, Filter) and "> 0" in join.left.predicate  # WHERE on the preserved side: below
    above = [n for n in walk(root) if isinstance(n, Filter) and join in n.children]
    assert len(above) == 1 and "IS NULL" in above[0].predicate  # WHERE on the padded side: above


def test_right_join_pads_the_items_before_it():
    root = plan_of("SELECT t.id FROM t RIGHT JOIN u ON t.k = u.k AND t.v > 1 WHERE t.v < 5 AND u.w = 3")
    join = only(root, OuterJoin)
    assert join.side == "right" and join.residual is None
    assert isinstance(join.left, Filter) and "> 1" in join.left.predicate
    assert isinstance(join.right, Filter) and "= 3" in join.right.predicate
    above = [n for n in walk(root) if isinstance(n, Filter) and join in n.children]
    assert len(above) == 1 and "< 5" in above[0].predicate


def test_inner_join_conditions_around_outer_joins():
    # The inner join after a LEFT JOIN takes its key from the padded item at its own point ...
    root = plan_of("SELECT t.id FROM t LEFT JOIN u ON t.k = u.k JOIN t AS t2 ON t2.k = u.k")
    inner = only(root, Join)
    assert isinstance(inner.left, OuterJoin) and len(inner.left_keys) == 1
    # ... and an inner join below a RIGHT JOIN keeps its condition below it.
    root = plan_of("SELECT t.id FROM t JOIN u ON t.k = u.k RIGHT JOIN t AS t2 ON t2.v = u.w")
    outer = only(root, OuterJoin)
    assert isinstance(outer.left, Join) and len(outer.left.left_keys) == 1 and len(outer.left_keys) == 1
    assert not any(isinstance(n, Filter) for n in walk(root))


def test_full_join_keeps_every_where_condition_above():
    root = plan_of("SELECT t.id FROM t FULL JOIN u ON t.k = u.k AND t.v < u.w WHERE t.v > 0 AND u.w > 0")
    join = only(root, OuterJoin)
    assert join.side == "full" and join.residual is not None
    assert not isinstance(join.left, Filter) and not isinstance(join.right, Filter)
    assert sum(isinstance(n, Filter) for n in walk(root)) == 1


def test_correlated_exists_is_a_semi_join_on_the_correlation():
    root = plan_of("SELECT t.id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w > 0) AND t.v > 1")
    semi = only(root, SemiJoin)
    assert semi.kind == "semi" and len(semi.left_keys) == 1 and isinstance(semi.right, Distinct)
    assert isinstance(semi.left, Filter) and "> 1" in semi.left.predicate  # WHERE first, then the test
    assert any(isinstance(n, Filter) and "> 0" in n.predicate for n in walk(semi.right))


def test_not_in_compares_within_a_group():
    semi = only(plan_of("SELECT t.id FROM t WHERE t.v NOT IN (SELECT u.w FROM u)"), SemiJoin)
    assert semi.kind == "not_in" and len(semi.left_keys) == 2  # a constant group, then the value
    assert isinstance(semi.right.input, Project) and semi.right.input.exprs[0][1] == "1"
    semi = only(plan_of("SELECT t.id FROM t WHERE t.v NOT IN (SELECT u.w FROM u WHERE u.k = t.k)"), SemiJoin)
    assert semi.kind == "not_in" and len(semi.left_keys) == 2 and semi.left_keys[-1].endswith("_v")


def test_anti_join_forms():
    for sql in (
        "SELECT t.id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE t.k = u.k)",
        "SELECT t.id FROM t LEFT ANTI JOIN u ON t.k = u.k",
    ):
        semi = only(plan_of(sql), SemiJoin)
        assert semi.kind == "anti" and len(semi.left_keys) == 1


def test_subqueries_without_a_rule():
    for sql in (
        "SELECT t.id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k < t.k)",  # correlated, not an equality
        "SELECT t.id FROM t WHERE EXISTS (SELECT COUNT(*) FROM u WHERE u.k = t.k)",  # correlated aggregate
        "SELECT t.id FROM t LEFT SEMI JOIN u ON t.k = u.k AND t.v < u.w",  # condition across both sides
    ):
        with pytest.raises(LoweringError):
            plan_of(sql)


def test_constructs_report_subqueries_outside_where_conditions():
    def found(sql: str) -> list[str]:
        return [f.describe() for f in find_non_incremental(sqlglot.parse_one(sql, read="spark"), sql)]

    assert found("SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u) AND (k IN (SELECT k FROM u))") == []
    assert found("SELECT id FROM t WHERE v = 1 OR EXISTS (SELECT 1 FROM u)") == [
        "EXISTS (subquery) other than a condition of WHERE at line 1, column 33"
    ]
    assert found("SELECT k IN (SELECT k FROM u) AS b FROM t") == ["IN (subquery) other than a condition of WHERE at line 1, column 10"]


# --- ORDER BY … LIMIT, window functions ------------------------------------------------------
def test_order_by_limit_is_a_top_k_over_a_total_order():
    root = plan_of("SELECT t.id, t.v FROM t ORDER BY t.v DESC LIMIT 3")
    assert isinstance(root, TopK) and (root.limit, root.offset) == (3, 0)
    v, id_ = root.input.columns[1], root.input.columns[0]
    # The query's key (DESC: NULLs last), then every output column not yet in it (ties).
    assert root.order == ((v, True, False), (id_, False, True))


def test_top_k_sorted_by_a_column_it_does_not_output_drops_it_above():
    root = plan_of("SELECT t.id FROM t ORDER BY t.v NULLS LAST, t.id DESC LIMIT 2 OFFSET 1")
    assert isinstance(root, Project) and root.columns == root.input.columns[:1]
    top = root.input
    assert isinstance(top, TopK) and top.offset == 1
    assert [k[1:] for k in top.order] == [(False, False), (True, False)]
    assert top.order[0][0] == top.input.columns[1]  # the hidden key, computed by the projection below


def test_top_k_over_an_aggregate_and_a_union():
    root = plan_of("SELECT t.k, SUM(t.v) AS s FROM t GROUP BY t.k ORDER BY s DESC LIMIT 5")
    assert isinstance(root, TopK) and root.order[0] == (root.columns[1], True, False)
    assert kinds(root)[:3] == ["TopK", "Project", "Aggregate"]
    root = plan_of("SELECT t.k FROM t UNION SELECT u.k FROM u ORDER BY 1 LIMIT 2")
    assert isinstance(root, TopK) and isinstance(root.input, Distinct)
    with pytest.raises(LoweringError):
        plan_of("SELECT DISTINCT t.k FROM t ORDER BY t.v LIMIT 2")


def test_windows_one_node_per_partition_by_with_ties_ordered_where_they_matter():
    root = plan_of(
        "SELECT t.id, ROW_NUMBER() OVER (PARTITION BY t.k ORDER BY t.v) AS rn, "
        "RANK() OVER (PARTITION BY t.k ORDER BY t.v) AS r, SUM(t.v) OVER () AS s FROM t"
    )
    windows = [n for n in walk(root) if isinstance(n, Window)]
    assert sorted(len(w.partition) for w in windows) == [0, 1]
    (by_k,) = [w for w in windows if w.partition]
    (rn, rank) = (sql for _, sql in by_k.calls)
    assert rn.startswith("ROW_NUMBER()") and rn.count("`s0_") == 4  # k, then v, id, k as tie-breakers
    assert rank.startswith("RANK()") and rank.endswith("ORDER BY `s0_v`)")


def test_per_group_top_k_filters_above_the_window():
    for sql in (
        "SELECT x.k, x.id FROM (SELECT t.k, t.id, ROW_NUMBER() OVER (PARTITION BY t.k ORDER BY t.v DESC) AS r FROM t) AS x "
        "WHERE x.r <= 2",
        "SELECT t.k, t.id FROM t QUALIFY RANK() OVER (PARTITION BY t.k ORDER BY t.v DESC) <= 2",
    ):
        root = plan_of(sql)
        window = only(root, Window)
        above = [n for n in walk(root) if isinstance(n, Filter) and any(m is window for m in walk(n))]
        assert len(above) == 1 and "<= 2" in above[0].predicate


def test_bounded_row_number_becomes_a_top_k_per_partition():
    def rewritten(sql: str) -> Node:
        statement = qualify(sqlglot.parse_one(sql, read="spark"), schema=SCHEMA, dialect="spark", quote_identifiers=False)
        plan = lower(statement, {name: tuple(cols) for name, cols in SCHEMA.items()})
        return top_k_per_group(prune_columns(plan)).root

    root = rewritten(
        "SELECT x.k, x.id, x.r FROM (SELECT t.k, t.id, ROW_NUMBER() OVER (PARTITION BY t.k ORDER BY t.v DESC) AS r FROM t) AS x "
        "WHERE x.r < 3 AND x.id > 0"
    )
    top = only(root, TopK)
    assert (top.limit, top.offset, len(top.partition)) == (2, 0, 1) and top.position is not None
    assert top.order[0][1:] == (True, False) and {c for c, _, _ in top.order} == set(top.input.columns)
    assert not any(isinstance(n, Window) for n in walk(root))
    # RANK keeps its window (ties share a rank), as does a ROW_NUMBER beside another function.
    for sql in (
        "SELECT t.k FROM t QUALIFY RANK() OVER (PARTITION BY t.k ORDER BY t.v) <= 2",
        "SELECT t.k, SUM(t.v) OVER (PARTITION BY t.k) AS s FROM t QUALIFY ROW_NUMBER() OVER (PARTITION BY t.k ORDER BY t.v) = 1",
    ):
        assert not any(isinstance(n, TopK) for n in walk(rewritten(sql)))


def test_constructs_report_nondeterministic_limits_and_other_windows():
    def found(sql: str) -> list[str]:
        return [f.construct for f in find_non_incremental(sqlglot.parse_one(sql, read="spark"), sql)]

    assert found("SELECT id FROM t ORDER BY v LIMIT 3 OFFSET 2") == []
    assert found("SELECT id, LAG(v, 2) OVER (PARTITION BY k ORDER BY id) AS p FROM t QUALIFY p > 0") == []
    assert found("SELECT id FROM t LIMIT 3") == ["LIMIT without ORDER BY (which rows it keeps is not defined)"]
    assert found("SELECT id FROM t ORDER BY v OFFSET 3") == ["OFFSET without ORDER BY … LIMIT or by other than a constant count"]
    assert found("SELECT NTILE(3) OVER (ORDER BY v) AS n FROM t") == ["window function NTILE"]
    assert found("SELECT RANK() OVER w AS r FROM t WINDOW w AS (ORDER BY v)") == []
    assert found("SELECT k, RANK() OVER (ORDER BY SUM(v)) AS r FROM t GROUP BY k") == []
    # Built-ins sqlglot parses into nodes of their own, not only anonymous calls.
    assert found("SELECT SHUFFLE(ARRAY(v)) AS s, UNIFORM(1, 2) AS u FROM t") == [
        "non-deterministic function SHUFFLE", "non-deterministic function UNIFORM",
    ]


def test_windows_over_group_by_run_over_a_grouping_subquery():
    root = plan_of(
        "SELECT t.k, SUM(t.v) AS s, SUM(t.v) / SUM(SUM(t.v)) OVER () AS share, ROW_NUMBER() OVER (ORDER BY COUNT(*)) AS rn "
        "FROM t GROUP BY t.k HAVING COUNT(*) > 1 ORDER BY share DESC LIMIT 3"
    )
    assert isinstance(root, TopK)
    windows = [n for n in walk(root) if isinstance(n, Window)]
    (aggregate,) = [n for n in walk(root) if isinstance(n, Aggregate)]
    assert len(windows) == 1 and all(aggregate in list(walk(w)) for w in windows)  # both functions: no PARTITION BY
    assert sorted(c.func for c in aggregate.aggs) == ["count_star", "sum"]  # each aggregate once, HAVING's COUNT(*) shared
    (ordered,) = [sql for _, sql in windows[0].calls if "row_number" in sql.lower()]
    assert ordered.count("ORDER BY") == 1 and ordered.count(",") == 1  # ties broken by the group key
    with pytest.raises(LoweringError, match="neither grouped nor aggregated"):
        plan_of("SELECT t.k, RANK() OVER (ORDER BY t.v) AS r FROM t GROUP BY t.k")


def test_uncorrelated_scalar_subquery_joins_a_global_aggregate_without_keys():
    root = plan_of("SELECT t.id FROM t WHERE t.v > (SELECT AVG(u.w) FROM u)")
    join = only(root, Join)
    assert join.left_keys == () and only(join.right, Aggregate).keys == ()
    assert any(isinstance(n, Filter) and join in walk(n) for n in walk(root))
    # HAVING: the groups join the value.
    root = plan_of("SELECT t.k, SUM(t.v) AS s FROM t GROUP BY t.k HAVING SUM(t.v) > (SELECT SUM(u.w) * 0.1 FROM u)")
    join = only(root, Join)
    assert isinstance(join.left, Aggregate) and join.left.keys and join.left_keys == ()


def test_correlated_scalar_subquery_is_a_grouped_aggregate_joined_on_the_correlation():
    # Compared in WHERE with a value NULL over no rows: a missing group fails, an inner join suffices.
    join = only(plan_of("SELECT t.id FROM t WHERE t.v < (SELECT 0.5 * SUM(u.w) FROM u WHERE u.k = t.k)"), Join)
    assert len(join.left_keys) == 1 and only(join.right, Aggregate).keys
    # COUNT over a missing group is 0 (the "COUNT bug"): an outer join, then COALESCE.
    root = plan_of("SELECT t.id FROM t WHERE (SELECT COUNT(*) FROM u WHERE u.k = t.k) = 0")
    assert only(root, OuterJoin).side == "left"
    assert any(isinstance(n, Project) and any("COALESCE" in e for _, e in n.exprs) for n in walk(root))
    # In SELECT every row stays, its group found or not.
    assert only(plan_of("SELECT t.id, (SELECT MAX(u.w) FROM u WHERE u.k = t.k) AS m FROM t"), OuterJoin).side == "left"


def test_scalar_subqueries_without_a_rule():
    for sql, where in (
        ("SELECT t.id FROM t WHERE t.v > (SELECT AVG(u.w) FROM u WHERE u.k < t.k)", "u.k < t.k"),
        ("SELECT t.k, (SELECT MAX(u.w) FROM u WHERE u.k = t.k) AS m FROM t GROUP BY t.k", None),
    ):
        with pytest.raises(LoweringError) as info:
            plan_of(sql)
        assert info.value.node is not None and (where is None or info.value.node.sql() == where)

    def found(sql: str) -> list[str]:
        return [f.describe() for f in find_non_incremental(sqlglot.parse_one(sql, read="spark"), sql)]

    assert found("SELECT id, (SELECT w FROM u WHERE u.id = 1) AS w FROM t") == [
        "scalar subquery that is not one aggregate without GROUP BY or HAVING (it could return no row or several) "
        "at line 1, column 12"
    ]
    assert found("SELECT id FROM t JOIN u ON t.k = (SELECT MAX(k) FROM u)") == [
        "scalar subquery outside WHERE, SELECT and HAVING at line 1, column 34"
    ]
    assert found("SELECT id, (SELECT COUNT(*) FROM u WHERE u.k = t.k) AS n FROM t") == []


def test_exists_with_an_inequality_is_a_semi_join_with_a_residual():
    semi = only(plan_of("SELECT t.id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w <> t.v)"), SemiJoin)
    assert semi.kind == "anti" and len(semi.left_keys) == 1 and semi.residual and "<>" in semi.residual
    assert semi.right.columns[: len(semi.right_keys)] == semi.right_keys and len(semi.right.columns) == 2
    for sql in (
        "SELECT t.id FROM t WHERE t.v NOT IN (SELECT u.w FROM u WHERE u.k <> t.k)",  # NOT IN: equalities only
        "SELECT t.id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k <> t.k)",  # no equality beside it
        # a correlated condition holding a subquery (correlated itself) is neither key nor residual
        "SELECT t.id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w > (SELECT AVG(x.w) FROM u AS x WHERE x.k = t.v))",
    ):
        with pytest.raises(LoweringError):
            plan_of(sql)


def test_in_over_several_columns_is_a_semi_join_on_all_of_them():
    semi = only(plan_of("SELECT t.id FROM t WHERE (t.k, t.v) IN (SELECT u.k, u.w FROM u)"), SemiJoin)
    assert semi.kind == "semi" and len(semi.left_keys) == 2 and semi.residual is None
    sql = "SELECT id FROM t WHERE (k, v) NOT IN (SELECT k, w FROM u)"
    assert [f.describe() for f in find_non_incremental(sqlglot.parse_one(sql, read="spark"), sql)] == [
        "NOT IN (subquery) with several columns at line 1, column 31"
    ]


def test_inner_joins_are_ordered_to_avoid_cross_products():
    # FROM order would join t and t2 first with no equality between them (TPC-H Q9's shape).
    root = plan_of("SELECT t.v, t2.v AS v2 FROM t, t AS t2, u WHERE t.k = u.k AND u.id = t2.id AND t2.v > 1")
    joins = [n for n in walk(root) if isinstance(n, Join)]
    assert len(joins) == 2 and all(j.left_keys for j in joins)
    # A cross product the query asks for stays one, after the joins that have keys.
    root = plan_of("SELECT t.v FROM t, u, t AS t2 WHERE t.k = t2.k")
    first, second = sorted((n for n in walk(root) if isinstance(n, Join)), key=lambda j: len(list(walk(j))))
    assert first.left_keys and not second.left_keys


def test_an_or_across_tables_filters_each_table_it_constrains_in_every_branch():
    # TPC-H Q19's shape: each branch constrains both tables; t.k = 1 is common to all.
    root = plan_of(
        "SELECT t.id FROM t JOIN u ON t.id = u.id"
        " WHERE (t.k = 1 AND t.v < 5 AND u.w = 2) OR (t.k = 1 AND t.v > 9 AND u.w = 3)"
    )
    join = only(root, Join)
    assert isinstance(join.left, Filter) and join.left.predicate == "(`s0_k` = 1) AND ((`s0_v` < 5) OR (`s0_v` > 9))"
    assert isinstance(join.right, Filter) and join.right.predicate == "(`s1_w` = 2) OR (`s1_w` = 3)"
    above = [n for n in walk(root) if isinstance(n, Filter) and join in n.children]
    assert above or join.residual is not None  # the OR itself still applies to the joined rows
    # A branch that leaves u unconstrained implies nothing about u; rand() implies nothing at all.
    join = only(plan_of("SELECT t.id FROM t JOIN u ON t.id = u.id WHERE (t.k = 1 AND u.w = 2) OR t.v = 3"), Join)
    assert isinstance(join.left, Filter) and not isinstance(join.right, Filter)
    join = only(plan_of("SELECT t.id FROM t JOIN u ON t.id = u.id WHERE (t.k = 1 AND u.w = rand()) OR t.v = 3"), Join)
    assert not isinstance(join.left, Filter)
    # Below a LEFT JOIN only on its preserved side; the padded side's part stays above it.
    root = plan_of("SELECT t.id FROM t LEFT JOIN u ON t.id = u.id WHERE (t.k = 1 AND u.w = 2) OR (t.k = 3 AND u.w IS NULL)")
    join = only(root, OuterJoin)
    assert isinstance(join.left, Filter) and not isinstance(join.right, Filter)


def test_a_window_sees_only_the_columns_read_above_it():
    """A join's own columns (``u.id``, ``u.k``) are projected away below a window: rows that
    differ only in them are one row to it, so a LEAD gives them the same values whenever their
    partition is recomputed (found by random views: a second window kept stale rows)."""
    sql = ("SELECT t.id, LEAD(t.v, 1) OVER (PARTITION BY t.k ORDER BY t.v) AS after, DENSE_RANK() OVER (ORDER BY t.v) AS dr "
           "FROM t JOIN u ON t.k = u.k")
    statement = qualify(sqlglot.parse_one(sql, read="spark"), schema=SCHEMA, dialect="spark", quote_identifiers=False)
    root = prune_columns(lower(statement, {name: tuple(cols) for name, cols in SCHEMA.items()})).root
    windows = [n for n in walk(root) if isinstance(n, Window)]
    lowest = next(w for w in windows if not any(isinstance(n, Window) for n in walk(w.input)))
    assert isinstance(lowest.input, Project) and len(lowest.input.columns) == 3  # t.id, t.k, t.v
