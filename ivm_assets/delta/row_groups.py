"""Selective reads on the driver: the row groups of a snapshot's files that may hold
wanted keys (chosen from the parquet footers' statistics), read by pyarrow; or, for a file
held indexed by its integer key (:mod:`~ivm_assets.delta.key_index`), its rows of those
keys found by binary search.

For small, selective reads: no Spark job, no Spark file index.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.delta import parquet_cache
from ivm_assets.delta.key_index import KeyIndex, indexable
from ivm_assets.delta.snapshot import SnapshotFiles, file_key, normalize_schema_of, partition_values
from ivm_assets.spark.arrow import empty_table
from ivm_assets.zset import normal_floats


@dataclass
class ReadCost:
    """What :func:`read_files_arrow` read: row groups, their rows and compressed bytes, and
    how many of those groups were decoded from disk (the others were in the parquet cache);
    files looked up through their key index (``indexed``), whose rows found count in
    ``rows`` (no row group is read for them)."""

    row_groups: int = 0
    rows: int = 0
    bytes: int = 0
    decoded: int = 0
    indexed: int = 0


@dataclass
class RowGroups:
    """The row groups a driver read will decode (chosen by :func:`select_row_groups`), and
    their compressed bytes, known from the footers before anything is decoded (what the
    read costs is counted as it is made: :class:`ReadCost`)."""

    schema: pa.Schema  # the table's columns, partition columns left out
    key: str | None
    present: pa.Array | None  # the wanted non-NULL key values (None: every row)
    keep_nulls: bool
    groups: list[tuple[parquet_cache.Footer, int]]
    bytes: int = 0
    # Files held indexed by ``key``, each with the keys wanted in it (int64, ascending) and
    # whether its NULL keys are; and those keys for each file whose groups were chosen.
    indexed: list[tuple[KeyIndex, np.ndarray, bool]] = field(default_factory=list)
    wanted_in: dict[parquet_cache.Stamp, tuple[np.ndarray, bool]] = field(default_factory=dict)


def select_row_groups(
    snap: SnapshotFiles,
    *,
    key: str | None = None,
    values: pa.Array | pa.ChunkedArray | Mapping[str, pa.Array] | None = None,
    partition: str | None = None,
) -> RowGroups:
    """The row groups of ``snap``'s files that may hold rows whose ``key`` is in ``values``
    (a NULL in ``values`` wants NULL keys); every row group without ``key``.

    With ``partition``, ``values`` maps that partition column's values (as text) to the key
    values wanted in their files: keys hashed to a bucket are looked for in that bucket's
    files only, so scattered keys cost one row group each, not one per file. Only footers
    are read: a row group whose min/max statistics exclude every wanted value is left out,
    so the choice follows the number of wanted keys, not the size of the files.
    """
    partitions = set(snap.table.metadata().partition_columns)
    schema = pa.schema([f for f in normalize_schema_of(snap.table) if f.name not in partitions])
    if key is None or values is None:
        chosen = RowGroups(schema, None, None, False, [])
        for path, size in zip(snap.files, snap.sizes):
            file = parquet_cache.footer(file_key(path), size)
            for group in range(len(file.rows)):
                _choose(chosen, file, group)
        return chosen
    by_part = dict(values) if partition is not None else {None: values}
    key_type = schema.field(key).type
    by_index = indexable(key_type)
    # Per partition: the wanted values sorted (NaN left out: it does not order, and parquet's
    # statistics need not cover it), whether NULL keys are wanted, whether NaN is, and for a
    # key index the sorted values as int64.
    wanted: dict[str | None, tuple[list, bool, bool, np.ndarray | None]] = {}
    present: list = []
    for part, vals in by_part.items():
        vals = normal_floats(pc.unique(pa.array(pc.drop_null(vals).to_pylist(), key_type)))
        nan = pa.types.is_floating(key_type) and pc.any(pc.is_nan(vals)).as_py()
        ordered = (pc.filter(vals, pc.invert(pc.is_nan(vals))) if nan else vals).sort().to_pylist()
        wanted[part] = (ordered, by_part[part].null_count > 0, bool(nan), np.array(ordered, np.int64) if by_index else None)
        present.extend(vals.to_pylist())
    keep_nulls = any(w[1] for w in wanted.values())
    chosen = RowGroups(schema, key, pc.unique(pa.array(present, key_type)), keep_nulls, [])
    file_parts = partition_values(snap.table, partition) if partition is not None else {}
    # For a file whose partition is not known.
    every_sorted = sorted({v for w in wanted.values() for v in w[0]})
    every = (every_sorted, keep_nulls, any(w[2] for w in wanted.values()), np.array(every_sorted, np.int64) if by_index else None)
    for path, size in zip(snap.files, snap.sizes):
        location = file_key(path)
        if partition is None:
            wanted_sorted, nulls, nan, keys = wanted[None]
        elif location not in file_parts:
            wanted_sorted, nulls, nan, keys = every
        elif file_parts[location] not in wanted:
            continue  # a partition none of the keys belongs to
        else:
            wanted_sorted, nulls, nan, keys = wanted[file_parts[location]]
        file = parquet_cache.footer(location, size)
        if keys is not None:
            if (held := parquet_cache.held_index(file, key, schema)) is not None:
                chosen.indexed.append((held, keys, nulls))
                continue
            chosen.wanted_in[file.stamp] = (keys, nulls)
        for group, stats in enumerate(file.stats(key)):
            if nan or not stats_exclude(stats, wanted_sorted, nulls):
                _choose(chosen, file, group)
    return chosen


def _choose(chosen: RowGroups, file: parquet_cache.Footer, group: int) -> None:
    chosen.groups.append((file, group))
    chosen.bytes += file.bytes[group]


def read_row_groups(chosen: RowGroups, *, cost: ReadCost | None = None, keep: bool = True) -> pa.Table:
    """The rows of the ``chosen`` row groups, read on the driver by pyarrow (or taken from
    :mod:`~ivm_assets.delta.parquet_cache`), limited to the wanted keys. Each file is read as
    it is and cast to the table's schema (files written at different times may hold
    string_view or string). ``cost``, when given, is added what was looked at; ``keep``:
    whether decoded row groups stay in the cache."""
    by_file: dict[parquet_cache.Stamp, tuple[parquet_cache.Footer, list[int]]] = {}
    for file, group in chosen.groups:
        by_file.setdefault(file.stamp, (file, []))[1].append(group)
    parts, indexed = [empty_table(chosen.schema)], list(chosen.indexed)
    decoded = 0
    for file, groups in by_file.values():
        if keep and file.stamp in chosen.wanted_in:
            held, decoded_now = parquet_cache.whole_file(file, groups, chosen.schema, chosen.key)
            decoded += decoded_now
            if held is not None:
                indexed.append((held, *chosen.wanted_in[file.stamp]))
                continue
        tables, decoded_now = parquet_cache.row_groups(file, groups, chosen.schema, keep=keep)
        decoded += decoded_now
        parts.extend(tables)
        if cost is not None:
            cost.row_groups += len(groups)
            cost.rows += sum(file.rows[g] for g in groups)
            cost.bytes += sum(file.bytes[g] for g in groups)
    rows = pa.concat_tables(parts)
    if chosen.present is not None:
        wanted = pc.is_in(normal_floats(rows.column(chosen.key)), value_set=chosen.present)
        if chosen.keep_nulls:
            wanted = pc.or_kleene(wanted, pc.is_null(rows.column(chosen.key)))
        rows = rows.filter(wanted)
    if indexed:
        found = [held.lookup(keys, nulls) for held, keys, nulls in indexed]
        rows = pa.concat_tables([rows, *found])
        if cost is not None:
            cost.indexed += len(indexed)
            cost.rows += sum(f.num_rows for f in found)
    if cost is not None:
        cost.decoded += decoded
    return rows.combine_chunks()


def read_files_arrow(
    snap: SnapshotFiles,
    *,
    key: str | None = None,
    values: pa.Array | pa.ChunkedArray | None = None,
    cost: ReadCost | None = None,
) -> pa.Table:
    """The rows of ``snap``'s files, read on the driver by pyarrow, without partition columns;
    with ``key``, only rows whose ``key`` is in ``values`` (a NULL in ``values`` keeps NULL keys).

    For small, selective reads: no Spark job, no Spark file index (see
    :func:`select_row_groups` and :func:`read_row_groups`).
    """
    return read_row_groups(select_row_groups(snap, key=key, values=values), cost=cost)


def stats_exclude(stats: tuple[object, object, int | None] | None, wanted: list, keep_nulls: bool) -> bool:
    """Whether a row group's key statistics (min, max, null count) prove none of its rows
    has a key among ``wanted`` (sorted; or, with ``keep_nulls``, a NULL key).

    Each wanted key is placed among the group's [min, max] by bisection, so keys scattered
    over the whole range (random orders deleted, random customers updated) still skip every
    row group that holds none of them; state rows are sorted by key within a file.
    """
    if stats is None:
        return False
    low, high, null_count = stats
    if keep_nulls and (null_count is None or null_count > 0):
        return False
    if not wanted:
        return True  # only NULLs wanted, and none here
    try:
        first = bisect.bisect_left(wanted, low)
        return first == len(wanted) or wanted[first] > high
    except TypeError:  # statistics of a type the values do not compare with
        return False
