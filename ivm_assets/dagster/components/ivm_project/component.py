"""A project folder as a Dagster component.

```yaml
# defs/shop/defs.yaml
type: ivm_assets.IvmProjectComponent
attributes:
  project: ../../../shop          # the folder holding ivm.yaml, relative to this file
  key_prefix: shop                # asset keys shop/<view>, shop/<source>
  consistency_checks: true        # checked hourly (check_cron), not in every refresh run
  spark_remote: local             # runs attach to the warm local Spark Connect server
  storage_options:                # over ivm.yaml's storage_options, key by key
    AWS_SECRET_ACCESS_KEY: "${S3_SECRET}"   # resolved where the project loads (code server, runs)
```
Each instance names its ops after its place in the defs folder, and ``key_prefix`` keeps
asset keys apart, so several projects (even with the same view names) live in one code
location. Sources are observed by a sensor without runs; automation refreshes the views.
"""

from __future__ import annotations

import json
import re

import dagster as dg
from pydantic import Field

from ivm_assets.dagster.asset_decorator import build_ivm_check_schedule, ivm_view_assets
from ivm_assets.dagster.resources import IvmResource
from ivm_assets.dagster.sensors import build_ivm_sensor, build_ivm_source_sensor
from ivm_assets.dagster.sources import ivm_source_assets
from ivm_assets.project import IvmProject


class IvmProjectComponent(dg.Component, dg.Resolvable, dg.Model):
    """The views of an ivm project (a folder with ivm.yaml and views/*.sql) as assets, its Delta sources as observable assets."""

    project: str = Field(description="Path of the project folder, relative to this defs.yaml (or absolute).")
    key_prefix: str | list[str] | None = Field(
        default=None, description="Put in front of every view and source key, e.g. `shop` → shop/revenue."
    )
    warehouse: str | None = Field(default=None, description="Replaces the project's `warehouse:`.")
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="delta-rs storage options over ivm.yaml's `storage_options`, key by key; write secrets as "
        "`${ENV_NAME}` references (resolved where the project loads, never shown).",
    )
    consistency_checks: bool = Field(default=False, description="Add an oracle asset check per view.")
    check_cron: str | None = Field(
        default="0 * * * *", description="When the checks run (each recomputes its view); null: only by hand."
    )
    blocking_checks: bool = Field(
        default=False, description="Check each view right after its refresh; a failure stops the views downstream."
    )
    observe_sensor: bool = Field(
        default=True, description="Observe the sources with a sensor (no runs); automation refreshes the views."
    )
    observe_cron: str | None = Field(
        default=None, description="Observe the sources by a run on this cron instead (a run per tick)."
    )
    sensor: bool = Field(
        default=False,
        description="Add the refresh sensor, for deployments without automation (stopped until turned on).",
    )
    spark_master: str | None = Field(default=None, description="Spark master URL (default local[*]).")
    spark_remote: str | None = Field(
        default=None, description="Spark Connect: `local` (warm local server) or sc://host:port, instead of a master."
    )
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings.")

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        root = (context.path / self.project).resolve()
        project = IvmProject.load(
            root, warehouse=self.warehouse, storage_options=self.storage_options,
            storage_origin=f"storage_options of the component in {context.path / 'defs.yaml'}",
        )
        name = _op_name(context)
        prefix = self.key_prefix
        views = ivm_view_assets(
            project=project, key_prefix=prefix, name=name,
            consistency_checks=self.consistency_checks, blocking_checks=self.blocking_checks,
        )
        sources = ivm_source_assets(project=project, key_prefix=prefix, cron=self.observe_cron, name=f"{name}_sources")
        sensors = []
        if self.observe_sensor:
            sensors.append(build_ivm_source_sensor(project=project, key_prefix=prefix, name=f"{name}_source_sensor"))
        if self.sensor:
            sensors.append(build_ivm_sensor(project=project, views=views, key_prefix=prefix, name=f"{name}_refresh_sensor"))
        schedules = []
        if self.consistency_checks and self.check_cron:
            schedules.append(build_ivm_check_schedule(views, cron=self.check_cron))
        resource = _shared_resource(self.spark_master, self.spark_remote, self.spark_conf)
        return dg.Definitions(assets=[views, sources], sensors=sensors, schedules=schedules, resources={"ivm": resource})


_resources: dict[str, IvmResource] = {}


def _shared_resource(master: str | None, remote: str | None, conf: dict[str, str]) -> IvmResource:
    """One resource object per Spark setting, so that several instances merge into one code
    location (a process has one Spark session anyway; differing settings are a conflict)."""
    key = json.dumps([master, remote, conf], sort_keys=True)
    if key not in _resources:
        _resources[key] = IvmResource(master=master, remote=remote, spark_conf=conf)
    return _resources[key]


def _op_name(context: dg.ComponentLoadContext) -> str:
    """``ivm_<path of the component in the defs folder>``: unique per instance."""
    try:
        relative = context.path.relative_to(context.defs_module_path)
    except ValueError:
        relative = context.path
    return "ivm_" + (re.sub(r"\W+", "_", str(relative)).strip("_").lower() or "project")
