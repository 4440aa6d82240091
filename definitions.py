"""The demo shop as Dagster assets: `dg dev` in this folder serves it (see workspace.yaml).

On first load the demo project is created in ./demo_project (or $IVM_DEMO_DIR): generated
Delta sources in a local warehouse and five SQL views. What happens in the UI:
- Within about 30 s of start-up the source sensor observes every source and automation
  (`ivm_demo_automation`) builds the views: one run, each view `ivm/mode: full`. So by the
  time you click, the views exist, and "Materialize" reports `unchanged` until sources move.
- Jobs → `demo_source_changes` → Launch writes a batch of inserts, updates and deletes into
  the sources. The source sensor (`ivm_demo_source_sensor`) observes the new Delta
  versions without a run, and automation refreshes exactly the views downstream of them,
  incrementally (`ivm/mode: incremental`, `ivm/change_rows_in` … on each view).
- "Materialize" on a view refreshes it by hand (`unchanged` when its sources did not move).
- The consistency checks run hourly (each recomputes its view) or by "Execute" on a check.
Runs attach to a warm local Spark Connect server (`ivm spark start`; the first run starts it
if needed) instead of starting a Spark each; $IVM_SPARK_REMOTE=sc://host:port points them
elsewhere.
"""

import os
from pathlib import Path

import dagster as dg

from ivm_assets import IvmProject
from ivm_assets.dagster import (
    IvmResource,
    build_ivm_check_schedule,
    build_ivm_source_sensor,
    ivm_source_assets,
    ivm_view_assets,
)
from ivm_assets.demo import apply_demo_changes, create_demo_project

DEMO_DIR = Path(os.environ.get("IVM_DEMO_DIR", Path(__file__).parent / "demo_project")).resolve()
DEMO_ORDERS = int(os.environ.get("IVM_DEMO_ORDERS", "20000"))


def demo_project() -> IvmProject:
    """The demo project, created with generated sources if it is not there yet."""
    if not (DEMO_DIR / "ivm.yaml").exists():
        create_demo_project(DEMO_DIR, orders=DEMO_ORDERS, customers=max(10, DEMO_ORDERS // 10), products=max(10, DEMO_ORDERS // 100))
    return IvmProject.load(DEMO_DIR)


project = demo_project()
views = ivm_view_assets(project=project, consistency_checks=True)
sources = ivm_source_assets(project=project)


@dg.op(description="Writes one realistic batch of inserts, updates and deletes into the demo's Delta sources.")
def write_demo_changes(context: dg.OpExecutionContext) -> None:
    summary = apply_demo_changes(DEMO_DIR, seed=abs(hash(context.run_id)) % 100_000, new_orders=max(5, DEMO_ORDERS // 100),
                                 status_changes=max(5, DEMO_ORDERS // 200), deletions=max(2, DEMO_ORDERS // 400))
    context.log.info(summary)


@dg.job(description="Change the demo sources; the views downstream are then refreshed incrementally.")
def demo_source_changes() -> None:
    write_demo_changes()


# Dagster's default automation sensor starts stopped; the demo should react to source changes
# without a toggle, so it brings its own, running from the first load.
# Both tick on every loop of their daemon: the sensor and asset daemons loop every 5 s, and
# a sensor is evaluated on a loop when its minimum interval has passed since its last tick.
# A minimum of 5 s ticked every 10 s about half the time (the elapsed came out a hair under
# 5 s); 1 s ticks every 5 s. A source commit then reaches a view within two ticks plus the
# run. A tick reads each source's Delta log head (milliseconds) and evaluates the views'
# conditions.
TICK_S = 1
automation = dg.AutomationConditionSensorDefinition(
    "ivm_demo_automation",
    target=dg.AssetSelection.assets(views, sources),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=TICK_S,
    description="Refreshes the ivm views whose sources (or upstream views) moved, and builds missing ones.",
)

defs = dg.Definitions(
    assets=[views, sources],
    # A run of ivm views is one step (one Spark session for all its views): the default
    # multiprocess executor would start a second process (and load the definitions again,
    # ~5 s) just to run it.
    executor=dg.in_process_executor,
    jobs=[demo_source_changes],
    sensors=[automation, build_ivm_source_sensor(project=project, name="ivm_demo_source_sensor", minimum_interval_seconds=TICK_S)],
    schedules=[build_ivm_check_schedule(views)],
    # $IVM_SPARK_REMOTE: sc://host:port for a Connect server elsewhere; empty for a Spark per run.
    resources={"ivm": IvmResource(remote=os.environ.get("IVM_SPARK_REMOTE", "local") or None)},
)
