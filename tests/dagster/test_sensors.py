"""The cursor sensor: first tick, unchanged versions, one source moved, unreadable cursor."""

from __future__ import annotations

import json

import dagster as dg
import pyarrow as pa
import pytest

from ivm_assets.dagster import build_ivm_sensor, ivm_view_assets
from ivm_assets.delta.write import delete_rows, write


@pytest.fixture
def graph(builder):
    """Sources a, b; views va (a), vab (a ⋈ b), vv (va): a view of a view."""
    builder.source("a", {"k": pa.array([1, 2], pa.int64()), "x": pa.array([10, 20], pa.int64())})
    builder.source("b", {"k": pa.array([1], pa.int64()), "y": pa.array([5], pa.int64())})
    builder.view("va", "SELECT k, x FROM a WHERE x > 0")
    builder.view("vab", "SELECT a.k, a.x, b.y FROM a JOIN b ON a.k = b.k")
    builder.view("vv", "SELECT k, SUM(x) AS total FROM va GROUP BY k")
    project = builder.load()
    views = ivm_view_assets(project=project)
    return builder, project, build_ivm_sensor(project=project, views=views)


def tick(sensor, cursor):
    result = sensor(dg.build_sensor_context(cursor=cursor))
    requested = [sorted(k.to_user_string() for k in r.asset_selection) for r in result.run_requests or []]
    return requested, result.cursor


def test_first_tick_requests_every_view_and_records_versions(graph):
    _, _, sensor = graph
    requested, cursor = tick(sensor, None)
    assert requested == [["va", "vab", "vv"]]
    assert json.loads(cursor) == {"sources": {"a": 0, "b": 0}}


def test_unchanged_versions_request_nothing(graph):
    _, _, sensor = graph
    _, cursor = tick(sensor, None)
    requested, again = tick(sensor, cursor)
    assert requested == [] and again == cursor


def test_one_source_changed_requests_only_its_downstream_views(graph):
    builder, _, sensor = graph
    _, cursor = tick(sensor, None)
    write(builder.uri("b"), pa.table({"k": pa.array([2], pa.int64()), "y": pa.array([7], pa.int64())}), mode="append")
    requested, cursor = tick(sensor, cursor)
    assert requested == [["vab"]]
    assert json.loads(cursor)["sources"] == {"a": 0, "b": 1}
    delete_rows(builder.uri("a"), "k = 2")
    requested, _ = tick(sensor, cursor)
    assert requested == [["va", "vab", "vv"]]


@pytest.mark.parametrize("cursor", ["not json", '{"sources": {"a": "x"}}', "[1, 2]", '{"other": 1}'])
def test_unreadable_cursor_starts_over(graph, cursor):
    _, _, sensor = graph
    requested, new_cursor = tick(sensor, cursor)
    assert requested == [["va", "vab", "vv"]]
    assert json.loads(new_cursor) == {"sources": {"a": 0, "b": 0}}


def test_source_sensor_reports_observations_of_moved_sources_without_runs(builder):
    from ivm_assets.dagster import build_ivm_source_sensor

    builder.source("a", {"k": pa.array([1], pa.int64())})
    builder.source("b", {"k": pa.array([1], pa.int64())})
    builder.view("va", "SELECT k FROM a")
    project = builder.load()
    sensor = build_ivm_source_sensor(project=project)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING and not sensor.targets  # it starts no run

    first = sensor(dg.build_sensor_context(cursor=None))
    assert not first.run_requests
    assert sorted((e.asset_key.to_user_string(), e.tags["dagster/data_version"]) for e in first.asset_events) == [("a", "0"), ("b", "0")]
    quiet = sensor(dg.build_sensor_context(cursor=first.cursor))
    assert not quiet.asset_events and quiet.skip_reason
    write(builder.uri("a"), pa.table({"k": pa.array([2], pa.int64())}), mode="append")
    moved = sensor(dg.build_sensor_context(cursor=first.cursor))
    assert [(e.asset_key.to_user_string(), e.tags["dagster/data_version"]) for e in moved.asset_events] == [("a", "1")]
    assert isinstance(moved.asset_events[0], dg.AssetObservation) and not moved.run_requests
