"""Parquet files written by Spark's executors into a table's folder and committed later by
the driver as add actions, so that the driver never holds a whole table.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties
from deltalake import Schema as DeltaSchema
from deltalake.transaction import AddAction, create_table_with_add_actions
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets import uris
from ivm_assets.delta import executor_io, storage, storage_errors
from ivm_assets.delta.commit import Epoch, commit_epoch
from ivm_assets.delta.handles import writable
from ivm_assets.delta.properties import new_table_configuration
from ivm_assets.delta.read import float_safe, read_on_executors
from ivm_assets.spark.arrow import arrow_schema as spark_to_arrow_schema, spark_schema
from ivm_assets.testing import faults


@dataclass(frozen=True)
class StagedFiles:
    """Parquet files written into a table's folder and not committed yet."""

    actions: list[AddAction]
    rows: int
    schema: pa.Schema  # the table's schema: every column nullable, as the Arrow path writes it
    partition_by: list[str]


# Parquet row groups of Spark-written files, in bytes (parquet-java's own default is 128 MiB:
# one group per file, which a key lookup could never skip part of).
SPARK_ROW_GROUP_BYTES = 1 << 20


def stage_files(
    uri: str, rows: DataFrame, *, partition_by: list[str], sort_by: list[str], row_group_rows: int | None = None
) -> StagedFiles:
    """Spark's executors write ``rows`` as parquet files into the table's folder, where
    delta-rs puts its own: ``<table>/<k>=<v>/part-….parquet``. Until the driver commits them
    they are not part of the table: a process killed here leaves unreferenced files, which
    readers never see and a later vacuum removes. Each file's row count goes into the Delta
    statistics (the cost model and :func:`~ivm_assets.delta.snapshot.row_count` use them). ``row_group_rows`` caps row
    groups by rows too, as the Arrow path does (narrow state rows fill 1 MiB only after
    ~100,000 rows), and writes them without dictionary pages.

    A local table's files are written by Spark's parquet writer into a staging folder and
    moved into place (one rename each, same file system). On an object store, where a
    rename is a copy and this Spark has no connector, the executors write them in place
    with pyarrow (:func:`~ivm_assets.delta.executor_io.write_files`).
    """
    if partition_by:
        rows = rows.repartition(*[F.col(f"`{c}`") for c in partition_by])
    if partition_by or sort_by:
        rows = rows.sortWithinPartitions(*[F.col(f"`{c}`") for c in [*partition_by, *sort_by]])
    schema = all_nullable(spark_to_arrow_schema(rows.schema))
    root = uris.local_path(uri)
    if root is None:
        return _stage_remote(uri, rows, schema, partition_by=partition_by, row_group_rows=row_group_rows)
    staging = os.path.join(root, f"_ivm_staging_{uuid.uuid4().hex}")
    writer = rows.write.option("parquet.block.size", SPARK_ROW_GROUP_BYTES)
    if row_group_rows:
        # Small row groups (state files) without dictionary pages: a dictionary per
        # 1,024 rows saves little, and parquet-java builds one per column chunk before it
        # falls back. TPC-H Q5's lineitem side at SF 1 (6 M rows, 4 buckets): 4.0-4.1 s to
        # write instead of 4.9-5.3, files 10 % larger, 1,320 scattered groups decoded in
        # 0.21 s instead of 0.27 (benchmarks/README.md, join_side_layouts.py).
        writer = writer.option("parquet.block.row.count.limit", row_group_rows).option("parquet.enable.dictionary", "false")
    (
        writer.option("compression", "snappy")
        .partitionBy(*partition_by)
        .parquet(staging)
    )
    actions: list[AddAction] = []
    total = 0
    now_ms = int(time.time() * 1000)
    for folder, _, names in os.walk(staging):
        for name in sorted(n for n in names if n.endswith(".parquet")):
            relative_dir = os.path.relpath(folder, staging)
            parts = [] if relative_dir == "." else relative_dir.split(os.sep)
            partition = dict(p.split("=", 1) for p in parts)
            target_dir = os.path.join(root, *parts)
            os.makedirs(target_dir, exist_ok=True)
            target = os.path.join(target_dir, name)
            os.rename(os.path.join(folder, name), target)
            count = pq.read_metadata(target).num_rows
            total += count
            actions.append(
                AddAction(
                    path="/".join([*parts, name]), size=os.path.getsize(target), partition_values=partition,
                    modification_time=now_ms, data_change=True, stats=json.dumps({"numRecords": count}),
                )
            )
    shutil.rmtree(staging, ignore_errors=True)
    faults.crossed("files")
    return StagedFiles(actions, total, schema, partition_by)


def _stage_remote(uri: str, rows: DataFrame, schema: pa.Schema, *, partition_by: list[str], row_group_rows: int | None) -> StagedFiles:
    """:func:`stage_files` on an object store: each write task puts its files in place under
    names no other attempt uses, and the job's result says which files, how large, how many
    rows (only one attempt of each task counts: a retried one's file is left unreferenced)."""
    with storage_errors.failures(uri):
        written = executor_io.write_files(
            rows, root=storage.normalize(uri), partitions=partition_by, row_group_rows=row_group_rows, row_group_bytes=SPARK_ROW_GROUP_BYTES
        )
    now_ms = int(time.time() * 1000)
    actions = [
        AddAction(
            path=f.path, size=f.size, partition_values=f.partition, modification_time=now_ms, data_change=True,
            stats=json.dumps({"numRecords": f.rows}),
        )
        for f in sorted(written, key=lambda f: f.path)
    ]
    faults.crossed("files")
    return StagedFiles(actions, sum(f.rows for f in written), schema, partition_by)


def all_nullable(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field nullable: how a table's files are written whichever way
    (Spark's writer and the executors' make every column nullable, so the driver's does too)."""
    return pa.schema([pa.field(f.name, f.type, True) for f in schema])


def read_staged(spark: SparkSession, uri: str, files: StagedFiles) -> DataFrame:
    """The rows of staged ``files`` (not committed yet) as Spark reads them, their partition
    columns included: a full refresh computes what it stores once and reads the stored files
    back instead of keeping a copy on the executors."""
    root = uris.local_path(uri)
    schema = spark_schema(files.schema)
    if not files.actions:
        return spark.createDataFrame([], schema)
    if root is None:
        base = storage.normalize(uri)
        found = [executor_io.DataFile(f"{base}/{a.path}", a.size, tuple(sorted(a.partition_values.items()))) for a in files.actions]
        return read_on_executors(spark, uri, found, files.schema, files.partition_by)
    paths = [os.path.join(root, a.path) for a in files.actions]
    # With the schema given Spark neither infers it (a job reading a footer) nor guesses the
    # partition columns' types from the folder names.
    rows = float_safe(spark.read.schema(schema), files.schema).option("basePath", root).parquet(*paths)
    return rows.select(*[F.col(f"`{f.name}`") for f in schema.fields])


def commit_staged(
    uri: str, files: StagedFiles, *, epoch: Epoch, after: int | None, change_feed: bool = False, metadata: dict[str, str] | None = None
) -> None:
    """Replace the table's content by the ``files`` :func:`stage_files` wrote into its folder,
    as the epoch's one commit right after version ``after`` (None: create the table)."""

    def attempt(at: int | None) -> bool:
        properties = epoch.commit_properties(metadata)
        if at is None:
            create_table_with_add_actions(
                uri, DeltaSchema.from_arrow(files.schema), files.actions, mode="error", partition_by=files.partition_by or None,
                configuration=new_table_configuration(change_feed), commit_properties=properties, storage_options=storage.options_for(uri),
            )
        else:
            commit_files(uri, at, files, properties)
        return True

    commit_epoch(uri, epoch, after, attempt)


def commit_files(uri: str, at: int | None, files: StagedFiles, properties: CommitProperties) -> None:
    """Replace the content of the table (as of version ``at``) by ``files`` in one commit."""
    writable(uri, at).create_write_transaction(
        files.actions, mode="overwrite", schema=files.schema, partition_by=files.partition_by or None, commit_properties=properties
    )
