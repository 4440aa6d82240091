"""definitions.py at the repository root: loadable, and creates the demo on first load."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import dagster as dg

ROOT = Path(__file__).resolve().parents[2]


def test_definitions_py_creates_the_demo_and_validates(tmp_path, monkeypatch):
    monkeypatch.setenv("IVM_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("IVM_DEMO_ORDERS", "60")
    spec = importlib.util.spec_from_file_location("ivm_demo_definitions", ROOT / "definitions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (tmp_path / "demo" / "ivm.yaml").exists()
    dg.Definitions.validate_loadable(module.defs)
    repo = module.defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert keys == {"customers", "products", "orders", "order_lines", "revenue_by_region_day", "region_totals",
                    "product_stock", "order_status_funnel", "top_customers"}
    assert repo.has_job("demo_source_changes")
    result = module.defs.get_job_def("demo_source_changes").execute_in_process()
    assert result.success
    from ivm_assets.delta.handles import latest_version

    assert latest_version(str(tmp_path / "demo" / "sources" / "orders")) == 3


def test_the_demo_has_one_way_to_react_to_source_changes_and_builds_missing_views_at_start(tmp_path, monkeypatch):
    """What the README and definitions.py tell a user must be what the demo does."""
    monkeypatch.setenv("IVM_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("IVM_DEMO_ORDERS", "60")
    monkeypatch.delenv("IVM_SPARK_REMOTE", raising=False)
    spec = importlib.util.spec_from_file_location("ivm_demo_definitions_2", ROOT / "definitions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    repo = module.defs.get_repository_def()
    sensors = {s.name: s for s in repo.sensor_defs}
    assert set(sensors) == {"ivm_demo_automation", "ivm_demo_source_sensor"}
    assert all(s.default_status == dg.DefaultSensorStatus.RUNNING and s.description for s in sensors.values())
    assert not sensors["ivm_demo_source_sensor"].targets  # observes; starts no run
    [schedule] = repo.schedule_defs
    assert repo.get_job(schedule.job_name).asset_layer.selected_asset_keys == set()  # checks only
    assert module.defs.resources["ivm"].remote == "local"  # runs attach to the warm Spark
    # Start-up: automation's first tick, the source sensor's first tick (it observes every
    # source), automation's next tick.
    instance = dg.DagsterInstance.ephemeral()
    first = dg.evaluate_automation_conditions(defs=module.defs, instance=instance)
    assert first.total_requested == 0
    for event in sensors["ivm_demo_source_sensor"](dg.build_sensor_context(instance=instance)).asset_events:
        instance.report_runless_asset_event(event)
    tick = dg.evaluate_automation_conditions(defs=module.defs, instance=instance, cursor=first.cursor)
    requested = sorted(r.key.to_user_string() for r in tick.results if r.true_subset.size)
    assert requested == sorted(["order_status_funnel", "product_stock", "region_totals", "revenue_by_region_day", "top_customers"])
    quiet = dg.evaluate_automation_conditions(defs=module.defs, instance=instance, cursor=tick.cursor)
    assert quiet.total_requested == 0  # requested once: nothing moved since, so no second start-up run
