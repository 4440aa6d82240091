"""Commits of an in-process epoch one at a time against all at once: the same TPC-H views and
batches, refreshed alternately with ``engine.execute.COMMIT_THREADS`` = 1 and the default, on a
local folder and (``--s3``) on a local S3 server. Prints the median refresh time and the median
time of the epoch's commits (state tables and output) for each; saves them to
benchmarks/results/commit_threads.json. Printed, not asserted.

    python benchmarks/commit_threads.py [--sf 0.1] [--views q03,q05,q10] [--rounds 6] [--s3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from ivm_assets import IvmProject  # noqa: E402
from ivm_assets.engine import execute  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.tpch import create_sources, generate_parquet, make_batches  # noqa: E402
from tpch_refresh import write_project  # noqa: E402  (benchmarks/: every benchmark's TPC-H project)

DATA = HERE / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--views", default="q03,q05,q10")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batch-fraction", type=float, default=0.001)
    parser.add_argument("--s3", action="store_true", help="sources and warehouse on a local S3 server")
    args = parser.parse_args()
    spark = get_spark()
    views = args.views.split(",")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        server = None
        if args.s3:
            from object_storage import LocalS3  # benchmarks/object_storage.py

            from ivm_assets.delta import storage

            server = LocalS3(root / "moto.log")
            server.create_bucket("bench")
            base = "s3://bench"
            storage.register(base, server.options, origin="benchmark")
        else:
            base = str(root)
        try:
            sources = create_sources(generate_parquet(args.sf, DATA), f"{base}/sources")
            write_project(root, sources, views, warehouse=f"{base}/warehouse", storage_options=server.options if server else None)
            project = IvmProject.load(root, spark=spark)
            project.refresh()
            batches = make_batches(spark, sources, args.batch_fraction, seed=11)
            timed = _timing_commits()
            found: dict[str, dict[str, list[float]]] = {v: {"one at a time": [], "at once": [], "commits one at a time": [], "commits at once": []} for v in views}
            default = execute.COMMIT_THREADS
            for round_ in range(args.rounds * 2 + 1):
                batches.apply()
                label = "one at a time" if round_ % 2 else "at once"
                execute.COMMIT_THREADS = 1 if round_ % 2 else default
                for view in views:
                    timed.clear()
                    began = time.perf_counter()
                    [result] = project.refresh([view])
                    if round_ == 0:
                        continue  # warm-up
                    assert result.engine == "in process", result.summary()
                    found[view][label].append(time.perf_counter() - began)
                    found[view]["commits " + label].append(sum(timed))
            execute.COMMIT_THREADS = default
        finally:
            if server is not None:
                server.stop()
    summary = {v: {k: round(statistics.median(t) * 1000, 1) for k, t in f.items()} for v, f in found.items()}
    where = "local S3 server" if args.s3 else "local folder"
    print(f"TPC-H SF {args.sf:g}, {where}, median ms over {args.rounds} refreshes each (threads: {default} vs 1):")
    for view, s in summary.items():
        print(f"  {view}: refresh {s['one at a time']} → {s['at once']} ms; commits {s['commits one at a time']} → {s['commits at once']} ms")
    out = HERE / "results" / "commit_threads.json"
    saved = json.loads(out.read_text()) if out.exists() else {}
    saved[f"sf{args.sf:g}_{'s3' if args.s3 else 'folder'}"] = summary
    out.write_text(json.dumps(saved, indent=2))
    stop_spark()


def _timing_commits() -> list[float]:
    """Wrap the epoch's commit step (execute._commit) to time it; returns the list it fills."""
    times: list[float] = []
    original = execute._commit

    def timed(*args, **kwargs):
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times.append(time.perf_counter() - began)

    execute._commit = timed
    return times


if __name__ == "__main__":
    main()
