"""A project folder as a Dagster component.

```yaml
# defs/shop/defs.yaml
type: ivm_assets.IvmProjectComponent
attributes:
  project: ../../../shop          # the folder holding ivm.yaml, relative to this file
  consistency_checks: true
  observe_cron: "*/5 * * * *"
```
Each instance names its ops after its place in the defs folder, so several projects can
live in one code location.
"""

from __future__ import annotations

import json
import re

import dagster as dg
from pydantic import Field

from ivm_assets.dagster.asset_decorator import ivm_view_assets
from ivm_assets.dagster.resources import IvmResource
from ivm_assets.dagster.sensors import build_ivm_sensor
from ivm_assets.dagster.sources import ivm_source_assets
from ivm_assets.project import IvmProject


class IvmProjectComponent(dg.Component, dg.Resolvable, dg.Model):
    """The views of an ivm project (a folder with ivm.yaml and views/*.sql) as assets, its Delta sources as observable assets."""

    project: str = Field(description="Path of the project folder, relative to this defs.yaml (or absolute).")
    warehouse: str | None = Field(default=None, description="Replaces the project's `warehouse:`.")
    consistency_checks: bool = Field(default=False, description="Add an oracle asset check per view.")
    blocking_checks: bool = Field(default=False, description="A failing check stops the views downstream of it.")
    observe_cron: str | None = Field(
        default="* * * * *", description="When sources are observed for new Delta versions; null: never automatically."
    )
    sensor: bool = Field(default=False, description="Also add the cursor sensor (stopped until turned on).")
    spark_master: str | None = Field(default=None, description="Spark master URL (default local[*]).")
    spark_remote: str | None = Field(default=None, description="Spark Connect URL instead of a master.")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings.")

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        root = (context.path / self.project).resolve()
        project = IvmProject.load(root, warehouse=self.warehouse)
        name = _op_name(context)
        views = ivm_view_assets(
            project=project, name=name, consistency_checks=self.consistency_checks, blocking_checks=self.blocking_checks
        )
        sources = ivm_source_assets(project=project, cron=self.observe_cron, name=f"{name}_sources")
        sensors = [build_ivm_sensor(project=project, views=views, name=f"{name}_sensor")] if self.sensor else []
        resource = _shared_resource(self.spark_master, self.spark_remote, self.spark_conf)
        return dg.Definitions(assets=[views, sources], sensors=sensors, resources={"ivm": resource})


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
