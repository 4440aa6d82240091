"""How long a one-row source change takes to reach a view's materialization in a real `dg dev`.

Serves the demo (definitions.py through workspace.yaml) with the repository's dagster.yaml
and automation on, and measures, for a one-row change to the `orders` source:

- **launch**: a run of one view launched through GraphQL (as the UI's "Materialize" does);
  the time from the launch call to the view's materialization event (its event timestamp);
- **sensor**: nothing launched by hand: the source sensor observes the new Delta version,
  the automation sensor requests the run; the time from the commit to the materialization,
  with the observation time in between.

``--spark connect`` (default) attaches the runs to a warm local Spark Connect server started
here first; ``--spark local`` gives each run its own local Spark (the behaviour before the
warm Spark), for comparison. Results are printed and saved to
``benchmarks/results/dagster_latency_<spark>.json``.

    .venv/bin/python benchmarks/dagster_latency.py --repeats 3
    .venv/bin/python benchmarks/dagster_latency.py --spark local --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ivm_assets.delta.write import update_rows  # noqa: E402
from ivm_assets.spark.connect import start_server, stop_server  # noqa: E402
from tests.dagster.dagster_dev import DagsterDev, start_dagster_dev  # noqa: E402
from tests.spark.connect_server import free_port  # noqa: E402

VIEWS = ["order_status_funnel", "product_stock", "revenue_by_region_day", "top_customers", "region_totals"]
MATERIALIZED = """
query M($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) { ... on Asset { assetMaterializations(limit: 1) { runId timestamp
    metadataEntries { label ... on TextMetadataEntry { text } } } } }
}
"""
OBSERVED = """
query O($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) { ... on Asset { assetObservations(limit: 1) { timestamp } } }
}
"""


def latest(dev: DagsterDev, view: str) -> dict | None:
    found = dev.graphql(MATERIALIZED, {"key": {"path": [view]}})["assetOrError"]["assetMaterializations"]
    return found[0] if found else None


def wait_for_materialization(dev: DagsterDev, view: str, after: float, timeout_s: float = 600) -> dict:
    """The first materialization of ``view`` stamped after ``after`` (epoch seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = latest(dev, view)
        if found and float(found["timestamp"]) / 1000 > after:
            return found
        time.sleep(0.25)
    raise TimeoutError(f"{view} was not materialized within {timeout_s} s; see {dev.log}")


def one_row_change(demo: Path, step: int) -> float:
    """Flip one order's status (one Delta commit); returns the commit time."""
    orders = str(demo / "sources" / "orders")
    status = "paid" if step % 2 else "placed"
    update_rows(orders, set_sql={"status": f"'{status}'"}, predicate="order_id = 1")
    return time.time()


def mode_of(materialization: dict) -> str:
    return next(e.get("text") for e in materialization["metadataEntries"] if e["label"] == "ivm/mode")


def measure_launch(dev: DagsterDev, repeats: int) -> list[dict]:
    """Launch path: a one-row commit, then a run of one view launched as the UI does."""
    out = []
    for step in range(repeats):
        one_row_change(dev.demo, step)
        launched = time.time()
        run_id = dev.launch(["order_status_funnel"])
        done = wait_for_materialization(dev, "order_status_funnel", after=launched)
        assert done["runId"] == run_id, (done, run_id)
        run = dev.wait_run(run_id)
        out.append({
            "launch_to_materialization_s": round(float(done["timestamp"]) / 1000 - launched, 2),
            "launch_to_run_start_s": round(run["startTime"] - launched, 2),
            "launch_to_run_end_s": round(run["endTime"] - launched, 2),
            "mode": mode_of(done),
        })
        print(f"launch #{step + 1}: {out[-1]}", flush=True)
    return out


SENSORS = """
query S($repo: RepositorySelector!) {
  sensorsOrError(repositorySelector: $repo) { ... on Sensors { results { name minIntervalSeconds } } }
}
"""


def sensor_intervals(dev: DagsterDev) -> dict[str, int]:
    """Each served sensor's minimum interval, as the running `dg dev` has it."""
    repo = {"repositoryLocationName": dev.location, "repositoryName": dev.repository}
    found = dev.graphql(SENSORS, {"repo": repo})["sensorsOrError"]["results"]
    return {s["name"]: s["minIntervalSeconds"] for s in found}


IN_PROGRESS = """
{ runsOrError(filter: {statuses: [QUEUED, NOT_STARTED, STARTING, STARTED]}) { ... on Runs { results { runId } } } }
"""


def settle(dev: DagsterDev, *, observed: bool = True, timeout_s: float = 300) -> None:
    """Quiet: (the source sensor has observed `orders`,) automation has ticked since (every daemon loop, 5 s),
    and whatever it launched has finished."""
    deadline = time.monotonic() + timeout_s
    while observed and not dev.graphql(OBSERVED, {"key": {"path": ["orders"]}})["assetOrError"]["assetObservations"]:
        assert time.monotonic() < deadline, f"orders was never observed; see {dev.log}"
        time.sleep(1)
    time.sleep(20)
    while dev.graphql(IN_PROGRESS)["runsOrError"]["results"]:
        assert time.monotonic() < deadline, f"start-up runs did not finish; see {dev.log}"
        time.sleep(1)


def measure_sensor(dev: DagsterDev, repeats: int) -> list[dict]:
    """Sensor path: only a one-row commit; the source sensor observes, automation launches."""
    out = []
    for step in range(repeats):
        committed = one_row_change(dev.demo, step + 1)
        done = wait_for_materialization(dev, "order_status_funnel", after=committed)
        observed = dev.graphql(OBSERVED, {"key": {"path": ["orders"]}})["assetOrError"]["assetObservations"]
        observed_at = float(observed[0]["timestamp"]) / 1000 if observed else None
        run = dev.wait_run(done["runId"])
        settle(dev, observed=False)  # automation's runs after this one finish before the next commit
        refreshed = [v for v in VIEWS if (latest(dev, v) or {}).get("timestamp", "0") > str(int(committed * 1000))]
        out.append({
            "commit_to_materialization_s": round(float(done["timestamp"]) / 1000 - committed, 2),
            "commit_to_observation_s": round(observed_at - committed, 2) if observed_at else None,
            "commit_to_run_start_s": round(run["startTime"] - committed, 2),
            "mode": mode_of(done),
            "views_refreshed_by_automation": refreshed,
        })
        print(f"sensor #{step + 1}: {out[-1]}", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spark", choices=["connect", "local"], default="connect")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--orders", type=int, default=20000, help="demo size (orders); the demo's default")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ivm_dagster_latency_"))
    demo = work / "demo"
    env = {"IVM_DEMO_ORDERS": str(args.orders)}
    connect_dir = work / "spark-connect"
    # The machine may be shared: the load average says how quiet it was.
    results: dict = {"spark": args.spark, "orders": args.orders, "repeats": args.repeats, "cores": os.cpu_count(),
                     "load_average_at_start": round(os.getloadavg()[0], 1)}
    if args.spark == "connect":
        started = time.monotonic()
        server = start_server(port=free_port(), directory=connect_dir)
        results["connect_server_start_s"] = round(time.monotonic() - started, 1)
        env.update(IVM_SPARK_CONNECT_DIR=str(connect_dir), IVM_SPARK_CONNECT_PORT=str(server.port), IVM_SPARK_REMOTE="local")
    else:
        env["IVM_SPARK_REMOTE"] = ""  # definitions.py: empty = a local Spark in each run
    dev = None
    try:
        # Phase 1, no automation: the launched runs are the only ones.
        (work / "launch").mkdir()
        dev = start_dagster_dev(work / "launch", env, demo=demo)
        started = time.time()
        first = dev.wait_run(dev.launch(VIEWS), timeout_s=900)
        assert first["status"] == "SUCCESS", dev.log
        results["first_build_all_views_s"] = round(first["endTime"] - started, 1)
        print(f"first build of the five views: {results['first_build_all_views_s']} s", flush=True)
        results["launch"] = measure_launch(dev, args.repeats)
        dev.stop()
        dev = None
        # Phase 2, automation on (as in the demo): both sensors tick on each daemon loop (definitions.TICK_S).
        (work / "sensor").mkdir()
        dev = start_dagster_dev(work / "sensor", env, automation=True, demo=demo)
        settle(dev)
        results["sensor_minimum_interval_s"] = sensor_intervals(dev)  # Dagster's daemons loop every 5 s besides
        results["sensor"] = measure_sensor(dev, args.repeats)
        results["launch_to_materialization_median_s"] = statistics.median(r["launch_to_materialization_s"] for r in results["launch"])
        results["sensor_commit_to_materialization_median_s"] = statistics.median(
            r["commit_to_materialization_s"] for r in results["sensor"]
        )
        results["load_average_at_end"] = round(os.getloadavg()[0], 1)
    finally:
        if dev is not None:
            dev.stop()
        if args.spark == "connect":
            stop_server(connect_dir)
    out = ROOT / "benchmarks" / "results" / f"dagster_latency_{args.spark}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: v for k, v in results.items() if not isinstance(v, list)}, indent=2))
    print(f"saved {out}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
