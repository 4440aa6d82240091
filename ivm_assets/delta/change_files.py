"""A range of a table's change data feed as the data files that hold it, from the Delta log,
so that Spark's executors can read it (:func:`read_on_executors`) and the driver never holds
its rows.

The Delta protocol's rules, per commit version in (after, upto]: a commit with ``cdc``
actions has exactly those files' rows as its changes (each row's ``_change_type`` says
which); a commit without them has its ``add`` actions with ``dataChange`` as inserts of
every row of the added file, and its ``remove`` actions with ``dataChange`` as deletes of
every row of the removed file (which must still be in the store). Actions without
``dataChange`` (OPTIMIZE, compactions) change no rows. Partition values come from the
actions, never from the files.

A range whose files a parquet reader cannot read as they are (deletion vectors, column
mapping) is not planned here: :func:`change_files` returns None and the caller reads it
with delta-rs, whose ``load_cdf`` resolves both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import unquote

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ivm_assets import uris
from ivm_assets.delta import executor_io, filesystems, storage
from ivm_assets.delta.handles import open_table
from ivm_assets.delta.log import commit_actions
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.spark.arrow import spark_schema
from ivm_assets.zset import WEIGHT

# Reader features and table properties under which a data file's rows are not what a
# parquet reader sees in it.
_UNREADABLE_FEATURES = {"deletionVectors", "columnMapping"}
_COLUMN_MAPPING = "delta.columnMapping.mode"


@dataclass(frozen=True)
class ChangeFiles:
    """The data files holding a table's changes in (after, upto], for the executors: each
    with a constant weight (+1 added, −1 removed), or None for a ``cdc`` file whose
    ``_change_type`` column gives each row's. ``rows``: the rows the log's statistics count
    in them (added files only: delta-rs records none for removed or ``cdc`` files)."""

    uri: str
    after: int
    upto: int
    partition_columns: tuple[str, ...]
    files: tuple[executor_io.DataFile, ...]
    rows: int

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


def change_files(uri: str, *, after: int, upto: int) -> ChangeFiles | None:
    """The files of the change data feed of versions (after, upto] of the table at ``uri``,
    from the commit files alone (no data file is looked at); None when they cannot be read
    by a plain parquet reader, or a commit file of the range is gone (log cleanup): then
    only delta-rs can tell the changes."""
    dt = open_table(uri, upto)
    if set(dt.protocol().reader_features or []) & _UNREADABLE_FEATURES:
        return None
    if str(dt.metadata().configuration.get(_COLUMN_MAPPING, "none")).lower() != "none":
        return None
    partition_columns = tuple(dt.metadata().partition_columns)
    root = storage.normalize(uris.local_path(uri) or uri)
    files: list[executor_io.DataFile] = []
    rows = 0
    for version in range(after + 1, upto + 1):
        cdc = commit_actions(uri, version, "cdc")
        if cdc is None:
            return None
        if cdc:
            found = [(a, None) for a in cdc]
        else:
            found = [(a, 1) for a in commit_actions(uri, version, "add") or () if a.get("dataChange", True)]
            found += [(a, -1) for a in commit_actions(uri, version, "remove") or () if a.get("dataChange", True)]
        for action, weight in found:
            if action.get("deletionVector"):
                return None
            values = action.get("partitionValues")
            if values is None and partition_columns:
                return None  # a remove may leave them out (the protocol allows it): no way to tell its rows' values
            partition = tuple(sorted((c, (values or {}).get(c)) for c in partition_columns))
            # A remove may leave its size out; it only weighs the file in the read's tasks.
            files.append(executor_io.DataFile(_file_uri(root, action["path"]), int(action.get("size") or 0), partition, weight=weight))
            rows += _records(action) if weight == 1 else 0
    return ChangeFiles(uri, after, upto, partition_columns, tuple(files), rows)


def missing_files(found: ChangeFiles) -> list[str]:
    """The removed files of ``found`` that the store no longer has (vacuumed: their deleted
    rows cannot be read). One stat each, or a HEAD on an object store."""
    return [f.uri for f in found.files if f.weight == -1 and filesystems.identity(f.uri) is None]


def _records(action: dict) -> int:
    """The rows of an add action's file from its statistics (0 when it has none)."""
    try:
        return int(json.loads(action.get("stats") or "{}").get("numRecords") or 0)
    except (ValueError, AttributeError):
        return 0


def _file_uri(root: str, path: str) -> str:
    """An action's ``path`` (a URI-encoded path relative to the table, or an absolute URI)
    as the location a file system reaches."""
    return unquote(path) if "://" in path else f"{root}/{unquote(path)}"


def read_on_executors(spark: SparkSession, found: ChangeFiles, columns: tuple[str, ...] | None) -> DataFrame:
    """The change set of ``found`` as a DataFrame of ``columns`` (all when None; in the
    table's types at ``upto``, NULL in rows written before a column existed) plus the weight
    ``__w`` BIGINT, read by Spark's executors with pyarrow. Not consolidated: a file
    rewritten without a change shows as a delete and an insert of each of its rows."""
    schema = arrow_schema(found.uri, found.upto)
    kept = [f for f in schema if columns is None or f.name in columns]
    target = pa.schema([*kept, pa.field(WEIGHT, pa.int64(), False)])
    root = storage.normalize(uris.local_path(found.uri) or found.uri)
    return executor_io.read_files(
        spark, list(found.files), root=root, schema=target, spark_schema=spark_schema(target),
        partitions=[c for c in found.partition_columns if c in target.names], weight=WEIGHT,
    )
