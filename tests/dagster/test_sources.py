"""Observable sources (DataVersion = Delta version) and the views' automation conditions."""

from __future__ import annotations

from datetime import datetime, timedelta

import dagster as dg
import pyarrow as pa
from dagster._core.definitions.observe import observe  # the in-process observe; not exported in 1.13

from ivm_assets.dagster import IvmResource, ivm_source_assets, ivm_view_assets
from ivm_assets.delta.write import write


def _project(builder):
    builder.source("a", {"k": pa.array([1, 2], pa.int64()), "x": pa.array([10, 20], pa.int64())})
    builder.source("b", {"k": pa.array([1], pa.int64()), "y": pa.array([5], pa.int64())})
    builder.view("va", "SELECT k, x FROM a WHERE x > 0")
    builder.view("vab", "SELECT a.k, a.x, b.y FROM a JOIN b ON a.k = b.k")
    builder.view("vv", "SELECT k, SUM(x) AS total FROM va GROUP BY k")
    return builder.load()


def test_observation_reports_the_delta_version(builder):
    project = _project(builder)
    write(builder.uri("a"), pa.table({"k": pa.array([3], pa.int64()), "x": pa.array([1], pa.int64())}), mode="append")
    instance = dg.DagsterInstance.ephemeral()
    assert observe([ivm_source_assets(project=project)], instance=instance).success
    versions = {
        key: instance.fetch_observations(dg.AssetKey(key), limit=1).records[0].asset_observation.data_version for key in ("a", "b")
    }
    assert versions == {"a": "1", "b": "0"}


def test_new_source_version_requests_exactly_the_downstream_views(builder):
    project = _project(builder)
    defs = dg.Definitions(
        assets=[ivm_view_assets(project=project), ivm_source_assets(project=project, cron="0 * * * *")],
        resources={"ivm": IvmResource()},
    )
    instance = dg.DagsterInstance.ephemeral()
    # Evaluate within one hour so the sources' own cron does not tick.
    now = datetime(2026, 1, 1, 12, 0, 5)

    def evaluate(cursor, seconds):
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor, evaluation_time=now + timedelta(seconds=seconds))
        requested = sorted(r.key.to_user_string() for r in result.results if r.true_subset.size)
        return requested, result.cursor

    def run(views):
        """What the requested run records (its materializations land on the next tick)."""
        for view in views:
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=view))

    def observe(versions):
        for source, version in versions.items():
            instance.report_runless_asset_event(dg.AssetObservation(asset_key=source, tags={"dagster/data_version": str(version)}))

    observe({"a": 0, "b": 0})
    run(["va", "vab", "vv"])
    requested, cursor = evaluate(None, 0)
    assert requested == []

    observe({"a": 0, "b": 0})  # observed again, same versions
    requested, cursor = evaluate(cursor, 10)
    assert requested == []

    observe({"a": 0, "b": 1})
    requested, cursor = evaluate(cursor, 20)
    assert requested == ["vab"]
    run(requested)
    requested, cursor = evaluate(cursor, 30)
    assert requested == []

    observe({"a": 1, "b": 1})
    requested, cursor = evaluate(cursor, 40)
    assert requested == ["va", "vab", "vv"]  # vv in the same tick, after va


def test_sources_are_observed_on_their_cron(builder):
    project = _project(builder)
    defs = dg.Definitions(assets=[ivm_source_assets(project=project, cron="*/5 * * * *")])
    instance = dg.DagsterInstance.ephemeral()
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance, evaluation_time=datetime(2026, 1, 1, 12, 1))
    assert first.total_requested == 0
    later = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor, evaluation_time=datetime(2026, 1, 1, 12, 6))
    assert sorted(r.key.to_user_string() for r in later.results if r.true_subset.size) == ["a", "b"]


def test_source_sensor_observations_drive_automation_without_a_run(builder):
    """The sensor's observations (runless events) are what eager automation reacts to."""
    from ivm_assets.dagster import build_ivm_source_sensor

    project = _project(builder)
    views, sources = ivm_view_assets(project=project), ivm_source_assets(project=project)
    assert not any(spec.automation_condition for spec in sources.specs)  # no observation run per cron tick
    defs = dg.Definitions(assets=[views, sources], resources={"ivm": IvmResource()})
    instance = dg.DagsterInstance.ephemeral()
    sensor = build_ivm_source_sensor(project=project)
    now = datetime(2026, 1, 1, 12, 0, 5)

    def tick(cursor):
        result = sensor(dg.build_sensor_context(cursor=cursor, instance=instance))
        for event in result.asset_events:
            instance.report_runless_asset_event(event)
        return result.cursor

    cursor = tick(None)
    for view in ("va", "vab", "vv"):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=view))
    evaluated = dg.evaluate_automation_conditions(defs=defs, instance=instance, evaluation_time=now)
    assert evaluated.total_requested == 0
    write(builder.uri("b"), pa.table({"k": pa.array([9], pa.int64()), "y": pa.array([1], pa.int64())}), mode="append")
    tick(cursor)
    evaluated = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=evaluated.cursor, evaluation_time=now + timedelta(seconds=15))
    assert sorted(r.key.to_user_string() for r in evaluated.results if r.true_subset.size) == ["vab"]
    assert instance.get_runs() == []
