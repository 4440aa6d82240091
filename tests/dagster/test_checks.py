"""The opt-in consistency check: passes on a good view, fails with counts on a tampered one."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa
import pytest

from ivm_assets.dagster import CHECK_NAME, IvmResource, ivm_view_assets
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.delta.write import write


def test_check_passes_on_a_good_view_and_fails_on_a_tampered_one(builder):
    builder.source("events", {"k": pa.array([1, 1, 2], pa.int64()), "v": pa.array([5, 6, 7], pa.int64())})
    builder.view("totals", "SELECT k, SUM(v) AS s FROM events GROUP BY k")
    project = builder.load()
    views = ivm_view_assets(project=project, consistency_checks=True, blocking_checks=True)
    [spec] = views.check_specs
    assert spec.name == CHECK_NAME and spec.blocking

    good = dg.materialize([views], resources={"ivm": IvmResource()})
    [evaluation] = good.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.metadata["rows_missing"].value == 0 and evaluation.metadata["rows_extra"].value == 0

    output = project.location("totals").output
    write(output, pa.table({"k": pa.array([99], pa.int64()), "s": pa.array([1], pa.int64())}, schema=arrow_schema(output)), mode="append")
    write(builder.uri("events"), pa.table({"k": pa.array([2], pa.int64()), "v": pa.array([1], pa.int64())}), mode="append")
    bad = dg.materialize([views], resources={"ivm": IvmResource()}, raise_on_error=False)
    [evaluation] = bad.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.metadata["rows_extra"].value == 1 and evaluation.metadata["rows_missing"].value == 0
    assert evaluation.metadata["sample_extra"].value == [{"k": 99, "s": 1}]


def test_checks_skip_refresh_runs_and_run_on_their_own_schedule(builder):
    from ivm_assets.dagster import build_ivm_check_schedule

    builder.source("events", {"k": pa.array([1, 2], pa.int64()), "v": pa.array([5, 6], pa.int64())})
    builder.view("totals", "SELECT k, SUM(v) AS s FROM events GROUP BY k")
    project = builder.load()
    views = ivm_view_assets(project=project, consistency_checks=True)
    instance = dg.DagsterInstance.ephemeral()

    refresh = dg.materialize([views], resources={"ivm": IvmResource()}, instance=instance)
    assert refresh.success and refresh.get_asset_check_evaluations() == []  # no full recompute per refresh
    logs = [e.message for e in instance.all_logs(refresh.run_id) if e.message]
    assert any("consistency checks of totals skipped in this refresh run" in m for m in logs)

    schedule = build_ivm_check_schedule(views, cron="*/30 * * * *")
    assert schedule.cron_schedule == "*/30 * * * *" and schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    defs = dg.Definitions(assets=[views], schedules=[schedule], resources={"ivm": IvmResource()})
    job = defs.resolve_job_def(schedule.job_name)
    checked = job.execute_in_process(instance=instance)
    [evaluation] = checked.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.metadata["ivm/check_duration_s"].value > 0
    assert checked.get_asset_materialization_events() == []  # the check run refreshes nothing

    with pytest.raises(dg.DagsterInvalidDefinitionError, match="has no consistency checks"):
        build_ivm_check_schedule(ivm_view_assets(project=project))
