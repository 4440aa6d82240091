"""A project's Delta sources as observable source assets: ``DataVersion`` = the Delta version.

Observing costs one read of each table's Delta log. The observation runs on a cron through
declarative automation; each view's ``AutomationCondition.eager()`` then requests exactly
the views downstream of a source whose version moved (and views of views after them), while
an observation that finds the same version changes nothing.

Example:
    >>> sources = ivm_source_assets(project=project, cron="*/5 * * * *")   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg

from ivm_assets.dagster.asset_decorator import build_ivm_specs, default_op_name
from ivm_assets.dagster.translator import IvmTranslator
from ivm_assets.delta import tables as delta
from ivm_assets.errors import SourceError
from ivm_assets.project import IvmProject


def source_version(uri: str) -> int:
    """The Delta table's latest version, or a SourceError saying what is missing."""
    if not delta.is_delta_table(uri):
        raise SourceError(f"expected a Delta table at {uri} (a folder with _delta_log/), found none")
    return delta.latest_version(uri)


def ivm_source_assets(
    *,
    project: IvmProject,
    translator: IvmTranslator | None = None,
    cron: str | None = "* * * * *",
    name: str | None = None,
) -> dg.AssetsDefinition:
    """One observable asset per source of ``project``, observed together (``cron=None``: only by hand)."""
    specs = build_ivm_specs(project, translator).sources
    condition = dg.AutomationCondition.cron_tick_passed(cron) & ~dg.AutomationCondition.in_progress() if cron else None
    by_key = {spec.key: name_ for name_, spec in specs.items()}

    @dg.multi_observable_source_asset(
        name=name or default_op_name(project) + "_sources",
        specs=[spec.replace_attributes(automation_condition=condition) for spec in specs.values()],
        can_subset=True,
    )
    def _observe_sources(context) -> Iterator[dg.ObserveResult]:
        for key in context.selected_asset_keys:
            source = by_key[key]
            version = source_version(project.sources[source])
            yield dg.ObserveResult(
                asset_key=key,
                data_version=dg.DataVersion(str(version)),
                metadata={"ivm/delta_version": version, "dagster/uri": project.sources[source]},
            )

    return _observe_sources
