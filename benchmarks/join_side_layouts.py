"""Issue 27, item 3: what a join side over a source table costs in each layout that could
serve its lookups, a copy in state (what the engine keeps) or the source's own files.

A join keeps each side's rows as state, bucketed by the join key and sorted by it in row
groups of 1,024 rows (:mod:`ivm_assets.state.arrangement`): a build writes that copy, and an
epoch looks up the keys of the other side's change in it. A side whose input is a source
table (a scan, maybe filtered) could instead be looked up in the source's files at the
epoch's version: no copy to write, but each lookup decodes whatever row groups of the
source may hold a wanted key. This measures both halves of that choice, with the engine's
own code, on the TPC-H views whose join sides over ``lineitem`` are the largest:

- **build**: the view's full build in Spark (``IVM_PROCESS_BUILD_MB=0``, as every build
  past the in-process bound runs), the time its executors spend writing that side into
  state (``delta/staging.stage_files``, timed around the call), and Spark's plain
  recompute-and-write of the same SQL: what a build without copies could approach;
- **lookup**: ``--keys`` keys drawn at random (seeded) from the side's key column, looked up
  cold (decoded from the files, nothing kept in the parquet cache) by the engine's driver
  read (``delta/row_groups``: footers' statistics choose the row groups, then pyarrow
  decodes them), once in the state copy (by bucket, as an epoch does) and once in the
  source's files at the same version. A key index into the source's files (key → file
  and row group) could not decode less than the row groups it points to.

    python benchmarks/join_side_layouts.py --sf 1 [--views q05,q03,q14] [--keys 1500,5] [--repeats 3]

Prints a table and saves ``results/join_side_layouts_sf<SF>.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import tpch_refresh as bench  # noqa: E402

from ivm_assets.delta import parquet_cache, staging  # noqa: E402
from ivm_assets.delta.read import read_arrow  # noqa: E402
from ivm_assets.delta.row_groups import ReadCost, read_row_groups, select_row_groups  # noqa: E402
from ivm_assets.delta.snapshot import row_count, snapshot_files  # noqa: E402
from ivm_assets.render.duckdb.spark_hash import buckets as spark_buckets  # noqa: E402
from ivm_assets.rules.incrementalize import operators  # noqa: E402
from ivm_assets.rules.join import JoinOp  # noqa: E402
from ivm_assets.rules.linear import FilterOp, ProjectOp, ScanOp  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.state import arrangement  # noqa: E402
from ivm_assets.zset import BUCKET  # noqa: E402

SOURCE = "lineitem"
RESULTS = HERE / "results"


def source_sides(project, view: str) -> list[tuple[object, str, str, str, list[str]]]:
    """The join sides of ``view`` over the source ``lineitem`` (scans, filters and projections
    of it): each one's state table, its key, the key's column in the source, whether the
    chain filters the source's rows, and the source columns it reads."""
    root = project.compile([view])[view].root
    found = []
    for op in operators(root):
        if not isinstance(op, JoinOp):
            continue
        for child, keys, table in ((op.left, op.left_keys, op.left_state), (op.right, op.right_keys, op.right_state)):
            filtered, node = False, child
            while isinstance(node, (FilterOp, ProjectOp)):
                filtered |= isinstance(node, FilterOp)
                node = node.input
            if isinstance(node, ScanOp) and node.relation == SOURCE and keys and keys[0] in node.columns:
                column = node.source_columns[node.columns.index(keys[0])]
                found.append((table, keys[0], column, "filtered" if filtered else "every row", list(node.source_columns)))
    return found


def lookup(uri: str, version: int, key: str, keys: pa.Array, buckets: int | None, columns: list[str]) -> tuple[float, ReadCost]:
    """Cold driver read of ``keys`` in the table at ``uri``: in a state copy by ``__bucket``
    (``buckets``), as :func:`ivm_assets.state.arrangement.read` makes it; in the source, the
    same choice of row groups from the footers' statistics, decoding only ``columns`` (what
    the side reads of the source). Nothing stays cached."""
    parquet_cache.clear()
    snap = snapshot_files(uri, version=version)
    start = time.perf_counter()
    cost = ReadCost()
    if buckets is not None:
        hashed = spark_buckets([keys], buckets).to_numpy()
        by_bucket = {str(b): pc.filter(keys, pa.array(hashed == b)) for b in set(hashed.tolist())}
        read_row_groups(select_row_groups(snap, key=key, values=by_bucket, partition=BUCKET), cost=cost, keep=False)
        return time.perf_counter() - start, cost
    chosen = select_row_groups(snap, key=key, values=keys)
    by_file: dict[str, tuple[object, list[int]]] = {}
    for file, group in chosen.groups:
        by_file.setdefault(file.path, (file, []))[1].append(group)
    for file, groups in by_file.values():
        with file.open() as handle:  # as the engine's driver read opens a local file
            rows = pq.ParquetFile(handle, metadata=file.metadata).read_row_groups(groups, columns=columns)
        rows.filter(pc.is_in(rows.column(key), value_set=keys))  # the match a lookup makes, timed; its rows are not kept
        cost.row_groups += len(groups)
        cost.rows += sum(file.rows[g] for g in groups)
        cost.bytes += sum(file.bytes[g] for g in groups)
    return time.perf_counter() - start, cost


def timed_staging(log: list[tuple[str, int, float]]) -> None:
    """Time each executors' write of a state table (the build's copies of its inputs)."""
    original = staging.stage_files

    def timed(uri, rows, **kwargs):
        start = time.perf_counter()
        out = original(uri, rows, **kwargs)
        log.append((uri.rsplit("/", 1)[-1], out.rows, time.perf_counter() - start))
        return out

    staging.stage_files = timed
    arrangement.stage_files = timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--views", default="q05,q03,q14")
    parser.add_argument("--keys", default="1500,5", help="how many keys a lookup wants (comma-separated sizes)")
    parser.add_argument("--repeats", type=int, default=3, help="lookups per size and layout (median), and Spark builds")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    views, sizes = args.views.split(","), [int(n) for n in args.keys.split(",")]
    staged: list[tuple[str, int, float]] = []
    timed_staging(staged)
    os.environ["IVM_PROCESS_BUILD_MB"] = "0"  # builds in Spark: the copies the executors write
    spark = get_spark()
    rows = []
    try:
        ctx = bench.prepare(spark, args.sf, views)
        source_uri = ctx.sources[SOURCE]
        source_version = snapshot_files(source_uri).table.version()
        rng = random.Random(args.seed)
        for view in views:
            builds, side_writes, recomputes = [], {}, []
            for _ in range(args.repeats):
                staged.clear()
                start = time.perf_counter()
                ctx.project.refresh(views=[view], full=True)
                builds.append(time.perf_counter() - start)
                for name, _, seconds in staged:
                    side_writes.setdefault(name, []).append(seconds)
                start = time.perf_counter()
                bench.full_recompute(spark, ctx.sources, bench.SQL_DIR.joinpath(f"{view}.sql").read_text(), ctx.full_uri(view))
                recomputes.append(time.perf_counter() - start)
            state_root = ctx.project.location(view).state_root
            for table, key, column, which, read_columns in source_sides(ctx.project, view):
                uri = table.uri(state_root)
                version, layout = arrangement.head_layout(table, state_root)
                source_keys = pc.unique(read_arrow(source_uri, source_version, [column]).column(column))
                candidates = source_keys.to_pylist()  # what the lookups below sample from, listed once per side
                row = {
                    "view": view, "side": table.table_name, "key": key, "rows": which, "source_columns": read_columns,
                    "state_rows": row_count(uri, version), "source_rows": row_count(source_uri, source_version),
                    "build_s": statistics.median(builds), "recompute_write_s": statistics.median(recomputes),
                    # None: the side was not written by the executors (a build in process or a small one).
                    "side_write_s": statistics.median(side_writes[table.table_name]) if table.table_name in side_writes else None,
                    "lookups": {},
                }
                for size in sizes:
                    for where, target, name, buckets in (
                        ("state copy", uri, key, layout.buckets), ("source files", source_uri, column, None),
                    ):
                        runs = []
                        for _ in range(args.repeats):
                            wanted = pa.array(rng.sample(candidates, size), source_keys.type)
                            runs.append(lookup(target, version if buckets else source_version, name, wanted, buckets, read_columns))
                        row["lookups"][f"{size} keys, {where}"] = {
                            "seconds": statistics.median(r[0] for r in runs),
                            "row_groups": statistics.median(r[1].row_groups for r in runs),
                            "rows_decoded": statistics.median(r[1].rows for r in runs),
                            "bytes": statistics.median(r[1].bytes for r in runs),
                        }
                rows.append(row)
                print(json.dumps(row, indent=1), flush=True)
    finally:
        stop_spark()
    save(args, rows, sizes)


def save(args, rows: list[dict], sizes: list[int]) -> None:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"# Join sides over `{SOURCE}`: state copy or the source's files (SF {args.sf:g}, {when})", "",
        f"`python benchmarks/join_side_layouts.py --sf {args.sf:g} --views {args.views} --keys {args.keys} --repeats {args.repeats}`; "
        "medians. Builds in Spark (`IVM_PROCESS_BUILD_MB=0`); lookups cold, by the engine's driver read.", "",
        "| view | side (key, rows) | side rows | build s | side write s | recompute + write s |"
        + "".join(f" {n} keys: copy s (groups, rows) | {n} keys: source s (groups, rows) |" for n in sizes),
        "|---|---|---|---|---|---|" + "---|---|" * len(sizes),
    ]
    for r in rows:
        cells = []
        for n in sizes:
            for where in ("state copy", "source files"):
                m = r["lookups"][f"{n} keys, {where}"]
                cells.append(f"{m['seconds']:.3f} ({m['row_groups']:,.0f}, {m['rows_decoded']:,.0f})")
        lines.append(
            f"| {r['view']} | {r['side']} ({r['key']}, {r['rows']}) | {r['state_rows']:,} | {r['build_s']:.2f} | "
            f"{_seconds(r['side_write_s'])} | {r['recompute_write_s']:.2f} | " + " | ".join(cells) + " |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    stem = f"join_side_layouts_sf{args.sf:g}"  # not Path.with_suffix: SF 0.1 has a dot of its own
    (RESULTS / f"{stem}.md").write_text(text)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"when": when, "args": vars(args), "rows": rows}, indent=1) + "\n")


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
