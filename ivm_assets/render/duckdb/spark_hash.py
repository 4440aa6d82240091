"""Spark's ``hash()`` (Murmur3 x86 32-bit, seed 42) computed on the driver over Arrow columns.

State tables are bucketed by ``pmod(hash(keys), buckets)`` as Spark computes it
(:func:`ivm_assets.state.layout.with_bucket`). An epoch computed in process must put its
rows in, and look its keys up from, the very buckets Spark would: this module mirrors
Spark's ``Murmur3HashFunction`` for the key types state tables use, and says so (None) for
the others, which keeps such epochs in Spark. The test compares it with Spark on every
supported type, NULLs, negative numbers, strings of every length modulo 4 and non-ASCII text.

What Spark hashes per type: BOOLEAN, TINYINT, SMALLINT, INT and DATE as an int; BIGINT and
TIMESTAMP as a long; DECIMAL of precision ≤ 18 as its unscaled long, wider ones as the bytes
of the unscaled value (two's complement, big-endian, shortest); DOUBLE as the bits of the
value (−0.0 as 0.0, every NaN as the canonical one); STRING and BINARY by their bytes, the
tail bytes one by one (Spark's legacy ``hashUnsafeBytes``). A NULL leaves the running hash as
it was; several columns chain, each one's hash the seed of the next.
"""

from __future__ import annotations

import struct
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEED = 42
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k1: np.ndarray) -> np.ndarray:
    return _rotl(k1 * _C1, 15) * _C2


def _mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    return _rotl(h1 ^ k1, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix(h1: np.ndarray, length: int | np.ndarray) -> np.ndarray:
    h1 = h1 ^ np.asarray(length, dtype=np.uint32)
    h1 = h1 ^ (h1 >> np.uint32(16))
    h1 = h1 * np.uint32(0x85EBCA6B)
    h1 = h1 ^ (h1 >> np.uint32(13))
    h1 = h1 * np.uint32(0xC2B2AE35)
    return h1 ^ (h1 >> np.uint32(16))


def _hash_int(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    return _fmix(_mix_h1(seed, _mix_k1(values.astype(np.int32).view(np.uint32))), 4)


def _hash_long(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    bits = values.astype(np.int64).view(np.uint64)
    low, high = (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32), (bits >> np.uint64(32)).astype(np.uint32)
    return _fmix(_mix_h1(_mix_h1(seed, _mix_k1(low)), _mix_k1(high)), 8)


def _hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``hashUnsafeBytes``: whole little-endian ints, then each tail byte (signed)."""
    with np.errstate(over="ignore"):
        h1 = np.uint32(seed)
        aligned = len(data) - len(data) % 4
        for (word,) in struct.iter_unpack("<I", data[:aligned]):
            h1 = _mix_h1(h1, _mix_k1(np.uint32(word)))
        for byte in data[aligned:]:
            h1 = _mix_h1(h1, _mix_k1(np.uint32((byte - 256 if byte > 127 else byte) & 0xFFFFFFFF)))
        return int(_fmix(h1, len(data)))


def _unscaled_bytes(value: Decimal) -> bytes:
    """Java's ``BigInteger.toByteArray`` of the unscaled value: shortest two's complement."""
    unscaled = int(value.scaleb(-value.as_tuple().exponent))
    return unscaled.to_bytes((unscaled + (unscaled < 0)).bit_length() // 8 + 1, "big", signed=True)


def _unscaled_longs(values: pa.Array) -> np.ndarray:
    """The unscaled values of a DECIMAL of precision ≤ 18 as int64, straight from Arrow's
    16-byte little-endian two's complement slots (the low 8 bytes hold the whole value)."""
    slots = np.frombuffer(values.buffers()[1], dtype=np.int64)
    return slots[2 * values.offset : 2 * (values.offset + len(values)) : 2]


def _hash_byte_strings(values: pa.Array, seed: np.ndarray) -> np.ndarray:
    """:func:`_hash_bytes` of every row at once: the rows' aligned words mixed in step, one
    word index at a time, then their tail bytes (signed, one by one), then each row's length."""
    values = values.cast(pa.large_binary())
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset : values.offset + len(values) + 1]
    data = values.buffers()[2]
    padded = np.concatenate([np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8), np.zeros(4, np.uint8)])
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    words, h1 = lengths // 4, seed.copy()
    for j in range(int(words.max(initial=0))):
        rows = np.nonzero(words > j)[0]
        at = starts[rows] + 4 * j
        word = padded[at].astype(np.uint32) | padded[at + 1].astype(np.uint32) << np.uint32(8)
        word |= padded[at + 2].astype(np.uint32) << np.uint32(16) | padded[at + 3].astype(np.uint32) << np.uint32(24)
        h1[rows] = _mix_h1(h1[rows], _mix_k1(word))
    for j in range(3):
        rows = np.nonzero(lengths % 4 > j)[0]
        byte = padded[starts[rows] + 4 * words[rows] + j].view(np.int8).astype(np.int32).view(np.uint32)
        h1[rows] = _mix_h1(h1[rows], _mix_k1(byte))
    return _fmix(h1, lengths.astype(np.uint32))


def _column_hash(values: pa.Array, seed: np.ndarray) -> np.ndarray | None:
    """Each row's hash of ``values`` seeded by ``seed`` (NULL rows keep their seed); None
    for a type not mirrored here."""
    t = values.type
    valid = ~np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_boolean(t) or pa.types.is_integer(t) and t.bit_width <= 32 or pa.types.is_date32(t):
        ints = pc.fill_null(values.cast(pa.int32()), 0).to_numpy(zero_copy_only=False)
        hashed = _hash_int(ints, seed)
    elif pa.types.is_integer(t) and t.bit_width == 64 and pa.types.is_signed_integer(t):
        hashed = _hash_long(pc.fill_null(values, 0).to_numpy(zero_copy_only=False), seed)
    elif pa.types.is_timestamp(t) and t.unit == "us":
        hashed = _hash_long(pc.fill_null(values.cast(pa.int64()), 0).to_numpy(zero_copy_only=False), seed)
    elif pa.types.is_float64(t):
        doubles = pc.fill_null(values, 0.0).to_numpy(zero_copy_only=False).copy()
        doubles[doubles == 0.0] = 0.0  # −0.0 hashes as 0.0
        doubles[np.isnan(doubles)] = np.nan  # one NaN
        hashed = _hash_long(doubles.view(np.int64), seed)
    elif pa.types.is_decimal128(t) and t.precision <= 18:
        hashed = _hash_long(_unscaled_longs(values), seed)
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        hashed = _hash_byte_strings(values, seed)
    elif pa.types.is_decimal128(t):
        hashed = np.array(
            [_hash_bytes(_unscaled_bytes(v), int(s)) if v is not None else int(s) for v, s in zip(values.to_pylist(), seed)],
            dtype=np.uint32,
        )
    else:
        return None
    return np.where(valid, hashed, seed)


def as_double(values: pa.Array | pa.ChunkedArray) -> pa.Array | None:
    """``CAST(values AS DOUBLE)`` as Spark computes it, for keys hashed as DOUBLE (numbers of
    two kinds joined); None where the mirror could differ.

    Integers and doubles convert as in Java. A DECIMAL of up to 18 digits is Spark's
    ``unscaled / 10^scale`` in doubles, which equals the correctly rounded value (Python's
    ``float(Decimal)``) while the unscaled value is below 2^53; beyond, Spark rounds twice,
    and wider DECIMALs go through ``BigDecimal.doubleValue``: both left to Spark.
    """
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    t = values.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return values.cast(pa.float64(), safe=False)  # rounded to nearest, as Java's (double) long
    if not (pa.types.is_decimal128(t) and t.precision <= 18):
        return None
    unscaled = _unscaled_longs(values)
    valid = ~np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if np.any(np.abs(unscaled[valid]) >= 2**53):
        return None
    # Both operands are exact doubles (10^scale is, up to 10^22), so IEEE division gives
    # the correctly rounded quotient: Spark's value.
    return pa.array(unscaled.astype(np.float64) / 10.0**t.scale, pa.float64(), mask=~valid)


def spark_hash(columns: list[pa.Array]) -> np.ndarray | None:
    """``hash(c1, c2, …)`` per row as Spark computes it (int32), or None when some column's
    type is not mirrored here (see the module doc)."""
    rows = len(columns[0]) if columns else 0
    hashed = np.full(rows, SEED, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for values in columns:
            values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
            hashed = _column_hash(values, hashed)
            if hashed is None:
                return None
    return hashed.view(np.int32)


def buckets(columns: list[pa.Array], count: int) -> pa.Array | None:
    """``pmod(hash(columns), count)`` per row as an int32 array, or None when a column's
    type is not mirrored here."""
    hashed = spark_hash(columns)
    if hashed is None:
        return None
    return pa.array(np.mod(hashed.astype(np.int64), count).astype(np.int32))
