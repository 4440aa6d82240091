"""DOUBLE sums under scattered deletes: what summing a group again from its values costs.

A SUM/AVG over DOUBLE keeps its values per group, and a group that a value leaves is summed
again from them where a bound on its running sum's error wants it (docs/sql-support.md,
Exactness); a SUM over DECIMAL is carried on as old + change. This times both over TPC-H's lineitem (generated at ``--sf``), each epoch
deleting the lines of ``--orders`` orders drawn at random (scattered keys) and inserting as
many lines under new order keys, for two groupings:

- ``coarse``: GROUP BY l_returnflag, l_linestatus (4 groups: every epoch touches all of
  them, so a DOUBLE sum recounted reads nearly every stored value again);
- ``fine``: GROUP BY l_suppkey (one group per supplier: an epoch touches few values each).

Each view once over DOUBLE (``CAST(l_extendedprice AS DOUBLE)``) and once over the DECIMAL
column. Prints medians over ``--repeats`` epochs and how many sums were recounted, every
epoch checked against Spark's recompute; saves ``benchmarks/results/double_sums_sf<sf>.json`` and ``.md``.

    .venv/bin/python benchmarks/double_sums.py --sf 0.1 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ivm_assets import IvmProject  # noqa: E402
from ivm_assets.delta.write import create_table, delete_rows, write  # noqa: E402
from ivm_assets.engine.oracle import check_views  # noqa: E402
from ivm_assets.spark.session import get_spark  # noqa: E402
from ivm_assets.tpch import generate_parquet  # noqa: E402

GROUPINGS = {"coarse": "l_returnflag, l_linestatus", "fine": "l_suppkey"}
ARGUMENTS = {"double": "CAST(l_extendedprice AS DOUBLE)", "decimal": "l_extendedprice"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--orders", type=int, default=150, help="orders whose lines are deleted (and inserted again under new keys) per epoch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    lineitem = pq.read_table(generate_parquet(args.sf, ROOT / "benchmarks" / "data") / "lineitem.parquet")
    lineitem = lineitem.select(["l_orderkey", "l_linenumber", "l_suppkey", "l_returnflag", "l_linestatus", "l_extendedprice"])
    # tpchgen writes text as string_view, which pyarrow's take does not handle.
    lineitem = lineitem.cast(pa.schema([pa.field(f.name, pa.string()) if "string" in str(f.type) else f for f in lineitem.schema]))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        (root / "views").mkdir(parents=True)
        uri = str(Path(tmp) / "lineitem")
        create_table(uri, lineitem)
        names = []
        for grouping, by in GROUPINGS.items():
            for kind, arg in ARGUMENTS.items():
                name = f"{grouping}_{kind}"
                (root / "views" / f"{name}.sql").write_text(f"SELECT {by}, SUM({arg}) AS s, AVG({arg}) AS a, COUNT(*) AS n FROM lineitem GROUP BY {by}")
                names.append(name)
        (root / "ivm.yaml").write_text(f"sources:\n  lineitem: {uri}\n")
        project = IvmProject.load(root, spark=get_spark())
        project.refresh()
        times: dict[str, list[float]] = {n: [] for n in names}
        engines: dict[str, set[str]] = {n: set() for n in names}
        recounts = {n: 0 for n in names}  # DOUBLE sums of a group summed again from its values
        orders = sorted(set(lineitem.column("l_orderkey").to_pylist()))
        suppliers = pc.max(lineitem.column("l_suppkey")).as_py()
        next_key = orders[-1] + 1
        for _ in range(args.repeats):
            drawn = rng.sample(orders, args.orders)
            orders = sorted(set(orders) - set(drawn))
            gone = lineitem.filter(pc.is_in(lineitem.column("l_orderkey"), pa.array(drawn, lineitem.schema.field("l_orderkey").type)))
            delete_rows(uri, f"l_orderkey IN ({', '.join(map(str, drawn))})")
            renumbered = {old: next_key + i for i, old in enumerate(drawn)}
            next_key += len(drawn)
            # New lines, not the old ones again (which would cancel before any operator): other
            # order keys, suppliers drawn at random, prices one unit higher.
            added = gone.set_column(0, "l_orderkey", pa.array([renumbered[k] for k in gone.column("l_orderkey").to_pylist()], gone.schema.field("l_orderkey").type))
            added = added.set_column(2, "l_suppkey", pa.array([rng.randint(1, suppliers) for _ in range(added.num_rows)], pa.int64()))
            price = added.schema.field("l_extendedprice").type
            added = added.set_column(5, "l_extendedprice", pa.array([p + 1 for p in added.column("l_extendedprice").to_pylist()], price)).cast(gone.schema)
            write(uri, added, mode="append")
            lineitem = pa.concat_tables([lineitem.filter(pc.invert(pc.is_in(lineitem.column("l_orderkey"), pa.array(drawn, lineitem.schema.field("l_orderkey").type)))), added])
            orders += list(renumbered.values())
            for name in names:
                started = time.perf_counter()
                (result,) = project.refresh([name])
                times[name].append(time.perf_counter() - started)
                engines[name].add(f"{result.mode}, {result.engine or 'no operator reached'}")
                recounts[name] += result.stats.get("double_sum_recounts", 0)
            wrong = [r for r in check_views(project, names) if not r.ok]
            if wrong:
                raise SystemExit("wrong answer: " + "; ".join(f"{r.view}: {r.missing} missing {r.sample_missing}, {r.extra} extra {r.sample_extra}" for r in wrong))
    rows = [{"view": n, "median_s": round(statistics.median(times[n]), 3), "recounts": recounts[n], "epochs": sorted(engines[n])} for n in names]
    lines = [f"DOUBLE sums under scattered deletes, SF {args.sf}, the lines of {args.orders} orders deleted and inserted again per epoch, "
             f"medians of {args.repeats} epochs, every epoch equal to Spark's recompute.", "",
             "| view | refresh s | sums recounted (all epochs) | epochs |", "|------|-----------|------|--------|"]
    lines += [f"| {r['view']} | {r['median_s']:.3f} | {r['recounts']} | {'; '.join(r['epochs'])} |" for r in rows]
    print("\n".join(lines))
    out = ROOT / "benchmarks" / "results" / f"double_sums_sf{args.sf:g}"
    Path(f"{out}.json").write_text(json.dumps({"args": vars(args), "views": rows}, indent=2) + "\n")
    Path(f"{out}.md").write_text("\n".join(lines) + "\n")
    print(f"saved {out}.json and .md")


if __name__ == "__main__":
    main()
