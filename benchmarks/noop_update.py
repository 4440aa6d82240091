"""What an UPDATE that changes nothing costs a refresh, beside one that changes one row.

delta-rs rewrites the file of every row an UPDATE matches and the change data feed reports
all of that file's rows as deleted and inserted again, whether or not a value changed. This
benchmark builds TPC-H views that read ``customer`` (one file, SF × 150,000 rows), then
times refreshes after (a) an UPDATE of one customer's c_acctbal to a new value, (b) an
UPDATE that sets it to the value it has, (c) an UPDATE of a column no view reads
(c_comment). Each is repeated; medians are printed and saved.

    python benchmarks/noop_update.py --sf 1 [--views q03,q10] [--repeats 5]

Results go to benchmarks/results/noop_update_sf<SF>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from ivm_assets import IvmProject  # noqa: E402
from ivm_assets.delta.write import update_rows  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.tpch import create_sources, generate_parquet  # noqa: E402
from tpch_refresh import write_project  # noqa: E402  (benchmarks/: every benchmark's TPC-H project)

CASES = {
    "one row changed": lambda i: {"c_acctbal": f"c_acctbal + {i + 1}"},
    "no-op update": lambda i: {"c_acctbal": "c_acctbal"},
    "unread column": lambda i: {"c_comment": f"'comment {i}'"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--views", default="q03,q10")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    spark = get_spark()
    run = HERE / "data" / f"noop_sf{args.sf:g}"
    shutil.rmtree(run, ignore_errors=True)
    sources = create_sources(generate_parquet(args.sf, HERE / "data"), run / "sources")
    views = args.views.split(",")
    project = IvmProject.load(write_project(run / "project", sources, views, warehouse=str(run / "warehouse")), spark=spark)
    project.refresh()
    results: dict[str, dict[str, list]] = {}
    for case, change in CASES.items():
        for i in range(args.repeats):
            update_rows(sources["customer"], set_sql=change(i), predicate="c_custkey = 1")
            for view in views:
                began = time.perf_counter()
                (result,) = project.refresh([view])
                took = time.perf_counter() - began
                entry = results.setdefault(case, {}).setdefault(view, [])
                entry.append({"s": took, "rows_in": result.rows_in, "rows_out": result.rows_out, "engine": result.engine})
    lines = [
        f"# A no-op UPDATE's refresh (TPC-H SF {args.sf:g}, customer: one file; median of {args.repeats})", "",
        "| change | view | refresh s | change rows in | rows out | engine |", "|---|---|---|---|---|---|",
    ]
    for case, by_view in results.items():
        for view, runs in by_view.items():
            median = statistics.median(r["s"] for r in runs)
            lines.append(f"| {case} | {view} | {median:.3f} | {runs[-1]['rows_in']} | {runs[-1]['rows_out']} | {runs[-1]['engine']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = HERE / "results" / f"noop_update_sf{args.sf:g}"
    out.with_name(out.name + ".md").write_text(text)
    out.with_name(out.name + ".json").write_text(json.dumps(results, indent=1))
    stop_spark()


if __name__ == "__main__":
    main()
