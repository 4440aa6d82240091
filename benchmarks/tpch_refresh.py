"""TPC-H refresh benchmark: incremental refresh versus full recompute of each view.

Generates TPC-H with tpchgen-cli, loads it into Delta source tables with the change data
feed on, maintains the TPC-H queries in benchmarks/tpch/ as ivm_assets views, then applies
TPC-H-style refresh batches (RF1 inserts new orders with their lineitems, RF2 deletes as
many old ones) and times, per view and batch, ``project.refresh(views=[v])`` against
recomputing the view's SQL over the new snapshots with Spark and writing it to Delta.

    python benchmarks/tpch_refresh.py --sf 0.1 [--batch-fraction 0.001] [--views q01,q03] [--repeats 3]

Results go to benchmarks/results/tpch_sf<SF>.md and .json; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

HERE = Path(__file__).resolve().parent
# Run from a checkout without installing the package: the repository root holds ivm_assets/.
sys.path.insert(0, str(HERE.parent))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from ivm_assets import IvmProject, RefreshResult  # noqa: E402
from ivm_assets.delta.tables import create_table, delete_rows, read_snapshot, write  # noqa: E402
from ivm_assets.errors import SourceError  # noqa: E402
from ivm_assets.spark.arrow import normalize_schema  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402

SQL_DIR = HERE / "tpch"
DATA_DIR = HERE / "data"
RESULTS_DIR = HERE / "results"
TABLES = ("region", "nation", "supplier", "customer", "part", "orders", "lineitem")
VIEWS = tuple(p.stem for p in sorted(SQL_DIR.glob("q*.sql")))
SIGNIFICANT_DIGITS = 6
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


# --- data and project ---------------------------------------------------------------------
def generate_parquet(sf: float) -> Path:
    """TPC-H parquet at ``sf``, generated once per scale factor and reused by later runs."""
    out = DATA_DIR / f"sf{sf:g}" / "parquet"
    done = out / "_COMPLETE"
    if done.exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    tpchgen = Path(sys.executable).with_name("tpchgen-cli")
    cmd = [str(tpchgen), "parquet", "-s", f"{sf:g}", "-o", str(out), "--tables", ",".join(TABLES), "--no-progress", "-q"]
    print(f"generating TPC-H sf={sf:g}: {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)
    done.touch()
    return out


def create_sources(parquet_dir: Path, sources_dir: Path) -> dict[str, str]:
    """Fresh Delta source tables (CDF on) from the cached parquet, so no earlier run's batches remain.

    tpchgen-cli writes string_view columns and parquet field ids; both are dropped so the
    Delta schema is the plain one Spark and the refresh batches write.
    """
    sources = {}
    for name in TABLES:
        table = pq.read_table(parquet_dir / f"{name}.parquet")
        plain = pa.schema([pa.field(f.name, f.type, f.nullable) for f in normalize_schema(table.schema)])
        uri = str(sources_dir / name)
        create_table(uri, table.cast(plain))
        sources[name] = uri
    return sources


def write_project(project_dir: Path, sources: dict[str, str], views: list[str]) -> Path:
    """The project folder the engine loads: ivm.yaml (warehouse + sources) and views/<name>.sql."""
    (project_dir / "views").mkdir(parents=True)
    config = {"warehouse": "warehouse", "sources": sources}
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
class RefreshBatches:
    """TPC-H-style refresh pairs: RF1 inserts ``size`` new orders with their lineitems, RF2 deletes ``size`` old ones.

    New orders copy randomly sampled existing orders (and their 1–7 lineitems) under fresh
    keys above every key so far, so values follow the generated distributions. RF2 deletes
    the ``size`` lowest order keys still present, as one key range per table.
    """

    spark: SparkSession
    sources: dict[str, str]
    size: int
    next_key: int
    seed: int
    applied: int = 0

    def apply(self) -> None:
        self._insert_orders()
        self._delete_orders()
        self.applied += 1

    def _insert_orders(self) -> None:
        orders = read_snapshot(self.spark, self.sources["orders"])
        picked = orders.orderBy(F.rand(self.seed + self.applied)).limit(self.size).toArrow()
        new_keys = pa.array(range(self.next_key, self.next_key + picked.num_rows), pa.int64())
        key_map = self.spark.createDataFrame(pa.table({"l_orderkey": picked.column("o_orderkey"), "__new": new_keys}))
        lines = read_snapshot(self.spark, self.sources["lineitem"])
        new_lines = lines.join(key_map, "l_orderkey").withColumn("l_orderkey", F.col("__new")).select(*lines.columns)
        index = picked.schema.get_field_index("o_orderkey")
        write(self.sources["orders"], picked.set_column(index, "o_orderkey", new_keys), mode="append")
        write(self.sources["lineitem"], new_lines, mode="append")
        self.next_key += picked.num_rows

    def _delete_orders(self) -> None:
        orders = read_snapshot(self.spark, self.sources["orders"])
        oldest = orders.select("o_orderkey").orderBy("o_orderkey").limit(self.size)
        low, high = oldest.agg(F.min("o_orderkey"), F.max("o_orderkey")).first()
        delete_rows(self.sources["orders"], f"o_orderkey >= {low} AND o_orderkey <= {high}")
        delete_rows(self.sources["lineitem"], f"l_orderkey >= {low} AND l_orderkey <= {high}")


def make_batches(spark: SparkSession, sources: dict[str, str], fraction: float, seed: int) -> RefreshBatches:
    stats = read_snapshot(spark, sources["orders"]).agg(F.count("*"), F.max("o_orderkey")).first()
    size = max(1, round(stats[0] * fraction))
    return RefreshBatches(spark, sources, size=size, next_key=stats[1] + 1, seed=seed)


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


def full_recompute(spark: SparkSession, sources: dict[str, str], sql: str, out_uri: str) -> None:
    """The baseline: the view's SQL over the latest snapshots, written whole to a Delta table."""
    register_sources(spark, sources)
    write(out_uri, spark.sql(sql), mode="overwrite")


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
    full: list[Sample] = field(default_factory=list)
    incremental: list[Sample] = field(default_factory=list)
    refreshes: list[dict[str, Any]] = field(default_factory=list)
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


def time_batch(ctx: Context, run: ViewRun, *, record: bool) -> None:
    """Time the incremental refresh of the latest batch, then the full recompute over the same snapshots."""
    result, incremental = measure(lambda: engine_call(run, "incremental refresh", lambda: refresh_view(ctx.project, run.view)))
    if run.error:
        return
    _, full = measure(lambda: full_recompute(ctx.spark, ctx.sources, run.sql, ctx.full_uri(run.view)))
    if record:
        run.incremental.append(incremental)
        run.full.append(full)
        run.refreshes.append(_result_fields(result))
    print(f"  {run.view}: incremental {incremental.seconds:.2f}s ({result.mode}) full {full.seconds:.2f}s", flush=True)


def _result_fields(result: RefreshResult) -> dict[str, Any]:
    fields = ("mode", "reason", "source_versions", "rows_in", "rows_out", "duration_s")
    return {name: getattr(result, name) for name in fields}


# --- the whole run ------------------------------------------------------------------------
@dataclass
class Context:
    """One run's Spark session, fresh source tables, run folder and loaded project."""

    spark: SparkSession
    sources: dict[str, str]
    run_dir: Path
    project: IvmProject

    def full_uri(self, view: str) -> str:
        return str(self.run_dir / "full" / view)


def prepare(spark: SparkSession, sf: float, views: list[str]) -> Context:
    """Fresh sources and project for this run; only the generated parquet is reused."""
    parquet_dir = generate_parquet(sf)
    run_dir = DATA_DIR / f"run_sf{sf:g}"
    shutil.rmtree(run_dir, ignore_errors=True)
    sources = create_sources(parquet_dir, run_dir / "sources")
    project_dir = write_project(run_dir / "project", sources, views)
    return Context(spark, sources, run_dir, IvmProject.load(project_dir))


def benchmark(ctx: Context, runs: list[ViewRun], batches: RefreshBatches, repeats: int) -> None:
    """Full build, one untimed warm-up batch (JIT, caches), ``repeats`` timed batches, then the oracle."""
    print("initial full build", flush=True)
    for run in runs:
        result, run.build = measure(lambda: engine_call(run, "full build", lambda: refresh_view(ctx.project, run.view, full=True)))
        if result is not None:
            print(f"  {run.view}: {run.build.seconds:.2f}s ({result.mode}, {result.rows_out} rows out)", flush=True)
    for batch in range(repeats + 1):
        print(f"batch {batch + 1}/{repeats + 1}{' (warm-up, untimed)' if batch == 0 else ''}: "
              f"RF1 + RF2 of {batches.size} orders", flush=True)
        batches.apply()
        for run in runs:
            if not run.error:
                time_batch(ctx, run, record=batch > 0)
    print("oracle", flush=True)
    for run in runs:
        if not run.error:
            run.oracle = check_oracle(ctx.spark, ctx.sources, run.sql, ctx.project.location(run.view).output)
            print(f"  {run.view}: {'oracle OK' if run.oracle['ok'] else 'MISMATCH'} {run.oracle}", flush=True)


# --- reporting ----------------------------------------------------------------------------
def summarize(run: ViewRun) -> dict[str, Any]:
    """Medians over the timed batches; peaks are the highest of any batch."""
    if run.error or not run.incremental:
        return {"view": run.view, "error": run.error}
    full_s = statistics.median(s.seconds for s in run.full)
    incremental_s = statistics.median(s.seconds for s in run.incremental)
    return {
        "view": run.view,
        "modes": sorted({r["mode"] for r in run.refreshes}),
        "build_s": run.build.seconds,
        "full_s": full_s,
        "incremental_s": incremental_s,
        "speedup": full_s / incremental_s,
        "rows_in": statistics.median(r["rows_in"] for r in run.refreshes),
        "rows_out": statistics.median(r["rows_out"] for r in run.refreshes),
        "peak_mib_full": max(s.peak_mib for s in run.full),
        "peak_mib_incremental": max(s.peak_mib for s in run.incremental),
        "oracle": "OK" if run.oracle["ok"] else "MISMATCH",
    }


HEADER = ("view", "mode", "build s", "full s", "incr s", "speed-up", "rows in", "rows out", "peak MiB full", "peak MiB incr", "oracle")


def table_row(s: dict[str, Any]) -> list[str]:
    if "full_s" not in s:
        return [s["view"], "ERROR", *["—"] * (len(HEADER) - 2)]
    return [
        s["view"], "/".join(s["modes"]), f"{s['build_s']:.2f}", f"{s['full_s']:.2f}", f"{s['incremental_s']:.2f}",
        f"{s['speedup']:.1f}×", f"{s['rows_in']:g}", f"{s['rows_out']:g}",
        f"{s['peak_mib_full']:.0f}", f"{s['peak_mib_incremental']:.0f}", s["oracle"],
    ]


def markdown_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [list(HEADER), *rows]) for i in range(len(HEADER))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


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
        # The machine may be shared: a load above the core count means the times are inflated.
        "load_average_at_end": [round(x, 1) for x in os.getloadavg()],
    }


def notes(runs: list[ViewRun]) -> list[str]:
    """Engine errors, non-incremental refreshes and oracle mismatches, spelled out under the table."""
    out = []
    for run in runs:
        if run.error:
            out.append(f"{run.view}: engine error — {run.error}")
        for reason in sorted({r["reason"] for r in run.refreshes if r["mode"] != "incremental"}, key=str):
            out.append(f"{run.view}: refreshed in full, not incrementally — {reason}")
        if run.oracle and not run.oracle["ok"]:
            out.append(f"{run.view}: oracle MISMATCH — {run.oracle}")
    return out


def report(args: argparse.Namespace, ctx: Context, runs: list[ViewRun], batches: RefreshBatches) -> None:
    """Print the table and save it as benchmarks/results/tpch_sf<SF>.md and .json."""
    summaries = [summarize(run) for run in runs]
    table = markdown_table([table_row(s) for s in summaries])
    meta = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "sf": args.sf,
        "batch_fraction": args.batch_fraction,
        "orders_per_batch": batches.size,
        "repeats": args.repeats,
        "machine": machine_info(ctx.spark),
    }
    machine = meta["machine"]
    lines = [
        f"# TPC-H refresh benchmark, SF {args.sf:g}",
        "",
        f"{meta['date']} · {machine['cores']} cores ({machine['cpu']}), {machine['memory_gib']} GiB · "
        f"Spark {machine['spark']} (driver {machine['spark_driver_memory']}), deltalake {machine['deltalake']} · "
        f"load average at the end (1/5/15 min): {' / '.join(map(str, machine['load_average_at_end']))}",
        "",
        f"Each batch: RF1 inserts {batches.size} orders with their lineitems, RF2 deletes {batches.size} "
        f"(batch fraction {args.batch_fraction:g}). Times are medians of {args.repeats} batches; "
        "peak MiB is the RSS of Python + Spark JVM, highest over the batches.",
        "",
        table,
    ]
    problems = notes(runs)
    if problems:
        lines += ["", "Notes:", "", *(f"- {n}" for n in problems)]
    print("\n" + "\n".join(lines))
    RESULTS_DIR.mkdir(exist_ok=True)
    stem = f"tpch_sf{args.sf:g}"  # not Path.with_suffix: "sf0.1" already has a suffix
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
    parser.add_argument("--seed", type=int, default=42, help="seed for sampling the orders RF1 copies")
    args = parser.parse_args(argv)
    args.views = [v.strip() for v in args.views.split(",") if v.strip()]
    unknown = sorted(set(args.views) - set(VIEWS))
    if unknown:
        parser.error(f"unknown views {unknown}; choose from {', '.join(VIEWS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    spark = get_spark()
    try:
        ctx = prepare(spark, args.sf, args.views)
        runs = [ViewRun(v, (SQL_DIR / f"{v}.sql").read_text()) for v in args.views]
        batches = make_batches(spark, ctx.sources, args.batch_fraction, args.seed)
        benchmark(ctx, runs, batches, args.repeats)
        report(args, ctx, runs, batches)
    finally:
        stop_spark()


if __name__ == "__main__":
    main()
