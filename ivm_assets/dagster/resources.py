"""The Spark resource ivm assets run with.

Every Dagster run is a new process. With local Spark (the default) each run starts its own
JVM, 10–20 s on a small machine, before any work. ``remote="local"`` attaches runs to a warm
local Spark Connect server instead (started once by ``ivm spark start`` or by the first run
that needs it, then reused: about a second per run); ``remote="sc://host:15002"`` attaches
to a Connect server elsewhere. Within a process the session is shared
(:func:`ivm_assets.spark.session.get_spark`).

Example:
    >>> dg.Definitions(assets=[views], resources={"ivm": IvmResource(remote="local")})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import SparkSession

from ivm_assets.project import IvmProject
from ivm_assets.spark.session import LazySession
from ivm_assets.state.claim import DEFAULT_WAIT_SECONDS


class IvmResource(dg.ConfigurableResource):
    """Where ivm refreshes run: a local Spark by default, a cluster master or Spark Connect by config."""

    master: str | None = Field(default=None, description="Spark master URL; default local[*] (or $IVM_SPARK_MASTER).")
    remote: str | None = Field(
        default=None,
        description="Spark Connect instead of a Spark per run: `local` (the warm local server of `ivm spark start`, "
        "started on first use) or a URL sc://host:15002. Default $IVM_SPARK_REMOTE.",
    )
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings for the session.")
    warehouse: str | None = Field(
        default=None, description="Replaces the project's `warehouse:` (outputs and state), e.g. per deployment."
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="delta-rs storage options for the runs' tables, over ivm.yaml's `storage_options` key by key "
        "(AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AZURE_STORAGE_…, GOOGLE_…). Write secrets "
        "as `${ENV_NAME}` references: they are resolved in the run's process, and the UI shows the reference, not the "
        "value. Sensors and source observations run without the resource: give them the options in ivm.yaml or the "
        "component.",
    )
    wait_seconds: float = Field(
        default=DEFAULT_WAIT_SECONDS,
        ge=0,
        description="How long a refresh waits for another refresh of the same view (another run, the CLI) to finish "
        "before failing with who holds the view.",
    )

    def spark_session(self) -> SparkSession:
        """The process-wide session; settings apply only if this creates it."""
        return self.lazy_session().session()

    def lazy_session(self, project: IvmProject | None = None) -> LazySession:
        """The session runs use, started only when a run needs Spark: a materialization whose
        epoch runs in process starts no JVM in the run worker. ``master``/``remote`` replace
        the ``project``'s ``spark:`` settings in ivm.yaml (they are alternatives), and
        ``spark_conf`` goes over its ``conf`` key by key."""
        if self.master and self.remote:
            raise dg.DagsterInvariantViolationError(
                f"IvmResource: set either `master` ({self.master}) or `remote` ({self.remote}, Spark Connect), not both"
            )
        declared = project.config.spark if project is not None else None
        master, remote = self.master, self.remote
        if declared is not None and not (master or remote):
            master, remote = declared.master, declared.remote
        conf = {**(declared.conf if declared is not None else {}), **self.spark_conf}
        return LazySession(master=master, remote=remote, conf=conf)

    def bind(self, project: IvmProject) -> IvmProject:
        """``project`` with this resource's session, warehouse and storage options."""
        bound = bind_project(project, spark=self.lazy_session(project), warehouse=self.warehouse)
        return bound.with_storage_options(self.storage_options, origin="IvmResource.storage_options")


def bind_project(project: IvmProject, *, spark: SparkSession | LazySession, warehouse: str | None = None) -> IvmProject:
    if warehouse is not None:
        config = project.config.model_copy(update={"warehouse": warehouse})
        return project.with_spark(spark).copy_with(config=config)
    return project.with_spark(spark)


def wait_seconds(resource: Any) -> float | None:
    """How long a run's refresh waits for a busy view (None: the engine's default)."""
    return resource.wait_seconds if isinstance(resource, IvmResource) else None


def project_for_run(project: IvmProject, resource: Any) -> IvmProject:
    """Bind ``project`` to the run's resource: an :class:`IvmResource`, or anything that has a
    ``spark_session`` (dagster-pyspark's ``PySparkResource``), whose session is then used as is."""
    if isinstance(resource, IvmResource):
        return resource.bind(project)
    session = getattr(resource, "spark_session", None)
    if isinstance(session, SparkSession):
        return bind_project(project, spark=session)
    raise dg.DagsterInvariantViolationError(
        f"ivm assets need an IvmResource or a PySparkResource under their resource key; found {type(resource).__name__}. "
        "Add `resources={'ivm': IvmResource()}` to your Definitions."
    )
