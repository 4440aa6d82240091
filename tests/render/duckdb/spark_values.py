"""Expressions computed in process, checked value by value against Spark's: adversarial
rows, each expression evaluated by DuckDB one row at a time and by Spark over the rows
DuckDB answered, with ANSI mode off and on (where Spark must not fail either). Shared by ``test_casts.py`` and ``test_functions.py``."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.render.duckdb.expressions import register_functions, translate
from ivm_assets.ir.types import arrow_type
from ivm_assets.spark.arrow import to_spark

TEXT = [
    "12", "-0", "007", " 12", "12 ", "+5", "1e3", "1.5", "1.25", "-1.25", "-1.35", "1.", ".5", "2147483647", "2147483648",
    "-2147483649", "9223372036854775808", "99999999.99", "123456789.5", "abc", "", "NaN", "Infinity", "-0.0", "1E400", "0.1",
    "4.9e-324", "2024-02-29", "2023-02-29", "2024-1-5", "0999-01-01", "1000-01-01", "9999-12-31", "1582-10-10",
    "2024-01-01T10:00", "2024-01-01 ", "2024-13-01", "\u0661\u0662", "1\u00a0", "true", "t", "0", "TRUE", " yes",
    "hello wORLD-x  y", "12\n", "ab\r\n", "a\u0085b\u2028", "A1 b2\tc3\x0bd4", None,
]
N = len(TEXT)


def _column(values: list, kind: pa.DataType) -> pa.Array:
    return pa.array((values * (N // len(values) + 1))[:N], kind)


_TIMES = [
    dt.datetime(1994, 1, 1, 23, 59, 59), dt.datetime(1969, 12, 31, 0, 0, 1), dt.datetime(1582, 10, 4, 12), None,
    # São Paulo's daylight time began at midnight on 2018-11-04 (00:00 became 01:00), New
    # York's at 02:00 on 2024-03-10; India is 5:30 ahead; 1800 is before standard time.
    dt.datetime(2018, 11, 4, 3, 30), dt.datetime(2018, 11, 4, 2, 59, 59, 999999), dt.datetime(2024, 3, 10, 7, 30),
    dt.datetime(2024, 12, 31, 23, 45, 30, 500000), dt.datetime(1800, 6, 1, 12, 0), dt.datetime(2021, 1, 3, 4, 0),
    # São Paulo's daylight time ended at midnight on 2018-02-18 (back to 23:00): 23:30 on
    # the 17th came twice, at 01:30 and 02:30 UTC; and a TIMESTAMP_NTZ of 23:30 (hours
    # + 19, below), which Spark reads as the earlier of the two.
    dt.datetime(2018, 2, 18, 1, 30), dt.datetime(2018, 2, 18, 2, 30), dt.datetime(2018, 2, 17, 4, 30),
]
ROWS = pa.table({
    "s": pa.array(TEXT, pa.string()),
    "i": _column([0, -1, 127, 128, -129, 32768, 2**31 - 1, -(2**31), None, 42, -7, 15], pa.int32()),
    "b": _column([2**63 - 1, -(2**63), 2**53 + 1, 2**31, -5, None, 0, 3], pa.int64()),
    "d": _column([Decimal(v) if v else None for v in ["1.25", "-1.25", "-0.05", "99999999999.99", "0.00", "127.99", "-128.50", "2.50", "-2.45", None, "15.55", "-0.45"]],
                 pa.decimal128(15, 2)),
    "w": _column([Decimal(v) if v else None for v in ["1234567890123456789012345678.0123456789", "-0.0000000005", "9223372036854775807.5", "0E-10", None]],
                 pa.decimal128(38, 10)),
    "tiny": _column([Decimal(v) if v else None for v in ["0.00000001", "-0.00000010", "0E-8", "1.5", "99.99999999", "0.00000100", "-0.00000099", "-0.00000100", None]], pa.decimal128(10, 8)),
    "f": _column([1.5, -1.5, -0.0, float("nan"), float("inf"), float("-inf"), 2.9e9, 1e19, -2.5, 2.0**53 + 2, 127.9, -128.9, None,
                  2.675, 0.125, -0.4, 1e-300, 5e-324, 123.456789, 0.1 + 0.2, 5e299, 2.0**60 + 2**8, -1e17 - 16, 2.0**62],
                 pa.float64()),
    "r": _column([1.5, -1.5, -0.0, float("nan"), float("inf"), 3.4e38, 2.5, -128.9, 1e-45, 0.1, None], pa.float32()),
    "day": _column([dt.date(1994, 1, 1), dt.date(999, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1582, 10, 10), None,
                    dt.date(2018, 11, 4), dt.date(2024, 2, 29), dt.date(2021, 1, 3), dt.date(2024, 1, 31)],
                   pa.date32()),
    "ts": _column(_TIMES, pa.timestamp("us", tz="UTC")),
    "ntz": _column([None if t is None else t.replace(hour=(t.hour + 19) % 24) for t in _TIMES], pa.timestamp("us")),
    "u": _column(["héllo", "e\u0301te\u0301", "😀ab😀", "", "abc  ", None, "a%b_c", "ABC"], pa.string()),
    "flag": _column([True, False, None], pa.bool_()),
})
TYPES = {f.name: arrow_type(f.type) for f in ROWS.schema}


def _in_duckdb(translated: list[str], zone: str) -> list[list[tuple]]:
    """Each translated expression over each row alone: (value, failed) — failed where DuckDB
    fails. Over all rows at once first: where none fails, that is each row's value."""
    con = duckdb.connect()
    register_functions(con)
    con.execute(f"SET TimeZone = '{zone}'")  # the session's zone, as the engine sets it
    con.register("t", ROWS.append_column("k", pa.array(range(N), pa.int32())))
    for k in range(N):
        con.register(f"t{k}", ROWS.slice(k, 1))
    found = []
    for sql in translated:
        try:
            found.append([(v, False) for v in _values(con.sql(f"SELECT {sql} FROM t ORDER BY k").to_arrow_table().column(0))])
            continue
        except duckdb.Error:
            pass
        row = []
        for k in range(N):
            try:
                row.append((_values(con.sql(f"SELECT {sql} FROM t{k}").to_arrow_table().column(0))[0], False))
            except duckdb.Error:
                row.append((None, True))
        found.append(row)
    return found


def _values(column: pa.ChunkedArray) -> list:
    """``column``'s values as Python objects; dates and timestamps as (kind, days or
    microseconds since the epoch): Python's dates stop at years 1 and 9999, Spark's and
    DuckDB's do not. A TIMESTAMP's microseconds are its UTC instant's."""
    t = column.type
    if pa.types.is_date32(t):
        return [None if v is None else ("date", v) for v in column.cast(pa.int32()).to_pylist()]
    if pa.types.is_timestamp(t):
        kind = "timestamp" if t.tz else "timestamp_ntz"
        return [None if v is None else (kind, v) for v in column.cast(pa.timestamp("us", t.tz)).cast(pa.int64()).to_pylist()]
    return column.to_pylist()


def failing_on_nulls(expressions: list[str]) -> list[str]:
    """The expressions DuckDB fails on over a row of NULLs: such a guard would send every
    epoch with a NULL to Spark (a cost the value-by-value comparison does not see)."""
    con = duckdb.connect()
    register_functions(con)
    con.register("t", pa.table({f.name: pa.nulls(1, f.type) for f in ROWS.schema}))
    failing = []
    for sql in expressions:
        try:
            con.sql(f"SELECT {translate(sql, TYPES)[0]} FROM t").fetchall()
        except duckdb.Error:
            failing.append(sql)
    return failing


def same(ours, theirs) -> bool:
    """Equal values of equal types: floats bit for bit but NaN (−0.0 is not 0.0), DECIMALs
    at the same exponent."""
    if isinstance(ours, float) and isinstance(theirs, float):
        return (math.isnan(ours) and math.isnan(theirs)) or (ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs))
    return type(ours) is type(theirs) and ours == theirs and (not isinstance(ours, Decimal) or ours.as_tuple().exponent == theirs.as_tuple().exponent)


def spark_type(t) -> str:
    """Spark's simple name of the in-process :class:`SqlType` ``t``."""
    if t.family == "number":
        return {3: "tinyint", 5: "smallint", 10: "int", 20: "bigint"}[t.precision] if t.integer else f"decimal({t.precision},{t.scale})"
    return {"boolean": "boolean", "date": "date", "double": "double", "string": "string", "timestamp": "timestamp"}.get(t.family, t.family)


def family(spark_type_name: str) -> str:
    """Spark's type name as :func:`spark_type` names it: the in-process types do not tell
    TIMESTAMP_NTZ from TIMESTAMP (DuckDB's do: the values compared say which it is)."""
    return "timestamp" if spark_type_name == "timestamp_ntz" else spark_type_name


def answers(spark, expressions: list[str], zone: str = "UTC") -> dict[str, tuple]:
    """Per expression: its in-process type, Spark's type, DuckDB's (value, failed) per row,
    and Spark's values per row with ANSI off and on, for the rows DuckDB answered (a CASE
    keeps Spark from evaluating the others, which may fail in either mode: ``add_months``
    past the last date does without ANSI too); both engines in session zone ``zone``."""
    translated = [translate(sql, TYPES) for sql in expressions]
    ours = _in_duckdb([t for t, _ in translated], zone)
    frame = to_spark(spark, ROWS.append_column("k", pa.array(range(N), pa.int32())))
    before = {key: spark.conf.get(key) for key in ("spark.sql.ansi.enabled", "spark.sql.session.timeZone")}
    theirs = {}
    try:
        spark.conf.set("spark.sql.session.timeZone", zone)
        for ansi in ("false", "true"):
            spark.conf.set("spark.sql.ansi.enabled", ansi)
            columns = [
                f"CASE WHEN k IN ({', '.join(str(k) for k, (_, failed) in enumerate(row) if not failed) or '-1'}) THEN {sql} END"
                for sql, row in zip(expressions, ours)
            ]
            result = frame.selectExpr("k", *[f"{c} AS v{i}" for i, c in enumerate(columns)])
            if ansi == "false":
                types = [f.dataType.simpleString() for f in result.schema.fields[1:]]
            try:
                theirs[ansi] = _by_row(result)
            except Exception:  # Spark failed where DuckDB answered: find the values, to report them
                theirs[ansi] = [_failures(frame, column) for column in columns]
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
    return {sql: (found, types[i], ours[i], theirs["false"][i], theirs["true"][i]) for i, (sql, (_, found)) in enumerate(zip(expressions, translated))}


class SparkError(str):
    """Spark's error on a value, in place of its answer."""


def _by_row(result) -> list[list]:
    """``result``'s columns after ``k``, each as a list of values ordered by ``k``."""
    table = result.toArrow()
    table = table.take(pc.sort_indices(table.column("k")))
    return [_values(table.column(i)) for i in range(1, table.num_columns)]


def _failures(frame, column: str) -> list:
    """``column`` per row, Spark's error where it fails."""
    try:
        return _by_row(frame.selectExpr("k", column))[0]
    except Exception:
        found = []
        for k in range(N):
            try:
                found.append(_by_row(frame.filter(f"k = {k}").selectExpr("k", column))[0][0])
            except Exception as exc:
                found.append(SparkError(str(exc).splitlines()[0]))
        return found


def wrong_answers(answer: tuple) -> dict[str, list]:
    """Where DuckDB answered but its value is not Spark's, per ANSI mode: (row, in process, Spark)."""
    _, _, ours, ansi_off, ansi_on = answer
    answered = [k for k, (_, failed) in enumerate(ours) if not failed]
    return {
        ansi: [(ROWS.slice(k, 1).to_pylist()[0], ours[k][0], theirs[k]) for k in answered if not same(ours[k][0], theirs[k])]
        for ansi, theirs in (("off", ansi_off), ("on", ansi_on))
    }
