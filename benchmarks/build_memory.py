"""Memory of a full build: the peak RSS of the Python process alone, in a fresh process.

The issue's limit for a full build at SF 10 is about the driver's Python process (the
executors' rows must never pass through it). Inside ``tpch_refresh.py`` that cannot be
told apart from what the same process held before (the sources it generated, the state
rows its incremental refreshes keep in memory), so this script measures it on its own:
it loads the project ``tpch_refresh.py --sf N`` left in ``benchmarks/data/run_sf<N>/``,
runs ``refresh --full`` of each view in this fresh process, and reports the wall time and
the kernel's peak RSS of this process (``VmHWM``, reset before each view through
``/proc/self/clear_refs``), beside the Spark JVM's.

    python benchmarks/build_memory.py --sf 10 --views q06,q12,q03

Prints, and saves ``benchmarks/results/build_memory_sf<N>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ivm_assets.project import IvmProject  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402


def _status_kib(pid: int | str, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(f"{field}:"))


def _reset_peak() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux ≥ 4.0); False where refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _jvm_pids() -> list[int]:
    """This process's child processes (the Spark JVM of a local session)."""
    me = str(os.getpid())
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if stat[stat.rfind(")") + 2 :].split()[1] == me:
                pids.append(int(entry.name))
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=10)
    parser.add_argument("--views", default="q06,q12,q03")
    args = parser.parse_args()
    project_dir = HERE / "data" / f"run_sf{args.sf:g}" / "project"
    if not project_dir.exists():
        sys.exit(f"no project at {project_dir}: run `python benchmarks/tpch_refresh.py --sf {args.sf:g}` first")
    get_spark()  # started before the first measurement, as a long-lived process has it
    project = IvmProject.load(project_dir)
    results = []
    try:
        for view in args.views.split(","):
            exact = _reset_peak()
            start_kib = _status_kib("self", "VmRSS")
            began = time.perf_counter()
            [result] = [r for r in project.refresh(views=[view], full=True) if r.view == view]
            seconds = time.perf_counter() - began
            peak_kib = _status_kib("self", "VmHWM")
            jvm_kib = sum(_status_kib(pid, "VmHWM") for pid in _jvm_pids())
            row = {
                "view": view, "seconds": round(seconds, 2), "mode": result.mode,
                "state_rows_written": result.stats.get("state_rows_written"), "spark_jobs": result.stats.get("spark_jobs"),
                "python_rss_start_mib": round(start_kib / 1024), "python_peak_mib": round(peak_kib / 1024),
                "peak_is_this_build": exact, "jvm_peak_mib": round(jvm_kib / 1024),
            }
            results.append(row)
            print(
                f"{view}: {seconds:.1f} s ({result.mode}, {row['state_rows_written']} state rows, {row['spark_jobs']} jobs); "
                f"Python RSS {row['python_rss_start_mib']} MiB at start, peak {row['python_peak_mib']} MiB"
                f"{'' if exact else ' (process lifetime: VmHWM could not be reset)'}; JVM peak {row['jvm_peak_mib']} MiB",
                flush=True,
            )
    finally:
        stop_spark()
    out = HERE / "results" / f"build_memory_sf{args.sf:g}.json"
    out.write_text(json.dumps({"sf": args.sf, "driver_memory": "4g (ivm default)", "views": results}, indent=2) + "\n")
    print(f"saved {out}")


if __name__ == "__main__":
    main()
