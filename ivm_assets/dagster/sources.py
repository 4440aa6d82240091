"""A project's Delta sources as observable source assets: ``DataVersion`` = the Delta version.

Observing costs one read of each table's Delta log. Each view's automation condition
(:func:`ivm_assets.dagster.automation.ivm_eager`) requests exactly the views downstream of a
source whose observed version moved (and views of views after them); an observation that
finds the same version changes nothing. Who observes:

- the source sensor (:func:`ivm_assets.dagster.sensors.build_ivm_source_sensor`, the
  default of the component and the demo): observations without a run, only for sources
  that moved;
- or ``cron=``: declarative automation observes every source on a cron, one run (one
  process) per tick, which fills the run list, so keep it coarse.

Example:
    >>> sources = ivm_source_assets(project=project)                        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import dagster as dg

from ivm_assets.dagster.asset_decorator import build_ivm_specs, default_op_name
from ivm_assets.dagster.translator import IvmTranslator
from ivm_assets.delta.handles import is_delta_table, latest_version, reusing_handles
from ivm_assets.errors import SourceError
from ivm_assets.project import IvmProject


def source_version(uri: str) -> int:
    """The Delta table's latest version, or a SourceError saying what is missing."""
    if not is_delta_table(uri):
        raise SourceError(f"expected a Delta table at {uri} (a folder with _delta_log/), found none")
    return latest_version(uri)


def ivm_source_assets(
    *,
    project: IvmProject,
    translator: IvmTranslator | None = None,
    key_prefix: str | Sequence[str] | None = None,
    cron: str | None = None,
    name: str | None = None,
) -> dg.AssetsDefinition:
    """One observable asset per source of ``project``, observed together: by a run on ``cron``,
    by hand ("Observe sources" in the UI), or, without runs, by the source sensor."""
    specs = build_ivm_specs(project, translator, key_prefix=key_prefix).sources
    condition = dg.AutomationCondition.cron_tick_passed(cron) & ~dg.AutomationCondition.in_progress() if cron else None
    by_key = {spec.key: name_ for name_, spec in specs.items()}

    @dg.multi_observable_source_asset(
        name=name or default_op_name(project, key_prefix) + "_sources",
        specs=[spec.replace_attributes(automation_condition=condition) for spec in specs.values()],
        can_subset=True,
    )
    def _observe_sources(context) -> Iterator[dg.ObserveResult]:
        for key in context.selected_asset_keys:
            source = by_key[key]
            with reusing_handles():  # kept between observations (see the sensor's _poll)
                version = source_version(project.sources[source])
            yield dg.ObserveResult(
                asset_key=key,
                data_version=dg.DataVersion(str(version)),
                metadata={"ivm/delta_version": version, "dagster/uri": project.sources[source]},
            )

    return _observe_sources
