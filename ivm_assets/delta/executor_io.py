"""Parquet files of object store tables read and written by Spark's executors, with pyarrow.

Spark's own parquet reader and writer reach an object store only through Hadoop's connectors
(hadoop-aws, hadoop-azure), which are jars from Maven that a pyspark wheel lacks. Here the
executors' Python workers do the I/O with pyarrow's file systems instead, built from the
table's registered storage options (:mod:`ivm_assets.delta.storage`), so the driver lists
files and commits them but never holds their rows:

- **reads**: a Spark Python data source (``pyspark.sql.datasource``), one per read, whose
  partitions are groups of the snapshot's files; each task streams its files row group by
  row group. A data source is a scan, so Spark knows nothing of its size and never plans a
  broadcast of it (a ``mapInArrow`` over a small frame of file names would be estimated at
  that frame's size and broadcast: the whole table collected to the driver).
- **writes**: ``mapInArrow`` over the rows, each task writing one parquet file per run of a
  partition value into the table's folder under a name no other attempt uses, and returning
  one row per file (path, size, rows, partition values), which the driver collects and
  commits with delta-rs. A data source writer's ``commit()`` runs in a Python worker, not in
  the caller's process, and would have to hand the files back through the store; a job's
  result is already in the caller's hands, and Spark keeps one successful attempt's result
  per task, so a retried or speculative attempt's file is never committed (it stays
  unreferenced, as does everything a killed write left).

Secrets: the storage options travel inside the pickled data source class and the pickled
write function (binary, shipped to the workers); nothing goes into Spark options or names,
so no plan, ``explain()``, log or Spark UI page shows them. Errors raised on executors are
re-raised with every secret value masked and without the client's exception chained.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ivm_assets.delta import filesystems, storage, storage_errors
from ivm_assets.errors import StorageError
from ivm_assets.testing import faults

# Rows a read yields per record batch (the Arrow batches Spark converts).
_BATCH_ROWS = 65_536
# Spark's defaults for packing files into read tasks (spark.sql.files.maxPartitionBytes,
# spark.sql.files.openCostInBytes), used when the session does not set them.
_SPLIT_BYTES = 128 << 20
_OPEN_COST = 4 << 20
# A change data file's ``_change_type`` values and the weights they stand for (the Delta
# protocol's change types).
CHANGE_TYPE = "_change_type"
CHANGE_WEIGHTS = {"insert": 1, "update_postimage": 1, "delete": -1, "update_preimage": -1}
# Partition values Spark writes as this folder name (Hive's), and which characters it escapes.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}

WRITTEN = pa.schema([("path", pa.string()), ("size", pa.int64()), ("rows", pa.int64()), ("partition", pa.string())])


@dataclass(frozen=True)
class DataFile:
    """A parquet file of a table: its URI, its size and its partition values (as text) from
    the Delta log. In a read of changes (:func:`read_files` with ``weight``), ``weight`` is
    every row's weight (+1 an added file, −1 a removed one), or None for a change data file
    whose ``_change_type`` column gives each row's."""

    uri: str
    size: int
    partition: tuple[tuple[str, str | None], ...] = ()
    weight: int | None = None


@dataclass(frozen=True)
class WrittenFile:
    """A file a write put into the table's folder, not committed yet: ``path`` relative to
    the table's root."""

    path: str
    size: int
    rows: int
    partition: dict[str, str | None]


@dataclass(frozen=True)
class _Store:
    """Where a table is and the options reaching it (secrets among them: never in a repr)."""

    root: str
    registration: storage.Registration | None = field(repr=False)

    def filesystem(self, uri: str):
        return filesystems.filesystem_with(uri, self.registration)

    def error(self, exc: BaseException, uri: str) -> StorageError:
        """``exc`` as a StorageError whose text holds no secret; a missing file keeps the
        words the engine recognises (a lost data file rebuilds the view)."""
        text = str(storage_errors.missing_file(uri)) if isinstance(exc, FileNotFoundError) else f"{type(exc).__name__}: {exc}"
        for key, value in self.registration.options if self.registration else ():
            if storage.is_secret(key) and len(value) >= 4:
                text = text.replace(value, "***")
        return StorageError(f"executor I/O of {uri} failed: {text}")


# --- reads ---------------------------------------------------------------------------------
def split_bytes(spark: SparkSession, total: int) -> tuple[int, int]:
    """The bytes per read task and the cost counted per file, as Spark sizes its file scans:
    ``maxPartitionBytes``, but smaller when that would leave the session's parallelism idle."""
    conf = spark.conf
    most = _conf_bytes(conf.get("spark.sql.files.maxPartitionBytes", None), _SPLIT_BYTES)
    open_cost = _conf_bytes(conf.get("spark.sql.files.openCostInBytes", None), _OPEN_COST)
    parallelism = int(conf.get("spark.default.parallelism", None) or conf.get("spark.sql.shuffle.partitions", None) or 8)
    return min(most, max(open_cost, total // max(parallelism, 1))), open_cost


def _conf_bytes(value: str | None, default: int) -> int:
    if not value:
        return default
    text = value.strip().lower().removesuffix("b")
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)


def plan_tasks(files: list[DataFile], *, split: int, open_cost: int) -> list[list[DataFile]]:
    """``files`` packed into read tasks of about ``split`` bytes (each file costing at least
    ``open_cost``), largest first, as Spark packs the files of a scan; a file larger than
    ``split`` is one task (it is streamed row group by row group, never held whole).

    >>> [len(t) for t in plan_tasks([DataFile(f"f{i}", 30) for i in range(5)], split=100, open_cost=10)]
    [3, 2]
    """
    tasks: list[list[DataFile]] = []
    current: list[DataFile] = []
    size = 0
    for file in sorted(files, key=lambda f: f.size, reverse=True):
        cost = max(file.size, open_cost)
        if current and size + cost > split:
            tasks.append(current)
            current, size = [], 0
        current.append(file)
        size += cost
    if current:
        tasks.append(current)
    return tasks


@dataclass(frozen=True)
class _ReadSpec:
    store: _Store
    schema: pa.Schema  # the table's columns, in order, partition columns included
    partitions: tuple[str, ...]
    tasks: tuple[tuple[DataFile, ...], ...]
    weight: str | None = None  # a read of changes: the weight column made from each file's DataFile.weight


class _FilesSource(DataSource):
    """A read of given parquet files: subclassed once per read with its ``spec`` (see
    :func:`read_files`)."""

    spec: _ReadSpec
    source_name: str

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def reader(self, schema) -> DataSourceReader:
        return _FilesReader(self.spec, schema)


class _FilesReader(DataSourceReader):
    def __init__(self, spec: _ReadSpec, schema) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.spec = spec
        self.target = to_arrow_schema(schema, timezone="UTC")  # what Spark checks each batch against

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(len(self.spec.tasks))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for file in self.spec.tasks[partition.value]:
            yield from _read_file(self.spec, file, self.target)


def _read_file(spec: _ReadSpec, file: DataFile, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of one file in ``target``'s columns and types: the file's columns cast (files
    written at different times may hold string_view or string), columns it lacks as NULLs,
    partition columns from the log's values."""
    values = dict(file.partition)
    typed = spec.weight is not None and file.weight is None
    try:
        fs, path = spec.store.filesystem(file.uri)
        with fs.open_input_file(path) as source:
            parquet = pq.ParquetFile(source)
            present = set(parquet.schema_arrow.names)
            wanted = [f.name for f in target if f.name in present and f.name not in spec.partitions and f.name != spec.weight]
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=wanted + [CHANGE_TYPE] * typed, use_threads=False):
                yield _conform(batch, target, spec.partitions, values, _weights(spec, file, batch, typed))
    except StorageError:
        raise
    except Exception as exc:  # pyarrow raises OSError, ArrowInvalid…: shown without their secrets
        raise spec.store.error(exc, file.uri) from None


def _weights(spec: _ReadSpec, file: DataFile, batch: pa.RecordBatch, typed: bool) -> dict[str, pa.Array]:
    """The weight column of a read of changes (none for a snapshot read)."""
    if spec.weight is None:
        return {}
    if typed:
        return {spec.weight: change_weights(batch.column(CHANGE_TYPE))}
    return {spec.weight: pa.repeat(pa.scalar(file.weight, pa.int64()), batch.num_rows)}


def change_weights(types: pa.Array) -> pa.Array:
    """Each row's weight from its ``_change_type``; an unknown type fails the read rather
    than count the row wrongly."""
    types = types.cast(pa.string())  # a writer may have stored it dictionary-encoded or as large_string
    weights = pc.index_in(types, pa.array(list(CHANGE_WEIGHTS)))
    if weights.null_count:
        unknown = pc.filter(types, pc.is_null(weights))[0]
        raise ValueError(f"a change data file holds a row of {CHANGE_TYPE} {unknown}, expected one of {sorted(CHANGE_WEIGHTS)}")
    return pc.take(pa.array(list(CHANGE_WEIGHTS.values()), pa.int64()), weights)


def _conform(
    batch: pa.RecordBatch, target: pa.Schema, partitions: tuple[str, ...], values: dict, extra: dict[str, pa.Array] | None = None
) -> pa.RecordBatch:
    n = batch.num_rows
    names = set(batch.schema.names)
    columns = []
    for f in target:
        if extra and f.name in extra:
            columns.append(extra[f.name])
        elif f.name in partitions:
            columns.append(pa.array([values.get(f.name)] * n, pa.string()).cast(f.type))
        elif f.name in names:
            columns.append(batch.column(f.name).cast(f.type))
        else:
            columns.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(columns, schema=target)


def read_files(
    spark: SparkSession, files: list[DataFile], *, root: str, schema: pa.Schema, spark_schema, partitions: list[str],
    weight: str | None = None,
) -> DataFrame:
    """A DataFrame of ``files``' rows (columns and types of ``schema``, as ``spark_schema``
    in Spark), read by the executors. Registers a data source for this read alone: its
    class carries the file list and the storage options, pickled to the workers.

    ``weight``, a read of changes: the column of ``schema`` that gets each row's weight
    (its file's :attr:`DataFile.weight`, or from its ``_change_type``)."""
    if not files:  # a data source without partitions has Spark call read() with None
        return spark.createDataFrame([], schema=spark_schema)
    split, open_cost = split_bytes(spark, sum(f.size for f in files))
    tasks = plan_tasks(files, split=split, open_cost=open_cost)
    spec = _ReadSpec(_Store(root, storage.registration(root)), schema, tuple(partitions), tuple(tuple(t) for t in tasks), weight)
    name = f"ivm_files_{uuid.uuid4().hex}"
    # Defined here, not in the module, so cloudpickle ships the class (with its spec) by value.
    source = type(name, (_FilesSource,), {"spec": spec, "source_name": name, "__module__": __name__})
    spark.dataSource.register(source)
    return spark.read.format(name).schema(spark_schema).load()


# --- writes --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _FileWriter:
    """The function each write task runs (``mapInArrow``): its rows, sorted by the partition
    columns, as parquet files ``<root>/<k>=<v>/part-<uuid>.parquet``, one per run of a
    partition value; yields one :data:`WRITTEN` row per file."""

    store: _Store
    partitions: tuple[str, ...]
    file_schema: pa.Schema  # the rows' columns without the partition columns, all nullable
    row_group_rows: int | None
    row_group_bytes: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        written: list[dict] = []
        current: _OpenFile | None = None
        try:
            for batch in batches:
                for value, rows in _runs(batch, self.partitions):
                    if current is not None and current.value != value:
                        written.append(current.close())
                        current = None
                    if current is None:
                        current = _OpenFile(self, value, rows)
                    current.add(rows)
            if current is not None:
                written.append(current.close())
        except StorageError:
            raise
        except Exception as exc:
            raise self.store.error(exc, current.uri if current is not None else self.store.root) from None
        if written:
            faults.write_task_finished()  # the tests' hook: a lost executor after the files were written
        yield pa.RecordBatch.from_pylist(written, schema=WRITTEN)

    __name__ = "ivm_write_files"  # what Spark's plan shows of the function


def _runs(batch: pa.RecordBatch, partitions: tuple[str, ...]) -> Iterator[tuple[tuple, pa.RecordBatch]]:
    """``batch`` cut where a partition column's value changes: (the values as text, rows)."""
    if not partitions or batch.num_rows == 0:
        if batch.num_rows:
            yield (), batch
        return
    text = [pc.cast(batch.column(p), pa.string()) for p in partitions]
    ends = sorted({int(e) for column in text for e in pc.run_end_encode(column).run_ends.to_pylist()})
    start = 0
    for end in ends:
        yield tuple(column[start].as_py() for column in text), batch.slice(start, end - start)
        start = end


def partition_folder(name: str, value: str | None) -> str:
    """``name=value`` as Spark names a partition's folder (NULL as Hive's default name)."""
    if value is None:
        return f"{name}={NULL_PARTITION}"
    return f"{name}=" + "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


class _OpenFile:
    """One file being written: rows are buffered until a whole row group is there, so row
    groups have the size the write asked for whatever the batches Spark hands over."""

    def __init__(self, writer: _FileWriter, value: tuple, first: pa.RecordBatch) -> None:
        self.writer, self.value = writer, value
        folders = [partition_folder(n, v) for n, v in zip(writer.partitions, value)]
        self.path = "/".join([*folders, f"part-{uuid.uuid4().hex}.parquet"])
        self.uri = f"{writer.store.root}/{self.path}"
        fs, path = writer.store.filesystem(self.uri)
        self.sink = fs.open_output_stream(path)
        self.parquet = pq.ParquetWriter(self.sink, writer.file_schema, compression="snappy")
        # Rows per row group from the Arrow size of the first rows (parquet's encoded size is
        # known only once written), capped by the caller's row limit.
        per_row = max(first.nbytes // max(first.num_rows, 1), 1)
        self.group_rows = max(1, min(writer.row_group_rows or 1 << 62, writer.row_group_bytes // per_row))
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.rows = 0

    def add(self, rows: pa.RecordBatch) -> None:
        rows = rows.drop_columns(list(self.writer.partitions)) if self.writer.partitions else rows
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        if self.pending_rows >= self.group_rows:
            self._flush(whole_groups=True)

    def _flush(self, *, whole_groups: bool) -> None:
        if not self.pending_rows:
            return
        table = pa.Table.from_batches(self.pending)
        take = (self.pending_rows // self.group_rows) * self.group_rows if whole_groups else self.pending_rows
        part = table.slice(0, take)
        self.parquet.write_table(pa.table(part.columns, schema=self.writer.file_schema), row_group_size=self.group_rows)
        rest = table.slice(take)
        self.pending = rest.to_batches()
        self.pending_rows = rest.num_rows
        self.rows += take

    def close(self) -> dict:
        self._flush(whole_groups=False)
        self.parquet.close()
        size = self.sink.tell()
        self.sink.close()  # on an object store, the upload completes here
        partition = dict(zip(self.writer.partitions, self.value))
        return {"path": self.path, "size": size, "rows": self.rows, "partition": json.dumps(partition)}


def write_files(
    rows: DataFrame, *, root: str, partitions: list[str], row_group_rows: int | None, row_group_bytes: int
) -> list[WrittenFile]:
    """Write ``rows`` (sorted by ``partitions`` within each Spark partition) as parquet files
    into the table folder ``root`` on the executors; the files' descriptions come back."""
    found = write_plan(rows, root=root, partitions=partitions, row_group_rows=row_group_rows, row_group_bytes=row_group_bytes).collect()
    return [WrittenFile(r["path"], int(r["size"]), int(r["rows"]), json.loads(r["partition"])) for r in found]


def write_plan(rows: DataFrame, *, root: str, partitions: list[str], row_group_rows: int | None, row_group_bytes: int) -> DataFrame:
    """The job :func:`write_files` runs: one row per file written (tests look at its plan)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from ivm_assets.spark.arrow import arrow_schema

    schema = arrow_schema(rows.schema)
    file_schema = pa.schema([pa.field(f.name, f.type, True) for f in schema if f.name not in partitions])
    writer = _FileWriter(_Store(root, storage.registration(root)), tuple(partitions), file_schema, row_group_rows, row_group_bytes)
    return rows.mapInArrow(writer, from_arrow_schema(WRITTEN))
