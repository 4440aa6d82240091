"""TPC-H refresh benchmark: incremental refresh versus full recompute of each view.

Generates TPC-H with tpchgen-cli, loads it into Delta source tables with the change data
feed on, maintains the TPC-H queries in benchmarks/tpch/ as ivm_assets views, then applies
TPC-H-style refresh batches (RF1 inserts new orders with their lineitems, RF2 deletes as
many existing ones, a few customers, suppliers and parts are updated) and times, per view
and batch, ``project.refresh(views=[v])`` against recomputing the view's SQL over the new
snapshots with Spark (written to Delta) and with DuckDB (query only). Then times a one-row
change per view on the warm session.

    python benchmarks/tpch_refresh.py --sf 0.1 [--batch-fraction 0.001] [--views q01,q03] [--repeats 3]
        [--rf2 random|lowest] [--dim-updates 5] [--one-row-repeats 3]

Results go to benchmarks/results/tpch_sf<SF>_<rf2>.md and .json; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pyarrow as pa
import sqlglot
import yaml
from deltalake import DeltaTable
from sqlglot import exp

try:  # the second peer; without it the "duckdb s" column says n/a
    import duckdb
except ImportError:  # pragma: no cover - duckdb is in the dev extra
    duckdb = None

HERE = Path(__file__).resolve().parent
# Run from a checkout without installing the package: the repository root holds ivm_assets/.
sys.path.insert(0, str(HERE.parent))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from ivm_assets import IvmProject, RefreshResult  # noqa: E402
from ivm_assets.delta import io_counts  # noqa: E402
from ivm_assets.delta.read import read_snapshot  # noqa: E402
from ivm_assets.delta.write import write  # noqa: E402
from ivm_assets.errors import SourceError  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.tpch import (  # noqa: E402
    DIMENSION_UPDATES, RefreshBatches, create_sources, generate_parquet, make_batches,
)

SQL_DIR = HERE / "tpch"
DATA_DIR = HERE / "data"
RESULTS_DIR = HERE / "results"
VIEWS = tuple(p.stem for p in sorted(SQL_DIR.glob("q*.sql")))
SIGNIFICANT_DIGITS = 6
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


# --- data and project ---------------------------------------------------------------------
def write_project(
    project_dir: Path, sources: dict[str, str], views: list[str], *, warehouse: str = "warehouse",
    storage_options: dict[str, str] | None = None, state_buckets: int | None = None,
) -> Path:
    """The project folder the engine loads: ivm.yaml (warehouse, sources, storage options,
    the state tables' buckets if not the default) and views/<name>.sql (every benchmark
    builds its TPC-H project here)."""
    (project_dir / "views").mkdir(parents=True)
    config: dict = {"warehouse": warehouse, "sources": sources}
    if storage_options:
        config["storage_options"] = storage_options
    if state_buckets is not None:
        config["state_buckets"] = state_buckets
    (project_dir / "ivm.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for view in views:
        shutil.copy(SQL_DIR / f"{view}.sql", project_dir / "views" / f"{view}.sql")
    return project_dir


def register_sources(spark: SparkSession, sources: dict[str, str]) -> None:
    """Each source's latest snapshot as a temp view named like the table, for plain Spark SQL."""
    for name, uri in sources.items():
        read_snapshot(spark, uri).createOrReplaceTempView(name)


# --- refresh batches ----------------------------------------------------------------------
@dataclass
class OneRowChanges:
    """One-row changes for the warm-session case: one new order line per change.

    The line copies an existing line that contributes to the view being timed (found by
    running the view's FROM and WHERE, its SELECT list replaced by the line's key), so the
    change passes the view's filters and joins and reaches its output. The copy keeps its
    order and gets line number 100, 101, … (TPC-H's are 1–7), one append to ``lineitem``.
    """

    spark: SparkSession
    sources: dict[str, str]
    seed: int
    inserted: int = 0

    def insert_for(self, sql: str) -> None:
        register_sources(self.spark, self.sources)
        lines = read_snapshot(self.spark, self.sources["lineitem"])
        key = self.spark.sql(contributing_line_sql(sql, self.seed + self.inserted)).first()
        if key is None:  # nothing passes the view's filter: any line will do
            row = lines.orderBy(F.rand(self.seed + self.inserted)).limit(1)
        else:
            row = lines.where((F.col("l_orderkey") == key[0]) & (F.col("l_linenumber") == key[1])).limit(1)
        table = row.toArrow()
        index = table.schema.get_field_index("l_linenumber")
        number = pa.array([100 + self.inserted] * table.num_rows, table.schema.field(index).type)
        write(self.sources["lineitem"], table.set_column(index, table.schema.field(index), number), mode="append")
        self.inserted += 1


def contributing_line_sql(sql: str, seed: int) -> str:
    """The view's query with its SELECT list replaced by ``l_orderkey, l_linenumber`` and no
    GROUP BY: one line (drawn with ``seed``) among those the view aggregates."""
    tree = sqlglot.parse_one(sql, read="spark")
    for part in ("group", "having", "order", "limit"):  # a top-k's ORDER BY names the SELECT list's aliases
        tree.set(part, None)
    tree = tree.select(exp.column("l_orderkey"), exp.column("l_linenumber"), append=False)
    return tree.order_by(f"rand({seed})").limit(1).sql(dialect="spark")


# --- measuring ----------------------------------------------------------------------------
def _tree_rss_bytes(root: int) -> int:
    """RSS of ``root`` plus all its descendants (Spark's JVM and Python workers), read from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:  # the process ended while we looked
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # fields 3 (state) on; the name may hold spaces
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * PAGE_SIZE
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


class PeakRss:
    """Peak RSS of this process tree while the ``with`` block runs, sampled every ``interval`` s.

    The JVM does the work, so Python's own allocator statistics would miss nearly all of it.
    """

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, _tree_rss_bytes(os.getpid()))
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _tree_rss_bytes(os.getpid()))

    @property
    def peak_mib(self) -> float:
        return self.peak / 2**20


@dataclass
class Sample:
    seconds: float
    peak_mib: float


def measure(fn: Callable[[], Any]) -> tuple[Any, Sample]:
    """Run ``fn`` and return its result with its wall time and the peak RSS meanwhile."""
    with PeakRss() as rss:
        start = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - start
    return out, Sample(seconds, rss.peak_mib)


_groups = itertools.count()


def _next_job_id(spark: SparkSession) -> int | None:
    """The id the next Spark job will get (ids count up from 0 per SparkContext), or None
    when the scheduler cannot be asked (Spark Connect, or another Spark version)."""
    try:
        return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())
    except Exception:
        return None


@dataclass
class Work:
    """Spark jobs and Delta commits one measured call made; None when they could not be counted."""

    spark_jobs: int | None = None
    group_jobs: int | None = None
    commits: int | None = None

    def jobs(self, stats: dict[str, Any] | None = None) -> int | None:
        """All the jobs of the call: from the scheduler's job counter when it can be read; else
        the jobs in the benchmark's job group plus those the engine counted in its own group
        (``stats["spark_jobs"]``: a nested job group takes them out of the benchmark's)."""
        if self.spark_jobs is not None:
            return self.spark_jobs
        if self.group_jobs is None:
            return None
        return self.group_jobs + int((stats or {}).get("spark_jobs", 0))


@contextmanager
def counting_work(spark: SparkSession) -> Iterator[Work]:
    """Count the Spark jobs and the ivm_assets Delta commits made inside the block."""
    work = Work()
    first = _next_job_id(spark)
    group = f"tpch-bench-{next(_groups)}"
    try:
        sc = spark.sparkContext
        sc.setJobGroup(group, "tpch benchmark", interruptOnCancel=False)
    except Exception:  # Spark Connect: no SparkContext here
        sc = None
    try:
        with io_counts.counting() as delta_io:
            yield work
    finally:
        last = _next_job_id(spark)
        if first is not None and last is not None:
            work.spark_jobs = last - first
        if sc is not None:
            work.group_jobs = len(sc.statusTracker().getJobIdsForGroup(group))
            sc.setLocalProperty("spark.jobGroup.id", None)
        work.commits = delta_io.commits


def full_recompute(spark: SparkSession, sources: dict[str, str], sql: str, out_uri: str) -> None:
    """The baseline: the view's SQL over the latest snapshots, written whole to a Delta table."""
    register_sources(spark, sources)
    write(out_uri, spark.sql(sql), mode="overwrite")


def duckdb_recompute(con: Any, sources: dict[str, str], sql: str) -> dict[str, Any]:
    """The view's SQL run by DuckDB over the same snapshots, as ``seconds`` and ``rows`` (or ``error``).

    Each source is a DuckDB view over the parquet files of its latest snapshot, as delta-rs
    lists them (the sources have no deletion vectors or column mapping, so those files are
    the snapshot). DuckDB reads them with its own parquet reader: registering delta-rs'
    ``to_pyarrow_dataset()`` failed once ``update_rows`` had rewritten a file (no kernel for
    string = string_view). Only the query is timed (to an Arrow table, not written
    anywhere); listing the files is not.
    """
    if con is None:
        return {"error": "duckdb is not installed"}
    for name, uri in sources.items():
        files = ", ".join("'" + f.replace("'", "''") + "'" for f in DeltaTable(uri).file_uris())
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet([{files}], union_by_name = true)")
    try:
        start = time.perf_counter()
        relation = con.sql(sql)
        out = relation.to_arrow_table() if hasattr(relation, "to_arrow_table") else relation.arrow()
        seconds = time.perf_counter() - start
    except Exception as exc:  # a dialect difference is a result to report, not a crash
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"seconds": seconds, "rows": out.num_rows}


# --- correctness --------------------------------------------------------------------------
_FRACTIONAL = (T.DecimalType, T.DoubleType, T.FloatType)


def _round_significant(c: F.Column) -> F.Column:
    """``c`` as a double rounded to SIGNIFICANT_DIGITS: sums added in another order or precision agree."""
    c = c.cast("double")
    scale = F.pow(F.lit(10.0), F.floor(F.log10(F.abs(c))) - (SIGNIFICANT_DIGITS - 1))
    return F.when(c == 0, F.lit(0.0)).otherwise(F.round(c / scale) * scale)


def _comparable(df: DataFrame, columns: list[str], fractional: set[str]) -> DataFrame:
    return df.select([(_round_significant(F.col(f"`{c}`")) if c in fractional else F.col(f"`{c}`")).alias(c) for c in columns])


def check_oracle(spark: SparkSession, sources: dict[str, str], sql: str, output_uri: str) -> dict[str, Any]:
    """Compare the view's output table with its SQL over the current snapshots, EXCEPT ALL both ways."""
    register_sources(spark, sources)
    try:
        actual = read_snapshot(spark, output_uri)
    except SourceError as exc:
        return {"ok": False, "detail": str(exc)}
    expected = spark.sql(sql)
    missing = [c for c in expected.columns if c not in actual.columns]
    if missing:
        return {"ok": False, "detail": f"output table lacks columns {missing}"}
    fractional = {f.name for df in (expected, actual) for f in df.schema.fields if isinstance(f.dataType, _FRACTIONAL)}
    e = _comparable(expected, expected.columns, fractional)
    a = _comparable(actual, expected.columns, fractional)
    missing_rows, extra_rows = e.exceptAll(a).count(), a.exceptAll(e).count()
    return {
        "ok": missing_rows == extra_rows == 0,
        "expected_rows": expected.count(),
        "missing_rows": missing_rows,
        "extra_rows": extra_rows,
    }


# --- one view -----------------------------------------------------------------------------
@dataclass
class ViewRun:
    """Everything measured for one view; ``error`` set means the engine failed and the view was dropped."""

    view: str
    sql: str
    build: Sample | None = None
    rebuild: Sample | None = None  # a second full build, warm, after the batches
    rebuild_peer: Sample | None = None  # Spark's recompute written to Delta, right after it
    full: list[Sample] = field(default_factory=list)
    full_jobs: list[int | None] = field(default_factory=list)
    duckdb: list[dict[str, Any]] = field(default_factory=list)
    incremental: list[Sample] = field(default_factory=list)
    refreshes: list[dict[str, Any]] = field(default_factory=list)
    one_row: list[Sample] = field(default_factory=list)
    one_row_refreshes: list[dict[str, Any]] = field(default_factory=list)
    oracle: dict[str, Any] | None = None
    error: str | None = None


def refresh_view(project: IvmProject, view: str, *, full: bool = False) -> RefreshResult:
    [result] = [r for r in project.refresh(views=[view], full=full) if r.view == view]
    return result


def engine_call(run: ViewRun, what: str, fn: Callable[[], Any]) -> Any:
    """Call the engine; an exception marks the view failed (with the message) instead of ending the benchmark."""
    try:
        return fn()
    except Exception as exc:  # any engine failure is a result to report, not a crash
        run.error = f"{what}: {type(exc).__name__}: {exc}"
        print(f"  {run.view}: ENGINE ERROR during {what}: {type(exc).__name__}: {exc}", flush=True)
        return None


def timed_refresh(ctx: Context, run: ViewRun, what: str) -> tuple[dict[str, Any] | None, Sample]:
    """One incremental refresh of the view, timed, with the jobs and commits it made."""
    with counting_work(ctx.spark) as work:
        result, sample = measure(lambda: engine_call(run, what, lambda: refresh_view(ctx.project, run.view)))
    return (None if result is None else _result_fields(result, work)), sample


def time_batch(ctx: Context, run: ViewRun, *, record: bool) -> None:
    """Time the incremental refresh of the latest batch, then the Spark and DuckDB recomputes over the same snapshots."""
    refreshed, incremental = timed_refresh(ctx, run, "incremental refresh")
    if refreshed is None:
        return
    with counting_work(ctx.spark) as work:
        _, full = measure(lambda: full_recompute(ctx.spark, ctx.sources, run.sql, ctx.full_uri(run.view)))
    duck = duckdb_recompute(ctx.duckdb, ctx.sources, run.sql)
    if record:
        run.incremental.append(incremental)
        run.full.append(full)
        run.full_jobs.append(work.jobs())
        run.duckdb.append(duck)
        run.refreshes.append(refreshed)
    duck_text = f"{duck['seconds']:.2f}s" if "seconds" in duck else f"n/a ({duck['error']})"
    print(
        f"  {run.view}: incremental {incremental.seconds:.2f}s ({refreshed['mode']}, {_fmt(refreshed['spark_jobs'])} jobs, "
        f"{_fmt(refreshed['commits'])} commits) full {full.seconds:.2f}s duckdb {duck_text}; stats {_stats_text(refreshed['stats'])}",
        flush=True,
    )


def time_one_row(ctx: Context, run: ViewRun, changes: OneRowChanges, repeats: int) -> None:
    """``repeats`` times: insert one order line that reaches the view, then time its refresh (warm session).

    An untimed refresh first takes in the lines inserted for the views timed before, so each
    timed refresh sees exactly one changed row.
    """
    tree = sqlglot.parse_one(run.sql, read="spark")
    if "lineitem" not in {t.name for t in tree.find_all(exp.Table) if t.find_ancestor(exp.Select) is tree}:
        print(f"  {run.view}: no one-row case (the change is a new order line: lineitem is not in the view's own FROM)", flush=True)
        return
    if engine_call(run, "catch-up refresh", lambda: refresh_view(ctx.project, run.view)) is None:
        return
    for _ in range(repeats):
        changes.insert_for(run.sql)
        refreshed, sample = timed_refresh(ctx, run, "one-row refresh")
        if refreshed is None:
            return
        run.one_row.append(sample)
        run.one_row_refreshes.append(refreshed)
        print(
            f"  {run.view}: one row {sample.seconds:.2f}s ({refreshed['mode']}, {refreshed['rows_in']} rows in, "
            f"{refreshed['rows_out']} out, {_fmt(refreshed['spark_jobs'])} jobs); stats {_stats_text(refreshed['stats'])}",
            flush=True,
        )


def _result_fields(result: RefreshResult, work: Work) -> dict[str, Any]:
    fields = ("mode", "reason", "source_versions", "rows_in", "rows_out", "duration_s", "stats")
    out = {name: getattr(result, name, None) for name in fields}
    out["stats"] = dict(out["stats"] or {})
    out["cost"] = getattr(result, "cost", None)  # the cost model's estimate, where the engine gives one
    out["spark_jobs"] = work.jobs(out["stats"])
    out["commits"] = out["stats"].get("commits", work.commits)
    return out


def _stats_text(stats: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(stats.items()) if not k.startswith("rows_in.")) or "none"


# --- the whole run ------------------------------------------------------------------------
@dataclass
class Context:
    """One run's Spark session, fresh source tables, run folder, loaded project and DuckDB connection."""

    spark: SparkSession
    sources: dict[str, str]
    run_dir: Path
    project: IvmProject
    duckdb: Any = None

    def full_uri(self, view: str) -> str:
        return str(self.run_dir / "full" / view)


def prepare(spark: SparkSession, sf: float, views: list[str], *, state_buckets: int | None = None) -> Context:
    """Fresh sources and project for this run; only the generated parquet is reused."""
    parquet_dir = generate_parquet(sf, DATA_DIR)
    run_dir = DATA_DIR / f"run_sf{sf:g}"
    shutil.rmtree(run_dir, ignore_errors=True)
    sources = create_sources(parquet_dir, run_dir / "sources")
    project_dir = write_project(run_dir / "project", sources, views, state_buckets=state_buckets)
    con = duckdb.connect() if duckdb is not None else None
    return Context(spark, sources, run_dir, IvmProject.load(project_dir), con)


def warmed(
    spark: SparkSession, sf: float, views: list[str], *, rf2: str, warm: int, state_buckets: int | None = None,
) -> tuple[Context, RefreshBatches]:
    """For the profiling tools: a fresh run (:func:`prepare`) whose ``views`` are built, then
    refreshed after each of ``warm`` untimed batches; and the batches, for the timed ones
    (0.1 % of the orders each, seeded, no dimension updates)."""
    ctx = prepare(spark, sf, views, state_buckets=state_buckets)
    batches = make_batches(spark, ctx.sources, 0.001, 7, rf2=rf2)
    for view in views:
        ctx.project.refresh(views=[view], full=True)
    for _ in range(warm):
        batches.apply()
        for view in views:
            ctx.project.refresh(views=[view])
    return ctx, batches


def benchmark(ctx: Context, runs: list[ViewRun], batches: RefreshBatches, repeats: int, one_row_repeats: int) -> None:
    """Full build, one untimed warm-up batch (JIT, caches), ``repeats`` timed batches, the
    one-row changes, then the oracle."""
    print("initial full build", flush=True)
    for run in runs:
        result, run.build = measure(lambda: engine_call(run, "full build", lambda: refresh_view(ctx.project, run.view, full=True)))
        if result is not None:
            print(f"  {run.view}: {run.build.seconds:.2f}s ({result.mode}, {result.rows_out} rows out)", flush=True)
    print(f"each batch: {batches.describe()}", flush=True)
    for batch in range(repeats + 1):
        print(f"batch {batch + 1}/{repeats + 1}{' (warm-up, untimed)' if batch == 0 else ''}", flush=True)
        batches.apply()
        for run in runs:
            if not run.error:
                time_batch(ctx, run, record=batch > 0)
    if one_row_repeats > 0:
        print(f"one-row changes: {one_row_repeats} per view, one new order line each", flush=True)
        changes = OneRowChanges(ctx.spark, ctx.sources, seed=batches.seed)
        for run in runs:
            if not run.error:
                time_one_row(ctx, run, changes, one_row_repeats)
        for run in runs:  # untimed: take in the lines inserted for the views timed after this one
            if not run.error:
                engine_call(run, "catch-up refresh", lambda: refresh_view(ctx.project, run.view))
    print("warm full rebuild (`refresh --full`), then Spark's recompute of the same snapshots", flush=True)
    for run in runs:
        if not run.error:
            result, run.rebuild = measure(lambda: engine_call(run, "full rebuild", lambda: refresh_view(ctx.project, run.view, full=True)))
            _, run.rebuild_peer = measure(lambda: full_recompute(ctx.spark, ctx.sources, run.sql, ctx.full_uri(run.view)))
            if result is not None:
                print(
                    f"  {run.view}: rebuild {run.rebuild.seconds:.2f}s ({result.stats.get('state_rows_written', 0)} state rows, "
                    f"{_fmt(result.stats.get('spark_jobs'))} jobs), "
                    f"recompute {run.rebuild_peer.seconds:.2f}s",
                    flush=True,
                )
    print("oracle", flush=True)
    for run in runs:
        if not run.error:
            # The query as the engine computes it: ties at a LIMIT's last row broken by the output columns.
            sql = ctx.project.compile([run.view])[run.view].sql
            run.oracle = check_oracle(ctx.spark, ctx.sources, sql, ctx.project.location(run.view).output)
            print(f"  {run.view}: {'oracle OK' if run.oracle['ok'] else 'MISMATCH'} {run.oracle}", flush=True)


# --- reporting ----------------------------------------------------------------------------
def _median(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(value: Any, spec: str = "g") -> str:
    return "n/a" if value is None else format(value, spec)


# The engine's statistics shown per view, each under the first of its names present
# (the names changed as the engine grew; "n/a" when none is).
STAT_COLUMNS = {
    "log_reads": ("delta_log_reads",),
    "state_rows_read": ("state_rows_read",),
    "state_bytes_read": ("state_bytes_read", "state_bytes_scanned"),
}


def _stat(refresh: dict[str, Any], names: Sequence[str]) -> Any:
    return next((refresh["stats"][n] for n in names if n in refresh["stats"]), None)


def summarize(run: ViewRun) -> dict[str, Any]:
    """Medians over the timed batches (and over the one-row changes); peaks are the highest of any batch."""
    if run.error or not run.incremental:
        return {"view": run.view, "error": run.error}
    full_s = statistics.median(s.seconds for s in run.full)
    incremental_s = statistics.median(s.seconds for s in run.incremental)
    refreshes = run.refreshes
    return {
        "view": run.view,
        "modes": sorted({r["mode"] for r in refreshes}),
        "build_s": run.build.seconds,
        "rebuild_s": run.rebuild.seconds if run.rebuild else None,
        "rebuild_recompute_s": run.rebuild_peer.seconds if run.rebuild_peer else None,
        "full_s": full_s,
        "duckdb_s": _median(d.get("seconds") for d in run.duckdb),
        "incremental_s": incremental_s,
        "speedup": full_s / incremental_s,
        "one_row_s": _median(s.seconds for s in run.one_row),
        "one_row_modes": sorted({r["mode"] for r in run.one_row_refreshes}),
        "spark_jobs": _median(r["spark_jobs"] for r in refreshes),
        "full_spark_jobs": _median(run.full_jobs),
        "one_row_spark_jobs": _median(r["spark_jobs"] for r in run.one_row_refreshes),
        **{name: _median(_stat(r, keys) for r in refreshes) for name, keys in STAT_COLUMNS.items()},
        "commits": _median(r["commits"] for r in refreshes),
        "rows_in": statistics.median(r["rows_in"] for r in refreshes),
        "rows_out": statistics.median(r["rows_out"] for r in refreshes),
        "peak_mib_full": max(s.peak_mib for s in run.full),
        "peak_mib_incremental": max(s.peak_mib for s in run.incremental),
        "cost": refreshes[-1]["cost"],
        "oracle": "OK" if run.oracle["ok"] else "MISMATCH",
    }


TIME_HEADER = ("view", "mode", "build s", "full s", "duckdb s", "incr s", "speed-up", "1-row s", "peak MiB full", "peak MiB incr", "oracle")
BUILD_HEADER = ("view", "build s (cold)", "rebuild s (warm)", "recompute + write s", "rebuild / recompute")
WORK_HEADER = ("view", "spark jobs", "log reads", "state rows read", "state bytes read", "commits", "rows in", "rows out", "1-row jobs", "full jobs")


def time_row(s: dict[str, Any]) -> list[str]:
    if "full_s" not in s:
        return [s["view"], "ERROR", *["—"] * (len(TIME_HEADER) - 2)]
    return [
        s["view"], "/".join(s["modes"]), f"{s['build_s']:.2f}", f"{s['full_s']:.2f}", _fmt(s["duckdb_s"], ".2f"),
        f"{s['incremental_s']:.2f}", f"{s['speedup']:.1f}×", _fmt(s["one_row_s"], ".2f"),
        f"{s['peak_mib_full']:.0f}", f"{s['peak_mib_incremental']:.0f}", s["oracle"],
    ]


def build_row(s: dict[str, Any]) -> list[str]:
    if "full_s" not in s or s["rebuild_s"] is None:
        return [s["view"], *["—"] * (len(BUILD_HEADER) - 1)]
    return [
        s["view"], f"{s['build_s']:.2f}", f"{s['rebuild_s']:.2f}", f"{s['rebuild_recompute_s']:.2f}",
        f"{s['rebuild_s'] / s['rebuild_recompute_s']:.1f}×",
    ]


def work_row(s: dict[str, Any]) -> list[str]:
    if "full_s" not in s:
        return [s["view"], *["—"] * (len(WORK_HEADER) - 1)]
    return [
        s["view"], _fmt(s["spark_jobs"]), _fmt(s["log_reads"]), _fmt(s["state_rows_read"]), _fmt(s["state_bytes_read"]),
        _fmt(s["commits"]), f"{s['rows_in']:g}", f"{s['rows_out']:g}", _fmt(s["one_row_spark_jobs"]), _fmt(s["full_spark_jobs"]),
    ]


def markdown_table(header: Sequence[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [list(header), *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def machine_info(spark: SparkSession) -> dict[str, Any]:
    with open("/proc/meminfo") as f:
        mem_kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), platform.processor())
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "cpu": cpu,
        "os": platform.platform(),
        "python": platform.python_version(),
        "spark": spark.version,
        "spark_driver_memory": spark.conf.get("spark.driver.memory"),
        "deltalake": version("deltalake"),
        "duckdb": _version("duckdb"),
        # The machine may be shared: a load above the core count means the times are inflated.
        "load_average_at_end": [round(x, 1) for x in os.getloadavg()],
    }


def notes(runs: list[ViewRun]) -> list[str]:
    """Engine errors, non-incremental refreshes, DuckDB failures and oracle mismatches, spelled out under the tables."""
    out = []
    for run in runs:
        if run.error:
            out.append(f"{run.view}: engine error — {run.error}")
        for what, refreshes in (("refreshed", run.refreshes), ("one-row change refreshed", run.one_row_refreshes)):
            for reason in sorted({r["reason"] for r in refreshes if r["mode"] != "incremental"}, key=str):
                out.append(f"{run.view}: {what} in full, not incrementally — {reason}")
        for error in sorted({d["error"] for d in run.duckdb if "error" in d}):
            out.append(f"{run.view}: DuckDB could not run the SQL — {error}")
        if run.oracle and not run.oracle["ok"]:
            out.append(f"{run.view}: oracle MISMATCH — {run.oracle}")
    return out


def report(args: argparse.Namespace, ctx: Context, runs: list[ViewRun], batches: RefreshBatches) -> None:
    """Print the tables and save them as benchmarks/results/tpch_sf<SF>_<rf2>.md and .json."""
    summaries = [summarize(run) for run in runs]
    meta = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "sf": args.sf,
        "batch_fraction": args.batch_fraction,
        "orders_per_batch": batches.size,
        "rf2": args.rf2,
        "dim_updates": args.dim_updates,
        "dimension_rows_per_batch": {d.table: d.rows(args.dim_updates) for d in DIMENSION_UPDATES},
        "batch": batches.describe(),
        "repeats": args.repeats,
        "one_row_repeats": args.one_row_repeats,
        "seed": args.seed,
        "spark_epochs": args.spark_epochs,
        "machine": machine_info(ctx.spark),
    }
    machine = meta["machine"]
    lines = [
        f"# TPC-H refresh benchmark, SF {args.sf:g}, RF2 {args.rf2}",
        "",
        f"{meta['date']} · {machine['cores']} cores ({machine['cpu']}), {machine['memory_gib']} GiB · "
        f"Spark {machine['spark']} (driver {machine['spark_driver_memory']}), deltalake {machine['deltalake']}, "
        f"duckdb {machine['duckdb'] or 'not installed'} · "
        f"load average at the end (1/5/15 min): {' / '.join(map(str, machine['load_average_at_end']))}",
        "",
        f"Options: `--sf {args.sf:g} --batch-fraction {args.batch_fraction:g} --rf2 {args.rf2} --dim-updates {args.dim_updates} "
        f"--repeats {args.repeats} --one-row-repeats {args.one_row_repeats} --seed {args.seed}"
        f"{' --spark-epochs' if args.spark_epochs else ''}"
        f"{f' --state-buckets {args.state_buckets}' if args.state_buckets is not None else ''}`.",
        "",
        f"Each batch: {batches.describe()} Times are medians of {args.repeats} batches; *full s* is Spark "
        "recomputing the view's SQL over the snapshots and writing it to Delta, *duckdb s* DuckDB running the same SQL "
        "over the same snapshots (query only, no write); *1-row s* is the median refresh after a one-line insert that "
        f"reaches the view ({args.one_row_repeats} per view, warm session). Peak MiB is the RSS of Python + Spark JVM, "
        "highest over the batches.",
        "",
        markdown_table(TIME_HEADER, [time_row(s) for s in summaries]),
        "",
        "Per incremental refresh (medians over the batches): Spark jobs started by the whole `project.refresh` call, "
        "the engine's Delta log reads and state reads (from `RefreshResult.stats`; n/a where it does not report them), "
        "commits, change rows in and out; *1-row jobs* for the one-row refreshes, *full jobs* for the Spark recompute.",
        "",
        markdown_table(WORK_HEADER, [work_row(s) for s in summaries]),
        "",
        "Full builds: *build s* is the first build of the view (the first Spark work of the process for the first "
        "view: cold JIT and code caches), *rebuild s* a second `refresh --full` after the batches (warm), "
        "*recompute + write s* Spark's recompute of the same snapshots written to Delta right after it. "
        "The Python process's memory during a build is measured in a fresh process by `build_memory.py`.",
        "",
        markdown_table(BUILD_HEADER, [build_row(s) for s in summaries]),
    ]
    costs = [f"- {s['view']}: {s['cost'] if s.get('cost') else 'n/a'}" for s in summaries if "full_s" in s]
    if costs:
        lines += ["", "Cost model's estimate at the last batch (`RefreshResult.cost`):", "", *costs]
    problems = notes(runs)
    if problems:
        lines += ["", "Notes:", "", *(f"- {n}" for n in problems)]
    print("\n" + "\n".join(lines))
    RESULTS_DIR.mkdir(exist_ok=True)
    stem = f"tpch_sf{args.sf:g}_{args.rf2}"  # not Path.with_suffix: "sf0.1" already has a suffix
    (RESULTS_DIR / f"{stem}.md").write_text("\n".join(lines) + "\n")
    detail = {**meta, "views": summaries, "runs": [asdict(run) for run in runs]}
    (RESULTS_DIR / f"{stem}.json").write_text(json.dumps(detail, indent=2, default=str) + "\n")
    print(f"\nsaved {RESULTS_DIR / stem}.md and .json")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    parser.add_argument("--batch-fraction", type=float, default=0.001, help="orders per RF1/RF2 batch, as a fraction of all orders")
    parser.add_argument("--views", default=",".join(VIEWS), help=f"comma-separated subset of {','.join(VIEWS)}")
    parser.add_argument("--repeats", type=int, default=3, help="timed batches; times reported are their median")
    parser.add_argument("--seed", type=int, default=42, help="seed for the orders RF1 copies, RF2 deletes and the rows updated")
    parser.add_argument("--rf2", choices=("random", "lowest"), default="random",
                        help="orders RF2 deletes: drawn at random (scattered keys, default) or the lowest keys (one range)")
    parser.add_argument("--dim-updates", type=int, default=5,
                        help="customers and suppliers updated per batch (parts: 2/5 as many); 0 disables (default 5)")
    parser.add_argument("--one-row-repeats", type=int, default=3,
                        help="one-row changes timed per view after the batches (median reported); 0 disables (default 3)")
    parser.add_argument("--state-buckets", type=int, default=None,
                        help="the project's state_buckets (default: ivm.yaml's default, 16)")
    parser.add_argument("--spark-epochs", action="store_true",
                        help="run every incremental epoch in Spark, none in process (for comparing the two)")
    args = parser.parse_args(argv)
    args.views = [v.strip() for v in args.views.split(",") if v.strip()]
    unknown = sorted(set(args.views) - set(VIEWS))
    if unknown:
        parser.error(f"unknown views {unknown}; choose from {', '.join(VIEWS)}")
    if args.dim_updates < 0 or args.one_row_repeats < 0:
        parser.error("--dim-updates and --one-row-repeats must be 0 or more")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.spark_epochs:
        os.environ["IVM_SMALL_EPOCHS"] = "spark"  # see docs/architecture.md, Small epochs in process
    spark = get_spark()
    try:
        ctx = prepare(spark, args.sf, args.views, state_buckets=args.state_buckets)
        runs = [ViewRun(v, (SQL_DIR / f"{v}.sql").read_text()) for v in args.views]
        batches = make_batches(spark, ctx.sources, args.batch_fraction, args.seed, rf2=args.rf2, dim_updates=args.dim_updates)
        benchmark(ctx, runs, batches, args.repeats, args.one_row_repeats)
        report(args, ctx, runs, batches)
    finally:
        stop_spark()


if __name__ == "__main__":
    main()
