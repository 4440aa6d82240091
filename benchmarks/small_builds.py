"""Full builds of small views: in process, in Spark written from the driver, or by the executors.

Builds TPC-H views at a scale factor whose sources stay under ``IVM_SMALL_BUILD_ROWS``
(default SF 0.005: lineitem 30,000 rows, every view's sources at most ~38,000), then, in
one warm process, rebuilds each view (``refresh --full``) in turn three ways, alternating:
with the defaults (a small build, in process where its rules translate: DuckDB over Arrow,
an epoch from empty state), with ``IVM_SMALL_EPOCHS=spark`` (a small build in Spark: one
partition, interpreted, state and output written by delta-rs from the driver) and with
``IVM_SMALL_BUILD_ROWS=0`` (the executors write them); prints the medians. Every rebuild is
checked against a recompute.

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
from ivm_assets.settings import SMALL_BUILD_ROWS_ENV, SMALL_EPOCHS_ENV  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.tpch import create_sources, generate_parquet  # noqa: E402
from tpch_refresh import write_project  # noqa: E402



def _rebuild(project: IvmProject, view: str, settings: dict[str, str | None]) -> tuple[float, dict, str | None]:
    for name, value in settings.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    began = time.perf_counter()
    (result,) = project.refresh([view], full=True)
    took = time.perf_counter() - began
    assert result.mode == "full", result.summary()
    assert check_view(project, view).ok, f"{view}: differs from its recompute"
    return took, result.stats, result.engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.005)
    parser.add_argument("--views", default="q01,q03,q05,q06,q10,q12,q14,q19")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", help="IVM_SMALL_BUILD_ROWS for the small builds (default: the setting's default)")
    args = parser.parse_args()
    ways = {
        "in process": {SMALL_BUILD_ROWS_ENV: args.limit, SMALL_EPOCHS_ENV: None},
        "small build in Spark": {SMALL_BUILD_ROWS_ENV: args.limit, SMALL_EPOCHS_ENV: "spark"},
        "executors write": {SMALL_BUILD_ROWS_ENV: "0", SMALL_EPOCHS_ENV: None},
    }
    spark = get_spark()
    run = HERE / "data" / f"small_builds_sf{args.sf:g}"
    shutil.rmtree(run, ignore_errors=True)
    sources = create_sources(generate_parquet(args.sf, HERE / "data"), run / "sources")
    views = args.views.split(",")
    project = IvmProject.load(write_project(run / "project", sources, views, warehouse=str(run / "warehouse")), spark=spark)
    project.refresh()  # first builds, untimed: Spark's classes loaded, plans compiled once
    times: dict[str, dict[str, list[float]]] = {}
    source_rows: dict[str, int | None] = {}
    engines: dict[str, str | None] = {}
    for view in views:
        for _ in range(args.repeats):
            for way, settings in ways.items():
                took, stats, engine = _rebuild(project, view, settings)
                times.setdefault(view, {}).setdefault(way, []).append(took)
                if way == "in process":
                    source_rows[view], engines[view] = stats.get("small_build_rows"), engine
    lines = [
        f"# Full builds of small views (TPC-H SF {args.sf:g}, warm process, median of {args.repeats})", "",
        "| view | source rows | ran | in process s | small build in Spark s | executors write s | vs Spark small | vs executors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ratios: dict[str, list[float]] = {"small": [], "executors": []}
    for view, found in times.items():
        local, small, large = (statistics.median(found[w]) for w in ways)
        ratios["small"].append(small / local)
        ratios["executors"].append(large / local)
        rows = source_rows[view]
        lines.append(f"| {view} | {rows if rows is not None else 'over the limit'} | {engines[view]} | {local:.2f} | {small:.2f} | "
                     f"{large:.2f} | {small / local:.2f}× | {large / local:.2f}× |")
    lines += ["", f"Median: the default build {statistics.median(ratios['small']):.2f}× faster than a small build in Spark, "
                  f"{statistics.median(ratios['executors']):.2f}× faster than the executors' writes."]
    text = "\n".join(lines) + "\n"
    print(text)
    out = HERE / "results" / (f"small_builds_sf{args.sf:g}" + (f"_limit{args.limit}" if args.limit else ""))
    out.with_name(out.name + ".md").write_text(text)
    out.with_name(out.name + ".json").write_text(json.dumps({"times": times, "source_rows": source_rows, "engines": engines}, indent=1))
    stop_spark()


if __name__ == "__main__":
    main()
