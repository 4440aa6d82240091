"""End to end in a real `dg dev` (the demo): runs attach to a warm Spark Connect server,
materializations carry lineage and schema, freshness shows, runs of a project queue."""

from __future__ import annotations

from ivm_assets.delta.handles import is_delta_table, latest_version
from ivm_assets.delta.read import read_small
import time

import pytest

from tests.dagster.dagster_dev import metadata

pytestmark = [pytest.mark.slow, pytest.mark.connect]


def test_a_launched_run_refreshes_a_view_over_the_warm_spark(dagster_dev, connect_server):
    server, _ = connect_server
    run_id = dagster_dev.launch(["order_status_funnel"])
    assert dagster_dev.wait_run(run_id)["status"] == "SUCCESS", dagster_dev.log.read_text()[-3000:]
    assert latest_version(str(dagster_dev.demo / "warehouse" / "order_status_funnel")) == 0
    assert not is_delta_table(str(dagster_dev.demo / "warehouse" / "revenue_by_region_day"))

    asset = dagster_dev.latest("order_status_funnel")
    [materialization] = asset["assetMaterializations"]
    assert materialization["runId"] == run_id
    entries = metadata(materialization["metadataEntries"])
    assert entries["ivm/mode"]["text"] == "full"
    assert entries["ivm/spark"]["text"] == f"connect {server.url}"  # no Spark of its own
    assert entries["dagster/row_count"]["intValue"] == read_small(str(dagster_dev.demo / "warehouse" / "order_status_funnel")).num_rows
    assert [c["name"] for c in entries["dagster/column_schema"]["schema"]["columns"]] == ["status", "orders", "customers"]
    lineage = {e["columnName"]: e["columnDeps"] for e in entries["dagster/column_lineage"]["lineage"]}
    assert lineage["customers"] == [{"assetKey": {"path": ["orders"]}, "columnName": "customer_id"}]
    assert "| `customers` | bigint | `orders.customer_id` |" in entries["ivm/column_lineage"]["mdStr"]

    policy = asset["definition"]["internalFreshnessPolicy"]
    assert policy == {"__typename": "TimeWindowFreshnessPolicy", "failWindowSeconds": 1800, "warnWindowSeconds": 600}
    # The freshness daemon (enabled by dagster.yaml) judges the fresh materialization.
    deadline = time.monotonic() + 60
    while dagster_dev.latest("order_status_funnel")["definition"]["freshnessStatusInfo"]["freshnessStatus"] != "HEALTHY":
        assert time.monotonic() < deadline, dagster_dev.latest("order_status_funnel")["definition"]
        time.sleep(2)


def test_two_runs_of_one_project_queue_in_its_pool(dagster_dev):
    first = dagster_dev.launch(["order_status_funnel"])
    second = dagster_dev.launch(["order_status_funnel"])
    seen_queued = False
    while dagster_dev.run(first)["status"] not in {"SUCCESS", "FAILURE", "CANCELED"}:
        seen_queued |= dagster_dev.run(second)["status"] == "QUEUED"
        time.sleep(0.5)
    a, b = dagster_dev.wait_run(first), dagster_dev.wait_run(second)
    assert a["status"] == b["status"] == "SUCCESS"
    assert seen_queued, "the second run never waited in the queue"
    assert b["startTime"] >= a["endTime"], (a, b)  # one after the other, never both at once
