"""Where a warm incremental refresh spends its time, phase by phase, without a profiler.

Builds the TPC-H views at ``--sf`` (the parquet the benchmark generated is reused), applies
one untimed batch, then ``--batches`` more, refreshing each view after each batch. Each
phase of the refresh is timed by a wrapper (a few microseconds a call, where cProfile
doubles the cost of Python-heavy code) and the medians over the batches are printed: reading
the change, the in-process epoch and inside it its DuckDB statements,
consolidations and state reads, the commits and the output's change (a MERGE, or an
overwrite), compiling (the sources' schemas read inside it), and the refresh's own
bookkeeping: the sources' latest versions, the claim taken with the epoch planned, the
epoch recorded with the claim released, the progress log's reads and commits, and whether
a compaction is due.

    python benchmarks/refresh_phases.py --sf 1 --views q01,q06,q14 --batches 4

Prints only. To compare two commits, run it from a worktree of each, one after the other:
this VM's speed drifts by 20 % within an hour, more than most changes it is used to judge.
"""

from __future__ import annotations

import argparse
import collections
import functools
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import tpch_refresh as bench  # noqa: E402

from ivm_assets import project  # noqa: E402
from ivm_assets.delta import write  # noqa: E402
from ivm_assets.engine import changes, execute, output, refresh  # noqa: E402
from ivm_assets.render.duckdb.epoch import LocalEpoch  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.state import arrangement, claim, compaction, progress  # noqa: E402

# (owner, attribute, label): each is looked up through its owner at call time, so wrapping
# the attribute times every call. Indented labels are inside the one above them. The
# bookkeeping after compile overlaps where the refresh nests it: planning looks up the
# sources' versions and checks whether the view is up to date again, inside the claim, and
# the progress log's reads and commits are inside the claim's rows.
PHASES = (
    (changes, "read_range", "read the change"),
    (LocalEpoch, "run", "epoch in process"),
    (LocalEpoch, "sql", "  DuckDB statements"),
    (LocalEpoch, "consolidate", "  consolidations"),
    (arrangement, "read", "  state reads"),
    (execute, "_commit", "commits"),
    (arrangement, "commit", "  state appends (summed over the commit threads)"),
    (write, "write_at", "    delta-rs writes"),
    (write, "cache_written", "    written files handed to the cache"),
    (output, "apply_change", "  output change applied"),
    (output, "apply_bag_change", "    as a MERGE"),
    (output, "write_output_rows", "    as an overwrite"),
    (project.IvmProject, "compile", "compile"),
    (project.IvmProject, "_source_schema", "  sources' schemas"),
    (refresh, "_source_versions", "sources' latest versions"),
    (refresh, "_up_to_date", "up-to-date checks"),
    (claim, "_acquire", "claim taken (the epoch planned)"),
    (refresh, "_plan_epoch", "  plan the epoch"),
    (claim.HeldClaim, "finish", "epoch recorded, claim released"),
    (claim.HeldClaim, "release", "claim released after a commit"),
    (progress.Progress, "read", "progress records read"),
    (progress.Progress, "commit", "progress records committed"),
    (refresh, "compaction_due", "compactions due?"),
)


_counting = threading.Lock()


def _timed(seconds: collections.Counter, owner: object, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            with _counting:  # commits run in threads
                seconds[label] += elapsed

    setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--views", default="q01,q06")
    parser.add_argument("--batches", type=int, default=4, help="timed batches (medians over them)")
    parser.add_argument("--rf2", choices=("random", "lowest"), default="random")
    parser.add_argument("--state-buckets", type=int, default=None, help="the project's state_buckets (default: none set, so new state gets 4 buckets)")
    args = parser.parse_args()
    views = args.views.split(",")

    seconds: collections.Counter[str] = collections.Counter()
    for owner, name, label in PHASES:
        _timed(seconds, owner, name, label)
    spark = get_spark()
    try:
        ctx, batches = bench.warmed(spark, args.sf, views, rf2=args.rf2, warm=1, state_buckets=args.state_buckets)
        runs: dict[str, list[tuple[float, dict[str, float]]]] = collections.defaultdict(list)
        for _ in range(args.batches):
            batches.apply()
            for view in views:
                seconds.clear()
                start = time.perf_counter()
                ctx.project.refresh(views=[view])
                runs[view].append((time.perf_counter() - start, dict(seconds)))
    finally:
        stop_spark()
    for view in views:
        totals = ", ".join(f"{total * 1000:.0f}" for total, _ in runs[view])
        print(f"{view}: refresh {statistics.median(t for t, _ in runs[view]) * 1000:.0f} ms median ({totals})")
        for _, _, label in PHASES:
            value = statistics.median(phases.get(label, 0.0) for _, phases in runs[view])
            print(f"  {label:48s} {value * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
