"""Applying a view's change set to its output table (a bag: duplicates, no key, no extra columns).

A full refresh overwrites the table with every row repeated by its weight. An incremental
refresh computes, for each distinct row whose multiplicity changes, its count before (read
from the output as of the epoch's start, only for rows that lose copies) and after, then
replaces all copies of that row by the right number in one MERGE. For a small change to a
small output that computation runs with Arrow on the driver; otherwise Spark does it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.delta import tables as delta
from ivm_assets.delta.tables import Epoch
from ivm_assets.operators.base import Batch, col, consolidate, copies, null_safe_match
from ivm_assets.state.arrangement import DRIVER_READ_BYTES, LARGE_READ_BYTES
from ivm_assets.spark.arrow import to_arrow
from ivm_assets.zset import WEIGHT

_OP, _COPY = "__ivm_op", "__ivm_copy"


def shape(change: DataFrame, internal: tuple[str, ...], schema: T.StructType) -> DataFrame:
    """The root operator's change set with the view's column names and Spark's types."""
    return consolidate(
        change.select(*[col(c).cast(f.dataType).alias(f.name) for c, f in zip(internal, schema.fields)], col(WEIGHT)),
        tuple(schema.names),
    )


def expand(rows: DataFrame, names: list[str]) -> DataFrame:
    """Each row repeated by its (positive) weight, without the weight column."""
    repeated = rows.filter(col(WEIGHT) > 0).withColumn("__rep", F.explode(F.array_repeat(F.lit(1), copies(col(WEIGHT)))))
    return repeated.select(*[col(n) for n in names])


def overwrite(uri: str, rows: DataFrame, schema: T.StructType, epoch: Epoch, *, after: int | None) -> int:
    """Replace the output with ``rows`` (the full result), right after version ``after``
    (None: create it). Returns the row count written."""
    rows = rows.select(*[col(n) for n in schema.names])
    return delta.overwrite_epoch(uri, rows, epoch=epoch, after=after, change_feed=True)


def apply_change(uri: str, change: Batch, schema: T.StructType, epoch: Epoch, *, output_version: int) -> None:
    """Apply a consolidated change set (view columns + ``__w``) to the output table as it
    was at ``output_version`` (the commit lands right after it)."""
    names = list(schema.names)
    if change.table is not None:
        snap = delta.snapshot_files(uri, version=output_version)
        if snap.bytes <= DRIVER_READ_BYTES and snap.plain_parquet:
            source = _bag_change_on_driver(change.table, names, snap)
            if source.num_rows:
                delta.apply_bag_change(uri, source, columns=names, epoch=epoch, after=output_version)
            return
    rows = change.df
    losing = rows.filter(col(WEIGHT) < 0)
    if _has_losses(change):
        old = _old_counts(uri, losing, names, output_version)
        # Renamed so Spark does not confuse the two sides (both descend from `change`).
        old = old.select(*[col(n).alias(f"__o{i}") for i, n in enumerate(names)], col("__old"))
        cond = null_safe_match(rows, old, [(n, f"__o{i}") for i, n in enumerate(names)])
        rows = rows.join(old, cond if cond is not None else F.lit(True), "left").select(
            *[col(n) for n in names], col(WEIGHT), F.coalesce(col("__old"), F.lit(0)).alias("__old")
        )
    else:
        rows = rows.withColumn("__old", F.lit(0))
    deletes = rows.filter(col(WEIGHT) < 0).select(*[col(n) for n in names], F.lit("del").alias(_OP), F.lit(0).cast("bigint").alias(_COPY))
    keep = F.when(col(WEIGHT) < 0, F.greatest(col("__old") + col(WEIGHT), F.lit(0))).otherwise(col(WEIGHT))
    inserts = (
        rows.withColumn("__keep", copies(keep))
        .filter("__keep > 0")
        .withColumn(_COPY, F.explode(F.sequence(F.lit(1).cast("bigint"), col("__keep").cast("bigint"))))
        .select(*[col(n) for n in names], F.lit("ins").alias(_OP), col(_COPY))
    )
    source = to_arrow(deletes.unionByName(inserts))
    if source.num_rows:
        delta.apply_bag_change(uri, source, columns=names, epoch=epoch, after=output_version)


def _bag_change_on_driver(change: pa.Table, names: list[str], snap: delta.SnapshotFiles) -> pa.Table:
    """:func:`apply_change`'s MERGE source computed with Arrow on the driver (small changes,
    small outputs): no Spark job. Old counts come from the output rows whose first column
    is among the losing rows' (read by pyarrow), matched on every column with NULL = NULL
    and NaN = NaN, as the Spark path and the MERGE compare them."""
    weights = change.column(WEIGHT).to_pylist()
    keys = [_row_key(r) for r in change.select(names).to_pylist()]
    losing = [i for i, w in enumerate(weights) if w < 0]
    old: dict[tuple, int] = {}
    if losing:
        first = names[0]
        present = delta.read_files_arrow(snap, key=first, values=change.column(first).take(pa.array(losing, pa.int64())))
        wanted = {keys[i] for i in losing}
        for row in present.select(names).to_pylist():
            key = _row_key(row)
            if key in wanted:
                old[key] = old.get(key, 0) + 1
    take: list[int] = []  # row index, once per MERGE source row
    ops: list[str] = []
    copies: list[int] = []
    for i, (w, key) in enumerate(zip(weights, keys)):
        keep = max(old.get(key, 0) + w, 0) if w < 0 else w
        if w < 0:
            take.append(i)
            ops.append("del")
            copies.append(0)
        take.extend([i] * keep)
        ops.extend(["ins"] * keep)
        copies.extend(range(1, keep + 1))
    rows = change.select(names).take(pa.array(take, pa.int64()))
    return rows.append_column(_OP, pa.array(ops, pa.string())).append_column(_COPY, pa.array(copies, pa.int64()))


def _row_key(row: dict) -> tuple:
    """A row as a hashable key where NaN equals NaN (as in Spark's comparisons)."""
    return tuple("NaN" if isinstance(v, float) and v != v else v for v in row.values())


def _has_losses(change: Batch) -> bool:
    if change.table is not None:
        return bool(pc.any(pc.less(change.table.column(WEIGHT), 0)).as_py())
    return not change.df.filter(col(WEIGHT) < 0).isEmpty()


def _old_counts(uri: str, losing: DataFrame, names: list[str], version: int) -> DataFrame:
    """Multiplicity, in the output as it was at the epoch's start, of each row that loses copies."""
    current, size = delta.read_snapshot_sized(losing.sparkSession, uri, version=version)
    wanted = losing.select(*[col(n) for n in names]).distinct()
    if size > LARGE_READ_BYTES:
        wanted = F.broadcast(wanted)
    cond = null_safe_match(current, wanted, [(n, n) for n in names])
    present = current.join(wanted, cond if cond is not None else F.lit(True), "left_semi")
    return present.groupBy(*[col(n) for n in names]).agg(F.count(F.lit(1)).alias("__old"))
