"""Fixtures for the Dagster layer: one tiny demo shop, materialized once per session.

Every refresh costs seconds on a small machine, so the tests share one demo project built
once through Dagster (``demo_run``) in the session Spark, and tests that need other states
use projects with one or two small views.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from ivm_assets import IvmProject
from ivm_assets.dagster import IvmResource, ivm_view_assets
from ivm_assets.demo import create_demo_project
from tests.spark.connect_server import connect_server  # noqa: F401  (the shared session fixture)

TINY = {"customers": 20, "products": 10, "orders": 60}


@dataclass
class DemoRun:
    root: Path
    project: IvmProject
    views: dg.AssetsDefinition
    instance: dg.DagsterInstance
    result: dg.ExecuteInProcessResult

    def materialize(self, selection: list[str], **kwargs) -> dg.ExecuteInProcessResult:
        return dg.materialize([self.views], selection=selection, resources={"ivm": IvmResource()}, instance=self.instance, **kwargs)


def materializations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetMaterialization]:
    return {e.materialization.asset_key.to_user_string(): e.materialization for e in result.get_asset_materialization_events()}


def meta(materialization: dg.AssetMaterialization) -> dict:
    return {k: v.value for k, v in materialization.metadata.items()}


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, spark) -> DemoRun:
    root = create_demo_project(tmp_path_factory.mktemp("dagster") / "shop", **TINY)
    project = IvmProject.load(root, spark=spark)
    views = ivm_view_assets(project=project)
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([views], resources={"ivm": IvmResource()}, instance=instance)
    assert result.success
    return DemoRun(root, project, views, instance, result)


@pytest.fixture(scope="session")
def dagster_dev(tmp_path_factory, connect_server):
    """One real `dg dev` for the session, its runs attached to the session's Connect server."""
    from tests.dagster.dagster_dev import start_dagster_dev

    _, env = connect_server
    server = start_dagster_dev(tmp_path_factory.mktemp("dg_dev"), {**env, "IVM_SPARK_REMOTE": "local"})
    yield server
    server.stop()
