"""Compaction of state tables (:func:`compact`): each folded back to its logical content (one
row per distinct row of a z-set, per key of the latest-value layout) once appends have left
many small files, re-bucketed with the layout its commits recorded, never with a guess.

Most compactions fold only what appends left (:func:`_merged_on_driver`): in each bucket,
every file but the largest into one, while those hold at most ``MERGE_SHARE`` of its bytes.
The cost then follows the changes since the last full compaction, not the table; a full
one comes once the merged files have grown to that share, a geometric schedule like a
log-structured merge tree's.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.delta.maintenance import replace_files, rewrite, rewrite_rows
from ivm_assets.delta.read import read_snapshot
from ivm_assets.delta.row_groups import read_row_groups, select_row_groups
from ivm_assets.delta.snapshot import SnapshotFiles, file_count, files_by_partition, partition_type, snapshot_files
from ivm_assets.spark.batches import col
from ivm_assets.state.arrangement import ROW_GROUP_ROWS, StateRead
from ivm_assets.state.spec import StateTable
from ivm_assets.state.layout import LAYOUT_KEY, StateLayout, with_bucket
from ivm_assets.zset import BUCKET, EPOCH
from ivm_assets.state import arrangement

# A state table up to this size (parquet bytes) is compacted on the driver by pyarrow and
# delta-rs instead of by Spark jobs.
DRIVER_COMPACT_BYTES = 64 << 20

# A compaction folds only a bucket's files other than its largest while they hold at most
# this share of the largest's bytes; past it (in any bucket) the whole table is compacted.
MERGE_SHARE = 0.25


def compaction_due(table: StateTable, root: str, *, max_files_per_bucket: int = 8) -> tuple[int, StateLayout] | None:
    """The version and layout to compact from, when appends have left more than
    ``max_files_per_bucket`` files per bucket; None when no compaction is due (also for
    no table, or one whose layout is unknown: the next refresh rebuilds it)."""
    version, layout = arrangement.head_layout(table, root) or (None, None)
    if layout is None or file_count(table.uri(root), version) <= max_files_per_bucket * layout.buckets:
        return None
    return version, layout


def compact(table: StateTable, spark, root: str, *, max_files_per_bucket: int = 8) -> bool:
    """Fold the table back to its logical content once appends have left many small files.

    Appending keeps each epoch cheap but leaves one file per touched bucket per epoch;
    reads then open ever more files. The rewrite is one overwrite commit with the same
    logical content, so an interruption leaves either the old files or the new ones; it
    lands right after the version it read or not at all (another process moved the
    table on: that one compacts next time). A small table (on any store) is compacted on the
    driver (:func:`_compacted_on_driver`); otherwise Spark re-buckets the rows exactly as
    the recorded layout says (a join hashes both sides as one common type, which a
    table's own column types do not tell). Returns whether it rewrote the table.
    """
    due = compaction_due(table, root, max_files_per_bucket=max_files_per_bucket)
    return due is not None and compact_from(table, spark, root, *due)


def compact_from(table: StateTable, spark, root: str, version: int, layout: StateLayout) -> bool:
    """:func:`compact` of the table at ``version`` with its ``layout``, as
    :func:`compaction_due` found them."""
    uri = table.uri(root)
    metadata = {LAYOUT_KEY: layout.to_json()}
    cache_key = table.keys[0] if table.keys else None
    merged = _merged_on_driver(table, uri, version)
    if merged is not None:
        replaced, rows = merged
        return replace_files(
            uri, replaced, rows, after=version, partition=BUCKET, row_group_rows=ROW_GROUP_ROWS, metadata=metadata, cache_key=cache_key,
        )
    compacted = _compacted_on_driver(table, uri, version)
    if compacted is not None:
        return rewrite(
            uri, compacted, after=version, partition_by=[BUCKET], row_group_rows=ROW_GROUP_ROWS, metadata=metadata, cache_key=cache_key,
        )
    rows = arrangement.current_rows(table, read_snapshot(spark, uri, version=version).drop(BUCKET))
    if table.alive_column:
        rows = rows.filter(col(table.alive_column) > 0)
    names = table.stored_columns()
    rows = with_bucket(rows, table.keys, layout.buckets, layout.types())
    extra = [EPOCH] if table.layout_kind == "latest" else []
    return rewrite_rows(
        uri, rows.select(*[col(c) for c in names], col(BUCKET), *[col(c) for c in extra]), after=version,
        partition_by=[BUCKET], sort_by=list(table.keys), row_group_rows=ROW_GROUP_ROWS, metadata=metadata,
    )


def _merged_on_driver(table: StateTable, uri: str, version: int) -> tuple[list[str], pa.Table] | None:
    """The files appends left in each bucket (all but its largest, where there are two or
    more of them) and their logical content with their buckets, computed on the driver;
    None when a full compaction is needed instead: those files hold more than
    ``MERGE_SHARE`` of the largest's bytes in some bucket, no bucket has two of them, a
    bucket's value is unknown, or the key types are compared in Spark only.

    Their content is folded as the table's readers fold all of its rows, which is right for
    any part of them: z-set weights add up, and the latest row per key among these files is
    the latest among all unless the bucket's largest file holds a later one, which the
    readers still find. Rows meaning "no such key" (``alive_column`` 0) stay, to hide the
    older rows of the largest file."""
    snap = snapshot_files(uri, version=version)
    if not snap.plain_parquet:
        return None
    buckets = files_by_partition(snap, BUCKET)
    if buckets is None or None in buckets:
        return None
    chosen: dict[str, SnapshotFiles] = {}
    for bucket, files in buckets.items():
        largest = max(range(len(files.files)), key=files.sizes.__getitem__)
        rest = [i for i in range(len(files.files)) if i != largest]
        if sum(files.sizes[i] for i in rest) > MERGE_SHARE * files.sizes[largest]:
            return None
        if len(rest) >= 2:
            chosen[bucket] = SnapshotFiles(snap.table, [files.files[i] for i in rest], [files.sizes[i] for i in rest])
    if not chosen:
        return None
    folded = _folded_buckets(table, chosen, partition_type(snap.table, BUCKET), dead_kept=True)
    if folded is None:
        return None
    return [f for files in chosen.values() for f in files.files], folded


def _compacted_on_driver(table: StateTable, uri: str, version: int) -> pa.Table | None:
    """The table's logical content with its buckets, computed on the driver bucket by
    bucket, when the table is small (``DRIVER_COMPACT_BYTES``, from the Delta log); None otherwise,
    or when its key types are compared in Spark only.

    Each row keeps the bucket its file is in: compaction never changes the layout (a
    changed layout rebuilds the table instead), so no key is hashed again. A Spark
    compaction costs a few jobs (~1–2 s) where an epoch in process costs ~0.1 s.
    """
    snap = snapshot_files(uri, version=version)
    if snap.bytes > DRIVER_COMPACT_BYTES or not snap.plain_parquet:
        return None
    buckets = files_by_partition(snap, BUCKET)
    if not buckets:
        return None
    return _folded_buckets(table, buckets, partition_type(snap.table, BUCKET), dead_kept=False)


def _folded_buckets(
    table: StateTable, buckets: Mapping[str | None, SnapshotFiles], bucket_type: pa.DataType, *, dead_kept: bool
) -> pa.Table | None:
    """The rows :func:`_folded` makes of each bucket's files, clustered as the table stores
    them; None when one of them cannot be folded on the driver."""
    parts = []
    for bucket, files in buckets.items():
        rows = _folded(table, files, bucket, bucket_type, dead_kept=dead_kept)
        if rows is None:
            return None
        parts.append(rows)
    return arrangement.clustered(table, pa.concat_tables(parts))


def _folded(table: StateTable, files: SnapshotFiles, bucket: str | None, bucket_type: pa.DataType, *, dead_kept: bool) -> pa.Table | None:
    """The logical content of one bucket's ``files``, read and folded on the driver, as the
    table stores it: its columns in the files' types, ``__bucket`` = ``bucket``, and
    ``__epoch`` for the latest layout; None when its key types are compared in Spark only.
    ``dead_kept``: whether rows meaning "no such key" (``alive_column`` 0) stay."""
    read = read_row_groups(select_row_groups(files), keep=False)
    rows = arrangement.current_on_driver(table, StateRead(None, False, True, read))
    if rows is None:
        return None
    if table.alive_column and not dead_kept:
        rows = rows.filter(pc.greater(rows.column(table.alive_column), 0))
    names = table.stored_columns()
    columns = [*names, *([EPOCH] if table.layout_kind == "latest" else [])]
    rows = rows.select(columns).cast(read.select(columns).schema)
    value = pa.array([None if bucket is None else int(bucket)] * rows.num_rows, pa.int64()).cast(bucket_type)
    return rows.add_column(len(names), pa.field(BUCKET, bucket_type), value)
