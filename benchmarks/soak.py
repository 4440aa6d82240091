"""Soak: many epochs of small random changes on the demo project, in one warm process.

Builds the demo project, then repeats N times: a small random batch of source changes
(new orders with lines, orders shipped, orders deleted), one refresh of every view. Prints
and saves, per view: the median refresh time of the first and of the last 20 epochs and
their ratio (the target is ≤ 1.5: the cost of an epoch must not grow with the number of
epochs before it), the state tables' and output's file counts and Delta log lengths at the
end, and whether every view still equals a recompute of its SQL.

    python benchmarks/soak.py [--epochs 300] [--window 20]

Results go to benchmarks/results/soak.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ivm_assets.delta.handles import latest_version  # noqa: E402
from ivm_assets.delta.snapshot import file_count, row_count  # noqa: E402
from ivm_assets.demo import apply_demo_changes, create_demo_project  # noqa: E402
from ivm_assets.engine.oracle import check_view  # noqa: E402
from ivm_assets.project import IvmProject  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402


def _tables(root: Path) -> dict[str, Path]:
    """Every Delta table a refresh writes: outputs, state tables, progress logs."""
    warehouse = root / "warehouse"
    return {str(p.parent.relative_to(warehouse)): p.parent for p in sorted(warehouse.rglob("_delta_log"))}


def _log_length(table: Path) -> int:
    """Commit files a reader may replay: those after the last checkpoint."""
    log = table / "_delta_log"
    commits = sorted(int(p.name.split(".")[0]) for p in log.glob("*.json") if p.name[0].isdigit())
    checkpoints = [int(p.name.split(".")[0]) for p in log.glob("*.checkpoint*.parquet")]
    last = max(checkpoints, default=-1)
    return sum(1 for c in commits if c > last)


def _source_rows(root: Path) -> dict[str, int | None]:
    """Rows of each demo source table now (from the Delta log's statistics)."""
    sources = root / "sources"
    return {p.name: row_count(str(p), latest_version(str(p))) for p in sorted(sources.iterdir()) if (p / "_delta_log").exists()}


def _n(rows: int | None) -> str:
    return "?" if rows is None else f"{rows:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--window", type=int, default=20, help="epochs in the first and last medians")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    spark = get_spark()
    folder = Path(tempfile.mkdtemp(prefix="ivm-soak-")) / "demo"
    root = create_demo_project(folder)
    project = IvmProject.load(root, spark=spark)
    project.refresh()
    times: dict[str, list[float]] = {}
    # Per epoch: the state rows the refresh's lookups decoded, and its change rows in: what
    # the work grew with, beside the time.
    state_rows: dict[str, list[int]] = {}
    rows_in: dict[str, list[int]] = {}
    source_rows = {"start": _source_rows(root)}
    modes: dict[str, dict[str, int]] = {}
    in_process: dict[str, int] = {}
    started = time.perf_counter()
    try:
        for epoch in range(1, args.epochs + 1):
            apply_demo_changes(root, seed=args.seed * 100_000 + epoch, new_orders=20, status_changes=10, deletions=5)
            for result in project.refresh():
                times.setdefault(result.view, []).append(result.duration_s)
                state_rows.setdefault(result.view, []).append(result.stats.get("state_rows_read", 0))
                rows_in.setdefault(result.view, []).append(result.rows_in)
                counts = modes.setdefault(result.view, {})
                counts[result.mode] = counts.get(result.mode, 0) + 1
                in_process[result.view] = in_process.get(result.view, 0) + (result.engine == "in process")
            if epoch % 25 == 0:
                print(f"epoch {epoch}: {time.perf_counter() - started:.0f} s", flush=True)
        oracle = {view: check_view(project, view).ok for view in project.order}
        source_rows["end"] = _source_rows(root)
        tables = {name: (file_count(str(path)), latest_version(str(path)) + 1, _log_length(path)) for name, path in _tables(root).items()}
    finally:
        stop_spark()

    w = args.window
    lines = [
        f"# Soak: {args.epochs} epochs of small random changes on the demo project",
        "",
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} · {os.cpu_count()} cores · load average at the end {os.getloadavg()[0]:.1f} · "
        f"each epoch: 20 new orders with their lines, 10 orders shipped, 5 orders deleted; one refresh of every view",
        "",
        "Source rows at the start → end: " + ", ".join(f"{n} {_n(source_rows['start'][n])} → {_n(source_rows['end'][n])}" for n in source_rows["start"]),
        "",
        f"| view | modes | in process | first {w} median s | last {w} median s | ratio | mean s (all, compactions included) | max s | "
        f"state rows read, first → last {w} median | change rows in, first → last {w} median | oracle |",
        "|------|-------|------------|----------------|---------------|-------|------|------|------|------|--------|",
    ]
    detail = {"epochs": args.epochs, "window": w, "views": {}, "tables": {}}
    for view, series in times.items():
        first, last = statistics.median(series[:w]), statistics.median(series[-w:])
        mode_text = ", ".join(f"{m} {n}" for m, n in sorted(modes[view].items()))
        mean, peak = statistics.fmean(series), max(series)
        read = (statistics.median(state_rows[view][:w]), statistics.median(state_rows[view][-w:]))
        changed = (statistics.median(rows_in[view][:w]), statistics.median(rows_in[view][-w:]))
        lines.append(
            f"| {view} | {mode_text} | {in_process.get(view, 0)} | {first:.3f} | {last:.3f} | {last / first:.2f} | {mean:.3f} | {peak:.2f} | "
            f"{read[0]:,.0f} → {read[1]:,.0f} | {changed[0]:,.0f} → {changed[1]:,.0f} | {'OK' if oracle[view] else 'DIFFERENT'} |"
        )
        detail["views"][view] = {
            "first_median_s": first, "last_median_s": last, "mean_s": mean, "max_s": peak, "modes": modes[view],
            "in_process": in_process.get(view, 0), "oracle_ok": oracle[view], "times_s": series,
            "state_rows_read": state_rows[view], "rows_in": rows_in[view],
        }
    detail["source_rows"] = source_rows
    lines += ["", "| table | files | commits | log files after the last checkpoint |", "|-------|-------|---------|------|"]
    for name, (files, commits, log) in tables.items():
        lines.append(f"| {name} | {files} | {commits} | {log} |")
        detail["tables"][name] = {"files": files, "commits": commits, "log_after_checkpoint": log}
    print("\n".join(lines))
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "soak.md").write_text("\n".join(lines) + "\n")
    (out / "soak.json").write_text(json.dumps(detail, indent=2) + "\n")
    print(f"\nsaved {out / 'soak'}.md and .json")
    if not all(oracle.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
