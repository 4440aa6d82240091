"""Bad inputs give clear errors and leave every view's output as it was.

Each error must name the file, the view and the construct (with line and column where the
SQL is at fault), say what was expected and what to do; nothing may be half-written.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from tests.conftest import assert_engine, assert_oracle, output_rows

from ivm_assets import IvmProject
from ivm_assets.delta import parquet_cache
from ivm_assets.delta.handles import is_delta_table, latest_version
from ivm_assets.delta.write import write
from ivm_assets.errors import (
    ConfigError,
    NotIncrementalError,
    RefreshError,
    SourceError,
    SqlError,
    ViewCycleError,
)

TOTALS = "SELECT cust, SUM(amount) AS total\nFROM orders\nGROUP BY cust"


def _shop(builder, *, cdf: bool = True) -> None:
    builder.source("orders", {"id": [1, 2, 3], "cust": [1, 1, 2], "amount": [10, 20, 30]}, cdf=cdf)
    builder.source("customers", {"id": [1, 2], "name": ["ann", "bob"]})


def _new_order(builder, id_: int = 4, cust: int = 2, amount: int = 40) -> None:
    write(builder.uri("orders"), pa.table({"id": [id_], "cust": [cust], "amount": [amount]}), mode="append")


def _sql_error(builder, sql: str, exc_type: type[SqlError] = SqlError, **settings) -> SqlError:
    """Load and refresh a project whose only view ``v`` is ``sql``; return the error raised."""
    _shop(builder)
    builder.view("v", sql, **settings)
    with pytest.raises(exc_type) as info:
        builder.load().refresh()
    err = info.value
    assert err.view == "v" and err.file.endswith("v.sql")
    assert "v.sql" in str(err) and "view 'v'" in str(err)
    return err


def _output_state(project, view: str) -> tuple[int, list[tuple]]:
    return latest_version(project.location(view).output), output_rows(project, view)


# --- malformed and unresolvable SQL ------------------------------------------------------------
def test_malformed_sql_points_at_line_and_column(builder):
    err = _sql_error(builder, "SELECT id\nFROM orders\nWHERE amount > AND cust = 1")
    assert "malformed SQL near `AND`" in str(err)
    assert (err.line, err.col) == (3, 16)  # at the AND where an operand was expected
    assert "v.sql:3:16" in str(err)


def test_more_than_one_statement_is_rejected(builder):
    err = _sql_error(builder, "SELECT id FROM orders;\nSELECT id FROM customers")
    assert "expected exactly one SELECT query" in str(err) and "one query per .sql file" in str(err)


def test_unknown_table_lists_known_names(builder):
    err = _sql_error(builder, "SELECT id\nFROM orderz")
    assert (err.line, err.col) == (2, 6)
    assert "v.sql:2:6" in str(err) and "unknown table `orderz`" in str(err)
    assert "customers, orders" in str(err) and "sources:" in str(err)


def test_unknown_column_is_located_by_the_analyzer(builder):
    err = _sql_error(builder, "SELECT id,\n  amout\nFROM orders")
    assert "amout" in str(err) and "`amount`" in str(err)  # Spark suggests the near miss
    assert (err.line, err.col) == (2, 3) and "v.sql:2:3" in str(err)
    assert err.hint and "column name" in err.hint


def test_ambiguous_column_asks_for_a_qualifier(builder):
    err = _sql_error(builder, "SELECT id, name\nFROM orders o JOIN customers c ON o.cust = c.id")
    assert "AMBIGUOUS_REFERENCE" in str(err) and "`id`" in str(err)
    assert (err.line, err.col) == (1, 8)
    assert "qualify the column" in str(err)


# --- constructs without an incremental rule ----------------------------------------------------
CONSTRUCTS = [
    pytest.param(
        "SELECT o.id,\n  (SELECT amount FROM orders WHERE id = 1) AS top\nFROM orders o",
        "scalar subquery", 2, 3, id="scalar-subquery",
    ),
    pytest.param("SELECT id,\n  ntile(2) OVER (ORDER BY amount) AS q\nFROM orders", "window function NTILE", 2, 12, id="window"),
    pytest.param("SELECT id, amount\nFROM orders\nLIMIT 2", "LIMIT without ORDER BY", 3, 1, id="limit"),
    pytest.param("SELECT id\nFROM orders\nWHERE rand() >= 0", "non-deterministic function RAND", 3, 7, id="rand"),
]


@pytest.mark.parametrize(("sql", "construct", "line", "col"), CONSTRUCTS)
def test_construct_under_refresh_incremental_is_an_error(builder, sql, construct, line, col):
    err = _sql_error(builder, sql, NotIncrementalError, refresh="incremental")
    assert construct in str(err) and (err.line, err.col) == (line, col)
    assert f"v.sql:{line}:{col}" in str(err)
    assert "refresh: incremental" in str(err) and "refresh: auto" in err.hint
    assert not is_delta_table(builder.load().location("v").output)  # nothing written


@pytest.mark.parametrize(("sql", "construct", "line", "col"), CONSTRUCTS)
def test_construct_under_refresh_auto_is_recomputed(builder, sql, construct, line, col):
    _shop(builder)
    builder.view("v", sql)
    project = builder.load()
    assert project.refresh()[0].reason == "first build"
    _new_order(builder)
    (result,) = project.refresh()
    assert result.mode == "full"
    assert construct in result.reason and f"line {line}, column {col}" in result.reason
    assert_oracle(project)


# --- sources -------------------------------------------------------------------------------------
@pytest.mark.parametrize("make_folder", [True, False], ids=["plain-folder", "missing"])
def test_source_that_is_not_a_delta_table(builder, make_folder):
    _shop(builder)
    builder.sources["events"] = "data/events"
    if make_folder:
        (builder.root / "data" / "events").mkdir(parents=True)
    builder.view("v", "SELECT * FROM events")
    with pytest.raises(SourceError) as info:
        builder.load().refresh()
    text = str(info.value)
    assert "source `events`" in text and "ivm.yaml" in text and "expected a Delta table" in text
    assert ("without a _delta_log" if make_folder else "found nothing") in text
    assert "view 'v'" in text and "v.sql" in text  # the view that reads it


def test_source_without_change_feed_under_auto_falls_back_to_full(builder):
    _shop(builder, cdf=False)
    builder.view("v", TOTALS)
    project = builder.load()
    assert project.refresh()[0].mode == "full"
    _new_order(builder)
    (result,) = project.refresh()
    assert result.mode == "full" and "change data feed" in result.reason and "orders" in result.reason
    assert_oracle(project)


def test_source_without_change_feed_under_incremental_is_refused_up_front(builder):
    """Refused before the first build (as Databricks' strict mode refuses such a view at
    creation), not at the first incremental refresh: nothing is written."""
    _shop(builder, cdf=False)
    builder.view("v", TOTALS, refresh="incremental")
    project = builder.load()
    with pytest.raises(NotIncrementalError) as info:
        project.refresh()
    text = str(info.value)
    assert "v.sql" in text and "view 'v'" in text and "source `orders`" in text and "no change data feed" in text
    assert "delta.enableChangeDataFeed" in text and "refresh: auto" in text
    assert not is_delta_table(project.location("v").output)


def test_source_whose_change_feed_goes_off_under_incremental_fails(builder):
    _shop(builder)
    builder.view("v", TOTALS, refresh="incremental")
    project = builder.load()
    assert project.refresh()[0].mode == "full"
    before = _output_state(project, "v")
    _new_order(builder)
    from deltalake import DeltaTable

    DeltaTable(builder.uri("orders")).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})
    with pytest.raises(NotIncrementalError) as info:
        project.refresh()
    assert "source `orders`" in str(info.value) and "no change data feed" in str(info.value)
    assert _output_state(project, "v") == before


# --- ivm.yaml ------------------------------------------------------------------------------------
def _config_error(builder, yaml_text: str) -> str:
    _shop(builder)
    builder.view("v", TOTALS)
    (builder.root / "ivm.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as info:
        IvmProject.load(builder.root)
    return str(info.value)


BASE_YAML = "sources:\n  orders: sources/orders\n  customers: sources/customers\n"


def test_unknown_top_level_key(builder):
    text = _config_error(builder, BASE_YAML + "colour: blue\n")
    assert "ivm.yaml:4" in text and "unknown key `colour`" in text
    assert "warehouse, sources, views, state_buckets" in text


def test_unknown_view_setting(builder):
    text = _config_error(builder, BASE_YAML + "views:\n  v:\n    refresh: auto\n    refesh_every: 5m\n")
    assert "ivm.yaml:7" in text and "unknown key `views.v.refesh_every`" in text
    assert "refresh, description" in text


@pytest.mark.parametrize(
    ("extra", "key", "line", "found"),
    [
        ("views:\n  v:\n    refresh: sometimes\n", "views.v.refresh", 6, "'sometimes'"),
        ("state_buckets: lots\n", "state_buckets", 4, "'lots'"),
    ],
    ids=["refresh-sometimes", "state-buckets-lots"],
)
def test_wrong_type_in_config(builder, extra, key, line, found):
    text = _config_error(builder, BASE_YAML + extra)
    assert f"ivm.yaml:{line}: `{key}`" in text and f"found {found}" in text
    if key.endswith("refresh"):
        assert "'auto', 'incremental' or 'full'" in text
    else:
        assert "integer" in text


def test_missing_project_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        IvmProject.load(tmp_path)
    assert "ivm.yaml" in str(info.value) and "sources:" in str(info.value)


def test_settings_for_a_view_without_sql(builder):
    text = _config_error(builder, BASE_YAML + "views:\n  revenue:\n    refresh: full\n")
    assert "`revenue`" in text and "views/revenue.sql" in text and "views found: v" in text


def test_sources_differing_only_in_case(builder):
    """Spark SQL resolves `customers` and `Customers` to one table: refused, naming both."""
    text = _config_error(builder, BASE_YAML + "  Orders: sources/customers\n")
    assert "ivm.yaml:4" in text and "`orders` and `Orders` differ only in case" in text and "rename one" in text


def test_source_and_view_differing_only_in_case(builder):
    _shop(builder)
    builder.view("Orders", TOTALS)
    with pytest.raises(ConfigError) as info:
        builder.load()
    text = str(info.value)
    assert "`orders` and `Orders` differ only in case" in text and "source and view (views/Orders.sql)" in text


def test_views_differing_only_in_case(builder):
    _shop(builder)
    builder.view("totals", TOTALS)
    builder.view("Totals", TOTALS)
    with pytest.raises(ConfigError) as info:
        builder.load()
    assert "`Totals` and `totals` differ only in case" in str(info.value)


@pytest.mark.parametrize("name", ["bad name", "1st", "total-sales", "été"])
def test_view_file_name_that_is_not_an_identifier(builder, name):
    _shop(builder)
    builder.view(name, TOTALS)
    with pytest.raises(ConfigError) as info:
        builder.load()
    text = str(info.value)
    assert f"{name}.sql" in text and "not a plain SQL identifier" in text and "rename the file" in text


def test_python_view_name_is_checked_like_a_file(builder):
    _shop(builder)
    project = builder.load()
    with pytest.raises(ConfigError, match="not a plain SQL identifier"):
        project.with_view("bad name", TOTALS)
    with pytest.raises(ConfigError, match="case-insensitively"):
        project.with_view("ORDERS", TOTALS)


# --- the project as a whole ----------------------------------------------------------------------
def test_view_cycle_is_named(builder):
    _shop(builder)
    builder.view("a", "SELECT * FROM b")
    builder.view("b", "SELECT * FROM a")
    with pytest.raises(ViewCycleError) as info:
        builder.load()
    text = str(info.value)
    assert "a -> b -> a" in text or "b -> a -> b" in text
    assert "a.sql" in text and "b.sql" in text and "break the cycle" in text


def test_unknown_view_name(builder):
    _shop(builder)
    builder.view("v", TOTALS)
    with pytest.raises(ConfigError) as info:
        builder.load().refresh(["nope"])
    assert "nope" in str(info.value) and "the project has: v" in str(info.value)


# --- nothing half-written ------------------------------------------------------------------------
def test_broken_view_leaves_its_output_untouched(builder):
    _shop(builder)
    builder.view("v", TOTALS)
    project = builder.load()
    project.refresh()
    before = _output_state(project, "v")
    _new_order(builder)
    builder.view("v", "SELECT cust, SUM(amout) AS total\nFROM orders\nGROUP BY cust")
    project = builder.load()
    with pytest.raises(SqlError) as info:
        project.refresh()
    assert "v.sql:1:18" in str(info.value) and "amout" in str(info.value)
    assert _output_state(project, "v") == before
    (status,) = project.status()
    assert status.epoch == 1 and not status.interrupted and "orders" in status.pending


def test_one_broken_view_refreshes_no_view(builder):
    _shop(builder)
    builder.view("good", TOTALS)
    builder.view("later", "SELECT * FROM good")
    project = builder.load()
    project.refresh()
    before = {v: _output_state(project, v) for v in ("good", "later")}
    _new_order(builder)
    builder.view("later", "SELECT *\nFROM good\nWHERE totl > 0")
    project = builder.load()
    with pytest.raises(SqlError, match="later.sql:3:7"):
        project.refresh()
    assert {v: _output_state(project, v) for v in ("good", "later")} == before


# --- lost files ------------------------------------------------------------------------------------
JOINED = "SELECT o.id, c.name FROM orders o JOIN customers c ON o.cust = c.id"


def _lose_files(pattern: str, *, forget: bool = True) -> None:
    """Delete the data files matching ``pattern`` (a user's cleanup, a bucket lifecycle rule).

    With ``forget``, this process also forgets the state rows it holds decoded, so its next
    refresh reads them from storage, as a process that did not write them does (one that
    holds them serves the rows the log names until it reads from storage again: see
    test_a_process_holding_a_lost_state_file_answers_right_until_it_reads_it)."""
    import glob
    import os

    files = glob.glob(pattern, recursive=True)
    assert files
    for f in files:
        os.remove(f)
    if forget:
        parquet_cache.clear()


def _lost_files_pattern(project, lost: str) -> str:
    where = project.location("v")
    return f"{where.state_root}/join_*/**/*.parquet" if lost == "state" else f"{where.output}/**/*.parquet"


@pytest.mark.parametrize("lost", ["state", "output"])
def test_lost_files_under_auto_rebuild_the_view(builder, engine, lost):
    _shop(builder)
    builder.view("v", JOINED)
    project = builder.load()
    project.refresh()
    _lose_files(_lost_files_pattern(project, lost))
    _new_order(builder, 4, 1)
    (result,) = project.refresh()
    what = "state table join_" if lost == "state" else "the output table"
    assert result.mode == "full" and what in result.reason and "lost a data file" in result.reason
    assert_oracle(project)
    _new_order(builder, 5, 2)
    assert_engine(project.refresh(), engine)  # incremental again
    assert_oracle(project)


def test_a_lost_output_file_is_noticed_by_a_change_that_replaces_every_row(builder, engine):
    """A change that removes every stored row is written without a MERGE (engine.output);
    it still reads the rows it removes, so a lost output file rebuilds the view, as a
    MERGE's read of the output does."""
    _shop(builder)
    builder.view("v", "SELECT COUNT(*) AS n, SUM(amount) AS total FROM orders")
    project = builder.load()
    project.refresh()
    _lose_files(f"{project.location('v').output}/**/*.parquet")
    _new_order(builder, 4, 1)
    (result,) = project.refresh()
    assert result.mode == "full" and "the output table" in result.reason and "lost a data file" in result.reason
    assert_oracle(project)


def test_a_process_holding_a_lost_state_file_answers_right_until_it_reads_it(builder, engine):
    """The process that built the view holds its state files decoded (delta.parquet_cache):
    a file deleted behind Delta's back is not read again, and the rows the log names are
    served (the answer stays right); the loss is noticed at its next read from storage,
    here once the process forgets what it holds, as after a restart."""
    _shop(builder)
    builder.view("v", JOINED)
    project = builder.load()
    project.refresh()
    _lose_files(_lost_files_pattern(project, "state"), forget=False)
    _new_order(builder, 4, 1)
    (result,) = project.refresh()
    assert result.mode == "incremental"
    assert_oracle(project)
    parquet_cache.clear()
    _new_order(builder, 5, 2)
    (result,) = project.refresh()
    assert result.mode == "full" and "state table join_" in result.reason and "lost a data file" in result.reason
    assert_oracle(project)


def test_lost_state_file_under_incremental_is_a_clear_error(builder, engine):
    _shop(builder)
    builder.view("v", JOINED, refresh="incremental")
    project = builder.load()
    project.refresh()
    before = _output_state(project, "v")
    _lose_files(_lost_files_pattern(project, "state"))
    _new_order(builder, 4, 1)
    with pytest.raises(RefreshError) as info:
        project.refresh()
    text = str(info.value)
    assert "view 'v'" in text and "state table join_" in text and "missing a data file" in text
    assert "ivm refresh --full v" in text and "Traceback" not in text
    assert _output_state(project, "v") == before
    (result,) = project.refresh(full=True)  # the advice works
    assert result.mode == "full"
    assert_oracle(project)
