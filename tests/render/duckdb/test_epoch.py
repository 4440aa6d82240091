"""Small epochs computed in process (DuckDB over Arrow): same outputs and state as Spark's,
and the epoch goes to Spark, with the reason recorded, wherever a rule is missing."""

from __future__ import annotations

import warnings
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from ivm_assets.duckdb_names import arrow_query

from tests.conftest import assert_engine, assert_oracle, output_rows

ORDERS = pa.schema([("id", pa.int64()), ("cust", pa.int32()), ("region", pa.string()), ("amount", pa.decimal128(10, 2)), ("qty", pa.int32())])


def _orders(rows):
    return pa.Table.from_pylist([dict(zip(ORDERS.names, r)) for r in rows], ORDERS)


def _refresh(project) -> dict:
    return {r.view: r for r in project.refresh()}


def test_filter_project_aggregate_distinct_run_in_process_and_match_a_recompute(builder):
    from ivm_assets.delta.write import delete_rows, update_rows

    uri = builder.source("orders", _orders([(i, i % 3, ["north", "south", None][i % 3], Decimal(f"{i}.25"), i) for i in range(1, 40)]))
    builder.view(
        "by_region",
        "SELECT region, COUNT(*) AS n, COUNT(qty) AS n_qty, SUM(amount * (1 - 0.10)) AS net, AVG(qty) AS avg_qty, "
        "AVG(amount) AS avg_amount, 100.00 * SUM(amount) / SUM(amount * qty) AS ratio, SUM(amount) / 3 AS third "
        "FROM orders WHERE amount BETWEEN 2 AND 30 AND region <> 'east' GROUP BY region",
    )
    builder.view("total", "SELECT SUM(amount) AS total, COUNT(*) AS n, MIN(amount) AS low, COUNT(DISTINCT region) AS regions FROM orders WHERE cust IN (0, 1)")
    builder.view("extremes", "SELECT cust, MAX(region) AS last_region, MIN(qty) AS low, COUNT(DISTINCT qty) AS qtys FROM orders GROUP BY cust")
    builder.view("pairs", "SELECT DISTINCT cust, upper(region) AS region FROM orders WHERE qty > 2 AND lower(region) <> 'x'")
    builder.view("top_custs", "SELECT cust, SUM(amount) AS total FROM orders GROUP BY cust ORDER BY total DESC LIMIT 2")
    builder.view("firsts", "SELECT id, amount FROM orders WHERE qty > 1 ORDER BY amount, id LIMIT 3 OFFSET 1")
    project = builder.load()
    project.refresh()
    write_deltalake(uri, _orders([(100, 1, "north", Decimal("7.50"), None), (101, 2, "east", Decimal("3.00"), 4), (102, 0, None, Decimal("29.99"), 2)]), mode="append")
    delete_rows(uri, "id IN (3, 4, 5)")
    update_rows(uri, set_sql={"amount": "amount + 1"}, predicate="id = 7")
    for result in _refresh(project).values():
        assert (result.mode, result.engine) == ("incremental", "in process"), result
        assert result.stats.get("spark_jobs", 0) == 0
    assert_oracle(project)
    # Every group leaves: the groups' rows are retracted, the global row stays (count 0).
    delete_rows(uri, "id > 0")
    assert {r.engine for r in _refresh(project).values()} == {"in process"}
    assert output_rows(project, "by_region") == output_rows(project, "extremes") == output_rows(project, "pairs") == []
    assert output_rows(project, "top_custs") == output_rows(project, "firsts") == []
    assert output_rows(project, "total") == [(None, 0, None, 0)]
    assert_oracle(project)


OUTSIDE_THE_RULES = {
    "frame": ("SELECT id, SUM(qty) OVER (PARTITION BY cust ORDER BY id RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM orders",
              "a RANGE frame with an offset"),
    "upper": ("SELECT region, SUM(qty) AS q FROM orders WHERE upper(region) = 'NORTH' GROUP BY region", "UPPER of text outside ASCII"),
    "cast": ("SELECT region, COUNT(*) AS n FROM orders WHERE cust = '1' GROUP BY region", "Spark casts implicitly"),
}


def test_epochs_outside_the_rules_run_in_spark_with_the_reason(builder):
    uri = builder.source("orders", _orders([(1, 1, "north", Decimal("1.00"), 1), (2, 2, "south", Decimal("2.00"), 2)]))
    for name, (sql, _) in OUTSIDE_THE_RULES.items():
        builder.view(name, sql)
    project = builder.load()
    project.refresh()
    write_deltalake(uri, _orders([(3, 1, "n\u00f6rth", Decimal("5.00"), 3)]), mode="append")
    results = _refresh(project)
    for name, (_, reason) in OUTSIDE_THE_RULES.items():
        engine = results[name].engine
        assert results[name].mode == "incremental" and engine.startswith("spark: ") and reason in engine, (name, engine)
    assert_oracle(project)


EVERY_KIND_OF_JOIN = {
    "outer": "SELECT o.id, p.id AS pid FROM orders o LEFT JOIN orders p ON o.cust = p.qty",
    "full": "SELECT o.id, p.id AS pid FROM orders o FULL JOIN orders p ON o.cust = p.qty AND p.amount > o.amount",
    "semi": "SELECT id FROM orders o WHERE cust IN (SELECT qty FROM orders)",
    "anti": "SELECT id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM orders p WHERE p.qty = o.cust AND p.id <> o.id)",
    "not_in": "SELECT id FROM orders WHERE cust NOT IN (SELECT qty FROM orders WHERE region = 'south')",
    "intersect": "SELECT cust FROM orders INTERSECT SELECT qty FROM orders",
    "except_all": "SELECT cust FROM orders EXCEPT ALL SELECT qty FROM orders",
    "window": "SELECT id, RANK() OVER (PARTITION BY cust ORDER BY qty) AS r, SUM(qty) OVER (PARTITION BY region) AS s FROM orders",
    "firsts": "SELECT id, cust, n FROM (SELECT id, cust, ROW_NUMBER() OVER (PARTITION BY cust ORDER BY qty DESC, id) AS n FROM orders) WHERE n <= 2",
    "running": "SELECT id, cust, SUM(amount) OVER (PARTITION BY cust ORDER BY qty) AS total FROM orders",
}


def test_every_kind_of_join_set_operation_and_window_runs_in_process(builder):
    """Outer, semi, anti (with a residual), NOT IN, set operations, windows and top-k per
    group: their rules are written once (ivm_assets.rules) and rendered by DuckDB for small
    epochs."""
    from ivm_assets.delta.write import delete_rows

    uri = builder.source("orders", _orders([(i, i % 4 if i % 5 else None, ["north", "south"][i % 2], Decimal(f"{i}.25"), i % 3) for i in range(1, 30)]))
    for name, sql in EVERY_KIND_OF_JOIN.items():
        builder.view(name, sql)
    project = builder.load()
    project.refresh()
    write_deltalake(uri, _orders([(40, 2, "south", Decimal("9.00"), 7), (41, None, "north", Decimal("1.00"), 2)]), mode="append")
    delete_rows(uri, "id IN (3, 4, 10)")
    results = _refresh(project)
    assert {name: (r.mode, r.engine) for name, r in results.items()} == {name: ("incremental", "in process") for name in EVERY_KIND_OF_JOIN}
    assert_oracle(project)


CUSTOMERS = pa.schema([("cid", pa.int64()), ("segment", pa.string()), ("nation", pa.int32())])


def _customers(rows):
    return pa.Table.from_pylist([dict(zip(CUSTOMERS.names, r)) for r in rows], CUSTOMERS)


def test_joins_run_in_process_on_both_sides_changing(builder):
    from ivm_assets.delta.write import delete_rows, update_rows

    orders = builder.source("orders", _orders([(i, i % 7 if i % 11 else None, "north", Decimal(f"{i}.50"), i % 4) for i in range(1, 60)]))
    customers = builder.source("customers", _customers([(c, ["a", "b"][c % 2], c % 3) for c in range(0, 7)]))
    builder.view(
        "by_segment",
        "SELECT segment, COUNT(*) AS n, SUM(amount * qty) AS value FROM orders o JOIN customers c ON o.cust = c.cid "
        "WHERE (segment = 'a' AND qty > 0) OR (segment = 'b' AND amount < 40) GROUP BY segment",
    )
    builder.view("pairs", "SELECT o.id, c.segment FROM orders o JOIN customers c ON o.cust = c.cid AND c.nation <> 1")
    project = builder.load()
    project.refresh()
    write_deltalake(orders, _orders([(100, 3, "x", Decimal("1.00"), 2), (101, None, "x", Decimal("2.00"), 1)]), mode="append")
    delete_rows(orders, "id IN (5, 6, 7)")
    update_rows(customers, set_sql={"segment": "'b'"}, predicate="cid = 2")
    delete_rows(customers, "cid = 4")
    write_deltalake(customers, _customers([(4, "a", 1), (8, "a", 0)]), mode="append")
    results = _refresh(project)
    assert {(r.mode, r.engine) for r in results.values()} == {("incremental", "in process")}, results
    assert_oracle(project)


def test_duckdb_reads_timestamps_in_sparks_session_zone(builder, spark):
    """DuckDB's time zone defaults to the host's (the suite's TZ may be anything); an epoch in
    process sets it to Spark's session time zone, where TIMESTAMP values are read."""
    from ivm_assets.render.duckdb.epoch import _connection

    uri = builder.source("orders", _orders([(1, 1, "north", Decimal("1.00"), 1)]))
    builder.view("n", "SELECT region, COUNT(*) AS c FROM orders GROUP BY region")
    project = builder.load()
    project.refresh()
    write_deltalake(uri, _orders([(2, 1, "north", Decimal("2.00"), 1)]), mode="append")
    assert _refresh(project)["n"].engine == "in process"
    zone = _connection().execute("SELECT current_setting('TimeZone')").fetchall()[0][0]
    assert zone == spark.conf.get("spark.sql.session.timeZone")


def test_a_statement_reads_the_tables_it_is_given_and_nothing_else():
    """In-process statements find their Arrow tables by name (duckdb_names.arrow_query): the
    tables passed, never a variable of the code around them."""
    con = duckdb.connect()
    rows = pa.table({"x": [1, 2]})
    other = pa.table({"x": [9]})  # noqa: F841 - a caller's variable the query names but is not given
    assert arrow_query(con, "SELECT sum(x) AS s FROM rows", {"rows": rows}).to_pylist() == [{"s": 3}]
    with pytest.raises(duckdb.Error, match="other"):
        arrow_query(con, "SELECT * FROM other", {"rows": rows})


def test_a_statement_gives_its_rows_and_types_and_warns_of_nothing():
    """arrow_query runs a DB-API statement (one parse and bind, where a relation takes two),
    whose Arrow result DuckDB 2 warns about: the caller sees the rows with DuckDB's types,
    and no warning."""
    con = duckdb.connect()
    rows = pa.table({"k": pa.array([3, 1, 2] * 50_000, pa.int32()), "v": pa.array([Decimal("1.5")] * 150_000, pa.decimal128(10, 2))})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = arrow_query(con, "SELECT k, sum(v) AS s FROM rows GROUP BY k ORDER BY k", {"rows": rows})
        assert arrow_query(con, "SELECT * FROM rows", {"rows": rows}).equals(rows)
    assert out.schema == pa.schema([("k", pa.int32()), ("s", pa.decimal128(38, 2))])
    assert out.to_pylist() == [{"k": k, "s": Decimal("75000.00")} for k in (1, 2, 3)]


def test_a_statement_parsed_once_reads_the_tables_of_each_run():
    """arrow_query parses a text once per process; each run binds the tables it is given, of
    their own types, and a text of two statements still runs as text."""
    con = duckdb.connect()
    query = "SELECT sum(x) AS s FROM rows"
    assert arrow_query(con, query, {"rows": pa.table({"x": [1, 2]})}).to_pylist() == [{"s": 3}]
    wider = arrow_query(con, query, {"rows": pa.table({"x": pa.array([Decimal("0.5")], pa.decimal128(5, 1))})})
    assert wider.to_pylist() == [{"s": Decimal("0.5")}] and pa.types.is_decimal(wider.schema.field("s").type)
    assert arrow_query(duckdb.connect(), query, {"rows": pa.table({"x": [7]})}).to_pylist() == [{"s": 7}]
    assert arrow_query(con, "SELECT 1 AS a; SELECT count(*) AS n FROM rows", {"rows": pa.table({"x": [1]})}).to_pylist() == [{"n": 1}]


def test_a_statement_parsed_once_runs_on_several_connections_at_once():
    """Refreshes in several threads share the parsed statements (one connection each): each
    run reads its own thread's tables."""
    import threading

    query = "SELECT k, sum(v) AS s, count(*) AS n FROM (SELECT k, v FROM rows WHERE v > 0) GROUP BY k ORDER BY k"
    wrong: list[int] = []

    def refresh(i: int) -> None:
        con = duckdb.connect(config={"threads": 1})
        rows = pa.table({"k": [i] * 10 + [9] * 3, "v": list(range(i, i + 13))})
        expected = [{"k": i, "s": sum(range(i, i + 10)), "n": 10}, {"k": 9, "s": sum(range(i + 10, i + 13)), "n": 3}]
        for _ in range(100):
            if arrow_query(con, query, {"rows": rows}).to_pylist() != expected:
                wrong.append(i)
                return

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # arrow_query's filter is the process's, shared by the threads
        threads = [threading.Thread(target=refresh, args=(i,)) for i in range(1, 5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert wrong == []


def test_a_statement_over_inputs_without_rows_is_remembered_by_its_inputs_types():
    """LocalEpoch.sql remembers a statement's result over inputs without rows (an unchanged
    source's scan): the same text over no rows of other types, or over rows, is run."""
    from ivm_assets.epoch_context import EpochContext
    from ivm_assets.render.duckdb.epoch import LocalEpoch

    ctx = EpochContext(spark=None, epoch=None, full=False, state_root="", buckets=1, changes={}, state_versions={})
    epoch = LocalEpoch(ctx, {})
    query = "SELECT x + 1 AS y FROM t"
    ints = epoch.sql(query, t=pa.table({"x": pa.array([], pa.int32())}))
    assert ints.num_rows == 0 and epoch.sql(query, t=pa.table({"x": pa.array([], pa.int32())})) is ints
    decimals = epoch.sql(query, t=pa.table({"x": pa.array([], pa.decimal128(5, 2))}))
    assert pa.types.is_decimal(decimals.schema.field("y").type)
    assert epoch.sql(query, t=pa.table({"x": pa.array([4], pa.int32())})).to_pylist() == [{"y": 5}]
    total = "SELECT count(*) AS n FROM t"
    assert epoch.sql(total, t=pa.table({"x": pa.array([], pa.int32())})).to_pylist() == [{"n": 0}]
    assert epoch.sql(total, t=pa.table({"x": pa.array([], pa.int32())})).to_pylist() == [{"n": 0}]


def test_a_global_aggregate_built_over_no_rows_has_its_one_row(builder, engine):
    """A build of a global aggregate whose input is empty: one row (COUNT 0, the others NULL),
    in either engine; in process too, the one group reduced without keys (rules.aggregate)."""
    uri = builder.source("orders", _orders([(1, 1, "north", Decimal("1.50"), 2), (2, 2, "south", Decimal("2.50"), 3)]))
    builder.view("sums", "SELECT COUNT(*) AS n, SUM(amount) AS total, AVG(qty) AS avg_qty FROM orders WHERE qty > 10")
    builder.view("lows", "SELECT COUNT(qty) AS n, MIN(amount) AS low, COUNT(DISTINCT region) AS regions FROM orders WHERE qty > 10")
    project = builder.load()
    built = _refresh(project)
    if engine == "in process":
        assert built["sums"].engine == "in process", built["sums"]
    assert output_rows(project, "sums") == [(0, None, None)]
    assert output_rows(project, "lows") == [(0, None, 0)]
    assert_oracle(project)
    write_deltalake(uri, _orders([(3, 1, "east", Decimal("7.25"), 11)]), mode="append")
    results = _refresh(project)
    assert_engine(results.values(), engine)
    assert output_rows(project, "sums") == [(1, Decimal("7.25"), 11.0)]
    assert output_rows(project, "lows") == [(1, Decimal("7.25"), 1)]
    assert_oracle(project)


def test_a_build_in_process_keeps_duplicate_rows_of_a_join_side_as_they_are(builder, engine):
    """A build takes a join's sides as they are (not consolidated), sorted by key only when
    they are not in order: duplicate rows, keys out of order and NULL keys, then a delete
    of one of two equal rows, equal the recompute."""
    from ivm_assets.delta.write import delete_rows

    rows = [(5, 1, "north", Decimal("1.00"), 1), (5, 1, "north", Decimal("1.00"), 1), (2, 2, "south", Decimal("2.00"), 2),
            (9, None, None, Decimal("3.00"), 3), (1, 1, "north", Decimal("4.00"), 4), (7, 2, "east", Decimal("5.00"), 5)]
    uri = builder.source("orders", _orders(rows))
    builder.source("regions", pa.table({"cust": pa.array([2, 1, 1, None], pa.int32()), "label": ["b", "a", "a", "z"]}))
    builder.view("joined", "SELECT o.id, o.amount, r.label FROM orders o JOIN regions r ON o.cust = r.cust")
    builder.view("per_label", "SELECT r.label, COUNT(*) AS n, SUM(o.amount) AS total FROM orders o JOIN regions r ON o.cust = r.cust GROUP BY r.label")
    project = builder.load()
    built = _refresh(project)
    if engine == "in process":
        assert {r.engine for r in built.values()} == {"in process"}, built
    assert_oracle(project)
    delete_rows(uri, "id = 5 AND qty = 1")  # both equal rows: delta-rs deletes by predicate
    write_deltalake(uri, _orders([(5, 1, "north", Decimal("1.00"), 1)]), mode="append")
    assert_engine(_refresh(project).values(), engine)
    assert_oracle(project)
