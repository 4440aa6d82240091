"""The Spark resource ivm assets run with.

Starting Spark costs ~10 s, so one run refreshes all its views in one session and every
later use in the same process reuses it (:func:`ivm_assets.spark.session.get_spark`).

Example:
    >>> dg.Definitions(assets=[views], resources={"ivm": IvmResource(master="local[4]")})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import SparkSession

from ivm_assets.project import IvmProject
from ivm_assets.spark.session import get_spark


class IvmResource(dg.ConfigurableResource):
    """Where ivm refreshes run: a local Spark by default, a cluster master or Spark Connect by config."""

    master: str | None = Field(default=None, description="Spark master URL; default local[*] (or $IVM_SPARK_MASTER).")
    remote: str | None = Field(default=None, description="Spark Connect URL (sc://host:15002) instead of a master.")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings for the session.")
    warehouse: str | None = Field(
        default=None, description="Replaces the project's `warehouse:` (outputs and state), e.g. per deployment."
    )

    def spark_session(self) -> SparkSession:
        """The process-wide session; settings apply only if this creates it."""
        if self.master and self.remote:
            raise dg.DagsterInvariantViolationError(
                f"IvmResource: set either `master` ({self.master}) or `remote` ({self.remote}, Spark Connect), not both"
            )
        return get_spark(master=self.master, remote=self.remote, conf=self.spark_conf)

    def bind(self, project: IvmProject) -> IvmProject:
        """``project`` with this resource's session and warehouse."""
        return bind_project(project, spark=self.spark_session(), warehouse=self.warehouse)


def bind_project(project: IvmProject, *, spark: SparkSession, warehouse: str | None = None) -> IvmProject:
    if warehouse is not None:
        config = project.config.model_copy(update={"warehouse": warehouse})
        return IvmProject(root=project.root, config=config, views=project.views, spark=spark)
    return project.with_spark(spark)


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
