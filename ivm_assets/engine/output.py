"""Applying a view's change set to its output table (a bag: duplicates, no key, no extra columns).

A full refresh overwrites the table with every row repeated by its weight. An incremental
refresh computes, for each distinct row whose multiplicity changes, its count before (read
from the output as of the epoch's start, only for rows that lose copies) and after, then
replaces all copies of that row by the right number in one MERGE. For a small change to a
small output that computation runs with Arrow on the driver; otherwise Spark does it. On the
driver, a change that removes every stored row of a small output is written as its new
contents instead: one commit either way, with the MERGE's change feed.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.delta.commit import Epoch
from ivm_assets.delta.read import read_snapshot_sized
from ivm_assets.delta.row_groups import read_files_arrow
from ivm_assets.delta.snapshot import SnapshotFiles, row_count, snapshot_files
from ivm_assets.delta.write import apply_bag_change, overwrite_epoch, write_output_rows
from ivm_assets.spark.arrow import to_arrow
from ivm_assets.spark.batches import Batch, col, copies, null_safe_match
from ivm_assets.state import consolidate, driver_rows
from ivm_assets.state.arrangement import DRIVER_READ_BYTES, LARGE_READ_BYTES
from ivm_assets.zset import WEIGHT, normal_row_bits

_OP, _COPY = "__ivm_op", "__ivm_copy"
# An output of at most this many rows, all removed by a change, is written anew instead of
# merged. Bounded because the overwrite's commit metrics count only the rows it adds, and
# a downstream view sizes its change from them (delta.log.change_rows_between).
REPLACED_ROWS = 10_000


def shape(change: DataFrame, internal: tuple[str, ...], schema: T.StructType) -> DataFrame:
    """The root operator's change set with the view's column names and Spark's types."""
    return consolidate.in_spark(
        change.select(*[col(c).cast(f.dataType).alias(f.name) for c, f in zip(internal, schema.fields)], col(WEIGHT)),
        tuple(schema.names),
    )


def expand(rows: DataFrame, names: list[str]) -> DataFrame:
    """Each row repeated by its (positive) weight, without the weight column."""
    repeated = rows.filter(col(WEIGHT) > 0).withColumn("__rep", F.explode(F.array_repeat(F.lit(1), copies(col(WEIGHT)))))
    return repeated.select(*[col(n) for n in names])


def overwrite(uri: str, rows: DataFrame, schema: T.StructType, epoch: Epoch, *, after: int | None, few: bool = False) -> int:
    """Replace the output with ``rows`` (the full result), right after version ``after``
    (None: create it); ``few``: collected and written by delta-rs on the driver (a small
    build). Returns the row count written."""
    rows = rows.select(*[col(n) for n in schema.names])
    return overwrite_epoch(uri, rows, epoch=epoch, after=after, change_feed=True, few=few)


def overwrite_expanded(uri: str, rows: pa.Table, epoch: Epoch, *, after: int | None) -> int:
    """Replace the output with ``rows`` (the full result computed in process: the view's
    columns and a positive ``__w``), each row written ``__w`` times, right after version
    ``after`` (None: create it). Returns the row count written."""
    rows = rows.filter(pc.greater(rows.column(WEIGHT), 0))  # as expand() keeps them
    expanded = rows.drop_columns([WEIGHT]).take(np.repeat(np.arange(rows.num_rows), rows.column(WEIGHT).to_numpy()))
    return overwrite_epoch(uri, expanded, epoch=epoch, after=after, change_feed=True)


def apply_change(uri: str, change: Batch, schema: T.StructType, epoch: Epoch, *, output_version: int) -> None:
    """Apply a consolidated change set (view columns + ``__w``) to the output table as it
    was at ``output_version`` (the commit lands right after it)."""
    names = list(schema.names)
    if change.table is not None:
        snap = snapshot_files(uri, version=output_version)
        if snap.bytes <= DRIVER_READ_BYTES and snap.plain_parquet:
            old = _old_copies(change.table, names, snap)
            if old is not None:
                _apply_on_driver(uri, change.table, names, old, epoch, output_version)
                return
    rows = change.df
    losing = rows.filter(col(WEIGHT) < 0)
    if _has_losses(change):
        old = _old_counts(uri, losing, names, output_version)
        # Renamed so Spark does not confuse the two sides (both descend from `change`).
        old = old.select(*[col(n).alias(f"__o{i}") for i, n in enumerate(names)], col("__old"))
        cond = null_safe_match(rows, old, [(n, f"__o{i}") for i, n in enumerate(names)], signed=True)
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
        apply_bag_change(uri, source, columns=names, epoch=epoch, after=output_version)


def _apply_on_driver(uri: str, change: pa.Table, names: list[str], old: list[int], epoch: Epoch, after: int) -> None:
    """:func:`apply_change` with the MERGE source computed with Arrow on the driver (small
    changes, small outputs): no Spark job. ``old``: each change row's copies in the output
    when it loses copies (:func:`_old_copies`).

    A change that removes every stored row (a global aggregate's one row, a handful of
    groups all touched) is an overwrite by the rows it keeps: the same rows and the same
    change feed as the MERGE, without its join. (A change that only adds copies stays a
    MERGE: an append would add a file per epoch to an output nothing compacts, and would
    not read the output's files, which is how a lost one is noticed.)"""
    take: list[int] = []  # row index, once per MERGE source row
    ops: list[str] = []
    copies: list[int] = []
    for i, (w, before) in enumerate(zip(change.column(WEIGHT).to_pylist(), old)):
        keep = max(before + w, 0) if w < 0 else w
        if w < 0:
            take.append(i)
            ops.append("del")
            copies.append(0)
        take.extend([i] * keep)
        ops.extend(["ins"] * keep)
        copies.extend(range(1, keep + 1))
    if "del" in ops and sum(old) == row_count(uri, after) <= REPLACED_ROWS:
        inserted = [i for i, op in zip(take, ops) if op == "ins"]
        write_output_rows(uri, change.select(names).take(pa.array(inserted, pa.int64())), epoch=epoch, after=after)
        return
    rows = change.select(names).take(pa.array(take, pa.int64()))
    source = rows.append_column(_OP, pa.array(ops, pa.string())).append_column(_COPY, pa.array(copies, pa.int64()))
    apply_bag_change(uri, source, columns=names, epoch=epoch, after=after)


def _old_copies(change: pa.Table, names: list[str], snap: SnapshotFiles) -> list[int] | None:
    """Per row of ``change``, its copies in the output (``snap``) when it loses copies, else 0;
    None when the rows' types are not compared on the driver.

    The output rows whose first column is among the losing rows' (read by pyarrow) are
    consolidated (:mod:`ivm_assets.state.consolidate`: NULL = NULL, NaN = NaN, −0.0 apart
    from 0.0, as the Spark path and the MERGE compare them) into one row per value with its
    count of copies.
    """
    losing = pc.less(change.column(WEIGHT), 0)
    if not pc.any(losing).as_py():
        return [0] * change.num_rows
    if not all(driver_rows.coded(change.schema.field(n).type) for n in names):
        return None
    present = read_files_arrow(snap, key=names[0], values=change.column(names[0]).filter(losing)).select(names)
    wanted = pa.schema([pa.field(n, change.schema.field(n).type) for n in names])
    try:
        present = present.cast(wanted)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    counts = consolidate.in_arrow(present.append_column(WEIGHT, pa.array([1] * present.num_rows, pa.int64())), names)
    codes = None if counts is None else driver_rows.tuple_codes(
        [(normal_row_bits(change.select(names)), tuple(names)), (counts, tuple(names))]
    )
    if codes is None:
        return None
    found = pc.index_in(codes[0], value_set=codes[1])
    old = pc.fill_null(counts.column(WEIGHT).take(found), 0)
    return pc.if_else(losing, old, 0).to_pylist()


def _has_losses(change: Batch) -> bool:
    if change.table is not None:
        return bool(pc.any(pc.less(change.table.column(WEIGHT), 0)).as_py())
    return not change.df.filter(col(WEIGHT) < 0).isEmpty()


def _old_counts(uri: str, losing: DataFrame, names: list[str], version: int) -> DataFrame:
    """Multiplicity, in the output as it was at the epoch's start, of each row that loses
    copies (rows told apart as z-set rows are: :mod:`ivm_assets.state.consolidate`)."""
    current, size = read_snapshot_sized(losing.sparkSession, uri, version=version)
    wanted = losing.select(*[col(n) for n in names]).distinct()
    if size > LARGE_READ_BYTES:
        wanted = F.broadcast(wanted)
    cond = null_safe_match(current, wanted, [(n, n) for n in names])
    present = current.join(wanted, cond if cond is not None else F.lit(True), "left_semi")
    counted = consolidate.in_spark(present.select(*[col(n) for n in names], F.lit(1).cast("bigint").alias(WEIGHT)), names)
    return counted.withColumnRenamed(WEIGHT, "__old")
