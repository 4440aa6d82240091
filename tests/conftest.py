"""Shared fixtures: one Spark session for the whole run, and throw-away projects.

Everything is real: local Spark, Delta tables written by delta-rs in a temporary folder.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("IVM_SPARK_MASTER", "local[2]")

# The local S3 server, one per test process for the whole run: fixtures defined (or imported)
# in two places are two fixtures, and a second server's secret, published through
# IVM_TEST_S3_SECRET, made the first one's projects fail with ACCESS_DENIED.
from tests.s3.server import s3_project, s3_server  # noqa: E402,F401


# scripts/test.sh runs the suite in two workers, a file each at a time. xdist hands out the
# files with the most tests first (its default); among files of as many tests, in collection
# order, where the longest (by --durations, 2026-11-26) go first. Two other orders were
# measured on a clean clone and were slower: the longest files first whatever their test
# count (--no-loadscope-reorder), 23 min 30 s, and the same with a worker taking its next
# file only at its current file's last test, 24 min 27 s (xdist's own order: see the
# README's time for the suite).
LONGEST_FIRST = (
    "tests/test_sql_steps.py", "tests/test_spark_answers.py", "tests/spark/test_cluster.py", "tests/test_tpch.py",
    "tests/test_concurrency.py", "tests/test_install.py", "tests/s3/test_executor_io.py", "tests/render/test_renderers.py",
    "tests/spark/test_connect.py", "tests/rules/test_aggregate.py", "tests/test_cli.py", "tests/s3/test_object_storage.py",
    "tests/dagster/test_dagster_dev.py", "tests/s3/test_faults.py", "tests/test_state_parity.py",
    "tests/spark/test_engine_over_connect.py", "tests/sql/test_regenerated_sql.py", "tests/rules/test_cancelling_changes.py",
    "tests/test_crash.py", "tests/dagster/test_browser.py", "tests/test_text_and_time_answers.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: each file's order kept


@pytest.fixture(scope="session")
def spark():
    from ivm_assets.spark.session import get_spark, stop_spark

    session = get_spark()
    yield session
    stop_spark()


class ProjectBuilder:
    """Writes sources, views and ivm.yaml into a folder and loads it as an IvmProject."""

    def __init__(self, root: Path, spark) -> None:
        self.root = root
        self.spark = spark
        self.sources: dict[str, str] = {}
        self.settings: dict[str, dict] = {}
        (root / "views").mkdir(parents=True, exist_ok=True)

    def source(self, name: str, table: pa.Table | dict, *, cdf: bool = True) -> str:
        from ivm_assets.delta.write import create_table

        table = table if isinstance(table, pa.Table) else pa.table(table)
        uri = str(self.root / "sources" / name)
        if cdf:
            create_table(uri, table)
        else:
            from deltalake import write_deltalake

            write_deltalake(uri, table)
        self.sources[name] = f"sources/{name}"
        return uri

    def view(self, name: str, sql: str, **settings) -> None:
        (self.root / "views" / f"{name}.sql").write_text(sql)
        if settings:
            self.settings[name] = settings

    def write_config(self, extra: str = "") -> None:
        import yaml

        data = {"sources": self.sources, "state_buckets": 4}
        if self.settings:
            data["views"] = self.settings
        (self.root / "ivm.yaml").write_text(yaml.safe_dump(data) + extra)

    def load(self):
        from ivm_assets import IvmProject

        self.write_config()
        return IvmProject.load(self.root, spark=self.spark)

    def uri(self, name: str) -> str:
        return str(self.root / "sources" / name)


@pytest.fixture
def builder(tmp_path, spark) -> ProjectBuilder:
    return ProjectBuilder(tmp_path / "project", spark)


@pytest.fixture(params=["spark", "in process"])
def engine(request, monkeypatch) -> str:
    """Runs the test twice: every incremental epoch in Spark, then in process where it can.
    A test that expects an epoch in process checks ``RefreshResult.engine`` (see
    :func:`assert_engine`): an epoch that silently went to Spark would test Spark twice."""
    from ivm_assets.settings import SMALL_EPOCHS_ENV

    monkeypatch.setenv(SMALL_EPOCHS_ENV, "spark" if request.param == "spark" else "auto")
    return request.param


@contextmanager
def small_epochs(mode: str) -> Iterator[None]:
    """``IVM_SMALL_EPOCHS`` set to ``mode`` ("spark" or "auto") for the block, restored after."""
    from ivm_assets.settings import SMALL_EPOCHS_ENV

    before = os.environ.get(SMALL_EPOCHS_ENV)
    os.environ[SMALL_EPOCHS_ENV] = mode
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SMALL_EPOCHS_ENV)
        else:
            os.environ[SMALL_EPOCHS_ENV] = before


def assert_engine(results, engine: str) -> None:
    """Every incremental epoch of ``results`` ran on ``engine`` ("spark" or "in process");
    one whose change came to nothing before any operator (``engine`` None) ran on neither."""
    for r in results:
        if r.mode == "incremental" and r.engine is not None:
            ran = "in process" if r.engine == "in process" else "spark"
            assert ran == engine, f"{r.view}: expected its epoch {engine}, it ran {r.engine}"


def assert_oracle(project, views=None, *, as_written: bool = False) -> None:
    """Every view equals its query recomputed at the recorded source versions (``as_written``:
    Spark's answer to the view's SQL exactly as written, not as the engine regenerated it).

    Recomputed with a small epoch's settings (one partition, no adaptive planning,
    interpreted): over the tests' few rows each Spark job then costs ~0.1 s, not ~0.5 s, and
    the settings change no answer (ties are ordered, floating-point sums compared rounded)."""
    from ivm_assets.engine.oracle import check_views
    from ivm_assets.spark.session import tuned_for

    with tuned_for(project.spark, small=True):
        for result in check_views(project, views or project.order, as_written=as_written):
            assert result.ok, f"{result.view}: {result.missing} missing {result.sample_missing}, {result.extra} extra {result.sample_extra}"


def output_rows(project, view: str) -> list[tuple]:
    """The view's output table as a sorted list of tuples (None sorts first)."""
    from ivm_assets.delta.read import read_snapshot

    rows = read_snapshot(project.spark, project.location(view).output).collect()
    return sorted((tuple(r) for r in rows), key=lambda t: tuple((v is not None, v) for v in t))
