"""Reads into Spark and Arrow: snapshots (read by Spark's executors from the table's
parquet files: by Spark's parquet reader on a local disk, by pyarrow in the executors'
Python workers on an object store, see :mod:`ivm_assets.delta.executor_io`), change feeds
(read by delta-rs and normalized) and small tables.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F

from ivm_assets import uris
from ivm_assets.delta import executor_io, hadoop_mapping, storage, storage_errors
from ivm_assets.delta.handles import open_table
from ivm_assets.delta.snapshot import SnapshotFiles, file_index, file_key, normalize_schema_of, snapshot_files
from ivm_assets.spark.arrow import normalize_table, spark_schema, to_spark
from ivm_assets.zset import WEIGHT


_CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def read_snapshot(
    spark: SparkSession,
    uri: str,
    *,
    version: int | None = None,
    partition_filters: list[tuple[str, str, object]] | None = None,
) -> DataFrame:
    """The table's rows at ``version`` as a Spark DataFrame, read by Spark from parquet.

    ``partition_filters`` (delta-rs form, e.g. ``[("__bucket", "in", ["3", "7"])]``) prunes
    files before Spark sees them.
    """
    return read_snapshot_sized(spark, uri, version=version, partition_filters=partition_filters)[0]


def read_snapshot_sized(
    spark: SparkSession,
    uri: str,
    *,
    version: int | None = None,
    partition_filters: list[tuple[str, str, object]] | None = None,
) -> tuple[DataFrame, int]:
    """:func:`read_snapshot`, plus the bytes of the files it reads (from the Delta log)."""
    snap = snapshot_files(uri, version=version, partition_filters=partition_filters)
    return _read_files(spark, snap), snap.bytes


def _read_files(spark: SparkSession, snap: SnapshotFiles) -> DataFrame:
    dt, files = snap.table, snap.files
    schema = normalize_schema_of(dt)
    if not snap.plain_parquet:
        # Spark's parquet reader would ignore deletion vectors / mapped names: let delta-rs
        # resolve them (this funnels the rows through the driver, so it is the slow path).
        return to_spark(spark, _read_all(dt.scan()))
    if not files:
        return spark.createDataFrame([], schema=spark_schema(schema))
    target = spark_schema(schema)
    partition_columns = dt.metadata().partition_columns
    if not all(uris.is_local(f) for f in files):
        if hadoop_mapping.executor_io() == "python":
            return read_on_executors(spark, dt.table_uri, data_files(snap), schema, partition_columns)
        files = [hadoop_mapping.hadoop_uri(f) for f in files]
    else:
        # delta-rs reports local files percent-encoded (`my%20project/…`); Spark takes a
        # path as spelled.
        files = [file_key(f) for f in files]
    # An explicit schema spares Spark a job that reads every file footer to infer one.
    reader = float_safe(spark.read.schema(target), schema)
    if partition_columns:
        local = uris.local_path(dt.table_uri)
        reader = reader.option("basePath", file_key(local) if local is not None else hadoop_mapping.hadoop_uri(dt.table_uri))
    return reader.parquet(*files).select(*[F.col(f"`{f.name}`") for f in target.fields])


# Parquet's row-group and page filters compare FLOAT/DOUBLE otherwise than SQL does: the
# dictionary and Bloom filters by Java's equals (−0.0 is not 0.0), the statistics by min/max
# that leave NaN out (as the format says, and delta-rs writes them), though NaN is above
# every value in Spark. Spark's scan then dropped rows its own filter keeps: a −0.0 row for
# `x = 0`, a NaN row for `x > 0`; a build in Spark and an epoch in process disagreed.
_FLOAT_UNSAFE_FILTERS = ("dictionary", "stats", "columnindex", "bloom")


def float_safe(reader: DataFrameReader, schema: pa.Schema) -> DataFrameReader:
    """``reader`` (of parquet files of ``schema``) with Parquet's own filters off when a
    column is FLOAT or DOUBLE, so that a filter Spark pushes down never skips a row group or
    page it would keep; Spark still applies every filter to each row. Set per read, on the
    Hadoop configuration of this scan only (a Spark Connect server's too)."""
    if any(pa.types.is_floating(f.type) for f in schema):
        for kind in _FLOAT_UNSAFE_FILTERS:
            reader = reader.option(f"parquet.filter.{kind}.enabled", "false")
    return reader


def data_files(snap: SnapshotFiles) -> list[executor_io.DataFile]:
    """``snap``'s files with their sizes and partition values from the add actions."""
    index = file_index(snap.table)
    return [
        executor_io.DataFile(file_key(path), size, tuple(sorted(index.get(file_key(path), (0, {}))[1].items())))
        for path, size in zip(snap.files, snap.sizes)
    ]


def read_on_executors(
    spark: SparkSession, uri: str, files: list[executor_io.DataFile], schema: pa.Schema, partition_columns: list[str]
) -> DataFrame:
    """The rows of ``files`` of the table at ``uri`` (an object store), read by Spark's
    executors with pyarrow (this Spark has no Hadoop object store connector)."""
    root = storage.normalize(uri)
    return executor_io.read_files(spark, files, root=root, schema=schema, spark_schema=spark_schema(schema), partitions=partition_columns)


def read_changes(uri: str, *, after: int, upto: int, columns: list[str] | None = None) -> pa.Table:
    """The change data feed of versions (after, upto] as a z-set: ``columns`` (all when None)
    plus ``__w``.

    insert/update_postimage weigh +1, delete/update_preimage −1. Not consolidated.
    Raises DeltaError when the range cannot be read (CDF off, files vacuumed, …), and
    StorageError when the store cannot be reached (a network fault is not a lost feed).
    """
    dt = open_table(uri, upto)
    # delta-rs parses these as SQL identifiers: quoted, so `Order` or `b c` are names, not syntax.
    wanted = [*('"' + c.replace('"', '""') + '"' for c in columns), "_change_type"] if columns is not None else None
    with storage_errors.failures(uri):
        table = normalize_table(_read_all(dt.load_cdf(starting_version=after + 1, ending_version=upto, columns=wanted)))
    weights = executor_io.change_weights(table.column("_change_type"))
    data_columns = [c for c in table.column_names if c not in _CDF_COLUMNS]
    return table.select(data_columns).append_column(WEIGHT, weights)


def read_arrow(uri: str, version: int | None = None, columns: list[str] | None = None) -> pa.Table:
    """The table's rows at ``version`` (the latest when None) read by delta-rs into the driver,
    normalized, with ``columns`` (all when None; plain names, unlike the change feed's): for
    small tables only."""
    with storage_errors.failures(uri):
        return normalize_table(_read_all(open_table(uri, version).scan(columns=columns)))


def read_small(uri: str) -> pa.Table:
    """A small table (progress records) read whole by delta-rs, without Spark."""
    return _read_all(open_table(uri).scan())


def _read_all(reader) -> pa.Table:
    """delta-rs streams arro3 batches; pyarrow takes them through the C stream interface."""
    return pa.RecordBatchReader.from_stream(reader).read_all()
