"""Casts computed in process (:mod:`ivm_assets.local.casts`) give Spark's value and type
wherever DuckDB answers, with ANSI mode on and off; every other value fails in DuckDB (the
epoch then runs in Spark, which gives its NULL, wrapped value or error).

Each cast is evaluated by DuckDB one row at a time over adversarial values, then by Spark
over the same rows: with ANSI off over all of them, with ANSI on over those DuckDB answered
(where Spark must not fail either)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from ivm_assets.local.expressions import translate
from ivm_assets.local.sql_types import arrow_type
from ivm_assets.local.untranslatable import Untranslatable
from ivm_assets.spark.arrow import to_spark

TEXT = [
    "12", "-0", "007", " 12", "12 ", "+5", "1e3", "1.5", "1.25", "-1.25", "-1.35", "1.", ".5", "2147483647", "2147483648",
    "-2147483649", "9223372036854775808", "99999999.99", "123456789.5", "abc", "", "NaN", "Infinity", "-0.0", "1E400", "0.1",
    "4.9e-324", "2024-02-29", "2023-02-29", "2024-1-5", "0999-01-01", "1000-01-01", "9999-12-31", "1582-10-10",
    "2024-01-01T10:00", "2024-01-01 ", "2024-13-01", "\u0661\u0662", "1\u00a0", None,
]
N = len(TEXT)


def _column(values: list, kind: pa.DataType) -> pa.Array:
    return pa.array((values * (N // len(values) + 1))[:N], kind)


ROWS = pa.table({
    "s": pa.array(TEXT, pa.string()),
    "i": _column([0, -1, 127, 128, -129, 32768, 2**31 - 1, -(2**31), None, 42], pa.int32()),
    "b": _column([2**63 - 1, -(2**63), 2**53 + 1, 2**31, -5, None, 0], pa.int64()),
    "d": _column([Decimal(v) if v else None for v in ["1.25", "-1.25", "-0.05", "99999999999.99", "0.00", "127.99", "-128.50", "2.50", "-2.45", None]],
                 pa.decimal128(15, 2)),
    "w": _column([Decimal(v) if v else None for v in ["1234567890123456789012345678.0123456789", "-0.0000000005", "9223372036854775807.5", "0E-10", None]],
                 pa.decimal128(38, 10)),
    "tiny": _column([Decimal(v) if v else None for v in ["0.00000001", "-0.00000010", "0E-8", "1.5", "99.99999999", "0.00000100", "-0.00000099", "-0.00000100", None]], pa.decimal128(10, 8)),
    "f": _column([1.5, -1.5, -0.0, float("nan"), float("inf"), float("-inf"), 2.9e9, 1e19, -2.5, 2.0**53 + 2, 127.9, -128.9, None],
                 pa.float64()),
    "r": _column([1.5, -1.5, -0.0, float("nan"), float("inf"), 3.4e38, 2.5, -128.9, 1e-45, 0.1, None], pa.float32()),
    "day": _column([dt.date(1994, 1, 1), dt.date(999, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1582, 10, 10), None],
                   pa.date32()),
    "ts": _column([dt.datetime(1994, 1, 1, 23, 59, 59), dt.datetime(1969, 12, 31, 0, 0, 1), dt.datetime(1582, 10, 4, 12), None],
                  pa.timestamp("us", tz="UTC")),
    "flag": _column([True, False, None], pa.bool_()),
})
TYPES = {f.name: arrow_type(f.type) for f in ROWS.schema}

CASTS = [
    "CAST(`s` AS INT)", "CAST(`s` AS BIGINT)", "CAST(`s` AS TINYINT)", "CAST(`s` AS DECIMAL(10, 2))", "CAST(`s` AS DECIMAL(5, 0))",
    "CAST(`s` AS DECIMAL)", "CAST(`s` AS DOUBLE)", "CAST(`s` AS DATE)", "to_date(`s`)", "TRY_CAST(`s` AS INT)", "`s`::bigint",
    "CAST(`i` AS TINYINT)", "CAST(`i` AS SMALLINT)", "CAST(`i` AS BIGINT)", "CAST(`i` AS DECIMAL(5, 2))", "CAST(`i` AS DECIMAL(20, 0))",
    "CAST(`i` AS DOUBLE)", "CAST(`i` AS STRING)",
    "CAST(`b` AS INT)", "CAST(`b` AS DOUBLE)", "CAST(`b` AS STRING)", "CAST(`b` AS DECIMAL(19, 0))",
    "CAST(`d` AS INT)", "CAST(`d` AS BIGINT)", "CAST(`d` AS TINYINT)", "CAST(`d` AS DECIMAL(4, 1))", "CAST(`d` AS DECIMAL(38, 10))",
    "CAST(`d` AS DOUBLE)", "CAST(`d` AS STRING)", "CAST(`d` AS DECIMAL)", "CAST(`d` * 3 AS DECIMAL(12, 1))",
    "CAST(`w` AS BIGINT)", "CAST(`w` AS DECIMAL(20, 2))", "CAST(`w` AS STRING)", "CAST(`tiny` AS STRING)",
    "CAST(`i` AS VARCHAR(3))", "CAST(`d` AS CHAR(2))",
    "CAST(`f` AS INT)", "CAST(`f` AS BIGINT)", "CAST(`f` AS SMALLINT)", "CAST(`r` AS DOUBLE)", "CAST(`r` AS INT)", "CAST(`r` AS BIGINT)",
    "CAST(`day` AS STRING)", "CAST(`ts` AS DATE)", "to_date(`ts`)", "date_add(`ts`, 1)", "date_sub(`ts`, 40)",
    "CAST(`flag` AS STRING)", "CAST(NULL AS INT)",
]


def _in_duckdb(translated: list[str]) -> list[list[tuple]]:
    """Each translated cast over each row alone: (value, failed) — failed where DuckDB fails."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")  # the test session's zone, as the engine sets it
    for k in range(N):
        con.register(f"t{k}", ROWS.slice(k, 1))
    found = []
    for sql in translated:
        row = []
        for k in range(N):
            try:
                row.append((con.sql(f"SELECT {sql} FROM t{k}").fetchall()[0][0], False))
            except duckdb.Error:
                row.append((None, True))
        found.append(row)
    return found


def _same(ours, theirs) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float):
        return (math.isnan(ours) and math.isnan(theirs)) or (ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs))
    return type(ours) is type(theirs) and ours == theirs and (not isinstance(ours, Decimal) or ours.as_tuple().exponent == theirs.as_tuple().exponent)


def _spark_type(t) -> str:
    if t.family == "number":
        return {3: "tinyint", 5: "smallint", 10: "int", 20: "bigint"}[t.precision] if t.integer else f"decimal({t.precision},{t.scale})"
    return t.family


@pytest.fixture(scope="module")
def answers(spark):
    """Per cast: its type, DuckDB's (value, failed) per row, and Spark's values per row with
    ANSI off (every row) and on (only the rows DuckDB answered: a CASE keeps Spark from
    evaluating the others, which may fail)."""
    translated = [translate(sql, TYPES) for sql in CASTS]
    ours = _in_duckdb([t for t, _ in translated])
    frame = to_spark(spark, ROWS.append_column("k", pa.array(range(N), pa.int32())))
    before = spark.conf.get("spark.sql.ansi.enabled")
    theirs = {}
    try:
        for ansi in ("false", "true"):
            spark.conf.set("spark.sql.ansi.enabled", ansi)
            columns = [
                sql if ansi == "false" else f"CASE WHEN k IN ({', '.join(str(k) for k, (_, failed) in enumerate(row) if not failed) or '-1'}) THEN {sql} END"
                for sql, row in zip(CASTS, ours)
            ]
            result = frame.selectExpr("k", *[f"{c} AS v{i}" for i, c in enumerate(columns)])
            if ansi == "false":
                types = [f.dataType.simpleString() for f in result.schema.fields[1:]]
            rows = sorted(tuple(r) for r in result.collect())
            theirs[ansi] = [[r[i + 1] for r in rows] for i in range(len(CASTS))]
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)
    return {sql: (found, types[i], ours[i], theirs["false"][i], theirs["true"][i]) for i, (sql, (_, found)) in enumerate(zip(CASTS, translated))}


@pytest.mark.parametrize("sql", CASTS)
def test_a_cast_answered_in_process_is_sparks_in_both_ansi_modes(answers, sql):
    found, spark_type, ours, ansi_off, ansi_on = answers[sql]
    assert spark_type == _spark_type(found)
    answered = [k for k, (_, failed) in enumerate(ours) if not failed]
    assert answered, f"{sql}: DuckDB answered no row"
    for ansi, theirs in (("off", ansi_off), ("on", ansi_on)):
        wrong = [(TEXT[k], ROWS.slice(k, 1).to_pylist()[0], ours[k][0], theirs[k]) for k in answered if not _same(ours[k][0], theirs[k])]
        assert not wrong, f"{sql} with ANSI {ansi}: (row, in process, Spark) {wrong}"


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("CAST(`f` AS DECIMAL(10, 2))", "casts of a double"),
        ("CAST(`f` AS STRING)", "casts of a double"),
        ("CAST(`r` AS DECIMAL(10, 2))", "casts of a float"),
        ("CAST(`ts` AS STRING)", "casts of a timestamp"),
        ("CAST(`i` AS FLOAT)", "casts to FLOAT"),
        ("CAST(`s` AS BOOLEAN)", "casts to BOOLEAN"),
        ("CAST(`s` AS TIMESTAMP)", "casts to TIMESTAMP"),
        ("CAST(`w` AS DOUBLE)", "widened to DOUBLE"),
        ("to_date(`s`, 'yyyy-MM-dd')", "TO_DATE"),
    ],
)
def test_casts_outside_the_rules_are_refused(sql, construct):
    with pytest.raises(Untranslatable, match=construct):
        translate(sql, TYPES)
