"""A project folder: `ivm.yaml` plus `views/*.sql`, and the Python API over it.

Example:
    >>> project = IvmProject.load("demo_project")          # doctest: +SKIP
    >>> for result in project.refresh():                     # doctest: +SKIP
    ...     print(result.summary())
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ivm_assets import uris
from ivm_assets.config import ProjectConfig, SourceSettings, ViewSettings, load_config, name_problem, resolve_options
from ivm_assets.delta import hadoop_mapping, storage
from ivm_assets.delta.handles import HandleBlock, is_delta_table, latest_version, reusing_handles
from ivm_assets.delta.log import change_feed_enabled
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.engine.compile import CompiledView, ViewDefinition, compile_key, compile_view
from ivm_assets.engine.cost import estimate
from ivm_assets.engine.explain import explain_view
from ivm_assets.engine.refresh import RefreshResult, ViewLocation, refresh_view
from ivm_assets.errors import ConfigError, NotIncrementalError, SourceError
from ivm_assets.spark.arrow import spark_schema
from ivm_assets.spark.cluster import check_reachable, master_of
from ivm_assets.spark.session import LazySession, semantics
from ivm_assets.state.claim import DEFAULT_WAIT_SECONDS, ClaimSettings, new_run_id
from ivm_assets.state.progress import Progress
from ivm_assets.view_definitions import dependency_order, read_views, view_definition
from ivm_assets.view_status import ViewStatus, view_status


def _resolve(base: Path, location: str) -> str:
    """A path relative to ``base`` made absolute; URIs (``s3://…``) pass through, without a
    trailing ``/`` (tables under them are ``<uri>/<name>``)."""
    if "://" in location:
        return storage.normalize(location)
    return str((base / location).resolve())


class IvmProject:
    """Views over Delta sources, declared in a folder, maintained incrementally."""

    def __init__(
        self,
        *,
        root: Path,
        config: ProjectConfig,
        views: dict[str, ViewDefinition],
        spark: SparkSession | None = None,
        storage_options: Mapping[str, str] | None = None,
        storage_origin: str = "storage_options given to IvmProject",
    ) -> None:
        """``storage_options`` (``${NAME}`` references allowed) go over ivm.yaml's
        ``storage_options`` key by key; ``storage_origin`` names them in errors."""
        self.root = root
        self.config = config
        self.views = views
        self.warehouse = _resolve(root, config.warehouse)
        self.sources = {name: _resolve(root, config.source_path(name)) for name in config.sources}
        self._storage = (dict(storage_options or {}), storage_origin)
        self._register_storage()
        # Started on first use (:class:`LazySession`): a small refresh may need no Spark at all.
        self._spark: SparkSession | LazySession = spark if spark is not None else LazySession(
            master=config.spark.master, remote=config.spark.remote, conf=config.spark.conf
        )
        # Compiling asks Spark to analyze the SQL; a view whose SQL and input schemas are
        # unchanged compiles to the same dataflow, so it is kept between refreshes.
        self._compiled: dict[tuple, CompiledView] = {}
        self.order = dependency_order(views)

    def _register_storage(self) -> None:
        """Hand the storage options to the Delta layer for the warehouse and each source
        (:mod:`ivm_assets.delta.storage`): the project's for the warehouse and the sources
        without their own, a source's own (replacing the project's) for it."""
        file = self.root / "ivm.yaml"
        options = resolve_options(self.config.storage_options, where=f"{file}: `storage_options.{{key}}`")
        origin = f"`storage_options` in {file}"
        extra, extra_origin = self._storage
        if extra:
            options = {**options, **resolve_options(extra, where=f"{extra_origin}: `{{key}}`")}
            origin = f"{extra_origin} (over `storage_options` in {file})"
        storage.register(self.warehouse, options, origin=origin)
        for name, uri in self.sources.items():
            source = self.config.sources[name]
            if isinstance(source, SourceSettings) and source.storage_options:
                where = f"{file}: `sources.{name}.storage_options.{{key}}`"
                own = resolve_options(source.storage_options, where=where)
                storage.register(uri, own, origin=f"`sources.{name}.storage_options` in {file}")
            else:
                storage.register(uri, options, origin=origin)

    def copy_with(self, *, config: ProjectConfig | None = None, views: dict[str, ViewDefinition] | None = None, spark=None) -> IvmProject:
        extra, origin = self._storage
        return type(self)(
            root=self.root, config=config or self.config, views=views if views is not None else self.views, spark=spark or self._spark,
            storage_options=extra, storage_origin=origin,
        )

    # --- loading --------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        spark: SparkSession | None = None,
        warehouse: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        storage_origin: str = "storage_options given to IvmProject.load",
    ) -> IvmProject:
        """Read ``path``/ivm.yaml and ``path``/views/*.sql; check names and dependencies.

        ``warehouse`` replaces the one in ivm.yaml (e.g. one warehouse per deployment);
        ``storage_options`` go over ivm.yaml's, key by key (``${NAME}`` references allowed;
        ``storage_origin`` names them in errors). Cheap: no Spark session is started until a
        view is compiled or refreshed.
        """
        root = Path(path).resolve()
        config = load_config(root / "ivm.yaml")
        if warehouse is not None:
            config = config.model_copy(update={"warehouse": warehouse})
        views = read_views(root, config)
        return cls(root=root, config=config, views=views, spark=spark, storage_options=storage_options, storage_origin=storage_origin)

    def with_view(
        self,
        name: str,
        sql: str,
        *,
        settings: ViewSettings | None = None,
        file: str | None = None,
        sources: Mapping[str, str] | None = None,
    ) -> IvmProject:
        """A copy of this project with one more view declared in code (and the extra sources it reads).

        The view behaves exactly like a ``views/<name>.sql`` file: same checks, same refresh.
        """
        if problem := name_problem(name):
            raise ConfigError(f"cannot add view {name!r} to {self.root}: {problem}")
        taken = {n.lower() for n in (*self.views, *self.sources)}
        if name.lower() in taken:
            raise ConfigError(
                f"cannot add view `{name}` to {self.root}: a source or view of that name (compared case-insensitively, "
                "as Spark SQL does) already exists; rename it"
            )
        extra = dict(sources or {})
        for source in extra:
            if problem := name_problem(source):
                raise ConfigError(f"view `{name}`: source name {problem}")
        views = {v.lower() for v in (*self.views, name)}
        declared = {s.lower(): s for s in self.config.sources}

        def means_else(s: str, uri: str) -> bool:
            same = declared.get(s.lower())
            return s.lower() in views or (same is not None and (same != s or self.sources[s] != uri))

        clash = {s for s, uri in extra.items() if means_else(s, uri)}
        if clash:
            raise ConfigError(f"view `{name}`: source name(s) {', '.join(sorted(clash))} already mean something else in {self.root}")
        config = self.config.model_copy(update={"sources": {**self.config.sources, **extra}})
        if settings is not None:
            config = config.model_copy(update={"views": {**self.config.views, name: settings}})
        definition = view_definition(name, sql, file, settings or ViewSettings(), set(config.sources), set(self.views) | {name})
        return self.copy_with(config=config, views={**self.views, name: definition})

    def with_storage_options(self, options: Mapping[str, str], *, origin: str) -> IvmProject:
        """A copy whose storage options are these over the ones it has, key by key
        (``${NAME}`` references allowed); ``origin`` names them in errors."""
        if not options:
            return self
        extra, before = self._storage
        copy = type(self)(
            root=self.root, config=self.config, views=self.views, spark=self._spark,
            storage_options={**extra, **options}, storage_origin=origin if not extra else f"{origin} (over {before})",
        )
        copy._compiled = self._compiled  # the same views over the same tables
        return copy

    def with_spark(self, spark: SparkSession | LazySession) -> IvmProject:
        """The same project bound to ``spark`` (a session a caller already manages)."""
        if spark is self._spark:
            return self  # keeps the compiled views of earlier refreshes
        return self.copy_with(spark=spark)

    @property
    def spark(self) -> SparkSession:
        """The project's Spark session, started now if it was not yet."""
        return self._spark.session() if isinstance(self._spark, LazySession) else self._spark

    @property
    def session(self) -> SparkSession | LazySession:
        """The project's Spark session as it is: a :class:`LazySession` is not started by
        asking (what a refresh reports as where it ran)."""
        return self._spark

    def check_placement(self, master: str) -> None:
        """Refuse local folders that executors of ``master`` cannot see
        (:func:`~ivm_assets.spark.cluster.check_reachable`): a ConfigError naming them."""
        locations = {"the warehouse": self.warehouse, **{f"source {n}": uri for n, uri in self.sources.items()}}
        check_reachable(master, locations, shared_filesystem=self.config.spark.shared_filesystem, settings=str(self.root / "ivm.yaml"))

    def _check_placement(self) -> None:
        """:meth:`check_placement` before anything is written: the master of a local session
        is known before it starts, a Spark Connect server's once connected."""
        lazy = self._spark
        if not isinstance(lazy, LazySession):
            self.check_placement(master_of(lazy))
        elif lazy.started or lazy.remote:
            lazy.on_start(("placement", self.root, self.warehouse, tuple(self.sources.values())), lambda s: self.check_placement(master_of(s)))
        else:
            self.check_placement(lazy.master)

    def _executor_io(self) -> None:
        """Set how Spark's executors reach object store tables (``spark.executor_io``). With
        Hadoop's connectors, the session gets the Hadoop settings of every object store
        location's options when it starts (Spark keeps values of keys like ``secret.key``
        out of its UI and logs)."""
        mode = self.config.spark.executor_io
        hadoop_mapping.set_executor_io(mode)
        if mode != "hadoop":
            return
        remote = [uri for uri in (self.warehouse, *self.sources.values()) if not uris.is_local(uri)]

        def configure(session: SparkSession) -> None:
            for uri in remote:
                for key, value in hadoop_mapping.hadoop_settings(uri).items():
                    session.conf.set(key, value)

        if isinstance(self._spark, LazySession):
            self._spark.on_start(("hadoop", self.root, tuple(remote)), configure)
        else:
            configure(self._spark)

    def location(self, view: str) -> ViewLocation:
        return ViewLocation(output=f"{self.warehouse}/{view}", state_root=f"{self.warehouse}/_ivm/{view}")

    def relation_uri(self, name: str) -> str:
        return self.sources[name] if name in self.sources else self.location(name).output

    # --- compiling ------------------------------------------------------------------------
    def _source_schema(self, name: str, reader: ViewDefinition) -> T.StructType:
        uri = self.sources[name]
        if not is_delta_table(uri):
            raise SourceError(
                f"source `{name}` in {self.root / 'ivm.yaml'} (read by view {reader.name!r}, {reader.file}): "
                f"expected a Delta table at {uri}, found "
                f"{'a folder without a _delta_log' if os.path.isdir(uri) else 'nothing'}. "
                "Point it at a Delta table (a folder with _delta_log/)."
            )
        return spark_schema(arrow_schema(uri))

    def _check_change_feeds(self, view: ViewDefinition) -> None:
        """Under ``refresh: incremental`` every source must have its change data feed on
        before the first build (as Databricks' strict mode refuses such a view at creation):
        otherwise the build succeeds and every later refresh fails."""
        if view.settings.refresh != "incremental":
            return
        for name in view.dependencies:
            if name in self.sources and not change_feed_enabled(self.sources[name]):
                raise NotIncrementalError(
                    f"`refresh: incremental` is set but source `{name}` ({self.sources[name]}) has no change data feed, "
                    "so the view could only be maintained by full recompute",
                    view=view.name, file=view.file,
                    hint="turn it on for that table (table property delta.enableChangeDataFeed = true), "
                    "or set `refresh: auto` for this view in ivm.yaml",
                )

    def compile(self, views: list[str] | None = None) -> dict[str, CompiledView]:
        """Compile ``views`` and everything they depend on, in dependency order.

        Spark's analysis of a view (its result schema) is recorded with every epoch under a
        key of everything it depends on (:func:`compile_key`); a view whose last epoch
        recorded the same key compiles from that record, without starting Spark.
        """
        wanted = self._with_upstream(views)
        settings = semantics(self._spark)  # a view compiles anew when they change
        schemas: dict[str, T.StructType] = {}
        compiled: dict[str, CompiledView] = {}
        for name in self.order:
            if name not in wanted:
                continue
            view = self.views[name]
            for dep in view.dependencies:
                if dep not in schemas and dep in self.sources:
                    schemas[dep] = self._source_schema(dep, view)
            key = compile_key(view, [schemas[d] for d in view.dependencies], settings)
            if (name, key) not in self._compiled:
                last = Progress(self.location(name).progress).last_committed()
                recorded = (last.payload.get("compiled") or {}) if last is not None else {}
                schema = T.StructType.fromJson(json.loads(recorded["schema"])) if recorded.get("key") == key else None
                self._compiled[(name, key)] = compile_view(self._spark, view, schemas, semantics=settings, key=key, schema=schema)
            compiled[name] = self._compiled[(name, key)]
            schemas[name] = compiled[name].schema
        return compiled

    def _with_upstream(self, views: list[str] | None) -> set[str]:
        if views is None:
            return set(self.views)
        unknown = [v for v in views if v not in self.views]
        if unknown:
            raise ConfigError(f"unknown view(s) {', '.join(unknown)}; the project has: {', '.join(sorted(self.views)) or 'none'}")
        todo, seen = list(views), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(d for d in self.views[name].dependencies if d in self.views)
        return seen

    # --- the API ----------------------------------------------------------------------------
    def refresh(
        self, views: list[str] | None = None, *, full: bool = False, wait: float | None = None, run_id: str | None = None
    ) -> list[RefreshResult]:
        """Refresh ``views`` (default: all), upstream views first; one result per view refreshed.

        Upstream views of the selection are refreshed too, so a view never reads a stale view.
        One refresh of a view runs at a time, in any number of processes: a refresh waits up
        to ``wait`` seconds (default 300) for another one of the same view, then finds the
        view up to date or runs the next epoch; past the wait it raises ViewBusyError.
        ``run_id`` names this run to the others (default: a random id).
        """
        return list(self.refresh_each(views, full=full, wait=wait, run_id=run_id))

    def refresh_each(
        self,
        views: list[str] | None = None,
        *,
        full: bool = False,
        upstream: bool = True,
        wait: float | None = None,
        run_id: str | None = None,
    ) -> Iterator[RefreshResult]:
        """Like :meth:`refresh`, one result as each view finishes.

        ``upstream=False`` refreshes exactly ``views`` (still in dependency order) and reads the
        other views' outputs as they are: an orchestrator that schedules each view itself
        (Dagster) decides when upstream views run.
        """
        # One handle cache for compiling and every refresh below (each table's log read
        # once), not held across the yields: the caller's code runs there.
        self._check_placement()
        self._executor_io()
        handles = HandleBlock()
        try:
            with reusing_handles(handles):
                compiled = self.compile(views)
                for view in compiled.values():
                    self._check_change_feeds(view.definition)
            selected = set(views) if views is not None else set(self.views)
            claim = ClaimSettings(
                wait_s=DEFAULT_WAIT_SECONDS if wait is None else wait, lease_s=self.config.lease_seconds, run=run_id or new_run_id()
            )
            for name in self.order:
                if name not in compiled or (not upstream and name not in selected):
                    continue
                relations = {d: self.relation_uri(d) for d in compiled[name].definition.dependencies}
                with reusing_handles(handles):
                    result = refresh_view(
                        self._spark, compiled[name], where=self.location(name), relations=relations,
                        buckets=self.config.state_buckets, full=full and name in selected, claim=claim,
                    )
                yield result
        finally:
            handles.keep()

    def explain(self, view: str) -> str:
        """The view's incremental dataflow: operators, state tables, per-construct status."""
        with reusing_handles():  # each table's log read once (on an object store, a listing and reads each)
            return self._explain(view)

    def _explain(self, view: str) -> str:
        compiled = self.compile([view])[view]
        where = self.location(view)
        last = Progress(where.progress).last_committed()
        pending = None
        if last is not None and compiled.root is not None:
            ranges = {
                name: (s["to"], latest_version(self.relation_uri(name))) for name, s in last.payload["sources"].items()
            }
            pending = estimate({name: self.relation_uri(name) for name in ranges}, ranges)
        return explain_view(compiled, where, pending, last)

    def status(self) -> list[ViewStatus]:
        """Per view: last epoch, its mode and reason, and which sources moved since."""
        with reusing_handles():
            return [view_status(name, self.location(name), self.relation_uri) for name in self.order]
