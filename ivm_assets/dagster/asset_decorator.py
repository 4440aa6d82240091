"""A project's views as one Dagster ``multi_asset``: any subset refreshed in one Spark session.

Example:
    >>> project = IvmProject.load("demo_project")                          # doctest: +SKIP
    >>> views = ivm_view_assets(project=project)
    >>> defs = dg.Definitions(assets=[views], resources={"ivm": IvmResource()})
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import dagster as dg
from pydantic import Field

from ivm_assets.dagster import checks
from ivm_assets.dagster.lineage import view_facts
from ivm_assets.dagster.python_views import IvmPythonView, add_python_views, external_keys
from ivm_assets.dagster.resources import project_for_run
from ivm_assets.dagster.results import materialize_result
from ivm_assets.dagster.translator import IvmSourceProps, IvmTranslator, IvmViewProps
from ivm_assets.project import IvmProject

FULL_REFRESH_TAG = "ivm/full_refresh"


class IvmRunConfig(dg.Config):
    """Run config of the views' op (the launchpad's ``ops: {<name>: {config: …}}``)."""

    full_refresh: bool = Field(
        default=False, description="Rebuild the selected views from their sources instead of applying changes."
    )


@dataclass(frozen=True)
class IvmSpecs:
    """The asset specs of a project's views and sources, by view/source name."""

    project: IvmProject
    views: dict[str, dg.AssetSpec]
    sources: dict[str, dg.AssetSpec]

    def view_of(self, key: dg.AssetKey) -> str:
        return next(name for name, spec in self.views.items() if spec.key == key)

    def downstream_views(self, changed: Iterable[str]) -> list[str]:
        """Views that read any of ``changed`` (sources or views), directly or through other views, in dependency order."""
        hit = set(changed)
        out = []
        for name in self.project.order:
            if hit.intersection(self.project.views[name].dependencies):
                hit.add(name)
                out.append(name)
        return out


def build_ivm_specs(
    project: IvmProject, translator: IvmTranslator | None = None, *, python_views: Sequence[IvmPythonView] = ()
) -> IvmSpecs:
    """Asset specs for every source and view (cheap: reads Delta logs, never starts Spark).

    ``project`` must already contain ``python_views`` (:func:`add_python_views`); their
    Dagster-asset inputs keep their own keys and are not ivm sources.
    """
    translator = translator or IvmTranslator()
    provided = external_keys(python_views)
    lines = {v.name: v.line for v in python_views}
    sources = {
        name: translator.get_source_asset_spec(IvmSourceProps(project=project, name=name, uri=uri))
        for name, uri in project.sources.items()
        if name not in provided
    }
    keys = {**provided, **{name: spec.key for name, spec in sources.items()}}
    facts = view_facts(project)
    views: dict[str, dg.AssetSpec] = {}
    for name in project.order:
        definition = project.views[name]
        props = IvmViewProps(
            project=project,
            definition=definition,
            dependency_keys={d: keys[d] for d in definition.dependencies},
            columns=facts[name].columns,
            column_lineage=facts[name].lineage,
            code_line=lines.get(name),
        )
        views[name] = translator.get_asset_spec(props)
        keys[name] = views[name].key
    return IvmSpecs(project=project, views=views, sources=sources)


def ivm_view_assets(
    *,
    project: IvmProject,
    translator: IvmTranslator | None = None,
    python_views: Sequence[IvmPythonView] = (),
    name: str | None = None,
    resource_key: str = "ivm",
    consistency_checks: bool = False,
    blocking_checks: bool = False,
    pool: str | None = None,
) -> dg.AssetsDefinition:
    """Every view of ``project`` (plus ``python_views``) as one subsettable multi_asset.

    A run refreshes exactly the selected views, in dependency order, in one Spark session,
    and reports one MaterializeResult each (mode, reason, source versions, change rows,
    row count, duration, state size; data version = the source versions consumed). Run config
    ``full_refresh: true`` or the run tag ``ivm/full_refresh=true`` forces full refreshes.
    ``consistency_checks`` adds an oracle asset check per view (see :mod:`.checks`).

    The run needs the resource ``resource_key``: an :class:`IvmResource` or a dagster-pyspark
    ``PySparkResource``.
    """
    project = add_python_views(project, python_views)
    specs = build_ivm_specs(project, translator, python_views=python_views)
    check_specs = checks.check_specs(specs.views, blocking=blocking_checks) if consistency_checks else []
    op_name = name or default_op_name(project)

    @dg.multi_asset(
        name=op_name,
        specs=list(specs.views.values()),
        check_specs=check_specs,
        can_subset=True,
        required_resource_keys={resource_key},
        config_schema=IvmRunConfig.to_fields_dict(),
        pool=pool,
        op_tags={"ivm/project": str(project.root)},
    )
    def _refresh_views(context) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        # `context` stays unannotated: Dagster cannot resolve postponed annotations of a closure.
        bound = project_for_run(project, getattr(context.resources, resource_key))
        config = IvmRunConfig(**(context.op_execution_context.op_config or {}))
        full = config.full_refresh or context.run.tags.get(FULL_REFRESH_TAG, "").lower() in {"1", "true", "yes"}
        selected = [v for v in project.order if specs.views[v].key in context.selected_asset_keys]
        to_check = {
            specs.view_of(k.asset_key) for k in context.selected_asset_check_keys
        } if consistency_checks else set()
        context.log.info(f"refreshing {', '.join(selected) or 'no views'}{' (full refresh)' if full else ''}")
        # A failed blocking check stops the views downstream of it; that needs one view per batch.
        batches = [[v] for v in selected] if consistency_checks and blocking_checks else [selected] if selected else []
        blocked: set[str] = set()
        for batch in batches:
            if blocked.intersection(batch):
                context.log.warning(f"not refreshing {', '.join(batch)}: an upstream view failed its blocking consistency check")
                continue
            for result in bound.refresh_each(batch, full=full, upstream=False):
                context.log.info(result.summary())
                yield materialize_result(bound, result, specs.views[result.view].key)
                if result.view in to_check:
                    to_check.discard(result.view)
                    check = checks.run_check(bound, result.view, key=specs.views[result.view].key, blocking=blocking_checks)
                    yield check
                    if blocking_checks and not check.passed:
                        blocked.update(specs.downstream_views([result.view]))
        for view in [v for v in project.order if v in to_check]:
            yield checks.run_check(bound, view, key=specs.views[view].key, blocking=blocking_checks)

    return _refresh_views


def default_op_name(project: IvmProject) -> str:
    """``ivm_<folder>``: distinct for projects in distinct folders."""
    return "ivm_" + re.sub(r"\W", "_", project.root.name).strip("_").lower()
