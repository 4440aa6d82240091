"""Automation over the source sensor's observations, in a real instance with real runs.

Issue 9: with ``AutomationCondition.eager()`` a view's own materialization counted as having
handled every update seen before it, so a source version observed while the view's run was
in progress, or in the same tick as that run's materialization, was never acted on and the
view stayed behind its source. :func:`ivm_assets.dagster.ivm_eager` requests it after the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import dagster as dg
import pyarrow as pa

from ivm_assets.dagster import IvmResource, build_ivm_source_sensor, ivm_eager, ivm_source_assets, ivm_view_assets
from ivm_assets.delta.write import write


REACHED, RELEASE = threading.Event(), threading.Event()


class _Hold(logging.Handler):
    """Stops the run at a view's summary line (``va: full; sources a ∅→0; …``): after its
    refresh read the sources, before its materialization is reported."""

    def emit(self, record: logging.LogRecord) -> None:
        if "; sources " in record.getMessage():
            REACHED.set()
            RELEASE.wait(60)


@dg.logger
def hold_after_refresh(_):
    held = logging.Logger("ivm_test_hold", level=logging.INFO)
    held.addHandler(_Hold())
    return held


@contextmanager
def held_run(job: dg.JobDefinition, instance: dg.DagsterInstance) -> Iterator[None]:
    """A run of ``job`` in progress for the body: it has read its sources and not yet reported."""
    REACHED.clear()
    RELEASE.clear()
    run = threading.Thread(target=job.execute_in_process, kwargs={"instance": instance, "run_config": {"loggers": {"hold": {}}}})
    run.start()
    try:
        assert REACHED.wait(60), "the held run did not reach its view's summary"
        yield
    finally:
        RELEASE.set()
        run.join(60)


class Automation:
    """Automation ticks 15 s apart over one instance; each returns the requested view names."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
        self.defs, self.instance = defs, instance
        self.cursor = None
        self.now = datetime(2026, 1, 1, 12, 0, 5)

    def tick(self) -> list[str]:
        self.now += timedelta(seconds=15)
        result = dg.evaluate_automation_conditions(defs=self.defs, instance=self.instance, cursor=self.cursor, evaluation_time=self.now)
        self.cursor = result.cursor
        return sorted(r.key.to_user_string() for r in result.results if r.true_subset.size)


class SourceSensor:
    """Ticks of the source sensor, its observations reported as the daemon reports them (runless)."""

    def __init__(self, sensor: dg.SensorDefinition, instance: dg.DagsterInstance) -> None:
        self.sensor, self.instance = sensor, instance
        self.cursor = None

    def tick(self) -> None:
        result = self.sensor(dg.build_sensor_context(cursor=self.cursor, instance=self.instance))
        for event in result.asset_events:
            self.instance.report_runless_asset_event(event)
        self.cursor = result.cursor


def consumed(instance: dg.DagsterInstance, view: str) -> str:
    """The source versions the view's latest materialization consumed (its data version)."""
    event = instance.get_latest_materialization_event(dg.AssetKey(view))
    return event.asset_materialization.tags["dagster/data_version"]


def _project(builder):
    builder.source("a", {"k": pa.array([1, 2], pa.int64()), "x": pa.array([10, 20], pa.int64())})
    builder.view("va", "SELECT k, x FROM a")
    return builder.load()


def _commit(builder, k: int) -> None:
    write(builder.uri("a"), pa.table({"k": pa.array([k], pa.int64()), "x": pa.array([k], pa.int64())}), mode="append")


def test_a_source_that_moves_during_its_views_run_is_refreshed_after_it(builder):
    project = _project(builder)
    views, sources = ivm_view_assets(project=project), ivm_source_assets(project=project)
    defs = dg.Definitions(
        assets=[views, sources],
        jobs=[dg.define_asset_job("refresh", selection=dg.AssetSelection.assets(views))],
        resources={"ivm": IvmResource()},
        loggers={"hold": hold_after_refresh},
    )
    job = defs.resolve_job_def("refresh")

    with dg.instance_for_test() as instance:
        automation, sensor = Automation(defs, instance), SourceSensor(build_ivm_source_sensor(project=project), instance)
        assert automation.tick() == []
        sensor.tick()  # a@0
        assert automation.tick() == ["va"]  # the start-up build

        # 1. The start-up run reads a@0; a@1 is committed and observed, and automation ticks,
        #    before the run reports (the demo's case in issue 9).
        with held_run(job, instance):
            assert automation.tick() == []  # va in progress
            _commit(builder, 3)
            sensor.tick()  # a@1
            assert automation.tick() == []  # still in progress: held back
        assert consumed(instance, "va") == "a@0"  # the run that just ended read the older version
        assert automation.tick() == ["va"]  # eager() requested nothing here, ever

        # 2. The requested run reads a@1; a@2 is observed before the next tick, which then also
        #    sees the run's request and its materialization.
        with held_run(job, instance):
            _commit(builder, 4)
            sensor.tick()  # a@2
        assert consumed(instance, "va") == "a@1"
        assert automation.tick() == ["va"]

        # 3. The requested run reads a@2: handled, nothing more (no loop), nothing on a quiet tick.
        assert job.execute_in_process(instance=instance).success
        assert consumed(instance, "va") == "a@2"
        assert automation.tick() == []
        sensor.tick()  # nothing moved
        assert automation.tick() == []


def test_an_observation_right_after_the_views_materialization_is_not_lost(builder):
    """The order seen in `dg dev`: va's run ends, a@1 is observed seconds later, and no
    automation tick falls between the two (the tick sees both; eager() let the
    materialization win)."""
    project = _project(builder)
    defs = dg.Definitions(assets=[ivm_view_assets(project=project), ivm_source_assets(project=project)], resources={"ivm": IvmResource()})
    instance = dg.DagsterInstance.ephemeral()
    automation, sensor = Automation(defs, instance), SourceSensor(build_ivm_source_sensor(project=project), instance)
    assert automation.tick() == []
    sensor.tick()  # a@0
    assert automation.tick() == ["va"]
    # What the requested run records (runless here: no run needs to be in progress for this order).
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="va", tags={"dagster/data_version": "a@0"}))
    _commit(builder, 3)
    sensor.tick()  # a@1
    assert automation.tick() == ["va"]
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="va", tags={"dagster/data_version": "a@1"}))
    assert automation.tick() == []
    sensor.tick()  # nothing moved
    assert automation.tick() == []


def test_a_view_of_a_view_refreshed_in_the_same_whole_job_run_is_not_requested_again():
    """Upstream views keep eager()'s rule: a whole asset job's run records no asset selection,
    so Dagster cannot tell that va's update came from vv's own run; vv's materialization in
    that run is what marks it handled. (Plain assets with the ivm condition: no Spark needed.)"""

    @dg.observable_source_asset
    def a():
        return dg.DataVersion("0")

    @dg.multi_asset(
        specs=[dg.AssetSpec("va", deps=["a"], automation_condition=ivm_eager()), dg.AssetSpec("vv", deps=["va"], automation_condition=ivm_eager())],
        can_subset=True,
    )
    def views(context):
        for key in sorted(context.selected_asset_keys, key=lambda k: k.to_user_string()):
            yield dg.MaterializeResult(asset_key=key)

    defs = dg.Definitions(assets=[a, views], jobs=[dg.define_asset_job("all_views", selection=["va", "vv"])])
    instance = dg.DagsterInstance.ephemeral()
    automation = Automation(defs, instance)
    assert automation.tick() == []
    instance.report_runless_asset_event(dg.AssetObservation(asset_key="a", tags={"dagster/data_version": "0"}))
    assert automation.tick() == ["va", "vv"]
    run = defs.resolve_job_def("all_views").execute_in_process(instance=instance)
    assert run.success and not run.dagster_run.asset_selection  # recorded as no selection
    assert automation.tick() == []
    assert automation.tick() == []
