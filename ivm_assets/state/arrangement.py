"""State tables: Delta tables under ``<warehouse>/_ivm/<view>/`` that operators keep.

Every state table is partitioned by ``__bucket = pmod(hash(key columns), buckets)``. A change
touching k keys reads only the files of at most k buckets (partition pruning happens in the
Delta log, before Spark opens a file), and writing it appends new files to those buckets:
nothing existing is rewritten. Reads are pinned to the table version recorded when the
epoch started, so a re-run of an interrupted epoch sees exactly what the first attempt saw.

This module is the state store: every read, append and commit of a state table (a
:class:`~ivm_assets.state.spec.StateTable`, what an operator declares, in either of its two
layouts) goes through its functions, from either engine. A read comes back as Spark rows,
or as Arrow where it was made on the driver (:class:`StateRead`).
:mod:`~ivm_assets.state.compaction` folds either layout back to one row per distinct row / key.

Every commit records the table's layout (:mod:`~ivm_assets.state.layout`) in its metadata.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import types as T
from pyspark.sql import functions as F

from ivm_assets.delta.commit import holds_epoch
from ivm_assets.delta.log import head
from ivm_assets.delta.read import read_snapshot
from ivm_assets.delta.row_groups import ReadCost, RowGroups, read_row_groups, select_row_groups
from ivm_assets.delta.snapshot import SnapshotFiles, normalize_schema_of, row_count, snapshot_files
from ivm_assets.delta.staging import StagedFiles, commit_staged, read_staged, stage_files
from ivm_assets.delta.write import overwrite_epoch, write_epoch
from ivm_assets.epoch_context import EpochContext
from ivm_assets.errors import RefreshError
from ivm_assets.spark.arrow import to_arrow, to_spark
from ivm_assets.spark.batches import Batch, col, materialize, null_safe_match
from ivm_assets.state import consolidate, driver_rows
from ivm_assets.state.layout import FORMAT, LAYOUT_KEY, StateLayout, hash_names, hash_type
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import BUCKET, EPOCH, value_runs

# Past this size a state read is joined by broadcasting the (small) change to it instead of
# shuffling it: a broadcast costs one extra Spark job, a shuffle of a large read costs more.
LARGE_READ_BYTES = 64 << 20
# Up to this many compressed bytes of row groups (those that may hold a touched key, or the
# touched buckets' whole files) are read on the driver by pyarrow, filtered by key, and enter
# the plan as a small local relation: no Spark file index, no scan stage.
DRIVER_READ_BYTES = 256 << 20
# A full refresh's state of up to this many rows (a count it knows) is written from the
# driver by delta-rs: cheaper than a Spark write job for a few groups or a small dimension.
DRIVER_WRITE_ROWS = 50_000
# Rows per parquet row group in state files: the unit a key-range lookup can skip, and so
# what one scattered key costs to decode. 1,024 against 4,096 (TPC-H SF 1, 1,500 random
# orders a batch): state reads of Q3 and Q5 16–36 % faster, Q10's level, full builds
# unchanged; 512 read slower again (pyarrow's cost per group).
ROW_GROUP_ROWS = 1024


class StateRead:
    """State rows for the touched keys, whether the files read were large, and whether they
    were read on the driver (then ``df`` is a local relation, cheap to evaluate twice).

    ``table``: the same rows as Arrow, when they were read on the driver and matched to the
    touched keys there (then :func:`current` can finish them there too, and the
    Spark frame of the raw rows is made only if someone asks for it).
    """

    def __init__(self, df: DataFrame | None, large: bool, local: bool = False, table: pa.Table | None = None, spark=None) -> None:
        self._df, self.large, self.local, self.table, self.spark = df, large, local, table, spark

    @property
    def df(self) -> DataFrame:
        if self._df is None:
            self._df = to_spark(self.spark, self.table)
        return self._df


def _driver_readable(snap: SnapshotFiles) -> bool:
    """Whether these files are read on the driver when the lookup's keys are there too."""
    return snap.bytes <= DRIVER_READ_BYTES and snap.plain_parquet


def _by_bucket(touched: pa.Table, key: str) -> dict[str, pa.Array]:
    """The distinct values of ``key`` in ``touched``, per bucket (as text, the way Delta
    records partition values)."""
    # Sorted, then each run's distinct values: 2-6 times faster than Arrow's hash group_by
    # over (bucket, key) for 1,500 to 100 K touched rows (benchmarks/driver_kernels.py).
    pairs = touched.select([key, BUCKET]).sort_by(BUCKET)
    runs = value_runs(pairs.column(BUCKET))  # sorted, and a bucket is never NULL: one run each
    assert runs or pairs.num_rows == 0
    values = pairs.column(key).combine_chunks()
    return {bucket: pc.unique(values.slice(offset, length)) for bucket, (offset, length) in runs.items()}


class Staged(Batch):
    """A full refresh's rows for one state table, written into its folder by
    :func:`stage` and not committed yet; its frame reads those files."""

    def __init__(self, df: DataFrame, files: StagedFiles, table_name: str) -> None:
        super().__init__(df, files.rows)
        self.files, self.table_name = files, table_name


def read(state: StateTable, ctx: EpochContext, touched: Batch | None, touched_keys: tuple[str, ...]) -> StateRead | None:
    """State rows whose key equals a key of ``touched`` (its ``touched_keys`` columns);
    with ``touched`` None, every row (a global aggregate's one group needs no keys).

    ``touched`` carries ``__bucket`` computed by :func:`~ivm_assets.state.layout.with_bucket` over those keys.
    None when the state is empty (first build, or the table does not exist yet).
    """
    uri = state.uri(ctx)
    version = ctx.state_versions.get(state.table_name)
    if ctx.full or version is None or (touched is not None and touched.rows == 0):
        return None
    pruning = [(BUCKET, "in", [str(b) for b in touched.values(BUCKET)])] if touched is not None else None
    snap = snapshot_files(uri, version=version, partition_filters=pruning)
    large = snap.bytes > LARGE_READ_BYTES
    by_key = touched is not None and bool(state.keys)
    local = touched is None or touched.table is not None
    chosen = _driver_read(state, snap, touched if by_key else None, touched_keys) if local and snap.plain_parquet else None
    on_driver = chosen is not None
    exact: pa.Table | None = None
    if on_driver:
        cost = ReadCost()
        table = read_row_groups(chosen, cost=cost)
        # What was decoded: rows and compressed bytes of the row groups read. A read in
        # Spark counts the touched buckets' whole files as bytes, and no rows (counting
        # them would cost a job).
        read = (("state_rows_read", cost.rows), ("state_bytes_read", cost.bytes), ("state_row_groups_read", cost.row_groups),
                ("state_row_groups_decoded", cost.decoded))
        for stat, value in read:
            ctx.stats[stat] = ctx.stats.get(stat, 0) + value
        exact = driver_rows.matching(table, state.keys, touched.table, touched_keys) if by_key else table
        rows = None if exact is not None else to_spark(ctx.spark, table)
    else:
        rows = read_snapshot(ctx.spark, uri, version=version, partition_filters=pruning).drop(BUCKET)
        if by_key:
            rows = _key_range(state, rows, touched, touched_keys[0])
        ctx.stats["state_bytes_read"] = ctx.stats.get("state_bytes_read", 0) + snap.bytes
    where_read = "state_reads_on_driver" if on_driver else "state_reads_in_spark"
    ctx.stats[where_read] = ctx.stats.get(where_read, 0) + 1
    ctx.stats["state_bytes_scanned"] = ctx.stats.get("state_bytes_scanned", 0) + snap.bytes
    if by_key and exact is None:
        keys = touched.df.select(*[col(k) for k in touched_keys]).distinct()
        cond = null_safe_match(rows, keys, list(zip(state.keys, touched_keys)))
        rows = rows.join(F.broadcast(keys) if large else keys, cond, "left_semi")
    return StateRead(rows, large, on_driver, exact, ctx.spark)


def rows_read_on_driver(state: StateTable, ctx: EpochContext) -> int | None:
    """The table's rows at the epoch's version (from the log's file statistics) when
    :func:`read` would read it whole on the driver; None when there is no state, no
    statistics, or it would be read in Spark."""
    version = ctx.state_versions.get(state.table_name)
    if version is None:
        return None
    snap = snapshot_files(state.uri(ctx), version=version)
    return row_count(state.uri(ctx), version) if _driver_readable(snap) else None


def _driver_read(state: StateTable, snap: SnapshotFiles, touched: Batch | None, touched_keys: tuple[str, ...]) -> RowGroups | None:
    """The row groups a read on the driver would decode, or None when they exceed
    ``DRIVER_READ_BYTES`` (then Spark reads the files).

    With ``touched``, only row groups whose statistics admit one of its first key's values
    (state files are sorted by key): the budget then follows the number of touched keys,
    also when they are scattered over a table too large to read whole. The exact,
    null-safe match on every key follows (on the driver where :func:`driver_rows.matching`
    can, else in Spark). Without a comparable first key (types Spark compares through a
    cast), the touched buckets' files are read whole.
    """
    if touched is not None:
        values = touched.table.column(touched_keys[0])
        own = normalize_schema_of(snap.table).field(state.keys[0]).type
        if own == values.type or (pa.types.is_integer(own) and pa.types.is_integer(values.type)):
            chosen = select_row_groups(snap, key=state.keys[0], values=_by_bucket(touched.table, touched_keys[0]), partition=BUCKET)
            return chosen if chosen.bytes <= DRIVER_READ_BYTES else None
    return select_row_groups(snap) if _driver_readable(snap) else None


def clustered(state: StateTable, table: pa.Table) -> pa.Table:
    """Rows sorted by bucket and key, so each row group covers a narrow key range."""
    if table.num_rows < 2:
        return table
    return table.sort_by([(BUCKET, "ascending"), *[(k, "ascending") for k in state.keys]])


def _key_range(state: StateTable, rows: DataFrame, touched: Batch, touched_key: str) -> DataFrame:
    """``rows`` limited to the touched keys' [min, max] on the first key column.

    Spark pushes the range into the parquet reader, which skips row groups outside it
    (state files are written sorted by key). Only when both key types order alike.
    """
    if touched.table is None or not state.keys:
        return rows
    own, theirs = rows.schema[state.keys[0]].dataType, touched.df.schema[touched_key].dataType
    if hash_type(own, theirs) not in (None, T.LongType()):
        return rows
    values = touched.table.column(touched_key)
    low, high = (v.as_py() for v in pc.min_max(values).values())
    key = col(state.keys[0])
    wanted = key.between(F.lit(low), F.lit(high)) if low is not None else F.lit(False)
    if values.null_count:
        wanted = wanted | key.isNull()  # NULL keys form a group of their own
    return rows.filter(wanted)


def current(state: StateTable, read: StateRead) -> DataFrame:
    """The logical content of the rows ``read``: consolidated z-set, or latest row per
    key; computed on the driver when the rows are there and their types allow."""
    done = current_on_driver(state, read)
    return to_spark(read.spark, done) if done is not None else current_rows(state, read.df)


def current_on_driver(state: StateTable, read: StateRead) -> pa.Table | None:
    """:func:`current` as Arrow, computed on the driver; None when the rows were read in
    Spark or their key types are compared in Spark only."""
    if read.table is None:
        return None
    if state.layout_kind == "zset":
        return consolidate.in_arrow(read.table, state.columns)
    return driver_rows.latest(read.table, state.keys, EPOCH)


def current_rows(state: StateTable, rows: DataFrame) -> DataFrame:
    """The logical content of raw state rows: consolidated z-set, or latest row per key."""
    if state.layout_kind == "zset":
        return consolidate.in_spark(rows, state.columns)
    if not state.keys:
        return rows.orderBy(F.col(EPOCH).desc()).limit(1)
    window = Window.partitionBy(*[col(k) for k in state.keys]).orderBy(F.col(EPOCH).desc())
    return rows.withColumn("__rank", F.row_number().over(window)).filter("__rank = 1").drop("__rank")


def layout_of(state: StateTable, buckets: int, types: list) -> StateLayout:
    """This table's layout with ``buckets`` and key hash ``types``."""
    return StateLayout(FORMAT, state.layout_kind, buckets, state.keys, state.columns, hash_names(types))


def head_layout(state: StateTable, root: str) -> tuple[int, StateLayout | None] | None:
    """The table's latest version and the layout that commit recorded (None: written
    before layouts were recorded), from one read of the log; None when there is no table."""
    latest = head(state.uri(root))
    if latest is None:
        return None
    text = latest[1].get(LAYOUT_KEY)
    return latest[0], StateLayout.from_json(text) if text else None


def stage(state: StateTable, ctx: EpochContext, rows: DataFrame, types: list) -> Batch:
    """``rows`` of a z-set table (its columns, ``__w``, ``__bucket``) computed once, as the
    batch to pass to :func:`write` later and to read meanwhile.

    In a full refresh the executors write them straight into this table's folder (on any
    store), sorted and bucketed as the table keeps them; the commit comes later in the
    epoch's order (:func:`write`), and meanwhile the batch reads the written files. The
    alternative, a checkpoint on the executors plus a count and then the write, costs two
    more passes over the rows (TPC-H Q3 at SF 1: 3.8 s of a 10.4 s build). Elsewhere (an
    incremental epoch or a small build, whose rows come to the driver, a repeat of a full epoch this table already holds, or the
    latest-value layout, whose few groups cost less checkpointed and written from Arrow)
    the rows are materialized as usual.
    """
    uri = state.uri(ctx)
    if ctx.small or state.layout_kind != "zset" or holds_epoch(uri, ctx.epoch):
        return materialize(rows, small=ctx.small)
    stored = rows.select(*[col(c) for c in state.stored_columns()], col(BUCKET))
    files = stage_files(uri, stored, partition_by=[BUCKET], sort_by=list(state.keys), row_group_rows=ROW_GROUP_ROWS)
    return Staged(read_staged(ctx.spark, uri, files), files, state.table_name)


def _stored_table(state: StateTable, table: pa.Table, names: list[str], ctx: EpochContext) -> pa.Table:
    """``table``'s stored columns and ``__bucket``, and ``__epoch`` for the latest-value layout."""
    table = table.select([*names, BUCKET])
    if state.layout_kind == "latest":
        table = table.append_column(EPOCH, pa.array([ctx.epoch.number] * table.num_rows, pa.int64()))
    return table


def write(state: StateTable, ctx: EpochContext, rows: Batch, types: list) -> None:
    """Append ``rows`` (overwrite everything on a full refresh), tagged with the epoch,
    right after the table version the epoch recorded (so never twice). The commit is
    made after the operators ran (``ctx.writes``), in the order they asked for it.

    ``rows`` holds the state's columns, ``__w`` (z-set) and ``__bucket`` over the keys,
    hashed as ``types`` say; the latest-value layout gets ``__epoch`` here. An
    incremental append whose layout differs from the recorded one is refused: its rows
    would sit in buckets where no lookup finds them.
    """
    after = ctx.state_versions.get(state.table_name)
    layout = layout_of(state, ctx.buckets, types)
    recorded = ctx.state_layouts.get(state.table_name)
    if not ctx.full and recorded and (why := StateLayout.from_json(recorded).difference(layout)):
        raise RefreshError(
            f"state table {state.table_name} was laid out differently ({why}) from what this epoch needs; "
            "run `ivm refresh --full` on the view to rebuild its state"
        )
    ctx.writes.append(StateAppend(state, rows, after, layout))


def commit(state: StateTable, ctx: EpochContext, rows: Batch, after: int | None, layout: StateLayout) -> int | None:
    """Make the commit :func:`write` queued (see :class:`StateAppend`)."""
    uri = state.uri(ctx)
    if rows.rows == 0 and not ctx.full and after is not None:
        return None  # nothing to append
    if holds_epoch(uri, ctx.epoch, after=after):
        return None  # an interrupted attempt of this epoch already wrote it
    names = state.stored_columns()
    meta = {LAYOUT_KEY: layout.to_json()}
    if isinstance(rows, Staged) and rows.table_name == state.table_name:
        commit_staged(uri, rows.files, epoch=ctx.epoch, after=after, metadata=meta)
        written = rows.rows
    elif ctx.full:
        # The whole state: written by the executors, never collected to the driver (unless
        # few rows); rows a small build collected are written from Arrow as they are.
        if rows.table is not None:
            whole = _stored_table(state, rows.table, names, ctx)
        else:
            whole = rows.df.select(*[col(c) for c in names], col(BUCKET))
            if state.layout_kind == "latest":
                whole = whole.withColumn(EPOCH, F.lit(ctx.epoch.number).cast("bigint"))
        written = overwrite_epoch(
            uri, whole, epoch=ctx.epoch, after=after, partition_by=[BUCKET], sort_by=list(state.keys), metadata=meta,
            row_group_rows=ROW_GROUP_ROWS, few=rows.rows <= DRIVER_WRITE_ROWS, cache_key=state.keys[0] if state.keys else None,
        )
    else:
        table = _stored_table(state, 
            rows.table if rows.table is not None else to_arrow(rows.df.select(*[col(c) for c in names], col(BUCKET))), names, ctx
        )
        write_epoch(
            uri, clustered(state, table), epoch=ctx.epoch, after=after, mode="append",
            partition_by=[BUCKET], row_group_rows=ROW_GROUP_ROWS, metadata=meta, cache_key=state.keys[0] if state.keys else None,
        )
        written = table.num_rows
    return written


@dataclass(frozen=True)
class StateAppend:
    """One state table's commit in an epoch, queued by :func:`write` in
    ``ctx.writes`` and made by :meth:`commit` after the operators ran: ``rows`` appended
    (the whole state in a full epoch) right after version ``after``, ``layout`` recorded."""

    table: StateTable
    rows: Batch
    after: int | None
    layout: StateLayout

    def commit(self, ctx: EpochContext) -> int | None:
        """The rows written; None when there was nothing to commit (no rows, or an
        interrupted attempt of this epoch made it). May run beside the epoch's other
        commits, in another thread (see :func:`ivm_assets.engine.execute._commit`)."""
        return commit(self.table, ctx, self.rows, self.after, self.layout)
