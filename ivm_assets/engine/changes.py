"""Change capture: can a source's change data feed be used for (from, to], and reading it.

A range is refused (and the view falls back to full recompute, or fails under
``refresh: incremental``) when the table went backwards, its schema changed, a commit in the
range restored or overwrote it, or its change data feed is off.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake.exceptions import DeltaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets.delta import tables as delta
from ivm_assets.delta.tables import WEIGHT
from ivm_assets.errors import RefreshError
from ivm_assets.spark.arrow import spark_schema, to_spark

_REWRITES = {"RESTORE": "restored", "CREATE OR REPLACE TABLE": "replaced", "CREATE OR REPLACE TABLE AS SELECT": "replaced"}


def schema_signature(uri: str, version: int) -> str:
    """A stable text form of the table's schema at ``version``."""
    return str(delta.arrow_schema(uri, version))


def unusable_range(name: str, uri: str, after: int, upto: int, *, recorded_schema: str | None, schema_now: str) -> str | None:
    """Why the change feed of ``name`` for (after, upto] cannot be used, or None if it can.

    ``schema_now`` is :func:`schema_signature` at ``upto`` (the caller has it already).
    """
    if upto < after:
        return f"source {name} went back from version {after} to {upto} (re-created or restored)"
    if recorded_schema is not None and schema_now != recorded_schema:
        return f"schema of source {name} changed between versions {after} and {upto}"
    for version, operation, params in delta.operations_between(uri, after, upto):
        if operation in _REWRITES:
            return f"source {name} was {_REWRITES[operation]} at version {version}"
        if operation.startswith("WRITE") or operation.startswith("CREATE"):
            if str(params.get("mode", "")).lower() == "overwrite" and not params.get("predicate"):
                return f"source {name} was overwritten at version {version}"
    if not delta.change_feed_enabled(uri, upto):
        return f"source {name} has no change data feed at version {upto} (set delta.enableChangeDataFeed=true)"
    return None


def read_range(spark: SparkSession, name: str, uri: str, after: int, upto: int) -> tuple[DataFrame, int]:
    """The change set of (after, upto] and its row count (read by delta-rs, small by nature).

    Raises RefreshError when the feed cannot be read.
    """
    if after == upto:
        empty = delta.arrow_schema(uri, upto).append(pa.field(WEIGHT, pa.int64()))
        return spark.createDataFrame([], spark_schema(empty)), 0
    try:
        table = delta.read_changes(uri, after=after, upto=upto)
    except (DeltaError, OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RefreshError(
            f"the change data feed of source {name} for versions {after + 1}..{upto} cannot be read ({first}); "
            "run a full refresh to rebuild from the current snapshot"
        ) from exc
    return to_spark(spark, table), table.num_rows


def read_full(spark: SparkSession, uri: str, version: int) -> DataFrame:
    """The snapshot at ``version`` as a change set of insertions (weight +1)."""
    return delta.read_snapshot(spark, uri, version=version).withColumn(WEIGHT, F.lit(1).cast("bigint"))
