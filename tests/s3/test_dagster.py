"""The demo shop's views as Dagster assets, materialized through a Dagster instance with the
sources and the warehouse on the local S3 server (conftest.py)."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from ivm_assets import IvmProject
from ivm_assets.dagster import IvmResource, ivm_view_assets
from ivm_assets.delta.read import read_small
from ivm_assets.delta.write import create_table, delete_rows, update_rows
from ivm_assets.demo import VIEWS, create_demo_project
from tests.conftest import assert_oracle
from tests.s3.server import SECRET_ENV

pytestmark = pytest.mark.s3


def test_demo_views_materialize_on_s3_without_showing_the_secret(s3_project, spark):
    root = create_demo_project(s3_project.root.parent / "shop", customers=20, products=10, orders=60)
    config = yaml.safe_load((root / "ivm.yaml").read_text())
    for name in config["sources"]:  # the generated sources, copied into the bucket
        uri = f"{s3_project.base}/sources/{name}"
        create_table(uri, read_small(str(root / "sources" / name)))
        config["sources"][name] = uri
    config["warehouse"] = f"{s3_project.base}/warehouse"
    # ivm.yaml holds no secret: the definitions' reads (specs, lineage) get it as the
    # component hands its settings to the project, the runs from the resource.
    config["storage_options"] = {k: v for k, v in s3_project.server.options().items() if k != "AWS_SECRET_ACCESS_KEY"}
    (root / "ivm.yaml").write_text(yaml.safe_dump(config))
    secret_ref = {"AWS_SECRET_ACCESS_KEY": "${" + SECRET_ENV + "}"}
    project = IvmProject.load(root, spark=spark, storage_options=secret_ref, storage_origin="the component's storage_options")
    views = ivm_view_assets(project=project)
    resource = IvmResource(storage_options=secret_ref)
    instance = dg.DagsterInstance.ephemeral()
    first = dg.materialize([views], resources={"ivm": resource}, instance=instance)
    assert first.success
    orders = config["sources"]["orders"]
    delete_rows(config["sources"]["order_lines"], "order_id = 1")
    update_rows(orders, set_sql={"status": "'shipped'"}, predicate="order_id IN (2, 3)")
    assert {e.asset_key.to_user_string() for e in first.get_asset_materialization_events()} == set(VIEWS)
    # Two views are enough for the second run: one incremental, one recomputed (PERCENT_RANK).
    second = dg.materialize([views], selection=["order_status_funnel", "top_customers"], resources={"ivm": resource}, instance=instance)
    assert second.success
    done = {e.materialization.asset_key.to_user_string(): e.materialization for e in second.get_asset_materialization_events()}
    modes = {name: m.metadata["ivm/mode"].value for name, m in done.items()}
    assert modes == {"order_status_funnel": "incremental", "top_customers": "full"}, modes
    assert all(m.metadata["dagster/uri"].value.startswith("s3://") for m in done.values())
    assert_oracle(project, ["order_status_funnel", "top_customers"])
    secret = s3_project.server.secret
    shown = [str(e) for result in (first, second) for e in result.all_events]
    shown += [str(record) for result in (first, second) for record in instance.all_logs(result.run_id)]
    shown += [str(m.metadata) + str(m.tags) for m in done.values()]
    shown += [str(instance.get_run_by_id(result.run_id)) for result in (first, second)]
    assert [text[:200] for text in shown if secret in text] == []
