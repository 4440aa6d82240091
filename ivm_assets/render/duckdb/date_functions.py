"""Date and time functions that DuckDB computes exactly as Spark does, for
:mod:`ivm_assets.render.duckdb.expressions` (whose translator takes these visits).

A TIMESTAMP is read in the session zone (the DuckDB connection's is set to Spark's), a
TIMESTAMP_NTZ as it is; a DATE argument of a time function is its midnight. Where Spark
casts a TIMESTAMP_NTZ to TIMESTAMP first (``date_trunc``), DuckDB's cast does the same in the
session zone (a wall time in a daylight-saving gap moves forward by the gap in both).

- ``year``, ``quarter``, ``month``, ``day``, ``dayofweek`` (1 = Sunday), ``dayofyear``,
  ``weekofyear`` (ISO 8601) of a DATE or a TIMESTAMP's date; ``hour``, ``minute``,
  ``second`` of a TIMESTAMP; ``EXTRACT`` of those fields but SECOND (a DECIMAL in Spark);
- ``date_add``/``date_sub``/``add_months`` by an INT (months clamp to the month's last day),
  ``datediff``, ``last_day``, ``trunc(d, unit)`` (a DATE), ``date_trunc(unit, ts)`` (a
  TIMESTAMP) with a literal unit Spark knows;
- ``date_format(x, pattern)`` with a literal pattern of year, month, day, hour, minute,
  second, weekday and AM/PM letters, and milli- or microseconds (``yyyy-MM``, ``MMM d``,
  ``EEE HH:mm:ss.SSS``).
Past the range of dates DuckDB fails, and Spark decides.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_assets.duckdb_names import string_literal
from ivm_assets.ir.types import SqlType
from ivm_assets.render.duckdb.sql_types import as_timestamp, wall_to_instant
from ivm_assets.errors import Untranslatable

_INT = SqlType("number", 10, 0, integer=True)
_DATE = SqlType("date")
# Spark's unit names (case-insensitive) as DuckDB's: trunc's, then date_trunc's.
_DATE_UNITS = {"YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter", "MONTH": "month", "MM": "month", "MON": "month", "WEEK": "week"}
_TIME_UNITS = {**_DATE_UNITS, "DAY": "day", "DD": "day", "HOUR": "hour", "MINUTE": "minute", "SECOND": "second", "MILLISECOND": "millisecond", "MICROSECOND": "microsecond"}
_EXTRACTED = {"YEAR": "year", "QUARTER": "quarter", "MONTH": "month", "DAY": "day", "DAYOFWEEK": "dayofweek", "DOY": "dayofyear", "WEEK": "weekofyear", "HOUR": "hour", "MINUTE": "minute"}


# Pattern letters of Spark's datetime patterns (Java's, in the US locale) as DuckDB's
# strftime writes them, by the letter and its count.
_PATTERN = {
    ("y", 4): "%Y", ("y", 2): "%y", ("M", 1): "%-m", ("M", 2): "%m", ("M", 3): "%b", ("M", 4): "%B", ("d", 1): "%-d", ("d", 2): "%d",
    ("H", 1): "%-H", ("H", 2): "%H", ("h", 1): "%-I", ("h", 2): "%I", ("m", 1): "%-M", ("m", 2): "%M", ("s", 1): "%-S", ("s", 2): "%S",
    ("E", 1): "%a", ("E", 2): "%a", ("E", 3): "%a", ("E", 4): "%A", ("a", 1): "%p",
    # Fractions of a second, truncated, in both: milliseconds and microseconds.
    ("S", 3): "%g", ("S", 6): "%f",
}


def strftime_pattern(pattern: str) -> str:
    """Spark's datetime ``pattern`` as a DuckDB strftime format writing the same text; refused
    beyond the letters of :data:`_PATTERN` (quoted text and other characters are copied)."""
    out, k = [], 0
    while k < len(pattern):
        c = pattern[k]
        if c == "'":
            end = pattern.find("'", k + 1)
            while end != -1 and pattern[end + 1:end + 2] == "'":  # '' inside quotes is a quote
                end = pattern.find("'", end + 2)
            if end == -1:
                raise Untranslatable(f"the pattern {pattern!r}: an unclosed quote")
            out.append(pattern[k + 1:end].replace("''", "'").replace("%", "%%") if end > k + 1 else "'")
            k = end + 1
        elif c.isascii() and c.isalpha():
            run = len(pattern[k:]) - len(pattern[k:].lstrip(c))
            if (c, run) not in _PATTERN:
                raise Untranslatable(f"the pattern {pattern!r}: {c * run}")
            out.append(_PATTERN[(c, run)])
            k += run
        else:
            out.append("%%" if c == "%" else c)
            k += 1
    return "".join(out)


def _unit(node: exp.Expression | None, units: dict[str, str], what: str) -> str:
    """A literal unit argument as DuckDB names it; refused unless Spark knows it (Spark
    gives NULL for an unknown one)."""
    name = node.name.upper() if isinstance(node, (exp.Literal, exp.Var)) else None
    if name not in units:
        raise Untranslatable(f"{what} with the unit {node.sql('spark') if node is not None else 'missing'}")
    return units[name]


class DateFunctions:
    """Visits of the date and time functions of the module doc, taken by the translator of
    :mod:`ivm_assets.render.duckdb.expressions`, whose ``_operand`` they call."""

    def _day(self, node: exp.Expression, what: str) -> str:
        """``node``, a DATE or a TIMESTAMP, as its date: a TIMESTAMP's in the session zone (a
        TIMESTAMP_NTZ's own), as Spark's implicit cast to DATE gives it. sqlglot wraps some
        date arguments in TO_DATE, which is that cast."""
        arg = node.this if isinstance(node, exp.TsOrDsToDate) else node
        x, t = self._operand(arg, ("date", "timestamp"), what)
        return f"CAST({x} AS DATE)" if t.family == "timestamp" else x

    def _instant(self, node: exp.Expression, what: str) -> str:
        """``node``, a DATE or a TIMESTAMP, as a TIMESTAMP in the session zone: a DATE its
        midnight there, a TIMESTAMP_NTZ its wall time there, as Spark casts them
        (:func:`~ivm_assets.ir.types.as_timestamp`)."""
        x, t = self._operand(node, ("date", "timestamp"), what)
        return as_timestamp(x, t, wall=False)

    def _date_part(self, arg: exp.Expression, part: str) -> tuple[str, SqlType]:
        """``year``/``month``/… of ``arg``, a DATE, or a TIMESTAMP's date (:meth:`_day`).
        Proleptic Gregorian in both engines; Spark's INT. DuckDB counts days of the week
        from 0 (Sunday), Spark from 1."""
        x = self._day(arg, part.upper())
        shift = " + 1" if part == "dayofweek" else ""
        return f"CAST({part}({x}){shift} AS INTEGER)", _INT

    def _time_part(self, arg: exp.Expression, part: str) -> tuple[str, SqlType]:
        """``hour``/``minute``/``second`` of ``arg``, a TIMESTAMP, in the session zone (the
        seconds truncated); Spark's INT."""
        x, _ = self._operand(arg, "timestamp", part.upper())
        return f"CAST({part}({x}) AS INTEGER)", _INT

    def visit_Hour(self, node: exp.Hour) -> tuple[str, SqlType]:
        return self._time_part(node.this, "hour")

    def visit_Minute(self, node: exp.Minute) -> tuple[str, SqlType]:
        return self._time_part(node.this, "minute")

    def visit_Second(self, node: exp.Second) -> tuple[str, SqlType]:
        return self._time_part(node.this, "second")

    def visit_DayOfWeek(self, node: exp.DayOfWeek) -> tuple[str, SqlType]:
        return self._date_part(node.this, "dayofweek")

    def visit_DayOfYear(self, node: exp.DayOfYear) -> tuple[str, SqlType]:
        return self._date_part(node.this, "dayofyear")

    def visit_WeekOfYear(self, node: exp.WeekOfYear) -> tuple[str, SqlType]:
        return self._date_part(node.this, "weekofyear")

    def visit_Extract(self, node: exp.Extract) -> tuple[str, SqlType]:
        part = _unit(node.this, _EXTRACTED, "EXTRACT")
        if part in ("hour", "minute"):
            return self._time_part(node.expression, part)
        return self._date_part(node.expression, part)

    def visit_DateDiff(self, node: exp.DateDiff) -> tuple[str, SqlType]:
        """``datediff(end, start)``: days between the two dates, Spark's INT."""
        if node.args.get("unit") is not None:
            raise Untranslatable(f"DATEDIFF with a unit ({node.sql('spark')})")
        end, start = self._day(node.this, "DATEDIFF"), self._day(node.expression, "DATEDIFF")
        return f"CAST(({end} - {start}) AS INTEGER)", _INT

    def visit_LastDay(self, node: exp.LastDay) -> tuple[str, SqlType]:
        if node.args.get("unit") is not None:
            raise Untranslatable(f"LAST_DAY with a unit ({node.sql('spark')})")
        return f"last_day({self._day(node.this, 'LAST_DAY')})", _DATE

    def visit_AddMonths(self, node: exp.AddMonths) -> tuple[str, SqlType]:
        """``add_months(d, n)``: the same day ``n`` months later, clamped to that month's
        last day in both (Spark 3+ no longer moves a month's last day to the last day)."""
        x = self._day(node.this, "ADD_MONTHS")
        n, nt = self._operand(node.expression, "number", "ADD_MONTHS's months")
        if nt.family == "number" and not (nt.integer and nt.precision <= 10):
            raise Untranslatable(f"ADD_MONTHS by a number that is not an INT ({node.sql('spark')})")
        return f"CAST(({x} + to_months(CAST({n} AS INTEGER))) AS DATE)", _DATE

    def visit_DateTrunc(self, node: exp.DateTrunc) -> tuple[str, SqlType]:
        """``trunc(d, unit)``: a DATE's (or TIMESTAMP's date's) first day of its year,
        quarter, month or ISO week (a Monday in both)."""
        unit = _unit(node.args.get("unit"), _DATE_UNITS, "TRUNC")
        return f"CAST(date_trunc('{unit}', {self._day(node.this, 'TRUNC')}) AS DATE)", _DATE

    def _date_format(self, args: list[exp.Expression]) -> tuple[str, SqlType]:
        """``date_format(x, pattern)`` of a DATE or TIMESTAMP (:meth:`_instant`) with a literal
        pattern of :func:`strftime_pattern`'s letters. A year outside 1–9999 fails in DuckDB
        (Spark writes a sign before a fifth digit)."""
        if len(args) != 2 or not (isinstance(args[1], exp.Literal) and args[1].is_string):
            raise Untranslatable("DATE_FORMAT with a pattern other than a string literal")
        form = string_literal(strftime_pattern(args[1].this))
        ts = self._instant(args[0], "DATE_FORMAT")
        guard = "error('DATE_FORMAT of a year outside 1-9999 (Spark decides)')"
        return f"(CASE WHEN {ts} IS NULL THEN NULL WHEN year({ts}) BETWEEN 1 AND 9999 THEN strftime({ts}, {form}) ELSE {guard} END)", SqlType("string")

    def visit_TimestampTrunc(self, node: exp.TimestampTrunc) -> tuple[str, SqlType]:
        """``date_trunc(unit, x)``: a TIMESTAMP (:meth:`_instant`), truncated in the session
        zone as Spark truncates it: to a day or longer, the start of that day (its earliest
        instant, where midnight comes twice); to an hour or shorter, the instant that much
        earlier, so its offset is kept (Java's ``ZonedDateTime.truncatedTo``). DuckDB's own
        truncation takes the later offset where the truncated wall time comes twice."""
        unit = _unit(node.args.get("unit"), _TIME_UNITS, "DATE_TRUNC")
        x = self._instant(node.this, "DATE_TRUNC")
        wall = f"CAST({x} AS TIMESTAMP)"
        if unit in ("hour", "minute", "second", "millisecond", "microsecond"):
            return f"({x} - ({wall} - date_trunc('{unit}', {wall})))", SqlType("timestamp")
        return wall_to_instant(f"date_trunc('{unit}', {wall})"), SqlType("timestamp")

    def visit_Year(self, node: exp.Year) -> tuple[str, SqlType]:
        return self._date_part(node.this, "year")

    def visit_Month(self, node: exp.Month) -> tuple[str, SqlType]:
        return self._date_part(node.this, "month")

    def visit_Day(self, node: exp.Day) -> tuple[str, SqlType]:
        return self._date_part(node.this, "day")

    visit_DayOfMonth = visit_Day

    def visit_Quarter(self, node: exp.Quarter) -> tuple[str, SqlType]:
        return self._date_part(node.this, "quarter")

    def visit_TsOrDsAdd(self, node: exp.TsOrDsAdd) -> tuple[str, SqlType]:
        """``date_add(d, n)`` (``date_sub(d, n)`` reaches here as ``date_add(d, n * -1)``) of
        a DATE by an integer of at most INT's range: ``n`` days later in both engines. Past
        the range of dates DuckDB fails, and Spark decides. Of a TIMESTAMP, Spark adds to
        its date (an implicit cast to DATE), as ``CAST(ts AS DATE)`` gives it."""
        unit = node.args.get("unit")
        if unit is not None and unit.name.upper() != "DAY":
            raise Untranslatable(f"DATE_ADD by {unit.name}")
        x = self._day(node.this, "DATE_ADD")
        n, nt = self._operand(node.expression, "number", "DATE_ADD's days")
        if nt.family == "number" and not (nt.integer and nt.precision <= 10):
            raise Untranslatable(f"DATE_ADD by a number that is not an INT ({node.sql('spark')})")
        return f"CAST(({x} + CAST({n} AS INTEGER)) AS DATE)", _DATE
