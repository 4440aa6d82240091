"""ivm_view_assets: one run refreshes the selected views and reports what each epoch did."""

from __future__ import annotations

import dagster as dg

from ivm_assets.dagster import FULL_REFRESH_TAG
from ivm_assets.delta.handles import latest_version
from ivm_assets.delta.read import read_small
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.demo import VIEWS, apply_demo_changes
from tests.dagster.conftest import materializations, meta


def test_materialize_all_views_reports_refresh_metadata(demo_run):
    done = materializations(demo_run.result)
    assert set(done) == set(VIEWS)
    for name, m in done.items():
        values = meta(m)
        assert values["ivm/mode"] == "full" and values["ivm/reason"] == "first build"
        assert values["ivm/epoch"] == 1
        assert values["dagster/uri"] == demo_run.project.location(name).output
        rows = read_small(values["dagster/uri"]).num_rows
        assert values["dagster/row_count"] == rows == values["ivm/change_rows_out"]
        assert values["ivm/duration_s"] > 0
        assert [c.name for c in values["dagster/column_schema"].columns] == arrow_schema(values["dagster/uri"]).names
        assert m.tags["dagster/code_version"] == demo_run.project.views[name].sql_hash
    revenue = meta(done["revenue_by_region_day"])
    assert revenue["ivm/source_versions"] == {"orders": "∅→0", "order_lines": "∅→0", "customers": "∅→0"}
    assert revenue["ivm/state_bytes"] > 0
    assert done["revenue_by_region_day"].tags["dagster/data_version"] == "customers@0;order_lines@0;orders@0"
    assert meta(done["top_customers"])["ivm/state_bytes"] == 0  # full-recompute view: no operator state
    lineage = done["revenue_by_region_day"].metadata["dagster/column_lineage"].value  # on the materialization, not only the spec
    assert {d.column_name for d in lineage.deps_by_column["revenue"]} == {"quantity", "unit_price"}
    assert "| `region` | string | `customers.region` |" in revenue["ivm/column_lineage"]
    assert revenue["ivm/spark"] == "local[2]"


def test_subset_run_refreshes_only_the_selection_incrementally(demo_run):
    apply_demo_changes(demo_run.root, new_orders=4, status_changes=3, deletions=2)
    result = demo_run.materialize(["order_status_funnel"])
    done = materializations(result)
    assert list(done) == ["order_status_funnel"]
    values = meta(done["order_status_funnel"])
    assert values["ivm/mode"] == "incremental" and "ivm/reason" not in values  # no empty row in the UI
    assert values["ivm/engine"] == "in process"
    result = demo_run.materialize(["top_customers"])
    reason = materializations(result)["top_customers"].metadata["ivm/reason"]
    assert isinstance(reason, dg.MarkdownMetadataValue)  # wraps in the UI instead of being cut off
    assert reason.value == "not incrementally maintainable: window function PERCENT_RANK at line 4, column 23"
    assert values["ivm/source_versions"] == {"orders": "0→3"}
    assert values["ivm/change_rows_per_source"]["orders"] == values["ivm/change_rows_in"] > 0
    assert done["order_status_funnel"].tags["dagster/data_version"] == "orders@3"
    # The upstream of an unselected view is not touched by this run.
    assert latest_version(demo_run.project.location("revenue_by_region_day").output) == 0


def test_full_refresh_by_run_config_and_by_run_tag(demo_run):
    by_config = demo_run.materialize(
        ["order_status_funnel"], run_config={"ops": {demo_run.views.op.name: {"config": {"full_refresh": True}}}}
    )
    values = meta(materializations(by_config)["order_status_funnel"])
    assert (values["ivm/mode"], values["ivm/reason"]) == ("full", "full refresh requested")

    by_tag = demo_run.materialize(["order_status_funnel"], tags={FULL_REFRESH_TAG: "true"})
    assert meta(materializations(by_tag)["order_status_funnel"])["ivm/mode"] == "full"

    plain = demo_run.materialize(["order_status_funnel"])
    assert meta(materializations(plain)["order_status_funnel"])["ivm/mode"] == "unchanged"


def test_a_view_held_by_another_refresh_fails_after_the_resources_wait(builder):
    import dagster as dg
    import pyarrow as pa

    from ivm_assets.dagster import IvmResource, ivm_view_assets
    from ivm_assets.state.claim import ClaimSettings, hold
    from ivm_assets.state.progress import Progress

    builder.source("events", {"k": pa.array([1], pa.int64())})
    builder.view("ks", "SELECT k FROM events")
    project = builder.load()
    views = ivm_view_assets(project=project)
    with hold(Progress(project.location("ks").progress), "ks", ClaimSettings(wait_s=0, run="cli-refresh")):
        result = dg.materialize([views], resources={"ivm": IvmResource(wait_seconds=0.5)}, raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "ViewBusyError" in failure.step_failure_data.error.cause.cls_name and "cli-refresh" in str(failure.step_failure_data.error.cause.message)
