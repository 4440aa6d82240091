"""Commits through kept Delta handles over a long-lived process: a state table's append per
refresh, as an epoch in process makes it (``write_epoch`` into bucket partitions, each
refresh in its own ``reusing_handles`` block, so the handle one commit moved on is the
next one's), ``--commits`` times.

Two tables are written alternately, commit for commit (this VM's speed drifts): one with
handles kept however often they moved (as before ``handles._MOVES_KEPT``), one with today's
rule (a handle moved ``_MOVES_KEPT`` times is not kept; the table is opened again). Prints
and saves the median commit time per window of commits, and each arm's mean.

    python benchmarks/kept_handles.py [--commits 300] [--rows 1500] [--window 50]

Results go to benchmarks/results/kept_handles.md and .json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ivm_assets.delta import handles  # noqa: E402
from ivm_assets.delta.commit import Epoch  # noqa: E402
from ivm_assets.delta.write import write_epoch  # noqa: E402

BUCKETS = 16
ARMS = {"kept however often moved": 10**9, f"reopened after {handles._MOVES_KEPT} moves": handles._MOVES_KEPT}


def _rows(rng: np.random.Generator, count: int) -> pa.Table:
    keys = np.sort(rng.integers(0, 6_000_000, count))
    return pa.table({
        "__bucket": pa.array(keys % BUCKETS, pa.int32()), "k": pa.array(keys, pa.int64()),
        "v": pa.array(rng.random(count)), "__w": pa.array(np.ones(count, np.int64)),
    }).sort_by([("__bucket", "ascending"), ("k", "ascending")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--window", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory() as folder:
        uris = {arm: f"{folder}/t{i}" for i, arm in enumerate(ARMS)}
        for arm, uri in uris.items():
            write_epoch(uri, _rows(rng, args.rows), epoch=Epoch("bench", 0, {}), after=None, mode="overwrite", partition_by=["__bucket"])
        for n in range(1, args.commits + 1):
            for arm, moves in ARMS.items():
                handles._MOVES_KEPT = moves
                rows = _rows(rng, args.rows)
                with handles.reusing_handles():
                    start = time.perf_counter()
                    write_epoch(uris[arm], rows, epoch=Epoch("bench", n, {}), after=n - 1, mode="append", partition_by=["__bucket"])
                    times[arm].append(time.perf_counter() - start)
    windows = range(0, args.commits, args.window)
    lines = [
        f"# Commits through kept handles: {args.commits} appends of {args.rows:,} rows into {BUCKETS} buckets",
        "",
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} · the two arms alternate commit for commit · median commit time (ms) per window",
        "",
        "| commits | " + " | ".join(ARMS) + " |",
        "|---|" + "---|" * len(ARMS),
    ]
    for start in windows:
        cells = [f"{1000 * statistics.median(times[arm][start:start + args.window]):.1f}" for arm in ARMS]
        lines.append(f"| {start + 1}–{min(start + args.window, args.commits)} | " + " | ".join(cells) + " |")
    lines.append("| mean of all | " + " | ".join(f"{1000 * statistics.mean(times[arm]):.1f}" for arm in ARMS) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = HERE / "results" / "kept_handles"
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"commits": args.commits, "rows": args.rows, "seconds": times}, indent=1))


if __name__ == "__main__":
    main()
