"""Parquet footers and decoded row groups of table files, kept in process between refreshes.

A small epoch looks up the state rows of its touched keys on the driver. With scattered keys
(random orders deleted, random customers updated) nearly every row group of a large state
table holds one of them, so each refresh decoded the same row groups again: at SF 1 a join
view's refresh spent more time decoding state (1.2 M rows, 0.2 s) than on anything else.

Delta never rewrites a data file: a new version adds files under new names. So a file's
location and its size as the Delta log records it name the same bytes for as long as the
file exists, and what was decoded from it once is still right later (compaction and
overwrites write new files; their old files are simply no longer asked for, and age out).
The name costs no request: no ``stat``, no HEAD. A file deleted behind Delta's back after it
was cached is noticed when it is next read from storage (the rows served meanwhile are the
ones the log names). Held by that name:

- footers (row counts, compressed sizes and key statistics of each row group), so choosing
  the row groups of a lookup reads no file;
- decoded row groups, under a budget of ``IVM_STATE_CACHE_MB`` MiB (default: a quarter of
  the memory the process may use, :func:`ivm_assets.settings.usable_memory`; ``0`` turns
  the cache off), least recently used first out;
- under the same budget, whole files indexed by an integer key
  (:mod:`~ivm_assets.delta.key_index`): a file looked up by that key a second time by
  scattered keys, or wanted at least half (counting the groups held already), is decoded
  whole and held indexed instead of by group (:func:`whole_file`), as are the files a
  commit of this process wrote from rows on the driver: an append, a compaction or a build
  computed in process (:func:`remember`; :func:`remember_parts` for a build's files, which
  share the rows written). A lookup in a fresh process still decodes only the groups its
  keys touch; scattered keys in a long-lived one stop paying per row group.

A process that refreshes once (a Dagster run in a process of its own) gains nothing and pays
nothing but the budget it fills; long-lived processes (``ivm serve``-style loops, the
benchmark, a Dagster code server running in-process jobs) read state from memory after the
first refreshes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ivm_assets import settings, uris
from ivm_assets.delta import filesystems, storage_errors
from ivm_assets.delta.key_index import KeyIndex, index, indexable, positions
from ivm_assets.recent import Recent
from ivm_assets.spark.arrow import normalize_table

Stamp = tuple[str, int]  # the file's location (a local path or a URI), its size in the Delta log


@dataclass
class Footer:
    """One file's footer, read once: per row group its rows and compressed bytes, and the
    min/max/null statistics of the columns lookups have asked for. Its row groups are read
    without reading the footer again (on an object store: one GET a read, see
    :func:`_decoded`)."""

    stamp: Stamp
    metadata: pq.FileMetaData
    rows: list[int]
    bytes: list[int]
    fs: pafs.FileSystem
    fs_path: str  # the file's path on ``fs``
    fragment: object = None  # an object store's ``pyarrow.dataset.ParquetFileFragment``
    lookups: int = 0  # lookups by key that asked for this file (see whole_file)
    _stats: dict[str, list[tuple[object, object, int | None] | None]] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return self.stamp[0]

    def open(self) -> pa.NativeFile:
        """The file, opened for reading (its size known: on an object store no HEAD)."""
        if self.fragment is not None:
            return self.fragment.open()
        return self.fs.open_input_file(self.fs_path)

    @property
    def decoded_bytes(self) -> int:
        """The file's rows' size uncompressed, as its footer says (about their Arrow size)."""
        return sum(self.metadata.row_group(g).total_byte_size for g in range(self.metadata.num_row_groups))

    def stats(self, column: str) -> list[tuple[object, object, int | None] | None]:
        """Per row group (min, max, null count) of ``column``; None where the file has no
        min/max for it (or no such column)."""
        if column not in self._stats:
            index = _column_index(self.metadata, column)
            found: list[tuple[object, object, int | None] | None] = []
            for group in range(self.metadata.num_row_groups):
                stats = self.metadata.row_group(group).column(index).statistics if index is not None else None
                found.append((stats.min, stats.max, stats.null_count) if stats is not None and stats.has_min_max else None)
            self._stats[column] = found
        return self._stats[column]


def _column_index(metadata: pq.FileMetaData, column: str) -> int | None:
    if metadata.num_row_groups == 0:
        return None
    group = metadata.row_group(0)
    for i in range(group.num_columns):
        if group.column(i).path_in_schema == column:
            return i
    return None


def budget_bytes() -> int:
    return settings.current().state_cache_bytes


_footers: Recent[Stamp, Footer] = Recent(4096)
# Held by (file, row group) or, for a file indexed whole, (file, key column).
_groups: Recent[tuple[Stamp, int | str], pa.Table | KeyIndex] = Recent(budget_bytes, size=lambda held: held.nbytes)


def footer(uri: str, size: int) -> Footer:
    """The footer of the parquet file at ``uri`` (a local path or an object store URI) of
    ``size`` bytes, as the Delta log says (read from the file at most once: with the size
    known, one ranged GET on an object store)."""
    stamp = (uri, size)
    found = _footers.get(stamp)
    if found is not None:
        return found
    fs, path = filesystems.filesystem(uri)
    fragment = None if uris.is_local(uri) else _fragment(fs, path, size)
    metadata = _reading(uri, lambda: fragment.metadata if fragment is not None else pq.read_metadata(path, filesystem=fs))
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    made = Footer(
        stamp, metadata, [g.num_rows for g in groups],
        [sum(g.column(i).total_compressed_size for i in range(g.num_columns)) for g in groups], fs, path, fragment,
    )
    _footers.put(stamp, made)
    return made


def _fragment(fs: pafs.FileSystem, path: str, size: int):
    """The dataset fragment of an object store's file of ``size`` bytes (see :func:`_decoded`).
    Imported here: local files are read without one, so a refresh over a local folder does
    not import pyarrow.dataset."""
    import pyarrow.dataset as ds

    return ds.ParquetFileFormat().make_fragment(path, filesystem=fs, file_size=size)


def row_groups(file: Footer, groups: list[int], schema: pa.Schema, *, keep: bool = True) -> tuple[list[pa.Table], int]:
    """The rows of ``groups`` of ``file`` with exactly ``schema``'s columns and types (see
    :func:`conformed`), decoded now or earlier, and how many were decoded now; ``keep=False``
    for a one-off read of files about to be replaced (a compaction), which should not push
    out what lookups will ask for again.

    A group is held as conformed, so a later read with the same schema takes it as it is:
    files Spark wrote declare ``__w`` NOT NULL where the Delta schema does not, and
    conforming every group again at every lookup cost more than the lookup's key filter."""
    found: dict[int, pa.Table] = {}
    for group in groups:
        table = _groups.get((file.stamp, group))
        if table is not None:
            found[group] = table
    budget = budget_bytes() if keep else 0
    for group, table in list(found.items()):
        if table.schema != schema:
            found[group] = table = conformed(table, schema)
            if budget > 0:
                _keep((file.stamp, group), table, replace=True)
    missing = sorted({g for g in groups if g not in found})
    if missing:
        rows = _reading(file.path, lambda: _decoded(file, missing))
        start = 0
        for group in missing:
            found[group] = table = conformed(rows.slice(start, file.rows[group]), schema)
            start += file.rows[group]
            if budget > 0:
                _keep((file.stamp, group), table)
    return [found[g] for g in groups], len(missing)


def held_index(file: Footer, key: str, schema: pa.Schema) -> KeyIndex | None:
    """``file``'s rows indexed by ``key``, conformed to ``schema``, when they are held."""
    found = _groups.get((file.stamp, key))
    if found is None:
        return None
    assert isinstance(found, KeyIndex)
    if found.rows.schema != schema:
        found = found.own()  # conformed alone, not with the rows it shares
        found = found.with_rows(conformed(found.rows, schema))
        if budget_bytes() > 0:
            _keep((file.stamp, key), found, replace=True)
    return found


def whole_file(file: Footer, groups: list[int], schema: pa.Schema, key: str) -> tuple[KeyIndex | None, int]:
    """``file``'s rows indexed by ``key`` (conformed to ``schema``) and how many of its row
    groups were decoded now, when a lookup wants ``groups`` of it: held already, or made now
    if the groups held or wanted are at least half the file's (decoding the rest at most
    doubles what this lookup decodes), or if the file was looked up before in this process
    (by an earlier refresh, as an epoch reads each state table once: the process is
    long-lived, and its next lookups will want the file too), at least a sixteenth of its
    groups are held or wanted (scattered keys, which a lookup by group pays for group by
    group; a contiguous range touches a group or two a lookup and is not worth a whole
    decode) and its rows fit in what the budget has left (decoding whole files only for
    them to be pushed out before their next lookup would cost more than it saves).
    (None, 0) otherwise, when nothing may be held, or when the file's rows would take more
    than a quarter of the budget."""
    found = held_index(file, key, schema)
    if found is not None:
        return found, 0
    file.lookups += 1
    budget = budget_bytes()
    if budget <= 0 or not indexable(schema.field(key).type) or 4 * file.decoded_bytes > budget:
        return None, 0
    count = len(file.rows)
    held = {g for g in range(count) if (file.stamp, g) in _groups}
    touched = len(held | set(groups))
    again = file.lookups > 1 and 16 * touched >= count and _groups.total() + file.decoded_bytes <= budget
    if not again and 2 * touched < count:
        return None, 0
    tables, decoded = row_groups(file, list(range(count)), schema, keep=False)
    made = index(pa.concat_tables(tables), key)
    if made is None:
        return None, decoded
    _hold_index(file, made)
    return made, decoded


def _hold_index(file: Footer, made: KeyIndex) -> None:
    """Hold ``made`` as ``file``'s index, in place of the file's row groups."""
    for group in range(len(file.rows)):
        _groups.take((file.stamp, group))
    _keep((file.stamp, made.key), made, replace=True)


def _decoded(file: Footer, groups: list[int]) -> pa.Table:
    """``groups`` of ``file`` decoded. A local file is read by pyarrow's parquet reader over
    the footer already read: 2–4 times faster than the dataset fragment's scan of the same
    groups (100 scattered groups of a state file in 4–6 ms instead of 11–17). On an object
    store the fragment scans them: it knows the file's size (no HEAD request, which opening
    the file for the reader costs) and fetches each group's column chunks in one ranged GET
    (``tests/s3``)."""
    if file.fragment is not None:
        return file.fragment.subset(row_group_ids=groups).to_table()
    with file.open() as source:
        return pq.ParquetFile(source, metadata=file.metadata).read_row_groups(groups)


def conformed(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` (normalized: see ``spark.arrow.normalize_table``) with exactly ``schema``'s
    columns and types, missing columns as NULLs: files written at different times may hold
    string_view or string, or lack a column added since."""
    rows = normalize_table(rows)
    if rows.schema == schema:
        return rows
    names = set(rows.column_names)
    return pa.table(
        [rows.column(f.name).cast(f.type) if f.name in names else pa.nulls(rows.num_rows, f.type) for f in schema],
        schema=schema,
    )


def _reading(uri: str, read):
    """``read()``, with a file the store no longer has reported as a FileNotFoundError
    naming ``uri``: pyarrow's S3 client, given the size, reports a missing object as an
    INTERNAL_FAILURE of its GET, which says nothing of what is wrong."""
    try:
        with storage_errors.failures(uri):
            return read()
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or uris.is_local(uri) or filesystems.identity(uri) is not None:
            raise
        raise storage_errors.missing_file(uri) from None


def remember(file: Footer, rows: pa.Table, key: str, *, ordered: bool = True) -> bool:
    """Hold ``rows`` as the decoded rows of ``file``, which this process just wrote from
    them, so that the next lookup does not decode what it wrote: indexed by ``key`` when
    its type allows (the rows are the file's, whatever their order), else as its row
    groups, only when ``ordered`` (the file holds them in this order): cut in another
    order, a group held could hold other rows than the file's, which a lookup reading
    some groups from here and others from the file would miss or count twice.

    Only when the file's footer agrees: the same number of rows and the same min and max
    of ``key``, over the file when indexed, else in each row group cut at the footer's
    group sizes. Rows with equal keys might sit on either side of a group boundary; a lookup
    reads every group whose key range holds its key, so it still finds each row once.
    Returns whether they were held."""
    budget = budget_bytes()
    if budget <= 0 or sum(file.rows) != rows.num_rows or key not in rows.column_names:
        return False
    rows = normalize_table(rows)
    if indexable(rows.schema.field(key).type):
        made = index(rows, key)
        assert made is not None
        if not _agrees(file, made):
            return False
        _hold_index(file, made)
        return True
    if not ordered:
        return False
    stats = file.stats(key)
    start, groups = 0, []
    for group, count in enumerate(file.rows):
        part = rows.slice(start, count)
        start += count
        low_high = pc.min_max(part.column(key))
        if stats[group] is None or (low_high["min"].as_py(), low_high["max"].as_py()) != stats[group][:2]:
            return False
        groups.append(part)
    for group, part in enumerate(groups):
        _keep((file.stamp, group), part)
    return True


def remember_parts(files: dict[object, Footer], rows: pa.Table, key: str, parts: dict[object, np.ndarray]) -> int:
    """Hold the rows of each of ``files``, which this process just wrote from ``rows``: the
    file of each part as the rows numbered ``parts[part]`` (ascending, in the order the file
    has them), indexed by ``key`` over ``rows`` itself, which the files share (see
    :func:`~ivm_assets.delta.key_index.positions`). Only files whose footer agrees (row
    count, min and max of ``key``), and only for an indexable key. Returns how many."""
    budget = budget_bytes()
    if budget <= 0 or key not in rows.column_names:
        return 0
    rows = normalize_table(rows)
    made = positions(rows, key, {part: parts[part] for part in files})
    if made is None:
        return 0
    held = 0
    for part, file in files.items():
        if _agrees(file, made[part]):
            _hold_index(file, made[part])
            held += 1
    return held


def _agrees(file: Footer, made: KeyIndex) -> bool:
    """Whether ``file``'s footer agrees with ``made``, the rows written to it: as many rows,
    and the same min and max of the key over the file."""
    stats = file.stats(made.key)
    if sum(file.rows) != made.row_count or any(s is None for s in stats):
        return False
    return not len(made.keys) or (int(made.keys[0]), int(made.keys[-1])) == (min(s[0] for s in stats), max(s[1] for s in stats))


def _keep(key: tuple[Stamp, int | str], table: pa.Table | KeyIndex, *, replace: bool = False) -> None:
    """Hold ``table`` under ``key`` (``replace``: instead of what is held there)."""
    _groups.put(key, table, over=lambda _: replace)


def held_bytes() -> int:
    """Bytes of decoded row groups and indexed files held now (tests, statistics)."""
    return _groups.total()


def clear() -> None:
    """Forget everything (tests that compare a cold read with a warm one)."""
    _footers.clear()
    _groups.clear()
