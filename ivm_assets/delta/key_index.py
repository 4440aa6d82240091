"""A whole file's rows held with its integer key column sorted beside them, so a lookup
finds the rows of its keys by binary search instead of matching every row of every row
group its keys touch.

Scattered keys (1,500 random orders at TPC-H SF 1) touch nearly every row group of a large
state table: a lookup by row group then matched 0.3–0.8 M rows per view to find a few
thousand, and paid pyarrow's per-call cost on each of hundreds of groups, every refresh. An
index answers the same lookup with two ``searchsorted`` over the file's keys and one
``take`` of the rows found: its cost follows the keys wanted, not the rows their groups hold.

Only for signed integer keys, whose order numpy and Spark agree on; other keys are looked up
by row group (:mod:`~ivm_assets.delta.row_groups`). A file need not be sorted by its key
(files are written sorted, but nothing here relies on it): unsorted keys are sorted once,
with the row each came from.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def indexable(key_type: pa.DataType) -> bool:
    """Whether a key column of ``key_type`` can be indexed here (see the module doc)."""
    return pa.types.is_signed_integer(key_type)


class SharedRows:
    """Rows the indexes of several files point into (one write's, see :func:`positions`),
    joined into one chunk by the first lookup that reads them: Arrow's take of a table of
    many chunks joins them at every call (a build's 6 M rows come from DuckDB as ~50 chunks:
    37 ms a take, against 0.4 ms over one chunk), and joining them in the build cost Q5's
    0.46 s for its lineitem side alone."""

    def __init__(self, rows: pa.Table) -> None:
        self._rows = rows
        self._lock = threading.Lock()

    @property
    def current(self) -> pa.Table:
        """The rows as they are now (their schema and size, without joining them)."""
        return self._rows

    def one_chunk(self) -> pa.Table:
        with self._lock:
            if any(column.num_chunks > 1 for column in self._rows.columns):
                self._rows = self._rows.combine_chunks()
            return self._rows


@dataclass(frozen=True)
class KeyIndex:
    """``rows`` and their non-NULL ``key`` values ascending in ``keys``; ``at`` the row of
    each entry of ``keys`` (None: the rows' own order, no NULL keys), ``nulls`` the rows whose
    key is NULL.

    A file's index may point into rows it shares with the other files of one write
    (``source`` a :class:`SharedRows`, from :func:`positions`): ``at`` and ``nulls`` then
    name its own rows among them, and ``share`` is the part of their bytes it stands for."""

    source: pa.Table | SharedRows
    key: str
    keys: np.ndarray
    at: np.ndarray | None
    nulls: np.ndarray
    share: float = 1.0

    @property
    def rows(self) -> pa.Table:
        return self.source.current if isinstance(self.source, SharedRows) else self.source

    @property
    def nbytes(self) -> int:
        arrays = self.keys.nbytes + (self.at.nbytes if self.at is not None else 0) + self.nulls.nbytes
        return int(self.rows.nbytes * self.share) + arrays

    @property
    def row_count(self) -> int:
        return len(self.keys) + len(self.nulls)

    def with_rows(self, rows: pa.Table) -> KeyIndex:
        """The same index over ``rows``: the same rows in the same order, conformed to
        another schema (see :func:`~ivm_assets.delta.parquet_cache.conformed`)."""
        return KeyIndex(rows, self.key, self.keys, self.at, self.nulls, self.share)

    def own(self) -> KeyIndex:
        """This index over a copy of just its own rows (in their order among the shared
        ones), for a change that would otherwise copy every shared row."""
        if not isinstance(self.source, SharedRows):
            return self
        mine = np.sort(np.concatenate([self.at if self.at is not None else np.empty(0, np.int64), self.nulls]))
        at = np.searchsorted(mine, self.at) if self.at is not None else None
        return KeyIndex(self.source.one_chunk().take(mine), self.key, self.keys, at, np.searchsorted(mine, self.nulls))

    def lookup(self, wanted: np.ndarray, keep_nulls: bool) -> pa.Table:
        """The rows whose key is in ``wanted`` (int64, ascending, distinct), and those whose
        key is NULL with ``keep_nulls``, in the file's order."""
        low = np.searchsorted(self.keys, wanted, "left")
        counts = np.searchsorted(self.keys, wanted, "right") - low
        total = int(counts.sum())
        # Entry positions low[i] .. low[i] + counts[i] - 1 for each wanted key, in one array.
        found = np.repeat(low - (np.cumsum(counts) - counts), counts) + np.arange(total)
        rows = self.at[found] if self.at is not None else found
        if keep_nulls and len(self.nulls):
            rows = np.concatenate([rows, self.nulls])
        if len(rows) == 0:
            return self.rows.slice(0, 0)
        table = self.source.one_chunk() if isinstance(self.source, SharedRows) else self.source
        return table.take(np.sort(rows))


def index(rows: pa.Table, key: str) -> KeyIndex | None:
    """``rows`` indexed by ``key``; None when its type is not :func:`indexable`."""
    if not indexable(rows.column(key).type):
        return None
    rows = rows.combine_chunks()
    values, null = _key_values(rows.column(key))
    keys, at, nulls = _entries(values, null, None)
    return KeyIndex(rows, key, keys, at, nulls)


def positions(rows: pa.Table, key: str, parts: dict[object, np.ndarray]) -> dict[object, KeyIndex] | None:
    """An index per part of ``rows`` (a write's rows, ``parts`` the ascending row numbers of
    each file's), all over ``rows`` itself: a build written in key order interleaves its
    partitions, and copying each file's rows out of it cost more than the build's join
    (TPC-H Q5 at SF 1: 2.9 s to hand 6 M rows to the cache as 133 files). None when the
    key's type is not :func:`indexable`."""
    if not indexable(rows.column(key).type):
        return None
    values, null = _key_values(rows.column(key))
    shared = SharedRows(rows)
    share = 1 / max(rows.num_rows, 1)
    return {part: KeyIndex(shared, key, *_entries(values, null, mine), len(mine) * share) for part, mine in parts.items()}


def _key_values(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | None]:
    """The key of every row as int64 (0 where NULL), and which rows' key is NULL (None: none)."""
    values = pc.fill_null(column, 0).to_numpy().astype(np.int64, copy=False)
    return values, column.is_null().to_numpy(zero_copy_only=False) if column.null_count else None


def _entries(values: np.ndarray, null: np.ndarray | None, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """For ``rows`` (ascending row numbers; every row when None): their non-NULL keys
    ascending, the row of each (None: every row, in its own order), and the rows whose key
    is NULL."""
    at, nulls = rows, np.empty(0, np.int64)
    if null is not None:
        picked = null if rows is None else null[rows]
        nulls = np.flatnonzero(picked) if rows is None else rows[picked]
        at = np.flatnonzero(~picked) if rows is None else rows[~picked]
    keys = values if at is None else values[at]
    if len(keys) > 1 and bool(np.any(keys[1:] < keys[:-1])):
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        at = order if at is None else at[order]
    return keys, at, nulls
