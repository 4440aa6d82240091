"""A source's change between two versions, read once per process for every view that reads it.

Views are refreshed one after another after a source commit: a Dagster run materializing
several views, ``ivm refresh``, the sensor's run, a loop. Each read the same range of the
same source: at TPC-H SF 1 a 0.1 % batch's change of lineitem and orders took ~5 ms a view
to read back (delta-rs' change feed, decoded into Arrow), every view.

A range of a Delta table never changes: what versions (after, upto] hold is fixed once
``upto`` is committed. So the rows read are kept, under the table's location, the range and
the identity of the commit file of ``upto`` (a table deleted and created again under the same
path has other commit files, see :func:`~ivm_assets.delta.handles.commit_file_identity`), and
a later read of the same range takes the columns it asks for from them. A read asking for a
column not read before reads the range again, with every column, and keeps that. Kept as
read: not netted, which depends on the columns a view reads
(:func:`ivm_assets.engine.changes.read_range` nets its own).

Small ranges only (an epoch's change read in process is small by nature): up to
``_KEPT_BYTES`` in all, least recently used first out; a range over a quarter of it is not
kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ivm_assets.delta import io_counts
from ivm_assets.delta.handles import commit_file_identity
from ivm_assets.delta.read import read_changes
from ivm_assets.recent import Recent
from ivm_assets.zset import WEIGHT

_KEPT_BYTES = 128 << 20


@dataclass(frozen=True)
class _Read:
    identity: tuple
    every: bool  # every column of the source was read
    rows: pa.Table

    def serves(self, columns: list[str] | None) -> bool:
        if columns is None:
            return self.every
        return set(columns) <= set(self.rows.column_names) - {WEIGHT}  # else a read names what is missing


_kept: Recent[tuple[str, int, int], _Read] = Recent(_KEPT_BYTES, size=lambda read: read.rows.nbytes)


def read_range(uri: str, *, after: int, upto: int, columns: list[str] | None = None) -> pa.Table:
    """:func:`~ivm_assets.delta.read.read_changes` of (after, upto] with ``columns`` (all
    when None), taken from the rows an earlier read of the range kept when they hold them."""
    key = (uri, after, upto)
    identity = commit_file_identity(uri, upto)
    found = _kept.get(key)
    same = found is not None and identity is not None and found.identity == identity
    if same and found.serves(columns):
        return _selected(found.rows, columns)
    # A second reader wanting other columns says that several views read this range: the
    # rest of them take theirs from one read of every column (at SF 1, 12.8 ms for
    # lineitem's 16 columns against 11.5 ms for 4). A column missing from every column is
    # asked for by name, so the read fails naming it, as it would without these rows.
    wanted = None if columns is None or (same and not found.every) else list(columns)
    io_counts.add("change_reads")
    rows = read_changes(uri, after=after, upto=upto, columns=wanted)
    if identity is not None and 4 * rows.nbytes <= _KEPT_BYTES:
        _kept.put(key, _Read(identity, wanted is None, rows))
    return _selected(rows, columns)


def _selected(rows: pa.Table, columns: list[str] | None) -> pa.Table:
    return rows if columns is None else rows.select([*columns, WEIGHT])


def clear() -> None:
    """Forget every range read (tests that compare a first read with a later one)."""
    _kept.clear()
