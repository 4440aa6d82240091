"""A one-row change refreshed by a fresh process: what a cron job, a CI check or a Dagster
run without a warm Spark pays for each small refresh.

Builds TPC-H views (default q03: a join of three tables and an aggregate; q06: a global
aggregate) at a scale factor in a setup process, then, repeatedly: appends one lineitem
line that reaches the view, and times a fresh ``ivm refresh VIEW --project DIR`` process
end to end, and a fresh Python process that does the same through the API with its phases
timed (interpreter + imports, project load, compile, refresh; the refresh's own split comes
from its statistics). Prints and saves medians.

    python benchmarks/fresh_refresh.py --sf 0.1 [--views q03,q06] [--repeats 5]

Results go to benchmarks/results/fresh_refresh_sf<SF>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from ivm_assets import IvmProject  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.tpch import create_sources, generate_parquet  # noqa: E402
from tpch_refresh import write_project  # noqa: E402  (benchmarks/: every benchmark's TPC-H project)

# Run in a fresh interpreter: times its own phases and prints them as JSON.
DRIVER = r"""
import json, sys, time
began = time.perf_counter()
from ivm_assets import IvmProject
import pyarrow as pa
pa.array([0])  # pyarrow imports pandas at its first conversion of values: counted as an import
imported = time.perf_counter()
project = IvmProject.load(sys.argv[1])
loaded = time.perf_counter()
project.compile([sys.argv[2]])
compiled = time.perf_counter()
(result,) = project.refresh([sys.argv[2]])
done = time.perf_counter()
print(json.dumps({"imports": imported - began, "load": loaded - imported, "compile": compiled - loaded,
                  "refresh": done - compiled, "mode": result.mode, "engine": result.engine, "rows_in": result.rows_in,
                  "spark_started": "pyspark.sql.session" in sys.modules and __import__("pyspark").sql.SparkSession.getActiveSession() is not None}))
"""


def _one_line(spark, sources: dict[str, str], step: int) -> None:
    """Append a copy of an existing lineitem line under a new line number (it reaches every
    view that reads lineitem's rows of that order)."""
    from pyspark.sql import functions as F

    from ivm_assets.delta.read import read_snapshot
    from ivm_assets.delta.write import write

    line = read_snapshot(spark, sources["lineitem"]).orderBy("l_orderkey").limit(1)
    write(sources["lineitem"], line.withColumn("l_linenumber", F.lit(100 + step).cast("int")).toArrow(), mode="append")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--views", default="q03,q06")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    spark = get_spark()
    run = HERE / "data" / f"fresh_sf{args.sf:g}"
    shutil.rmtree(run, ignore_errors=True)
    sources = create_sources(generate_parquet(args.sf, HERE / "data"), run / "sources")
    views = args.views.split(",")
    project_dir = write_project(run / "project", sources, views, warehouse=str(run / "warehouse"))
    IvmProject.load(project_dir, spark=spark).refresh()
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    env.pop("IVM_SPARK_REMOTE", None)
    results: dict[str, dict[str, list]] = {}
    step = 0
    for view in views:
        for _ in range(args.repeats):
            step += 1
            _one_line(spark, sources, step)
            began = time.perf_counter()
            subprocess.run([str(Path(sys.executable).with_name("ivm")), "refresh", view, "--project", str(project_dir)],
                           check=True, env=env, capture_output=True)
            results.setdefault(view, {}).setdefault("cli", []).append(time.perf_counter() - began)
            step += 1
            _one_line(spark, sources, step)
            began = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", DRIVER, str(project_dir), view], check=True, env=env, capture_output=True, text=True)
            phases = json.loads(out.stdout.strip().splitlines()[-1])
            phases["total"] = time.perf_counter() - began
            results[view].setdefault("api", []).append(phases)
    lines = [
        f"# A one-row change refreshed by a fresh process (TPC-H SF {args.sf:g}, median of {args.repeats})", "",
        "| view | `ivm refresh VIEW` s | API total s | imports s | load s | compile s | refresh s | engine | Spark started |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for view, found in results.items():
        api = found["api"]

        def median(key: str) -> float:
            return statistics.median(p[key] for p in api)

        lines.append(
            f"| {view} | {statistics.median(found['cli']):.2f} | {median('total'):.2f} | {median('imports'):.2f} | "
            f"{median('load'):.2f} | {median('compile'):.2f} | {median('refresh'):.2f} | {api[-1]['engine']} | "
            f"{api[-1]['spark_started']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out_path = HERE / "results" / f"fresh_refresh_sf{args.sf:g}"
    out_path.with_name(out_path.name + ".md").write_text(text)
    out_path.with_name(out_path.name + ".json").write_text(json.dumps(results, indent=1))
    stop_spark()


if __name__ == "__main__":
    main()
