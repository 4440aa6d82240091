"""Casts that DuckDB computes exactly as Spark does, for :mod:`ivm_assets.render.duckdb.expressions`
(whose translator takes these visits).

Spark's casts differ from DuckDB's at the edges: a DECIMAL or DOUBLE cast to an integer is
truncated in Spark and rounded in DuckDB; Spark trims and reads strings DuckDB refuses
(``' 12'``, ``'1e3'``) and gives NULL (ANSI off) or an error (ANSI on) where DuckDB fails;
an integer narrowed past its range wraps around in Spark without ANSI. So a cast is
rendered only where both give the same value, and every other value fails in DuckDB, which
sends the epoch to Spark: Spark then gives its NULL, its wrapped value or its error. Where
DuckDB answers, the answer is Spark's in both ANSI modes (``tests/render/duckdb/test_casts.py``
checks each cast value by value against Spark's, both ways).

The rules, from a value of:

- an integer: to any integer type (past the range: fails), to DECIMAL (exact, or fails), to
  DOUBLE (the nearest, in both), to STRING (its digits);
- a DECIMAL: to an integer type truncated toward zero, to DECIMAL rounded half up (away
  from zero) as Spark's ``changePrecision`` rounds (past the precision: fails), to DOUBLE up
  to 15 digits (see :func:`~ivm_assets.ir.types.widens_exactly`), to STRING (where
  Spark writes it without an exponent: scale up to 6, or a value of at least 10^-6);
- a DOUBLE or FLOAT: to an integer type truncated toward zero (NaN, ±Infinity, past the
  range: fails); a FLOAT to DOUBLE (exactly);
- to FLOAT: an integer or a DOUBLE, the nearest FLOAT (IEEE's rounding, Java's and DuckDB's;
  a DOUBLE past FLOAT's range fails in DuckDB, where Spark gives ±Infinity), a FLOAT as it is;
- a STRING in canonical form only: digits with an optional minus to integers; with at most
  the target's scale of fractional digits to DECIMAL (no rounding); decimal digits with an
  optional exponent to DOUBLE (both read it correctly rounded); ``yyyy-mm-dd`` (years 1000
  to 9999) to DATE — ``to_date`` of one argument too. Anything else (spaces, ``+``,
  ``NaN``, out of range, an invalid day) fails;
- a DATE: to STRING (``yyyy-mm-dd``, years 1000 to 9999); a TIMESTAMP: to DATE (its date in
  the session zone, the connection's; a TIMESTAMP_NTZ's date part) or to STRING (years 1 to
  9999); a DATE or either TIMESTAMP to TIMESTAMP or TIMESTAMP_NTZ (in the session zone, a
  wall time that comes twice as its earlier instant, as Java resolves it);
- a string literal ``yyyy-mm-dd[ hh:mm[:ss[.ffffff]]]`` to TIMESTAMP or TIMESTAMP_NTZ
  (``TIMESTAMP '…'`` is that cast), a wall time made an instant alike;
- a BOOLEAN: to STRING (``true``/``false``), to integers and DOUBLE (1 and 0);
- to BOOLEAN: a number or DOUBLE is TRUE unless 0 (NaN is TRUE, −0.0 FALSE, in both); a
  string only in Spark's words, lower case and without spaces (``true``/``t``/``yes``/``y``/
  ``1``, ``false``/``f``/``no``/``n``/``0``); any other string fails (Spark trims it and
  reads any case, and gives NULL or its ANSI error for other words).

A DECIMAL, a string or a BOOLEAN to FLOAT (Spark's DECIMAL goes to FLOAT through a
BigDecimal, another rounding path), any other string or a number to TIMESTAMP, and a DOUBLE
or FLOAT to DECIMAL or STRING are refused. VARCHAR(n) and CHAR(n) are STRING, as Spark 4 casts to them
by default (``spark.sql.preserveCharVarcharTypeInfo`` off).
"""

from __future__ import annotations

import datetime as dt
import re

from sqlglot import exp

from ivm_assets.ir.decimal_rules import MAX_PRECISION
from ivm_assets.duckdb_names import string_literal
from ivm_assets.ir.types import BOOL, DOUBLE, SqlType, widens_exactly
from ivm_assets.render.duckdb.sql_types import as_timestamp, duckdb_type, wall_to_instant
from ivm_assets.errors import Untranslatable

_T = exp.DataType.Type
_INTEGERS = {_T.TINYINT: 3, _T.SMALLINT: 5, _T.INT: 10, _T.BIGINT: 20}
_STRING = SqlType("string")
_FLOAT = SqlType("float")
_TIMESTAMPS = {_T.TIMESTAMPTZ: SqlType("timestamp"), _T.TIMESTAMPLTZ: SqlType("timestamp"), _T.TIMESTAMPNTZ: SqlType("timestamp", wall=True)}
_DATE = SqlType("date")
# Strings read alike by both engines, as regular expressions over the whole string.
_INTEGER_TEXT = "-?[0-9]+"
_DOUBLE_TEXT = "-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?"
_DATE_TEXT = "[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}"
# A timestamp literal both engines read alike: a date, then hours and minutes, seconds and
# up to six digits of a fraction, each optional after the one before.
_TIMESTAMP_LITERAL = re.compile(_DATE_TEXT + r"( [0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?)?")
# Spark's words for TRUE and FALSE (StringUtils.isTrueString/isFalseString, after trimming
# and lower-casing, which these forms do not need).
_TRUE_WORDS, _FALSE_WORDS = ("t", "true", "y", "yes", "1"), ("f", "false", "n", "no", "0")


def _target(to: exp.DataType, what: str) -> SqlType:
    """The :class:`SqlType` of a cast's target type; refused outside the rules."""
    if to.this in _INTEGERS:
        return SqlType("number", _INTEGERS[to.this], 0, integer=True)
    if to.this == _T.DECIMAL:
        params = [int(p.this.this) for p in to.expressions] if to.expressions else [10, 0]  # Spark's DECIMAL is DECIMAL(10, 0)
        precision, scale = (params + [0])[:2]
        if not 0 <= scale <= precision <= MAX_PRECISION:
            raise Untranslatable(f"{what}: DECIMAL({precision}, {scale})")
        return SqlType("number", precision, scale)
    if to.this == _T.DOUBLE:
        return DOUBLE
    if to.this == _T.FLOAT:
        return _FLOAT
    if to.this == _T.TEXT:  # STRING, and VARCHAR(n)/CHAR(n), which sqlglot reads as STRING as Spark casts them
        return _STRING
    if to.this == _T.DATE:
        return _DATE
    if to.this == _T.BOOLEAN:
        return BOOL
    raise Untranslatable(f"{what}: no in-process rule for casts to {to.sql('spark')}")


def _if(condition: str, then: str, otherwise: str, x: str) -> str:
    """``then`` where ``condition`` holds, NULL where ``x`` is NULL, else an error saying
    ``otherwise``: the epoch then runs in Spark, which decides."""
    return f"(CASE WHEN {x} IS NULL THEN NULL WHEN {condition} THEN {then} ELSE error({string_literal(otherwise)}) END)"


def _listed(words: tuple[str, ...]) -> str:
    return ", ".join(f"'{w}'" for w in words)


def _if_matches(x: str, pattern: str, then: str, what: str) -> str:
    """``then`` where ``x`` (a string) matches ``pattern`` whole (see :func:`_if`)."""
    return _if(f"regexp_full_match({x}, '{pattern}')", then, f"{what}: a value outside the forms read alike (Spark decides)", x)


class Casts:
    """Visits of ``CAST`` (``TRY_CAST`` and ``::`` alike: sqlglot reads Spark's casts as
    one node, and where a cast's value is invalid DuckDB fails and Spark decides) and
    ``to_date``, taken by the translator of :mod:`ivm_assets.render.duckdb.expressions`."""

    def _cast(self, value: exp.Expression, target: SqlType, what: str) -> str:
        x, t = self(value)
        to = duckdb_type(target)
        if t.family == "null":
            return f"CAST(NULL AS {to})"
        if target.family == "float":
            if t.family == "float":
                return x
            if t.family == "double" or (t.family == "number" and t.integer):
                return f"CAST({x} AS FLOAT)"
            raise Untranslatable(f"{what}: no in-process rule for casts of a {'DECIMAL' if t.family == 'number' else t.family} to FLOAT")
        if t.family == "number":
            if target.family == "number" and target.integer and not t.integer:
                return f"CAST(trunc({x}) AS {to})"
            if target.family == "double":
                widens_exactly(t, what)
            if target.family == "string" and t.scale > 6:
                # Spark writes a DECIMAL as Java's BigDecimal.toString: in scientific notation
                # when its adjusted exponent is below -6 (0.00000001 as 1E-8, zero at scale 10
                # as 0E-10), which only a scale above 6 reaches, for values under 10^-6.
                least = f"CAST('0.000001' AS DECIMAL({MAX_PRECISION}, {t.scale}))"
                return _if(f"abs({x}) >= {least}", f"CAST({x} AS VARCHAR)", f"{what}: a DECIMAL under 10^-6 (Spark writes it in scientific notation)", x)
            if target.family in ("number", "double", "string"):
                return f"CAST({x} AS {to})"
            if target.family == "boolean":
                return f"({x} <> 0)"
        elif t.family in ("double", "float"):
            if target.family == "boolean":
                return f"({x} <> 0)"
            if target.family == "double":
                return x if t.family == "double" else f"CAST({x} AS DOUBLE)"  # every FLOAT is a DOUBLE exactly
            if target.family == "number" and target.integer:
                return f"CAST(trunc({x}) AS {to})"
        elif t.family == "string":
            if target.family == "string":
                return x
            if target.family == "number":
                pattern = _INTEGER_TEXT if target.integer else _INTEGER_TEXT + (f"(\\.[0-9]{{1,{target.scale}}})?" if target.scale else "")
                return _if_matches(x, pattern, f"CAST({x} AS {to})", what)
            if target.family == "double":
                return _if_matches(x, _DOUBLE_TEXT, f"CAST({x} AS DOUBLE)", what)
            if target.family == "date":
                return _if_matches(x, _DATE_TEXT, f"CAST({x} AS DATE)", what)
            if target.family == "boolean":
                return _if(f"{x} IN ({_listed(_TRUE_WORDS + _FALSE_WORDS)})", f"({x} IN ({_listed(_TRUE_WORDS)}))",
                           f"{what}: a value outside the words read alike (Spark decides)", x)
        elif t.family == "date":
            if target.family == "date":
                return x
            if target.family == "string":
                within = f"{x} BETWEEN DATE '1000-01-01' AND DATE '9999-12-31'"
                return _if(within, f"CAST({x} AS VARCHAR)", f"{what}: a year outside 1000-9999 (Spark decides)", x)
        elif t.family == "timestamp":
            if target.family == "date":
                return f"CAST({x} AS DATE)"
            if target.family == "string":
                # Spark writes yyyy-MM-dd HH:mm:ss and the fraction of a second without its
                # trailing zeros, in the session zone (a TIMESTAMP_NTZ as it is); strftime
                # reads each DuckDB type the same way. DuckDB's microsecond() counts from the
                # minute.
                fraction = f"microsecond({x}) % 1000000"
                text = (f"strftime({x}, '%Y-%m-%d %H:%M:%S') || (CASE WHEN {fraction} = 0 THEN '' "
                        f"ELSE '.' || rtrim(lpad(CAST({fraction} AS VARCHAR), 6, '0'), '0') END)")
                return _if(f"year({x}) BETWEEN 1 AND 9999", text, f"{what}: a year outside 1-9999 (Spark decides)", x)
        elif t.family == "boolean":
            if target.family == "boolean":
                return x
            if target.family == "string" or (target.family == "number" and target.integer) or target.family == "double":
                return f"CAST({x} AS {to})"
        raise Untranslatable(f"{what}: no in-process rule for casts of a {t.family} to {to}")

    def visit_Cast(self, node: exp.Cast) -> tuple[str, SqlType]:
        day = self._date_literal(node)
        if day is not None:
            return f"DATE '{day.isoformat()}'", _DATE
        what = f"the cast {node.sql('spark')}"
        if node.to.this in _TIMESTAMPS and isinstance(node.this, exp.Literal) and node.this.is_string:
            return self._timestamp_literal(node.this.this, _TIMESTAMPS[node.to.this], what)
        if node.to.this in _TIMESTAMPS:
            # To a TIMESTAMP_NTZ: a DATE is its midnight, a TIMESTAMP its wall time in the
            # session zone (DuckDB's casts give them as Spark's do). To a TIMESTAMP: a DATE's
            # midnight or a TIMESTAMP_NTZ's wall time is an instant in the session zone, by
            # Java's rule for overlaps and gaps (wall_to_instant).
            x, t = self._operand(node.this, ("date", "timestamp"), what)
            target = _TIMESTAMPS[node.to.this]
            return as_timestamp(x, t, wall=target.wall), target
        target = _target(node.to, what)
        return self._cast(node.this, target, what), target

    visit_TryCast = visit_Cast

    @staticmethod
    def _timestamp_literal(text: str, target: SqlType, what: str) -> tuple[str, SqlType]:
        """``TIMESTAMP 'text'`` (or a cast of that string): a wall time, made an instant in
        the session zone as Spark makes it (:func:`wall_to_instant`) unless the target is a
        TIMESTAMP_NTZ. Only the plain forms of :data:`_TIMESTAMP_LITERAL` that name a real
        date and time; Spark decides the others."""
        if not _TIMESTAMP_LITERAL.fullmatch(text):
            raise Untranslatable(f"{what}: a timestamp text other than yyyy-mm-dd[ hh:mm[:ss[.ffffff]]]")
        try:
            dt.datetime.fromisoformat(text)
        except ValueError:
            raise Untranslatable(f"{what}: not a real date and time (Spark decides)") from None
        wall = f"TIMESTAMP '{text}'"
        return (wall if target.wall else wall_to_instant(wall)), target

    def _to_date(self, args: list[exp.Expression]) -> tuple[str, SqlType]:
        """``to_date(x)``: Spark's cast of ``x`` to DATE (parsed as written, see
        :mod:`ivm_assets.sql.dialect`). ``to_date(s, 'yyyy-MM-dd')`` of a string: the same
        cast, whose canonical form is exactly what that pattern reads (four digits from
        1000, two, two; anything else fails in DuckDB, and Spark decides). Other patterns
        are not rendered."""
        if len(args) == 2 and isinstance(args[1], exp.Literal) and args[1].is_string and args[1].this == "yyyy-MM-dd":
            self._operand(args[0], "string", "TO_DATE with a pattern")
        elif len(args) != 1:
            raise Untranslatable(f"TO_DATE with a pattern other than 'yyyy-MM-dd' ({', '.join(a.sql('spark') for a in args)})")
        return self._cast(args[0], _DATE, f"TO_DATE ({args[0].sql('spark')})"), _DATE
