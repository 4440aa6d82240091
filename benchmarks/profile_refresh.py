"""Where one incremental refresh spends its time: a profile of one TPC-H view's refresh.

Builds the TPC-H sources at ``--sf`` (the parquet the benchmark generated is reused), builds
the views, applies one untimed warm-up batch, then one more batch and profiles each view's
refresh of it: wall time, Spark jobs, Delta log opens by table and by caller, py4j round
trips (calls into the JVM) and their time by the ivm_assets line that made them, and the
functions with the most cumulative time (cProfile; time spent waiting on the JVM shows up
under py4j's ``send_command``/``recv``).

    python benchmarks/profile_refresh.py --sf 0.1 --views q03 [--top 25] [--warm 3] [--one-row | --full]

``--full`` profiles a second full build of each view instead (warm: the first built it) and
times plain Spark's recompute of the same SQL, written to a Delta table, beside it.

Prints only; it is a tool for finding the next thing to optimize, not a benchmark.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import sys
import time
import traceback
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import tpch_refresh as bench  # noqa: E402

from ivm_assets.delta import (  # noqa: E402
    change_files, commit, handles, log, maintenance, read, row_groups, snapshot, staging, write,
)
from ivm_assets.engine import execute  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402


# The Delta modules a log open is made through, and those of them that call open_table.
DELTA_IO = (commit, handles, log, maintenance, read, row_groups, snapshot, staging, write)
OPENERS = [m for m in (change_files, *DELTA_IO) if hasattr(m, "open_table")]


def _caller() -> str:
    """The first frame outside the Delta modules that led to a log open."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        if frame.filename not in {m.__file__ for m in DELTA_IO}:
            return f"{Path(frame.filename).name}:{frame.lineno} {frame.name}"
    return "?"


def _ivm_site() -> str:
    """The innermost ivm_assets frame that led to a py4j call (where planning could save it)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/ivm_assets/" in frame.filename:
            return f"{frame.filename.split('/ivm_assets/')[1]}:{frame.lineno} {frame.name}"
    return "?"


def _count_py4j(calls: collections.Counter, seconds: collections.Counter) -> None:
    """Wrap py4j's one send path (classic Spark's pinned-thread client) to count round trips."""
    from py4j.clientserver import ClientServerConnection

    original = ClientServerConnection.send_command

    def counted(self, command):
        start = time.perf_counter()
        try:
            return original(self, command)
        finally:
            site = _ivm_site()
            calls[site] += 1
            seconds[site] += time.perf_counter() - start

    ClientServerConnection.send_command = counted


def _list_statements(statements: list, dump: Path | None) -> None:
    """Wrap the in-process epoch's one statement path to time each statement (bind, run and
    the tables' registration) and say which operator's binding made it; with ``dump``, write
    each statement's text and input tables there (``001.sql``, ``001.change.parquet``, …)."""
    from ivm_assets.render.duckdb.epoch import LocalEpoch

    def site() -> str:
        """The operators' bindings that led to the statement, innermost first (``aggregate.epoch:71``)."""
        frames = reversed(traceback.extract_stack()[:-2])
        return " < ".join(f"{Path(f.filename).stem}.{f.name}:{f.lineno}" for f in frames if "/operators/" in f.filename)

    sql, consolidate = LocalEpoch.sql, LocalEpoch.consolidate

    def timed_sql(self, query, **tables):
        start = time.perf_counter()
        out = sql(self, query, **tables)
        statements.append((site(), len(query), sum(t.num_rows for t in tables.values()), out.num_rows, time.perf_counter() - start))
        if dump:
            (dump / f"{len(statements):03d}.sql").write_text(query + "\n")
            for name, table in tables.items():
                pq.write_table(table, dump / f"{len(statements):03d}.{name}.parquet")
        return out

    def timed_consolidate(self, table, columns, *order):
        start = time.perf_counter()
        out = consolidate(self, table, columns, *order)
        statements.append(("consolidate < " + site(), 0, table.num_rows, out.num_rows, time.perf_counter() - start))
        return out

    LocalEpoch.sql, LocalEpoch.consolidate = timed_sql, timed_consolidate


def _serial_commits() -> None:
    """Make every epoch's commits in the calling thread (cProfile sees one thread only)."""
    commit = execute._commit

    def serial(*args, at_once: bool = False, **kwargs):
        return commit(*args, **kwargs)

    execute._commit = serial


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--views", default="q03")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--rf2", choices=("random", "lowest"), default="random")
    parser.add_argument("--warm", type=int, default=1, help="untimed batches before the profiled one")
    parser.add_argument("--one-row", action="store_true", help="profile the refresh of a one-line insert instead of a batch")
    parser.add_argument("--full", action="store_true", help="profile a (second, warm) full build instead of a batch")
    parser.add_argument("--sort", default="cumulative", choices=("cumulative", "tottime"), help="order of the profile's functions")
    parser.add_argument("--statements", action="store_true", help="list the in-process epoch's DuckDB statements, timed")
    parser.add_argument("--dump-sql", type=Path, help="with --statements: write each statement's text and input tables to this folder")
    parser.add_argument(
        "--serial-commits", action="store_true",
        help="make an in-process epoch's commits one after the other, in this thread, so the profile sees inside them",
    )
    args = parser.parse_args()
    views = args.views.split(",")

    opens: collections.Counter[tuple[str, str]] = collections.Counter()
    original = handles.open_table

    def counted(uri: str, version: int | None = None):
        opens[(Path(uri).name, "latest" if version is None else "at version", _caller())] += 1
        return original(uri, version)

    for module in OPENERS:
        module.open_table = counted
    py4j_calls: collections.Counter[str] = collections.Counter()
    py4j_seconds: collections.Counter[str] = collections.Counter()
    _count_py4j(py4j_calls, py4j_seconds)
    statements: list[tuple[str, int, int, int, float]] = []
    if args.statements:
        if args.dump_sql:
            args.dump_sql.mkdir(parents=True, exist_ok=True)
        _list_statements(statements, args.dump_sql)
    if args.serial_commits:
        _serial_commits()
    spark = get_spark()
    try:
        ctx, batches = bench.warmed(spark, args.sf, views, rf2=args.rf2, warm=args.warm)
        one_row = bench.OneRowChanges(spark, ctx.sources, 7)
        if not args.one_row and not args.full:
            batches.apply()
        for view in views:
            if args.one_row:
                ctx.project.refresh(views=[view])
                one_row.insert_for(bench.SQL_DIR.joinpath(f"{view}.sql").read_text())
            opens.clear()
            statements.clear()
            py4j_calls.clear()
            py4j_seconds.clear()
            profile = cProfile.Profile()
            start = time.perf_counter()
            profile.enable()
            result = ctx.project.refresh(views=[view], full=args.full)[0]
            profile.disable()
            seconds = time.perf_counter() - start
            print(f"\n=== {view}: {seconds:.2f} s, mode {result.mode}, rows in {result.rows_in}, out {result.rows_out}")
            if args.full:
                sql = bench.SQL_DIR.joinpath(f"{view}.sql").read_text()
                start = time.perf_counter()
                bench.full_recompute(spark, ctx.sources, sql, ctx.full_uri(view))
                print(f"plain Spark recompute written to Delta: {time.perf_counter() - start:.2f} s")
            print("stats:", {k: v for k, v in result.stats.items() if not k.startswith("rows_in.")})
            by_table: collections.Counter[str] = collections.Counter()
            for (table, _, _), n in opens.items():
                by_table[table] += n
            print(f"log opens: {sum(opens.values())}; by table: {dict(by_table.most_common())}")
            for (table, which, caller), n in opens.most_common(40):
                print(f"  {n:3d}  {table:28s} {which:10s} {caller}")
            print(f"py4j round trips: {sum(py4j_calls.values())}, {sum(py4j_seconds.values()):.2f} s; by site:")
            for site, n in py4j_calls.most_common(args.top):
                print(f"  {n:4d}  {py4j_seconds[site]:6.3f} s  {site}")
            if args.statements:
                print(f"DuckDB statements: {len(statements)}, {sum(s[4] for s in statements) * 1000:.1f} ms")
                for site, size, rows_in, rows_out, took in statements:
                    print(f"  {took * 1000:6.2f} ms  {size:6d} chars  {rows_in:7d} rows in  {rows_out:7d} out  {site}")
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats(args.sort).print_stats(args.top)
            print(out.getvalue())
    finally:
        stop_spark()


if __name__ == "__main__":
    main()
