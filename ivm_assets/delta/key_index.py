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

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def indexable(key_type: pa.DataType) -> bool:
    """Whether a key column of ``key_type`` can be indexed here (see the module doc)."""
    return pa.types.is_signed_integer(key_type)


@dataclass(frozen=True)
class KeyIndex:
    """``rows`` (one chunk) and their non-NULL ``key`` values ascending in ``keys``; ``at``
    the row of each entry of ``keys`` (None: the rows' own order, no NULL keys), ``nulls``
    the rows whose key is NULL."""

    rows: pa.Table
    key: str
    keys: np.ndarray
    at: np.ndarray | None
    nulls: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.rows.nbytes + self.keys.nbytes + (self.at.nbytes if self.at is not None else 0) + self.nulls.nbytes

    def with_rows(self, rows: pa.Table) -> KeyIndex:
        """The same index over ``rows``: the same rows in the same order, conformed to
        another schema (see :func:`~ivm_assets.delta.parquet_cache.conformed`)."""
        return KeyIndex(rows, self.key, self.keys, self.at, self.nulls)

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
        return self.rows.take(np.sort(rows))


def index(rows: pa.Table, key: str) -> KeyIndex | None:
    """``rows`` indexed by ``key``; None when its type is not :func:`indexable`."""
    column = rows.column(key)
    if not indexable(column.type):
        return None
    rows = rows.combine_chunks()
    column = rows.column(key)
    values = pc.fill_null(column, 0).to_numpy().astype(np.int64, copy=False)
    at: np.ndarray | None = None
    nulls = np.empty(0, np.int64)
    if column.null_count:
        null = column.is_null().to_numpy(zero_copy_only=False)
        nulls = np.flatnonzero(null)
        at = np.flatnonzero(~null)
        values = values[at]
    if len(values) > 1 and bool(np.any(values[1:] < values[:-1])):
        order = np.argsort(values, kind="stable")
        values = values[order]
        at = order if at is None else at[order]
    return KeyIndex(rows, key, values, at, nulls)

