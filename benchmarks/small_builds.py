"""Full builds of small views: written from the driver (a small build) or by the executors.

Builds TPC-H views at a scale factor whose sources stay under ``IVM_SMALL_BUILD_ROWS``
(default SF 0.005: lineitem 30,000 rows, every view's sources at most ~38,000), then, in
one warm process, rebuilds each view (``refresh --full``) in turn with the setting at its
default (a small build: one partition, interpreted, state and output written by delta-rs
from the driver) and at 0 (the executors write them), alternating, and prints the medians.
Every rebuild is checked against a recompute.

    python benchmarks/small_builds.py [--sf 0.005] [--views q01,q03,...] [--repeats 3] [--limit ROWS]

``--limit`` sets ``IVM_SMALL_BUILD_ROWS`` for the small builds (default: the setting's own).

Results go to benchmarks/results/small_builds_sf<SF>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from ivm_assets import IvmProject  # noqa: E402
from ivm_assets.engine.oracle import check_view  # noqa: E402
from ivm_assets.settings import SMALL_BUILD_ROWS_ENV  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.testing.tpch import create_sources, generate_parquet  # noqa: E402
from tpch_refresh import write_project  # noqa: E402



def _rebuild(project: IvmProject, view: str, limit: str | None) -> tuple[float, dict]:
    if limit is None:
        os.environ.pop(SMALL_BUILD_ROWS_ENV, None)
    else:
        os.environ[SMALL_BUILD_ROWS_ENV] = limit
    began = time.perf_counter()
    (result,) = project.refresh([view], full=True)
    took = time.perf_counter() - began
    assert result.mode == "full", result.summary()
    assert check_view(project, view).ok, f"{view}: differs from its recompute"
    return took, result.stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.005)
    parser.add_argument("--views", default="q01,q03,q05,q06,q10,q12,q14,q19")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", help="IVM_SMALL_BUILD_ROWS for the small builds (default: the setting's default)")
    args = parser.parse_args()
    ways = {"small build": args.limit, "executors write": "0"}
    spark = get_spark()
    run = HERE / "data" / f"small_builds_sf{args.sf:g}"
    shutil.rmtree(run, ignore_errors=True)
    sources = create_sources(generate_parquet(args.sf, HERE / "data"), run / "sources")
    views = args.views.split(",")
    project = IvmProject.load(write_project(run / "project", sources, views, warehouse=str(run / "warehouse")), spark=spark)
    project.refresh()  # first builds, untimed: Spark's classes loaded, plans compiled once
    times: dict[str, dict[str, list[float]]] = {}
    source_rows: dict[str, int | None] = {}
    for view in views:
        for _ in range(args.repeats):
            for way, limit in ways.items():
                took, stats = _rebuild(project, view, limit)
                times.setdefault(view, {}).setdefault(way, []).append(took)
                if way == "small build":
                    source_rows[view] = stats.get("small_build_rows")
    lines = [
        f"# Full builds, small build vs the executors' writes (TPC-H SF {args.sf:g}, warm process, median of {args.repeats})", "",
        "| view | source rows | small build s | executors write s | ratio |", "|---|---|---|---|---|",
    ]
    ratios = []
    for view, found in times.items():
        small, large = statistics.median(found["small build"]), statistics.median(found["executors write"])
        ratios.append(large / small)
        rows = source_rows[view]
        lines.append(f"| {view} | {rows if rows is not None else 'over the limit'} | {small:.2f} | {large:.2f} | {large / small:.2f}× |")
    lines += ["", f"Median: the small build {statistics.median(ratios):.2f}× faster."]
    text = "\n".join(lines) + "\n"
    print(text)
    out = HERE / "results" / (f"small_builds_sf{args.sf:g}" + (f"_limit{args.limit}" if args.limit else ""))
    out.with_name(out.name + ".md").write_text(text)
    out.with_name(out.name + ".json").write_text(json.dumps({"times": times, "source_rows": source_rows}, indent=1))
    stop_spark()


if __name__ == "__main__":
    main()
