"""A table version's data files, and what its log says of them (sizes, partition values,
row counts, schema), without reading a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable

from ivm_assets import uris
from ivm_assets.delta import filesystems, storage, storage_errors
from ivm_assets.delta.handles import open_table
from ivm_assets.spark.arrow import normalize_schema


@dataclass(frozen=True)
class SnapshotFiles:
    """The data files of a table version (pruned by partition), and their sizes as the
    Delta log records them (no file is looked at: on an object store that would cost a
    request a file)."""

    table: DeltaTable
    files: list[str]
    sizes: list[int]

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    @property
    def plain_parquet(self) -> bool:
        """Files a parquet reader can read as they are (no deletion vectors, no column
        mapping), on any store: what :func:`~ivm_assets.delta.row_groups.read_files_arrow` needs."""
        features = set(self.table.protocol().reader_features or [])
        return not features & {"deletionVectors", "columnMapping"}


def snapshot_files(
    uri: str, *, version: int | None = None, partition_filters: list[tuple[str, str, object]] | None = None
) -> SnapshotFiles:
    dt = open_table(uri, version)
    files = _files(dt, partition_filters)
    index = file_index(dt)
    return SnapshotFiles(dt, files, [_size(index, f) for f in files])


# Attribute of a handle holding (its version, each data file's size and partition values
# from its add action): built once per version a refresh reads, not once per lookup, and
# gone with the handle (DeltaTable is not hashable, so no weak dictionary can key on it).
_INDEX = "_ivm_file_index"


def file_key(path: str) -> str:
    """A data file's location as both ``file_uris()`` and the add actions can be matched on."""
    return unquote(path.removeprefix("file://"))


class LoggedFile(NamedTuple):
    """A data file as its add action records it."""

    size: int
    partition_values: dict[str, str | None]  # as text
    path: str  # as the log spells it, relative to the table


def file_index(dt: DeltaTable) -> dict[str, LoggedFile]:
    """Data file location (:func:`file_key`) → what its add action records."""
    found = getattr(dt, _INDEX, None)
    if found is not None and found[0] == dt.version():
        return found[1]
    actions = pa.table(dt.get_add_actions(flatten=True))
    root = storage.normalize(uris.local_path(dt.table_uri) or dt.table_uri)
    columns = {n.removeprefix("partition."): actions.column(n).to_pylist() for n in actions.column_names if n.startswith("partition.")}
    index = {}
    for i, (path, size) in enumerate(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist())):
        values = {c: None if v[i] is None else str(v[i]) for c, v in columns.items()}
        index[file_key(f"{root}/{path}")] = LoggedFile(int(size), values, path)
    setattr(dt, _INDEX, (dt.version(), index))
    return index


def _size(index: dict[str, LoggedFile], file: str) -> int:
    """``file``'s size from the log; from the store (a stat, or a HEAD) if its location is
    spelled differently in the add actions than in ``file_uris()``."""
    found = index.get(file_key(file))
    if found is not None:
        return found.size
    identity = filesystems.identity(file_key(file))
    if identity is None:
        raise storage_errors.missing_file(file)
    return identity[-2]


def files_by_partition(snap: SnapshotFiles, column: str) -> dict[str | None, SnapshotFiles] | None:
    """``snap``'s files grouped by their value of partition ``column`` (as text), each group
    a snapshot of its own; None when a file's value is not known."""
    values = partition_values(snap.table, column)
    groups: dict[str | None, tuple[list[str], list[int]]] = {}
    for path, size in zip(snap.files, snap.sizes):
        key = file_key(path)
        if key not in values:
            return None
        files, sizes = groups.setdefault(values[key], ([], []))
        files.append(path)
        sizes.append(size)
    return {value: SnapshotFiles(snap.table, files, sizes) for value, (files, sizes) in groups.items()}


def partition_type(dt: DeltaTable, column: str) -> pa.DataType:
    return pa.schema(dt.schema().to_arrow()).field(column).type


def partition_values(dt: DeltaTable, column: str) -> dict[str, str | None]:
    """Each data file's location (:func:`file_key`) → its value of partition ``column``, as text."""
    return {key: logged.partition_values.get(column) for key, logged in file_index(dt).items()}


def _files(dt: DeltaTable, partition_filters: list[tuple[str, str, object]] | None) -> list[str]:
    return dt.file_uris(file_pruning_predicate=partition_filters) if partition_filters else dt.file_uris()


def arrow_schema(uri: str, version: int | None = None) -> pa.Schema:
    return normalize_schema_of(open_table(uri, version))


def normalize_schema_of(dt: DeltaTable) -> pa.Schema:
    return normalize_schema(pa.schema(dt.schema().to_arrow()))


def file_count(uri: str, version: int | None = None) -> int:
    """Number of data files in the table at ``version`` (default: the latest)."""
    return len(open_table(uri, version).file_uris())


def row_count(uri: str, version: int) -> int | None:
    """Rows of the table from the per-file statistics in the Delta log (no data is read);
    None when some file has no statistics."""
    actions = open_table(uri, version).get_add_actions(flatten=True)
    names = list(actions.schema.names)
    if "num_records" not in names:
        return None
    counts = actions.column(names.index("num_records")).to_pylist()
    return None if any(c is None for c in counts) else int(sum(counts))


def snapshot_bytes(uri: str, *, version: int, partition_filters: list[tuple[str, str, object]] | None = None) -> int:
    """Bytes of the files :func:`~ivm_assets.delta.read.read_snapshot` would read, from the Delta log."""
    return snapshot_files(uri, version=version, partition_filters=partition_filters).bytes
