"""Column names of the z-set conventions every layer shares.

A z-set is a table of rows plus an integer weight: +n for n copies inserted, −n for n
copies deleted. Changes, state tables and their reads all carry it under one name; state
tables also carry the bucket a row's key hashes to, and "latest" state the epoch that
wrote each row. Nothing here knows how the rows are stored.

Two equalities of rows matter, and both treat NULL as equal to NULL:

- *keys* are equal as Spark's joins and GROUP BY compare them: in DOUBLE and FLOAT columns
  −0.0 equals 0.0 and every NaN every NaN. :func:`normal_floats` brings float values to one
  representative each (0.0, the canonical NaN), after which that equality is equality bit
  for bit, the one Arrow's hashing and ``is_in`` use;
- *rows* of a z-set are the same row when they are equal bit for bit but for a NaN's bits:
  −0.0 and 0.0 are different rows, because a value's sign shows in Spark's answer
  (``CAST(x AS STRING)`` is '-0.0') and a projection keeps it. :func:`normal_nans` brings
  every NaN to the canonical one and keeps the sign of a zero.

:func:`value_runs` finds each bucket's rows in rows sorted by bucket, as appends and
lookups hold them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

WEIGHT = "__w"
# The hash bucket of a state row's key (a state table's partition column).
BUCKET = "__bucket"
# The refresh epoch that wrote a row of a state table keeping only each key's latest row.
EPOCH = "__epoch"


def normal_floats(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``values`` with −0.0 as 0.0 and every NaN as the canonical one (floating point; other
    types as they are): equal under Spark's rule is then equal bit for bit.

    >>> normal_floats(pa.array([-0.0, float("-nan"), None, 1.5])).to_pylist()
    [0.0, nan, None, 1.5]
    """
    if not pa.types.is_floating(values.type):
        return values
    zero, nan = pa.scalar(0.0, values.type), pa.scalar(float("nan"), values.type)
    values = pc.if_else(pc.equal(values, zero), zero, values)
    return pc.if_else(pc.is_nan(values), nan, values)


def normal_nans(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``values`` with every NaN as the canonical one and −0.0 as it is (floating point;
    other types as they are): the same z-set row is then the same bits.

    >>> [str(v) for v in normal_nans(pa.array([-0.0, float("-nan"), 0.0])).to_pylist()]
    ['-0.0', 'nan', '0.0']
    """
    if not pa.types.is_floating(values.type):
        return values
    return pc.if_else(pc.is_nan(values), pa.scalar(float("nan"), values.type), values)


def normal_rows(table: pa.Table, columns: tuple[str, ...] | list[str] | None = None) -> pa.Table:
    """``table`` with :func:`normal_floats` in ``columns`` (default: every column): keys."""
    return _normal_in(table, columns, normal_floats)


def normal_row_bits(table: pa.Table) -> pa.Table:
    """``table`` with :func:`normal_nans` in every column: z-set rows."""
    return _normal_in(table, None, normal_nans)


def _normal_in(table: pa.Table, columns, normal) -> pa.Table:
    for i, field in enumerate(table.schema):
        if pa.types.is_floating(field.type) and (columns is None or field.name in columns):
            table = table.set_column(i, field, normal(table.column(i)))
    return table


def value_runs(column: pa.ChunkedArray) -> dict[str, tuple[int, int]]:
    """Where each value of an integer column lies in the rows (the value as text, as Delta
    records a partition's → (offset, length)), when every value lies in one run (rows sorted
    by it: a state append's or a lookup's keys by bucket); else, or for a column of another
    type or with NULLs, nothing (the caller filters). A slice per value costs nothing, where
    a filter per value cost ~0.1 ms each."""
    if not pa.types.is_integer(column.type) or column.null_count or len(column) == 0:
        return {}
    values = column.to_numpy()
    starts = np.concatenate([[0], np.flatnonzero(values[1:] != values[:-1]) + 1])
    # More runs than buckets may exist are rows in another order (a build's, in key order:
    # a run per row, which took 0.8 s to tell apart as text at TPC-H SF 1).
    if len(starts) > _MOST_RUNS or len(np.unique(values[starts])) != len(starts):
        return {}
    ends = [*starts[1:].tolist(), len(values)]
    return {str(int(values[s])): (int(s), e - int(s)) for s, e in zip(starts, ends)}


# The most runs value_runs looks at: the most buckets a state table may have, and then some.
_MOST_RUNS = 1 << 16
