"""Small builds: a full epoch over few source rows (``IVM_SMALL_BUILD_ROWS``) runs in process
as an epoch from empty state where every rule translates, else in one Spark partition, and
writes its state and output from the driver; a larger one (or with the setting at 0) has the
executors write them. All give the recompute's answer; that they leave the same state is
checked by tests/test_state_parity.py."""

from __future__ import annotations

from contextlib import contextmanager

import pyarrow as pa
import pytest

from ivm_assets.delta.write import delete_rows, write
from ivm_assets.render.duckdb import epoch as local_epoch
from ivm_assets.errors import ChangeTooLarge, IvmError
from ivm_assets.settings import PROCESS_BUILD_ENV, SMALL_BUILD_ROWS_ENV, SMALL_EPOCHS_ENV, current
from tests.conftest import assert_oracle, output_rows

VIEWS = {
    "sales": "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total FROM orders o JOIN customers c ON o.cust = c.cust GROUP BY c.region",
    "ranked": "SELECT region, cust, RANK() OVER (PARTITION BY region ORDER BY cust) AS r FROM customers",
}


def _project(builder):
    builder.source("orders", {"id": pa.array(range(1, 41), pa.int64()), "cust": pa.array([i % 5 for i in range(40)], pa.int64()),
                              "amount": pa.array(range(40), pa.int64())})
    builder.source("customers", {"cust": pa.array(range(5), pa.int64()), "region": ["eu", "us", "eu", "ap", "us"]})
    for name, sql in VIEWS.items():
        builder.view(name, sql)
    return builder.load()


@pytest.mark.parametrize("limit", ["45", "44", "0"])
def test_a_build_is_small_up_to_the_limit_and_gives_the_recompute(builder, monkeypatch, limit):
    """45 source rows (40 orders, 5 customers): small up to a limit of 45, not at 44 or 0 (off).
    Every build but those with the setting at 0 runs in process (up to LOCAL_CHANGE_ROWS source
    rows, whatever the limit): ``sales``' rules translate, and ``ranked``'s window too."""
    monkeypatch.setenv(SMALL_BUILD_ROWS_ENV, limit)
    project = _project(builder)
    built = {r.view: r for r in project.refresh()}
    assert {r.mode for r in built.values()} == {"full"}
    small = {view: r.stats.get("small_build_rows") for view, r in built.items()}
    assert small == ({"sales": 45, "ranked": 5} if limit == "45" else {"sales": None, "ranked": 5} if limit == "44" else {"sales": None, "ranked": None})
    assert {r.engine for r in built.values()} == ({None} if limit == "0" else {"in process"})
    assert_oracle(project)
    # The state a build left serves the next epochs, and a --full rebuild replaces it.
    write(builder.uri("orders"), pa.table({"id": pa.array([41], pa.int64()), "cust": pa.array([3], pa.int64()), "amount": pa.array([7], pa.int64())}), mode="append")
    delete_rows(builder.uri("customers"), "cust = 1")
    assert {r.mode for r in project.refresh()} <= {"incremental", "full"}
    assert_oracle(project)
    rebuilt = project.refresh(full=True)
    assert {r.mode for r in rebuilt} == {"full"}
    assert_oracle(project)


def test_a_malformed_limit_is_named_with_the_fix():
    with pytest.raises(IvmError, match=f"{SMALL_BUILD_ROWS_ENV} must be a number of rows .* found 'many'"):
        current({SMALL_BUILD_ROWS_ENV: "many"})
    with pytest.raises(IvmError, match=f"{PROCESS_BUILD_ENV} must be a number of MiB .* found '-1'"):
        current({PROCESS_BUILD_ENV: "-1"})


def test_a_build_runs_in_process_while_its_sources_columns_fit_the_memory_bound(builder, monkeypatch):
    """A build that is not small (45 source rows, limit 10) still runs in process while the
    columns it reads fit ``IVM_PROCESS_BUILD_MB`` as Arrow; past it, in Spark, saying why:
    told from the Delta log's row counts and the columns' types before anything is read
    (``sales``: 40 orders × 3 BIGINT columns with the weight > 100 bytes), or counted as the
    sources are read where strings are longer than the estimate (``ranked``: 5 regions of
    1,000 characters). Each gives the recompute's answer, and the next epoch runs from its state."""
    monkeypatch.setenv(SMALL_BUILD_ROWS_ENV, "10")
    builder.source("orders", {"id": pa.array(range(1, 41), pa.int64()), "cust": pa.array([i % 5 for i in range(40)], pa.int64()),
                              "amount": pa.array(range(40), pa.int64())})
    builder.source("customers", {"cust": pa.array(range(5), pa.int64()), "region": [r * 1000 for r in "eueap"]})
    for name, sql in VIEWS.items():
        builder.view(name, sql)
    project = builder.load()
    built = {r.view: r for r in project.refresh()}
    assert {view: r.engine for view, r in built.items()} == {"sales": "in process", "ranked": "in process"}
    assert built["sales"].stats["build_source_bytes"] > 0 and "small_build_rows" not in built["sales"].stats
    monkeypatch.setenv(PROCESS_BUILD_ENV, str(100 / (1 << 20)))
    assert project.refresh(["sales"], full=True)[0].engine == "spark: the sources' columns take ~0 MiB as Arrow (in process up to 0 MiB, IVM_PROCESS_BUILD_MB)"
    monkeypatch.setenv(PROCESS_BUILD_ENV, str(2000 / (1 << 20)))
    (ranked,) = project.refresh(["ranked"], full=True)
    assert ranked.engine.startswith("spark: the sources' columns take over "), ranked.engine
    monkeypatch.setenv(PROCESS_BUILD_ENV, "0")  # never in process
    assert project.refresh(["sales"], full=True)[0].engine is None
    assert_oracle(project)
    write(builder.uri("orders"), pa.table({"id": pa.array([41], pa.int64()), "cust": pa.array([3], pa.int64()), "amount": pa.array([7], pa.int64())}), mode="append")
    delete_rows(builder.uri("customers"), "cust = 1")
    assert {r.view: r.mode for r in project.refresh()} == {"sales": "incremental", "ranked": "incremental"}
    assert_oracle(project)


@contextmanager
def _driver_results_at_most(spark, size: str):
    """Spark's bound on a job's results collected to the driver (``spark.driver.maxResultSize``),
    lowered for the jobs started inside: the context's conf is read by each new task set."""
    conf = spark.sparkContext._jsc.sc().conf()
    conf.set("spark.driver.maxResultSize", size)
    try:
        yield
    finally:
        conf.remove("spark.driver.maxResultSize")


def test_a_small_build_whose_join_multiplies_its_rows_past_the_driver_bound_is_written_by_the_executors(builder, monkeypatch):
    """45 source rows, but the self-join's output is 320 rows of 200 characters (64 KB): more
    than the driver may collect (16 KiB here). The build repeats as a large one, the join's
    state, already committed by the first attempt, kept; a view Spark recomputes does the same.
    (The build of ``pairs`` runs in Spark here; in process, see the next test.)"""
    monkeypatch.setenv(SMALL_BUILD_ROWS_ENV, "45")
    monkeypatch.setenv(SMALL_EPOCHS_ENV, "spark")
    pad = "repeat('x', 200)"
    builder.view("pairs", f"SELECT a.id AS a, b.id AS b, {pad} AS pad FROM orders a JOIN orders b ON a.cust = b.cust")
    # LIMIT without ORDER BY is recomputed; this one keeps every row.
    builder.view("pairs_recomputed", f"SELECT a.id AS a, b.id AS b, {pad} AS pad FROM orders a JOIN orders b ON a.cust = b.cust LIMIT 1000")
    project = _project(builder)
    with _driver_results_at_most(builder.spark, "16k"):
        built = {r.view: r for r in project.refresh()}
    for view in ("pairs", "pairs_recomputed"):
        assert built[view].mode == "full"
        assert built[view].stats.get("small_build_too_large") == 1, built[view].stats
    assert built["pairs"].stats["rows_out"] == built["pairs_recomputed"].stats["rows_out"] == 320
    assert built["sales"].stats.get("small_build_too_large") is None
    assert_oracle(project)
    write(builder.uri("orders"), pa.table({"id": pa.array([41], pa.int64()), "cust": pa.array([3], pa.int64()), "amount": pa.array([7], pa.int64())}), mode="append")
    assert {r.view: r.mode for r in project.refresh()}["pairs"] == "incremental"
    assert_oracle(project)


def test_a_small_build_whose_join_multiplies_its_rows_past_the_in_process_bound_runs_in_spark(builder, monkeypatch):
    """A small build runs in process, as an epoch from empty state, when every rule
    translates; one whose join computes more rows than the driver holds in process
    (``LOCAL_CHANGE_ROWS``, 100 here: the self-join makes 320) runs in Spark, saying why."""
    monkeypatch.setenv(SMALL_BUILD_ROWS_ENV, "45")
    monkeypatch.setattr(local_epoch, "LOCAL_CHANGE_ROWS", 100)
    builder.view("pairs", "SELECT a.id AS a, b.id AS b FROM orders a JOIN orders b ON a.cust = b.cust")
    project = _project(builder)
    built = {r.view: r for r in project.refresh()}
    assert built["sales"].engine == "in process" and built["sales"].stats["small_build_rows"] == 45
    assert built["pairs"].engine.startswith("spark: operator ") and "computed 320 rows (in process up to 100)" in built["pairs"].engine
    assert built["pairs"].stats["rows_out"] == 320 and "epochs_in_process" not in built["pairs"].stats
    assert_oracle(project)


def test_a_build_that_leaves_a_state_table_empty_runs_in_spark(builder, monkeypatch):
    """No order passes the filter, so no row reaches the aggregate's state. In process that
    table would not be written, and a rebuild would leave the last build's groups there for
    the next epoch; Spark's build writes it empty, so such a build runs in Spark, saying why."""
    builder.view("big", "SELECT cust, COUNT(*) AS n FROM orders WHERE amount > 1000 GROUP BY cust")
    project = _project(builder)
    built = {r.view: r for r in project.refresh()}
    assert built["big"].engine.startswith("spark: no row of this build reaches state table aggregate_"), built["big"].engine
    assert built["sales"].engine == "in process"
    big = {"id": pa.array([41], pa.int64()), "cust": pa.array([3], pa.int64()), "amount": pa.array([2000], pa.int64())}
    write(builder.uri("orders"), pa.table(big), mode="append")
    assert {r.view: r.mode for r in project.refresh(["big"])} == {"big": "incremental"}
    assert_oracle(project)
    delete_rows(builder.uri("orders"), "amount > 1000")
    (rebuilt,) = project.refresh(["big"], full=True)
    assert rebuilt.engine.startswith("spark: no row of this build reaches state table"), rebuilt.engine
    write(builder.uri("orders"), pa.table(big), mode="append")  # the group again: counted once, not twice
    project.refresh(["big"])
    assert_oracle(project)


@pytest.mark.parametrize("policy", ["auto", "incremental"])
def test_an_incremental_change_too_large_for_the_driver_is_recomputed_or_named(builder, monkeypatch, policy):
    """An incremental epoch in Spark collects its change sets. Past the driver's bound the view
    is recomputed with the reason recorded (``refresh: auto``), or the refresh fails saying
    so and what to do (``refresh: incremental``), leaving the view as it was."""
    monkeypatch.setenv(SMALL_EPOCHS_ENV, "spark")
    builder.view("pairs", "SELECT a.id AS a, b.id AS b, repeat('x', 200) AS pad FROM orders a JOIN orders b ON a.cust = b.cust",
                 refresh=policy)
    project = _project(builder)
    project.refresh()
    before = output_rows(project, "pairs")
    write(builder.uri("orders"), pa.table({"id": pa.array(range(41, 61), pa.int64()), "cust": pa.array([3] * 20, pa.int64()),
                                           "amount": pa.array([1] * 20, pa.int64())}), mode="append")
    with _driver_results_at_most(builder.spark, "16k"):
        if policy == "incremental":
            with pytest.raises(ChangeTooLarge, match=r"view 'pairs': this epoch's change is more than Spark may bring to the driver .*"
                               r"Run `ivm refresh --full pairs`.* raise spark.driver.maxResultSize"):
                project.refresh(["pairs"])
            assert output_rows(project, "pairs") == before
        else:
            (result,) = project.refresh(["pairs"])
            assert (result.mode, result.reason) == ("full", "this epoch's change is more than Spark may bring to the driver "
                                                             "(spark.driver.maxResultSize): recomputed")
    if policy == "incremental":
        project.refresh(["pairs"], full=True)
    assert_oracle(project)


def test_a_build_in_process_stores_each_bucket_of_a_join_side_sorted_by_key(builder, monkeypatch):
    """A join side of 20,000 rows in scattered key order (past the size pyarrow consolidates):
    consolidated by DuckDB in key order, grouped by bucket and written as it is. Every state
    file's keys ascend, in one run per batch DuckDB handed back (delta-rs writes batches in
    the order they reach it: ``delta.write.write_at``), so each row group covers a narrow key
    range for the lookups, and the view equals its recompute before and after an
    incremental epoch."""
    import random

    import pyarrow.parquet as pq

    monkeypatch.setenv(SMALL_BUILD_ROWS_ENV, "10")
    keys = list(range(20_000))
    random.Random(7).shuffle(keys)
    builder.source("facts", {"k": pa.array(keys, pa.int64()), "v": pa.array([k % 97 for k in keys], pa.int64())})
    builder.source("dims", {"k": pa.array(range(0, 20_000, 7), pa.int64()), "name": [f"d{k}" for k in range(0, 20_000, 7)]})
    builder.view("joined", "SELECT f.k, f.v, d.name FROM facts f JOIN dims d ON f.k = d.k")
    project = builder.load()
    (built,) = project.refresh()
    assert built.engine == "in process"
    files = list((builder.root / "warehouse").rglob("join_*_left/__bucket=*/*.parquet")) or list(builder.root.rglob("join_*_left/__bucket=*/*.parquet"))
    assert len(files) == 4  # one per bucket (the tests' projects have 4)
    for file in files:
        stored = pq.read_table(file)
        stored = stored.column(next(n for n in stored.column_names if n.endswith("_k"))).to_pylist()
        runs = 1 + sum(1 for a, b in zip(stored, stored[1:]) if b < a)
        assert runs <= 20_000 // 2048 + 1 and len(stored) > 1000, file  # a batch has at least DuckDB's 2,048 rows
    assert_oracle(project)
    delete_rows(builder.uri("facts"), "k < 100")
    assert project.refresh()[0].mode == "incremental"
    assert_oracle(project)
