"""The driver's mirror of Spark's hash() agrees with Spark on every type state keys use."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from ivm_assets.render.duckdb.spark_hash import buckets, spark_hash
from ivm_assets.spark.arrow import to_spark

_STRINGS = ["", "a", "ab", "abc", "abcd", "abcde", "héllo wörld", "日本語のテキスト", "x" * 37, None]
COLUMNS = {
    "b": pa.array([True, False, None, True, False, True, None, False, True, True], pa.bool_()),
    "i8": pa.array([0, 1, -1, 127, -128, 5, None, 3, 2, 9], pa.int8()),
    "i16": pa.array([0, 1, -1, 32767, -32768, 5, None, 3, 2, 9], pa.int16()),
    "i32": pa.array([0, 1, -1, 2**31 - 1, -(2**31), 42, None, 7, 1000, -5], pa.int32()),
    "i64": pa.array([0, 1, -1, 2**63 - 1, -(2**63), 42, None, 2**40, -(2**35), 99], pa.int64()),
    "f64": pa.array([0.0, -0.0, 1.5, -2.25, float("nan"), 1e300, None, 3.0, float("inf"), -1e-300], pa.float64()),
    "d": pa.array([dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(2024, 2, 29), None] + [dt.date(1995, 3, 15)] * 6, pa.date32()),
    "ts": pa.array([dt.datetime(2020, 1, 1, 12, 30, 1, 5), None] + [dt.datetime(1960, 5, 1)] * 8, pa.timestamp("us", tz="UTC")),
    "dec": pa.array([Decimal("0.00"), Decimal("-1.05"), Decimal("12345.67"), None, Decimal("-99999999.99")] + [Decimal("0.01")] * 5, pa.decimal128(10, 2)),
    "wide": pa.array([Decimal("0"), Decimal("-1"), Decimal("128"), Decimal("-129"), None, Decimal("123456789012345678901234.5678"), Decimal("-0.0001"), Decimal("255"), Decimal("-256"), Decimal("32768")], pa.decimal128(30, 4)),
    "s": pa.array(_STRINGS, pa.string()),
}


@pytest.mark.parametrize("name", list(COLUMNS))
def test_one_column_hashes_as_in_spark(spark, name):
    table = pa.table({name: COLUMNS[name]})
    theirs = [r[0] for r in to_spark(spark, table).select(F.hash(F.col(name))).collect()]
    assert spark_hash([table.column(name)]).tolist() == theirs


def test_columns_chain_and_buckets_match_spark(spark):
    table = pa.table(COLUMNS)
    names = ["i64", "s", "dec", "d", "b"]
    rows = to_spark(spark, table).select(F.hash(*names), F.pmod(F.hash(*names), F.lit(16))).collect()
    assert spark_hash([table.column(n) for n in names]).tolist() == [r[0] for r in rows]
    assert buckets([table.column(n) for n in names], 16).to_pylist() == [r[1] for r in rows]


def test_unmirrored_types_are_refused():
    assert spark_hash([pa.array([[1]], pa.list_(pa.int64()))]) is None
    assert spark_hash([pa.array([1.5], pa.float32())]) is None


def test_keys_hashed_as_double_match_spark_casts(spark):
    """Numbers of two kinds joined are hashed as DOUBLE: the driver's cast must be Spark's."""
    from ivm_assets.render.duckdb.spark_hash import as_double

    table = pa.table({"dec": COLUMNS["dec"], "i64": COLUMNS["i64"], "i32": COLUMNS["i32"], "tiny": pa.array([Decimal("0.07"), Decimal("-0.3"), Decimal("1e-2"), None] * 2 + [Decimal("9999999.99")] * 2, pa.decimal128(9, 2))})
    names = list(table.column_names)
    theirs = to_spark(spark, table).select(*[F.hash(F.col(n).cast("double")) for n in names]).collect()
    for i, name in enumerate(names):
        assert spark_hash([as_double(table.column(name))]).tolist() == [r[i] for r in theirs], name
    assert as_double(pa.array([Decimal("12345678901234.5678")], pa.decimal128(18, 4))) is None  # unscaled ≥ 2^53


def test_sliced_and_long_strings_and_decimals_hash_as_in_spark(spark):
    # Arrow slices (offsets into shared buffers) and strings far longer than a word.
    words = [("ç%d" % i) * (i % 23) + "é" * (i % 5) for i in range(200)]
    table = pa.table({
        "s": pa.array([w if i % 7 else None for i, w in enumerate(words)], pa.string()),
        "dec": pa.array([Decimal(i * 37 - 3000) / 100 if i % 11 else None for i in range(200)], pa.decimal128(15, 2)),
    }).slice(13, 150)
    theirs = [r[0] for r in to_spark(spark, table).select(F.hash("s", "dec")).collect()]
    assert spark_hash([table.column("s").combine_chunks(), table.column("dec").combine_chunks()]).tolist() == theirs
    sliced = [table.column(n).chunk(0) for n in ("s", "dec")]  # a slice of the original buffers, offset 13
    assert sliced[0].offset == 13 and spark_hash(sliced).tolist() == theirs
