"""What compactions cost a run of small refreshes: TPC-H views refreshed after each of
``--batches`` 0.1 % batches (scattered orders inserted and deleted), long enough for every
state table to reach its compaction threshold (8 files per bucket) more than once. Prints
each refresh's time, the refreshes that compacted and what they took, and the total beside
the median; ``--full-only`` sets ``compaction.MERGE_SHARE`` below zero, so that every
compaction folds the whole table (the behaviour before 2026-12-02), for comparison in a
second process. Saves to benchmarks/results/compaction[_full_only].json.

    python benchmarks/compaction.py --sf 1 --views q03,q05,q10 --batches 20 [--full-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import tpch_refresh as bench  # noqa: E402

from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.state import compaction  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--views", default="q03,q05,q10")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--full-only", action="store_true", help="every compaction folds the whole table")
    args = parser.parse_args()
    views = args.views.split(",")
    if args.full_only:
        compaction.MERGE_SHARE = -1.0
    spark = get_spark()
    runs: dict[str, list[dict]] = {view: [] for view in views}
    try:
        ctx, batches = bench.warmed(spark, args.sf, views, rf2="random", warm=1, state_buckets=4)
        for batch in range(args.batches):
            batches.apply()
            for view in views:
                start = time.perf_counter()
                (result,) = ctx.project.refresh(views=[view])
                seconds = time.perf_counter() - start
                runs[view].append({"batch": batch + 1, "seconds": round(seconds, 4), "mode": result.mode,
                                   "compacted": result.stats.get("state_tables_compacted", 0)})
            print(f"batch {batch + 1}: " + ", ".join(f"{v} {runs[v][-1]['seconds']:.2f}s"
                                                     + (f" ({runs[v][-1]['compacted']} compacted)" if runs[v][-1]["compacted"] else "")
                                                     for v in views), flush=True)
    finally:
        stop_spark()
    summary = {}
    print(f"\n{'view':5s} {'median':>8s} {'max':>8s} {'total':>8s} {'compacting refreshes (s)':s}")
    for view in views:
        times = [r["seconds"] for r in runs[view]]
        compacting = [r["seconds"] for r in runs[view] if r["compacted"]]
        summary[view] = {"median": statistics.median(times), "max": max(times), "total": sum(times), "compacting": compacting}
        print(f"{view:5s} {statistics.median(times):8.3f} {max(times):8.3f} {sum(times):8.2f} {', '.join(f'{t:.2f}' for t in compacting)}")
    name = "compaction_full_only" if args.full_only else "compaction"
    out = HERE / "results" / f"{name}.json"
    out.write_text(json.dumps({"sf": args.sf, "batches": args.batches, "full_only": args.full_only, "summary": summary, "runs": runs},
                              indent=1))
    print(f"saved {out.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
