"""Where small incremental epochs run, over the test suite's adversarial corpora.

Issue 25's target: on adversarial values, at least 90 % of small incremental epochs run in
process (DuckDB over Arrow), every answer equal to Spark's. This counts, it does not time:

- **numbers**: the views and epochs of ``tests/test_spark_answers.py`` (BIGINT near ±2⁶³,
  DECIMAL(38) near its limit, NaN, ±0.0, ±Infinity in sums, groups and join keys);
- **text and time**: ``tests/test_text_and_time_answers.py`` (trailing spaces, composed and
  decomposed accents, emoji, LIKE escapes, dates before 1582, TIMESTAMP beside
  TIMESTAMP_NTZ), in the America/New_York session zone;
- **operators**: the 20 views of ``tests/rules/test_cancelling_changes.py`` (every
  operator: outer, semi and anti joins, NOT IN, set operations, windows, top-k) through
  plain inserts, deletes and updates;
- **random views**: ``--random-seeds`` seeds of ``tests/random_views.py``'s 25 random views
  each (every incremental construct, over adversarial values) through 4 epochs of random
  changes, ANSI on, in UTC.

Each epoch is refreshed with the cost model free to choose (``IVM_SMALL_EPOCHS=auto``);
every incremental epoch that reached an operator is counted "in process" or "spark: <why>".
A refresh that fails (Spark's own error under ANSI) counts as neither. Prints a table per
corpus and the reasons, saves ``benchmarks/results/in_process_share.json``.

    .venv/bin/python benchmarks/in_process_share.py
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import random
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ivm_assets.delta.write import delete_rows, update_rows, write  # noqa: E402
from ivm_assets.errors import ExpressionError  # noqa: E402
from ivm_assets.spark.session import get_spark  # noqa: E402
from tests import test_spark_answers as numbers  # noqa: E402
from tests import test_text_and_time_answers as text_and_time  # noqa: E402
from tests.conftest import ProjectBuilder  # noqa: E402
from tests.rules import test_cancelling_changes as operators  # noqa: E402
from tests.random_changes import SCHEMA, initial_table  # noqa: E402
from tests.random_views import Changes, random_changes, random_views  # noqa: E402


def _operator_corpus(builder: ProjectBuilder) -> list:
    """The operator views over two small tables, and epochs of ordinary changes to both."""
    ids = itertools.count(1)
    t, u = builder.source("t", initial_table(ids)), builder.source("u", initial_table(ids, n=4))
    for name, sql in operators.VIEWS.items():
        builder.view(name, sql)

    def rows(*values) -> pa.Table:
        return pa.Table.from_pylist([dict(zip(SCHEMA.names, v)) for v in values], schema=SCHEMA)

    return [
        [lambda: write(t, rows((50, 1, 7, 2.5, "b"), (51, None, 3, None, "c"), (52, 2, -1, 0.5, None)), mode="append")],
        [lambda: delete_rows(t, "id = 2"), lambda: update_rows(t, set_sql={"v": "v + 10"}, predicate="id = 3")],
        [lambda: write(u, rows((60, 0, 4, 1.25, "a")), mode="append"), lambda: delete_rows(u, "id = 8")],
        [lambda: update_rows(t, set_sql={"k": "2"}, predicate="id = 50"), lambda: update_rows(u, set_sql={"k": "NULL"}, predicate="id = 9")],
    ]


def _random_corpus(seed: int):
    """25 random views over two small tables, and 4 epochs of random changes to them."""

    def corpus(builder: ProjectBuilder) -> list:
        rng = random.Random(seed)
        changes = Changes(rng)
        uris = {"t": builder.source("t", changes.initial("t", 14)), "u": builder.source("u", changes.initial("u", 6))}
        for name, sql in random_views(rng, 25).items():
            builder.view(name, sql)
        return [[lambda: random_changes(rng, changes, uris)] for _ in range(4)]

    return corpus


def _count(project, counts: collections.Counter, reasons: collections.Counter, per_view: dict) -> None:
    for view in project.order:
        try:
            results = project.refresh([view])
        except ExpressionError:
            counts["failed (Spark's error)"] += 1
            continue
        for r in results:
            if r.mode != "incremental" or r.engine is None:
                continue
            where = "in process" if r.engine == "in process" else "spark"
            counts[where] += 1
            per_view.setdefault(r.view, collections.Counter())[where] += 1
            if where == "spark":
                reasons[r.engine.removeprefix("spark: ")] += 1


def measure(name: str, corpus, work: Path, spark) -> dict:
    builder = ProjectBuilder(work / name, spark)
    epochs = corpus(builder)
    project = builder.load()
    for view in project.order:
        try:
            project.refresh([view])
        except ExpressionError:
            pass  # a first build Spark itself refuses (ANSI): that view's refreshes fail alike
    counts, reasons, per_view = collections.Counter(), collections.Counter(), {}
    for changes in epochs:
        for change in changes:
            change()
        _count(project, counts, reasons, per_view)
    small = counts["in process"] + counts["spark"]
    return {
        "corpus": name,
        "views": len(project.order),
        "incremental_epochs": small,
        "in_process": counts["in process"],
        "share_in_process": round(counts["in process"] / small, 3) if small else None,
        "failed_refreshes": counts["failed (Spark's error)"],
        "spark_reasons": dict(reasons.most_common()),
        "never_in_process": sorted(v for v, c in per_view.items() if not c["in process"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-seeds", type=int, default=3, help="seeds of 25 random views each (0: none)")
    args = parser.parse_args()
    spark = get_spark()
    corpora = {
        "numbers": lambda b: (numbers.create_corpus(b), numbers.corpus_epochs(b))[1],
        "text and time": lambda b: (text_and_time.create_corpus(b), text_and_time.corpus_epochs(b))[1],
        "operators": _operator_corpus,
        **{f"random views {seed}": _random_corpus(seed) for seed in range(1, args.random_seeds + 1)},
    }
    results = []
    with tempfile.TemporaryDirectory(prefix="ivm_in_process_share_") as work:
        for name, corpus in corpora.items():
            zone = "America/New_York" if name == "text and time" else "UTC"
            spark.conf.set("spark.sql.session.timeZone", zone)
            results.append(measure(name, corpus, Path(work), spark))
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    total = sum(r["incremental_epochs"] for r in results)
    local = sum(r["in_process"] for r in results)
    print(f"{'corpus':<16} {'views':>5} {'epochs':>7} {'in process':>11} {'share':>6}")
    for r in results:
        print(f"{r['corpus']:<16} {r['views']:>5} {r['incremental_epochs']:>7} {r['in_process']:>11} {r['share_in_process']:>6}")
    print(f"{'all':<16} {'':>5} {total:>7} {local:>11} {round(local / total, 3):>6}")
    reasons = collections.Counter()
    for r in results:
        reasons.update(r["spark_reasons"])
    print("\nwhy epochs ran in Spark:")
    for why, n in reasons.most_common():
        print(f"  {n:>3}  {why}")
    out = ROOT / "benchmarks" / "results" / "in_process_share.json"
    out.write_text(json.dumps({"corpora": results, "incremental_epochs": total, "in_process": local,
                               "share_in_process": round(local / total, 3)}, indent=2) + "\n")
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
