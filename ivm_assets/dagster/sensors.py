"""Sensors over a project's Delta sources. Use one of the two, not both:

- :func:`build_ivm_source_sensor` (with declarative automation, the default): each tick
  reads every source's Delta version and reports an observation, with no run, for each
  source that moved; the views' automation condition (:func:`ivm_eager`) then refreshes
  exactly the views downstream (the automation sensor launches that run), also when the
  observation lands while a view's run is in progress.
- :func:`build_ivm_sensor` (without declarative automation): each tick requests one run of
  exactly the views downstream of the sources that moved (views of views included).

Both read one Delta log per source per tick and keep ``{"sources": {name: version}}`` as
their cursor. An unreadable cursor is logged and the sensor starts over as on its first
tick: the source sensor then reports every source, the refresh sensor requests every view
(an up-to-date view refreshes as a cheap no-op).

Example:
    >>> sensor = build_ivm_source_sensor(project=project)           # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_TAG  # "dagster/data_version"; not exported

from ivm_assets.dagster.asset_decorator import build_ivm_specs, default_op_name
from ivm_assets.dagster.sources import source_version
from ivm_assets.dagster.translator import IvmTranslator
from ivm_assets.delta.handles import reusing_handles
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
    key_prefix: str | Sequence[str] | None = None,
    name: str | None = None,
    minimum_interval_seconds: int = 60,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """A sensor that requests runs of ``views`` (from :func:`ivm_view_assets`) downstream of moved sources.

    For deployments without declarative automation. Pass the same ``translator`` and
    ``key_prefix`` as to ``ivm_view_assets`` so the asset keys agree.
    """
    specs = build_ivm_specs(project, translator, key_prefix=key_prefix)
    view_keys = {name_: spec.key for name_, spec in specs.views.items() if spec.key in views.keys}

    @dg.sensor(
        name=name or default_op_name(project, key_prefix) + "_refresh_sensor",
        target=views,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=(
            "Without declarative automation: requests a run of the ivm views downstream of Delta sources whose "
            "version changed. Do not run it together with the source sensor and automation."
        ),
    )
    def _ivm_refresh_sensor(context) -> dg.SensorResult:
        before, now, changed, cursor = _poll(project, context)
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

    return _ivm_refresh_sensor


def build_ivm_source_sensor(
    *,
    project: IvmProject,
    translator: IvmTranslator | None = None,
    key_prefix: str | Sequence[str] | None = None,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.SensorDefinition:
    """A sensor that observes ``project``'s sources without starting runs.

    Each tick reports an ``AssetObservation`` (data version = Delta version) for each source
    whose version moved; declarative automation takes it from there. Pass the same
    ``translator`` and ``key_prefix`` as to ``ivm_source_assets``.
    """
    keys = {source: spec.key for source, spec in build_ivm_specs(project, translator, key_prefix=key_prefix).sources.items()}

    @dg.sensor(
        name=name or default_op_name(project, key_prefix) + "_source_sensor",
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=(
            "Observes the ivm sources' Delta versions (no run); automation then refreshes the views downstream "
            "of the sources that moved."
        ),
    )
    def _ivm_source_sensor(context) -> dg.SensorResult:
        _, now, changed, cursor = _poll(project, context)
        observations = [
            dg.AssetObservation(
                asset_key=keys[source],
                tags={DATA_VERSION_TAG: str(now[source])},
                metadata={"ivm/delta_version": now[source], "dagster/uri": project.sources[source]},
            )
            for source in sorted(changed)
            if source in keys
        ]
        if not observations:
            return dg.SensorResult(skip_reason=dg.SkipReason("no source changed"), cursor=cursor)
        return dg.SensorResult(asset_events=observations, cursor=cursor)

    return _ivm_source_sensor


def _poll(project: IvmProject, context) -> tuple[dict[str, int] | None, dict[str, int], set[str], str]:
    """(versions in the cursor, versions now, sources that moved, the new cursor)."""
    now: dict[str, int] = {}
    # Handles kept from tick to tick: on an object store a source that did not move costs two
    # HEAD requests a tick, one that moved a read of its new commits, not a replay of its log.
    with reusing_handles():
        for source, uri in project.sources.items():
            try:
                now[source] = source_version(uri)
            except SourceError as exc:
                context.log.warning(f"source `{source}` skipped this tick: {exc}")
    before = read_cursor(context.cursor)
    if context.cursor and before is None:
        context.log.warning(f"unreadable cursor {context.cursor[:200]!r}; starting over from the current source versions")
    changed = set(now) if before is None else {s for s, v in now.items() if before.get(s) != v}
    cursor = json.dumps({"sources": {**(before or {}), **now}}, sort_keys=True)
    return before, now, changed, cursor
