"""Maintenance of the tables ivm owns: compactions (the same logical content in fewer
files, committed as such so that fenced commits of an epoch may land after them), log
cleanup, and removal of state tables a plan no longer names.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties
from deltalake.transaction import AddAction, RemoveAction
from pyspark.sql import DataFrame

from ivm_assets import uris
from ivm_assets.delta import filesystems, storage, storage_errors
from ivm_assets.delta.commit import COMPACTION, fenced_commit
from ivm_assets.delta.executor_io import partition_folder
from ivm_assets.delta.handles import is_delta_table, open_table, writable
from ivm_assets.delta.snapshot import file_index, file_key
from ivm_assets.delta.staging import commit_files, stage_files
from ivm_assets.delta.write import cache_written, write_at
from ivm_assets.testing import faults
from ivm_assets.zset import value_runs
from ivm_assets.errors import CommitConflictError


def rewrite(
    uri: str, table: pa.Table, *, after: int, partition_by: list[str], row_group_rows: int, metadata: dict[str, str] | None = None,
    cache_key: str | None = None,
) -> bool:
    """Replace the table's content by ``table`` (same logical content, fewer files), right
    after version ``after``, with ``metadata`` in the commit info. Returns False, committing
    nothing, when the table moved. With ``cache_key`` (the column ``table`` is sorted by in
    each partition), the new files are held from ``table`` in the parquet cache, as an
    append's are: lookups after a compaction then decode nothing (held indexed, a long-lived
    process's scattered lookups would otherwise decode the new files whole again)."""

    def write(at: int | None, properties: CommitProperties) -> None:
        write_at(uri, table, at, mode="overwrite", properties=properties, partition_by=partition_by, row_group_rows=row_group_rows)
        if cache_key is not None and at is not None:
            cache_written(uri, at + 1, table, partition_by, cache_key)

    return _compaction_commit(uri, after, write, metadata)


def rewrite_rows(
    uri: str, rows: DataFrame, *, after: int, partition_by: list[str], sort_by: list[str], row_group_rows: int, metadata: dict[str, str]
) -> bool:
    """:func:`rewrite` of a Spark DataFrame (sorted by ``partition_by`` + ``sort_by``): its
    files are written by the executors, as in :func:`~ivm_assets.delta.write.overwrite_epoch`."""
    files = stage_files(uri, rows, partition_by=partition_by, sort_by=sort_by, row_group_rows=row_group_rows)
    return _compaction_commit(uri, after, lambda at, properties: commit_files(uri, at, files, properties), metadata)


def replace_files(
    uri: str, replaced: list[str], table: pa.Table, *, after: int, partition: str, row_group_rows: int,
    metadata: dict[str, str] | None = None, cache_key: str | None = None,
) -> bool:
    """Replace the files ``replaced`` (locations as the snapshot of version ``after`` lists
    them) by ``table``'s rows, the same logical content, one new file per value of
    integer ``partition`` (``table`` is sorted by it), right after version ``after``; the table's
    other files stay as they are. Returns False, committing nothing, when the table moved.

    A :func:`rewrite` of only the files appends left, where rewriting the whole table
    would cost as much as a build (TPC-H Q5's state at SF 1: 29 s in Spark, every eighth
    epoch). The new files are written by pyarrow and committed, with the removal of the old
    ones, as one commit that changes no data (``dataChange`` false): killed before it, the
    new files are unreferenced and the table is as it was. With ``cache_key`` the new files
    are held in the parquet cache, as :func:`rewrite` holds its files."""
    dt = open_table(uri, after)
    root = storage.normalize(uris.local_path(dt.table_uri) or dt.table_uri)
    index = file_index(dt)
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = []
    for file in replaced:
        logged = index[file_key(file)]
        actions.append(RemoveAction(
            path=logged.path, data_change=False, deletion_timestamp=now, size=logged.size, partition_values=logged.partition_values,
        ))
    runs = value_runs(table.column(partition))
    if table.num_rows and not runs:
        raise ValueError(f"replace_files: {partition} must be an integer column without NULLs, rows sorted by it")
    for value, (start, length) in runs.items():
        path = f"{partition_folder(partition, value)}/part-{uuid.uuid4().hex}-c000.snappy.parquet"
        size = _write_parquet(f"{root}/{path}", table.slice(start, length).drop_columns([partition]), row_group_rows)
        actions.append(AddAction(
            path=path, size=size, partition_values={partition: value}, modification_time=now, data_change=False,
            stats=json.dumps({"numRecords": length}),
        ))
    faults.crossed("files")

    def write(at: int | None, properties: CommitProperties) -> None:
        writable(uri, at).create_write_transaction(
            actions, mode="append", schema=dt.schema(), partition_by=[partition], commit_properties=properties
        )
        if cache_key is not None and at is not None:
            cache_written(uri, at + 1, table, [partition], cache_key)

    return _compaction_commit(uri, after, write, metadata)


def _write_parquet(uri: str, rows: pa.Table, row_group_rows: int) -> int:
    """Write ``rows`` as one parquet file at ``uri`` (any store); returns its size."""
    fs, path = filesystems.filesystem(uri)
    with storage_errors.failures(uri), fs.open_output_stream(path) as sink:
        pq.write_table(rows, sink, row_group_size=row_group_rows, compression="snappy")
        return sink.tell()


def _compaction_commit(
    uri: str, after: int, write: Callable[[int | None, CommitProperties], None], metadata: dict[str, str] | None
) -> bool:
    """Make a compaction's commit with ``write`` right after version ``after``, marked as a
    compaction; False, committing nothing, when the table moved."""
    properties = CommitProperties(custom_metadata={COMPACTION: "true", **(metadata or {})}, max_commit_retries=0)

    def attempt(at: int | None) -> bool:
        write(at, properties)
        return True

    try:
        fenced_commit(uri, after, attempt)
    except CommitConflictError:
        return False
    return True


def clean_log(uri: str) -> None:
    """Remove the log files of an internal table that no version from its last checkpoint on
    needs (:data:`~ivm_assets.delta.properties.INTERNAL_TABLE`; a table created with Delta's default retention keeps its
    files 30 days). Call only when no epoch in flight reads an older version."""
    if is_delta_table(uri):
        with storage_errors.failures(uri):
            open_table(uri).cleanup_metadata()


def remove_tables_except(root: str, kept: list[str]) -> int:
    """Delete the Delta tables directly under ``root`` whose folder is not in ``kept`` (and
    does not start with ``_``, which is ivm's own bookkeeping); returns how many.

    Used for state tables a new plan no longer names, on any store (on an object store, a
    listing of ``root`` and one of each table removed).
    """
    fs, path = filesystems.filesystem(root)
    with storage_errors.failures(root):
        children = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    removed = 0
    for child in sorted(children, key=lambda c: c.base_name):
        name = child.base_name
        uri = f"{storage.normalize(root)}/{name}"
        if child.type != pafs.FileType.Directory or name.startswith("_") or name in kept or not is_delta_table(uri):
            continue
        with storage_errors.failures(uri):
            fs.delete_dir(child.path)
        removed += 1
    return removed
