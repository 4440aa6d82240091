"""Where the small epochs of all 22 TPC-H views run: in process (DuckDB over Arrow) or in Spark.

Issue 25's target: every small epoch of the 22 TPC-H views runs in process. This counts, it
does not time (``tpch_refresh.py`` times): it builds the 22 queries of ``benchmarks/tpch``
as views over generated data, applies TPC-H refresh batches (RF1 inserts, RF2 deletes of
random orders, dimension updates, as the benchmark's), refreshes with the cost model free to
choose (``IVM_SMALL_EPOCHS=auto``), checks each view against its recompute, and prints per
view where its epochs ran and, for Spark, why. Saves ``benchmarks/results/tpch_in_process.json``.

    .venv/bin/python benchmarks/tpch_in_process.py [--sf 0.01] [--batches 3] [--batch-fraction 0.001]
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ivm_assets import IvmProject  # noqa: E402
from ivm_assets.engine.oracle import check_view  # noqa: E402
from ivm_assets.spark.session import get_spark  # noqa: E402
from ivm_assets.tpch import create_sources, generate_parquet, make_batches  # noqa: E402

QUERIES = ROOT / "benchmarks" / "tpch"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--batch-fraction", type=float, default=0.001)
    args = parser.parse_args()
    spark = get_spark()
    where: dict[str, collections.Counter] = {}
    reasons: collections.Counter = collections.Counter()
    wrong: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ivm_tpch_in_process_") as work:
        data = generate_parquet(args.sf, ROOT / "benchmarks" / "data")
        sources = create_sources(data, Path(work) / "sources")
        root = Path(work) / "project"
        (root / "views").mkdir(parents=True)
        (root / "ivm.yaml").write_text(yaml.safe_dump({"sources": sources}))
        for query in sorted(QUERIES.glob("q*.sql")):
            shutil.copy(query, root / "views" / query.name)
        project = IvmProject.load(root, spark=spark)
        project.refresh()
        batches = make_batches(spark, sources, args.batch_fraction, seed=25, dim_updates=5)
        for batch in range(args.batches):
            batches.apply()
            for r in project.refresh():
                if r.mode != "incremental" or r.engine is None:
                    continue
                ran = "in process" if r.engine == "in process" else "spark"
                where.setdefault(r.view, collections.Counter())[ran] += 1
                if ran == "spark":
                    reasons[f"{r.view}: {r.engine.removeprefix('spark: ')}"] += 1
            wrong += [f"batch {batch + 1}: {v}" for v in project.order if not check_view(project, v).ok]
    epochs = sum(sum(c.values()) for c in where.values())
    local = sum(c["in process"] for c in where.values())
    print(f"{'view':<6} {'in process':>10} {'spark':>6}")
    for view in sorted(where):
        print(f"{view:<6} {where[view]['in process']:>10} {where[view]['spark']:>6}")
    print(f"all    {local:>10} {epochs - local:>6}   ({local} of {epochs} small epochs in process)")
    if reasons:
        print("\nwhy epochs ran in Spark:")
        for why, n in reasons.most_common():
            print(f"  {n:>3}  {why}")
    print("\noracle:", "every view equals its recompute after every batch" if not wrong else f"WRONG: {wrong}")
    out = ROOT / "benchmarks" / "results" / "tpch_in_process.json"
    out.write_text(json.dumps({
        "sf": args.sf, "batches": args.batches, "batch_fraction": args.batch_fraction, "small_epochs": epochs,
        "in_process": local, "per_view": {v: dict(c) for v, c in sorted(where.items())},
        "spark_reasons": dict(reasons.most_common()), "wrong": wrong,
    }, indent=2) + "\n")
    print(f"saved {out}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
