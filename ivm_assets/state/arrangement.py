"""State tables: Delta tables under ``<warehouse>/_ivm/<view>/`` that operators keep.

Every state table is partitioned by ``__bucket = pmod(hash(key columns), buckets)``. A change
touching k keys reads only the files of at most k buckets (partition pruning happens in the
Delta log, before Spark opens a file), and writing it appends new files to those buckets:
nothing existing is rewritten. Reads are pinned to the table version recorded when the
epoch started, so a re-run of an interrupted epoch sees exactly what the first attempt saw.

Two layouts use this:
- a *z-set* (``__w`` column): rows with weights, appended as changes; a row's multiplicity is
  the sum of its weights (join sides, DISTINCT counts, MIN/MAX/COUNT DISTINCT values);
- *latest value* (``__epoch`` column): one row per key per epoch that touched it; the row of
  the highest epoch is the current one (aggregate groups).
``compact`` folds either layout back to one row per distinct row / key.
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ivm_assets.delta import tables as delta
from ivm_assets.delta.tables import WEIGHT
from ivm_assets.operators.base import EpochContext, col, consolidate, null_safe_match
from ivm_assets.spark.arrow import to_arrow
from ivm_assets.sql.plan import q

BUCKET = "__bucket"
EPOCH = "__epoch"


class StateTable:
    """One operator's state table: ``columns`` (keys first) plus ``__w`` or ``__epoch``."""

    def __init__(
        self,
        *,
        operator_id: str,
        name: str,
        columns: tuple[str, ...],
        keys: tuple[str, ...],
        layout: Literal["zset", "latest"],
    ) -> None:
        self.operator_id = operator_id
        self.name = name
        self.columns = columns
        self.keys = keys
        self.layout = layout

    def uri(self, ctx_or_root: EpochContext | str) -> str:
        root = ctx_or_root if isinstance(ctx_or_root, str) else ctx_or_root.state_root
        return f"{root}/{self.operator_id}_{self.name}"

    def bucket_of(self, df: DataFrame, keys: tuple[str, ...], buckets: int) -> Column:
        if not keys:
            return F.lit(0)
        return F.pmod(F.hash(*[df[q(k)] for k in keys]), F.lit(buckets))

    def read(self, ctx: EpochContext, touched: DataFrame, touched_keys: tuple[str, ...]) -> DataFrame | None:
        """State rows whose key equals a key of ``touched`` (its ``touched_keys`` columns).

        None when the state is empty (first build, or the table does not exist yet).
        """
        uri = self.uri(ctx)
        version = ctx.state_versions.get(uri)
        if ctx.full or version is None:
            return None
        buckets = sorted(
            r[0] for r in touched.select(self.bucket_of(touched, touched_keys, ctx.buckets).alias("b")).distinct().collect()
        )
        if not buckets:
            return None
        rows = delta.read_snapshot(
            ctx.spark, uri, version=version, partition_filters=[(BUCKET, "in", [str(b) for b in buckets])]
        ).drop(BUCKET)
        if self.keys:
            keys = touched.select(*[col(k) for k in touched_keys]).distinct()
            cond = null_safe_match(rows, keys, list(zip(self.keys, touched_keys)))
            rows = rows.join(F.broadcast(keys), cond, "left_semi")
        return rows

    def current(self, rows: DataFrame) -> DataFrame:
        """The logical content of raw state rows: consolidated z-set, or latest row per key."""
        if self.layout == "zset":
            return consolidate(rows, self.columns)
        if not self.keys:
            return rows.orderBy(F.col(EPOCH).desc()).limit(1)
        window = Window.partitionBy(*[col(k) for k in self.keys]).orderBy(F.col(EPOCH).desc())
        return rows.withColumn("__rank", F.row_number().over(window)).filter("__rank = 1").drop("__rank")

    def write(self, ctx: EpochContext, rows: DataFrame) -> None:
        """Append ``rows`` (overwrite everything on a full refresh), tagged with the epoch."""
        uri = self.uri(ctx)
        done = delta.transaction_version(uri, ctx.epoch.app_id)
        if done is not None and done >= ctx.epoch.number:
            return  # an interrupted attempt of this epoch already wrote it
        if self.layout == "latest":
            rows = rows.withColumn(EPOCH, F.lit(ctx.epoch.number).cast("bigint"))
        extra = WEIGHT if self.layout == "zset" else EPOCH
        rows = rows.select(*[col(c) for c in self.columns], col(extra))
        rows = rows.withColumn(BUCKET, self.bucket_of(rows, self.keys, ctx.buckets))
        table = to_arrow(rows)
        if table.num_rows == 0 and not ctx.full and delta.is_delta_table(uri):
            return
        delta.write(uri, table, mode="overwrite" if ctx.full else "append", epoch=ctx.epoch, partition_by=[BUCKET])
        ctx.stats["state_rows_written"] = ctx.stats.get("state_rows_written", 0) + table.num_rows
