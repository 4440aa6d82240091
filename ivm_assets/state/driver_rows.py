"""State rows read on the driver, finished there: exact key match, netting and the latest
row per key, computed with pyarrow on the few rows a small epoch touches (consolidation, on
these codes too, is :func:`ivm_assets.state.consolidate.in_arrow`).

A state read on the driver enters the Spark plan as a local relation. Matching it to the
touched keys or consolidating it in Spark costs a shuffle (a stage) each, for a few thousand
rows; done here, the plan starts from rows that are already current.

Rows are compared through *codes*: each distinct tuple of values gets one int64 code, NULLs
included (NULL equals NULL, as Spark's null-safe match and GROUP BY have it). Floating point
is coded bit for bit: Spark treats −0.0 and 0.0, and all NaNs, as equal in joins and groups,
which their bits tell apart until :func:`~ivm_assets.zset.normal_floats` normalises them; key
matches and the latest row per key compare keys so normalised, while :func:`cancelled`
compares the bits on purpose. Nested types are not coded, nor keys of two different types
other than integers, or integers beside DOUBLEs (compared as DOUBLEs, as Spark does): for
those every function returns None and the caller does the work in Spark, as before.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.zset import normal_rows


def coded(t: pa.DataType) -> bool:
    """Whether :func:`tuple_codes` codes a column of type ``t`` (see the module doc)."""
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_null(t))


def tuple_codes(parts: list[tuple[pa.Table, tuple[str, ...]]]) -> list[pa.Array] | None:
    """One int64 code per row of each table, equal exactly where the rows' value tuples are.

    ``parts[i]`` is a table and the columns of it to compare (every part the same number;
    column j of each part compared with column j of the others). No columns: every row
    gets code 0. None when some column's type is not coded here (see the module doc).
    Floating point is compared as Arrow hashes it (−0.0 and 0.0 apart, a NaN equal to a NaN
    of the same bits): normalise first (:func:`~ivm_assets.zset.normal_rows`) to compare as
    Spark does.
    """
    sizes = [table.num_rows for table, _ in parts]
    width = len(parts[0][1])
    if width == 0:
        return [pa.array([0] * n, pa.int64()) for n in sizes]
    code: pa.Array | None = None
    for j in range(width):
        arrays = [_flat(table.column(names[j])) for table, names in parts]
        types = {a.type for a in arrays}
        if len(types) > 1:
            if all(pa.types.is_integer(t) for t in types):
                arrays = [a.cast(pa.int64()) for a in arrays]
            elif all(pa.types.is_integer(t) or pa.types.is_float64(t) for t in types):
                # Spark compares an integer with a DOUBLE as a DOUBLE: the integer rounded to
                # the nearest one, as Java's (double) cast and Arrow's unchecked cast round.
                arrays = [a.cast(pa.float64(), safe=False) for a in arrays]
            else:
                return None
        if not coded(arrays[0].type):
            return None
        encoded = pc.dictionary_encode(pa.concat_arrays(arrays), null_encoding="encode")
        column = encoded.indices.cast(pa.int64())
        if code is None:
            code = column
        else:
            # Both codes are below the row count: the pair fits in an int64, and re-coding it
            # keeps the next step's product small too.
            pair = pc.add(pc.multiply(code, len(encoded.dictionary)), column)
            code = pc.dictionary_encode(pair).indices.cast(pa.int64())
    out, start = [], 0
    for n in sizes:
        out.append(code.slice(start, n))
        start += n
    return out


def _flat(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def matching(rows: pa.Table, keys: tuple[str, ...], wanted: pa.Table, wanted_keys: tuple[str, ...]) -> pa.Table | None:
    """The rows of ``rows`` whose ``keys`` equal (NULL-safe) the ``wanted_keys`` of some row
    of ``wanted``; None when the key types are not compared here."""
    codes = tuple_codes([(normal_rows(rows, keys), keys), (normal_rows(wanted, wanted_keys), wanted_keys)])
    if codes is None:
        return None
    return rows.filter(pc.is_in(codes[0], value_set=codes[1]))


def sum_weights(rows: pa.Table, columns: tuple[str, ...], weight: str, codes: pa.Array) -> pa.Table:
    """``rows``' ``columns`` once per distinct code (the first row of it), with the sum of the
    code's ``weight``s, in the order of their first rows; codes whose sum is zero dropped.

    ``codes`` are :func:`tuple_codes`' (non-negative and below the row count), so the sums
    are numpy's unbuffered adds into an array indexed by code, exact in int64: 3–18 times
    faster than Arrow's hash aggregate from 1,500 to 6 M rows (``benchmarks/driver_kernels.py``)."""
    n = rows.num_rows
    code = np.asarray(codes.to_numpy(zero_copy_only=False), np.int64)
    sums = np.zeros(int(code.max()) + 1 if n else 0, np.int64)
    np.add.at(sums, code, np.asarray(rows.column(weight).to_numpy(), np.int64))
    first = np.full(len(sums), n, np.int64)
    np.minimum.at(first, code, np.arange(n, dtype=np.int64))
    live = np.flatnonzero(sums)
    live = live[np.argsort(first[live], kind="stable")]
    kept = rows.select(list(columns)).take(pa.array(first[live]))
    # Built from arrays: a table without columns has no rows to append a column to.
    field = rows.schema.field(weight)
    return pa.Table.from_arrays([*kept.columns, pa.array(sums[live]).cast(field.type)], schema=kept.schema.append(field))


def cancelled(rows: pa.Table, columns: tuple[str, ...], weight: str) -> pa.Table | None:
    """``rows`` with a row deleted and inserted again unchanged cancelled: the weights of
    bitwise identical rows that may cancel summed (floats compared bit for bit, as
    :func:`tuple_codes` does) and rows of weight zero dropped; None when some column type is
    not coded here. Rows that cannot cancel are left as they are (two identical insertions
    stay two rows: consolidation is the operators' business)."""
    if any(not coded(rows.schema.field(c).type) for c in columns):
        return None
    candidates = _may_cancel(rows, columns, weight)
    if not pc.any(candidates).as_py():
        return rows
    part = rows.filter(candidates)
    codes = tuple_codes([(part, columns)])
    if codes is None:
        return None
    netted = sum_weights(part, columns, weight, codes[0]).select(rows.column_names)
    return pa.concat_tables([rows.filter(pc.invert(candidates)), netted])


def _may_cancel(rows: pa.Table, columns: tuple[str, ...], weight: str) -> pa.Array:
    """A mask of the rows that may cancel: a deletion each of whose values also occurs in an
    insertion that is still a candidate, and the reverse, column after column. A bitwise
    identical pair passes every column, so the mask holds every row that cancels; hashing the
    few candidates instead of the whole change is what makes a change of inserts and deletes
    of different rows (a fact table's batch) cheap. Floating point columns are skipped: a
    membership test compares their values, not their bits."""
    weights = rows.column(weight)
    negative, positive = pc.less(weights, 0), pc.greater(weights, 0)
    candidates = pc.or_(negative, positive)
    for name in columns:
        values = rows.column(name)
        if pa.types.is_floating(values.type):
            continue
        deleted = values.filter(pc.and_(candidates, negative))
        inserted = values.filter(pc.and_(candidates, positive))
        candidates = pc.and_(candidates, pc.or_(
            pc.and_(negative, pc.is_in(values, value_set=_flat(inserted), skip_nulls=False)),
            pc.and_(positive, pc.is_in(values, value_set=_flat(deleted), skip_nulls=False)),
        ))
        if not pc.any(candidates).as_py():
            break
    return _flat(candidates)


def latest(rows: pa.Table, keys: tuple[str, ...], epoch: str) -> pa.Table | None:
    """Per distinct ``keys`` tuple, its row of the highest ``epoch``; None when some key type
    is not compared here."""
    codes = tuple_codes([(normal_rows(rows, keys), keys)])
    if codes is None:
        return None
    if rows.num_rows == 0:
        return rows
    order = pc.sort_indices(
        pa.table({"code": codes[0], "epoch": rows.column(epoch)}),
        sort_keys=[("code", "ascending"), ("epoch", "descending")],
    )
    sorted_codes = codes[0].take(order)
    starts = pc.not_equal(sorted_codes.slice(1), sorted_codes.slice(0, len(sorted_codes) - 1))
    first = pa.concat_arrays([pa.array([True]), starts])
    return rows.take(order.filter(first))
