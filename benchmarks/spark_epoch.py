"""What an epoch run in Spark costs when its change is one row: the fixed cost of Spark's
engine, which the suite pays at every epoch it runs in both engines and a user pays for
every epoch the cost model sends to Spark.

A 20-row source and a grouped SUM/COUNT view over it, built once; then one-row appends,
each refreshed with every epoch in Spark (``IVM_SMALL_EPOCHS=spark``), and as many
refreshed in process beside them. One more Spark epoch is profiled (cProfile) and its time
split by the engine's steps: building the DataFrames of each compute (classic Spark analyzes
a DataFrame as each transformation creates it), collecting results to Arrow, committing state,
and the output. The Python process's own CPU time over the Spark epochs is printed beside
their wall time: what it does not account for is the JVM's.

    python benchmarks/spark_epoch.py [--repeats 5]

Results go to benchmarks/results/spark_epoch.md and .json.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import pyarrow as pa  # noqa: E402
import yaml  # noqa: E402

from ivm_assets import IvmProject  # noqa: E402
from ivm_assets.delta.write import create_table, write  # noqa: E402
from ivm_assets.settings import SMALL_EPOCHS_ENV  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("x", pa.float64())])
VIEW = "SELECT k, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY k"
# The steps of an epoch: label -> (module, function) in the profile.
STEPS = {
    "DataFrames built (render)": ("render/spark/rel.py", "render"),
    "collects to Arrow": ("spark/arrow.py", "to_arrow"),
    "state commits": ("state/arrangement.py", "commit"),
    "output written": ("engine/execute.py", "write_output"),
}


def _project(root: Path, spark) -> tuple[IvmProject, str]:
    uri = str(root / "sources" / "t")
    create_table(uri, pa.Table.from_pylist([{"id": i, "k": i % 3, "x": float(i)} for i in range(20)], schema=SCHEMA))
    (root / "views").mkdir(parents=True)
    (root / "views" / "sums.sql").write_text(VIEW)
    (root / "ivm.yaml").write_text(yaml.safe_dump({"sources": {"t": "sources/t"}, "state_buckets": 4}))
    project = IvmProject.load(root, spark=spark)
    project.refresh()
    return project, uri


def _timed_refresh(project: IvmProject, uri: str, row: int, engine: str) -> float:
    write(uri, pa.Table.from_pylist([{"id": row, "k": 1, "x": 0.5}], schema=SCHEMA), mode="append")
    os.environ[SMALL_EPOCHS_ENV] = engine
    began = time.perf_counter()
    (result,) = project.refresh()
    elapsed = time.perf_counter() - began
    assert result.mode == "incremental" and (result.engine == "in process") == (engine != "spark"), result.summary()
    return elapsed


def _steps(profile: cProfile.Profile) -> dict[str, float]:
    stats = pstats.Stats(profile).stats  # (file, line, function) -> (cc, nc, tt, ct, callers)
    found = dict.fromkeys(STEPS, 0.0)
    for (file, _, function), (_, _, _, cumulative, _) in stats.items():  # a recursive call's cumulative time counts once
        for label, (module, name) in STEPS.items():
            if file.endswith(module) and function == name:
                found[label] += cumulative
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    spark = get_spark()
    try:
        with tempfile.TemporaryDirectory() as folder:
            project, uri = _project(Path(folder) / "project", spark)
            row = 100
            _timed_refresh(project, uri, row, "spark")  # warm-up
            spark_times, local_times = [], []
            cpu_before = time.process_time()
            for _ in range(args.repeats):
                row += 1
                spark_times.append(_timed_refresh(project, uri, row, "spark"))
            cpu = time.process_time() - cpu_before
            for _ in range(args.repeats):
                row += 1
                local_times.append(_timed_refresh(project, uri, row, "auto"))
            profile = cProfile.Profile()
            profile.enable()
            profiled = _timed_refresh(project, uri, row + 1, "spark")
            profile.disable()
            steps = _steps(profile)
    finally:
        stop_spark()
    results = {
        "view": VIEW, "repeats": args.repeats,
        "spark_epoch_s": statistics.median(spark_times), "spark_epochs_s": spark_times,
        "python_cpu_share": cpu / sum(spark_times),
        "in_process_epoch_s": statistics.median(local_times), "in_process_epochs_s": local_times,
        "profiled_epoch_s": profiled, "profiled_steps_s": steps,
    }
    lines = [
        f"# A one-row epoch in Spark (median of {args.repeats}; `{VIEW}` over 20 rows)",
        "",
        f"- in Spark: **{results['spark_epoch_s']:.2f} s**; the Python process's CPU over those epochs: "
        f"{results['python_cpu_share']:.0%} of their wall time (the rest is the JVM's, or waiting on it)",
        f"- in process: **{results['in_process_epoch_s']:.3f} s**",
        f"- one Spark epoch profiled: {profiled:.2f} s (under cProfile), of which (the steps may overlap: "
        "building a compute's frames may collect a smaller result it reads):",
        "",
        "| step | s |",
        "|---|---|",
        *[f"| {label} | {seconds:.2f} |" for label, seconds in steps.items()],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    out = HERE / "results"
    (out / "spark_epoch.md").write_text(text)
    (out / "spark_epoch.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
