"""A cursor sensor that refreshes the views downstream of sources whose Delta version moved.

For deployments without declarative automation. Each tick reads every source's latest
Delta version (one Delta log read each), compares with the versions in the cursor, and
requests one run of exactly the affected views (views of views included). The cursor is
JSON ``{"sources": {name: version}}``; an unreadable cursor is logged and the sensor starts
over as on its first tick, which requests every view (an up-to-date view refreshes as a
cheap no-op).

Example:
    >>> sensor = build_ivm_sensor(project=project, views=views)     # doctest: +SKIP
"""

from __future__ import annotations

import json

import dagster as dg

from ivm_assets.dagster.asset_decorator import build_ivm_specs, default_op_name
from ivm_assets.dagster.sources import source_version
from ivm_assets.dagster.translator import IvmTranslator
from ivm_assets.errors import SourceError
from ivm_assets.project import IvmProject


def read_cursor(cursor: str | None) -> dict[str, int] | None:
    """Per-source versions from a cursor, or None when there is none or it is unreadable."""
    if not cursor:
        return None
    try:
        data = json.loads(cursor)
        versions = data["sources"]
        if not isinstance(versions, dict) or not all(isinstance(v, int) for v in versions.values()):
            return None
        return {str(k): int(v) for k, v in versions.items()}
    except (ValueError, KeyError, TypeError):
        return None


def build_ivm_sensor(
    *,
    project: IvmProject,
    views: dg.AssetsDefinition,
    translator: IvmTranslator | None = None,
    name: str | None = None,
    minimum_interval_seconds: int = 60,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """A sensor over ``project``'s sources that targets ``views`` (from :func:`ivm_view_assets`).

    Pass the same ``translator`` as to ``ivm_view_assets`` so the asset keys agree.
    """
    specs = build_ivm_specs(project, translator)
    view_keys = {name_: spec.key for name_, spec in specs.views.items() if spec.key in views.keys}

    @dg.sensor(
        name=name or default_op_name(project) + "_sources_sensor",
        target=views,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Refreshes the ivm views downstream of Delta sources whose version changed.",
    )
    def _ivm_sources_sensor(context) -> dg.SensorResult:
        now: dict[str, int] = {}
        for source, uri in project.sources.items():
            try:
                now[source] = source_version(uri)
            except SourceError as exc:
                context.log.warning(f"source `{source}` skipped this tick: {exc}")
        before = read_cursor(context.cursor)
        if context.cursor and before is None:
            context.log.warning(f"unreadable cursor {context.cursor[:200]!r}; starting over from the current source versions")
        if before is None:
            changed = set(now)
        else:
            changed = {s for s, v in now.items() if before.get(s) != v}
        cursor = json.dumps({"sources": {**(before or {}), **now}}, sort_keys=True)
        if not changed:
            return dg.SensorResult(skip_reason=dg.SkipReason("no source changed"), cursor=cursor)
        affected = [v for v in specs.downstream_views(changed) if v in view_keys]
        if not affected:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"{', '.join(sorted(changed))} changed; no view reads them"), cursor=cursor)
        moved = ", ".join(f"{s} {before.get(s) if before else '∅'}→{now[s]}" for s in sorted(changed))
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=cursor,
                    asset_selection=[view_keys[v] for v in affected],
                    tags={"ivm/sources_changed": moved[:200]},
                )
            ],
            cursor=cursor,
        )

    return _ivm_sources_sensor
