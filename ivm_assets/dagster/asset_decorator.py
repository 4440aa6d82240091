"""A project's views as one Dagster ``multi_asset``: any subset refreshed in one Spark session.

Example:
    >>> project = IvmProject.load("demo_project")                          # doctest: +SKIP
    >>> views = ivm_view_assets(project=project)                           # doctest: +SKIP
    >>> defs = dg.Definitions(assets=[views], resources={"ivm": IvmResource()})  # doctest: +SKIP
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
from ivm_assets.dagster.resources import project_for_run, wait_seconds
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
    project: IvmProject,
    translator: IvmTranslator | None = None,
    *,
    python_views: Sequence[IvmPythonView] = (),
    key_prefix: str | Sequence[str] | None = None,
) -> IvmSpecs:
    """Asset specs for every source and view (cheap: reads Delta logs, never starts Spark).

    ``project`` must already contain ``python_views`` (:func:`add_python_views`); their
    Dagster-asset inputs keep their own keys and are not ivm sources. ``key_prefix`` goes in
    front of every source and view key the translator returns (deps and lineage follow), so
    two projects with the same names fit in one code location.
    """
    translator = translator or IvmTranslator()
    prefix = prefix_path(key_prefix)
    provided = external_keys(python_views)
    lines = {v.name: v.line for v in python_views}
    sources = {
        name: _prefixed(translator.get_source_asset_spec(IvmSourceProps(project=project, name=name, uri=uri)), prefix)
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
        views[name] = _prefixed(translator.get_asset_spec(props), prefix)
        keys[name] = views[name].key
    return IvmSpecs(project=project, views=views, sources=sources)


def prefix_path(key_prefix: str | Sequence[str] | None) -> list[str]:
    """``"shop"`` or ``["team", "shop"]`` as a key path (empty for None)."""
    if key_prefix is None:
        return []
    return [key_prefix] if isinstance(key_prefix, str) else list(key_prefix)


def _prefixed(spec: dg.AssetSpec, prefix: list[str]) -> dg.AssetSpec:
    return spec.replace_attributes(key=spec.key.with_prefix(prefix)) if prefix else spec


def ivm_view_assets(
    *,
    project: IvmProject,
    translator: IvmTranslator | None = None,
    python_views: Sequence[IvmPythonView] = (),
    key_prefix: str | Sequence[str] | None = None,
    name: str | None = None,
    resource_key: str = "ivm",
    consistency_checks: bool = False,
    blocking_checks: bool = False,
    checks_with_refresh: bool = False,
    pool: str | None = None,
) -> dg.AssetsDefinition:
    """Every view of ``project`` (plus ``python_views``) as one subsettable multi_asset.

    A run refreshes exactly the selected views, in dependency order, in one Spark session,
    and reports one MaterializeResult each (mode, reason, source versions, change rows,
    row count, column schema and lineage, duration, state size; data version = the source
    versions consumed). Run config ``full_refresh: true`` or the run tag
    ``ivm/full_refresh=true`` forces full refreshes.

    ``consistency_checks`` adds an oracle asset check per view (see :mod:`.checks`). Each
    costs a full recompute, so by default a check runs only in runs that refresh no view
    (its schedule, :func:`build_ivm_check_schedule`, or "Execute" in the UI);
    ``checks_with_refresh`` (implied by ``blocking_checks``) runs selected checks right after
    their view's refresh.

    Runs use the Dagster pool ``pool`` (default: the op name, one pool per project): with a
    pool limit of 1 in the instance (``concurrency: pools: {default_limit: 1, granularity:
    run}``) a second run of the project waits in the queue instead of racing the first.

    The run needs the resource ``resource_key``: an :class:`IvmResource` or a dagster-pyspark
    ``PySparkResource``.
    """
    project = add_python_views(project, python_views)
    specs = build_ivm_specs(project, translator, python_views=python_views, key_prefix=key_prefix)
    check_specs = checks.check_specs(specs.views, blocking=blocking_checks) if consistency_checks else []
    op_name = name or default_op_name(project, key_prefix)
    checks_with_refresh = checks_with_refresh or blocking_checks

    @dg.multi_asset(
        name=op_name,
        specs=list(specs.views.values()),
        check_specs=check_specs,
        can_subset=True,
        required_resource_keys={resource_key},
        config_schema=IvmRunConfig.to_fields_dict(),
        pool=pool or op_name,
        op_tags={"ivm/project": str(project.root)},
    )
    def _refresh_views(context) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        # `context` stays unannotated: Dagster cannot resolve postponed annotations of a closure.
        resource = getattr(context.resources, resource_key)
        bound = project_for_run(project, resource)
        config = IvmRunConfig(**(context.op_execution_context.op_config or {}))
        full = config.full_refresh or context.run.tags.get(FULL_REFRESH_TAG, "").lower() in {"1", "true", "yes"}
        selected = [v for v in project.order if specs.views[v].key in context.selected_asset_keys]
        to_check = {specs.view_of(k.asset_key) for k in context.selected_asset_check_keys}
        if selected and to_check and not checks_with_refresh:
            context.log.info(
                f"consistency checks of {', '.join(sorted(to_check))} skipped in this refresh run: each recomputes its "
                "view in full; they run on their schedule or when executed on their own"
            )
            to_check = set()
        context.log.info(f"refreshing {', '.join(selected) or 'no views'}{' (full refresh)' if full else ''}")
        blocked: set[str] = set()
        for view in selected:
            if view in blocked:
                context.log.warning(f"not refreshing {view}: an upstream view failed its blocking consistency check")
                continue
            # One call per view, so the run's log shows when each view starts as well as ends.
            context.log.info(f"{view}: refreshing")
            refreshes = bound.refresh_each([view], full=full, upstream=False, wait=wait_seconds(resource), run_id=context.run_id)
            for result in refreshes:
                context.log.info(result.summary())
                yield materialize_result(bound, result, specs.views[result.view])
            if view in to_check:
                to_check.discard(view)
                check = checks.run_check(bound, view, key=specs.views[view].key, blocking=blocking_checks)
                yield check
                if blocking_checks and not check.passed:
                    blocked.update(specs.downstream_views([view]))
        for view in [v for v in project.order if v in to_check]:
            yield checks.run_check(bound, view, key=specs.views[view].key, blocking=blocking_checks)

    return _refresh_views


def build_ivm_check_schedule(
    views: dg.AssetsDefinition, *, cron: str = "0 * * * *", name: str | None = None,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.RUNNING,
) -> dg.ScheduleDefinition:
    """A schedule that runs only the consistency checks of ``views`` (from ``ivm_view_assets(consistency_checks=True)``).

    Each check recomputes its view's SQL in full, so they run on a cadence rather than after
    every refresh: hourly by default.
    """
    if not views.check_keys:
        raise dg.DagsterInvalidDefinitionError(
            f"build_ivm_check_schedule: `{views.node_def.name}` has no consistency checks; "
            "build it with ivm_view_assets(..., consistency_checks=True)"
        )
    job_name = f"{views.node_def.name}_consistency_checks"
    return dg.ScheduleDefinition(
        name=name or f"{job_name}_schedule",
        cron_schedule=cron,
        target=dg.define_asset_job(job_name, selection=dg.AssetSelection.checks(*views.check_keys)),
        default_status=default_status,
        description="Runs the ivm consistency checks (each recomputes its view in full and compares it with the output).",
    )


def default_op_name(project: IvmProject, key_prefix: str | Sequence[str] | None = None) -> str:
    """``ivm_<key prefix>``, else ``ivm_<folder>``: distinct for projects with distinct prefixes or folders."""
    stem = "_".join(prefix_path(key_prefix)) or project.root.name
    return "ivm_" + re.sub(r"\W", "_", stem).strip("_").lower()
