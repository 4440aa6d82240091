"""Date parts that DuckDB computes exactly as Spark does, for
:mod:`ivm_assets.local.expressions` (whose translator takes these visits)."""

from __future__ import annotations

from sqlglot import exp

from ivm_assets.local.sql_types import SqlType
from ivm_assets.local.untranslatable import Untranslatable


class DateFunctions:
    """Visits of ``year``, ``month``, ``day`` (``dayofmonth``), ``quarter`` and
    ``date_add``/``date_sub`` (of a DATE, or a TIMESTAMP's date), taken by the translator of :mod:`ivm_assets.local.expressions`,
    whose ``_operand`` they call."""

    def _date_part(self, node: exp.Func, part: str) -> tuple[str, SqlType]:
        """``year``/``month``/``day``/``quarter`` of a DATE, or of a TIMESTAMP's date in the
        session zone (a TIMESTAMP_NTZ's own date), as Spark reads it: the same cast as
        ``CAST(ts AS DATE)``'s. Proleptic Gregorian in both engines; Spark's INT."""
        arg = node.this.this if isinstance(node.this, exp.TsOrDsToDate) else node.this
        x, t = self._operand(arg, ("date", "timestamp"), part.upper())
        if t.family == "timestamp":
            x = f"CAST({x} AS DATE)"
        return f"CAST({part}({x}) AS INTEGER)", SqlType("number", 10, 0, integer=True)

    def visit_Year(self, node: exp.Year) -> tuple[str, SqlType]:
        return self._date_part(node, "year")

    def visit_Month(self, node: exp.Month) -> tuple[str, SqlType]:
        return self._date_part(node, "month")

    def visit_Day(self, node: exp.Day) -> tuple[str, SqlType]:
        return self._date_part(node, "day")

    visit_DayOfMonth = visit_Day

    def visit_Quarter(self, node: exp.Quarter) -> tuple[str, SqlType]:
        return self._date_part(node, "quarter")

    def visit_TsOrDsAdd(self, node: exp.TsOrDsAdd) -> tuple[str, SqlType]:
        """``date_add(d, n)`` (``date_sub(d, n)`` reaches here as ``date_add(d, n * -1)``) of
        a DATE by an integer of at most INT's range: ``n`` days later in both engines. Past
        the range of dates DuckDB fails, and Spark decides. Of a TIMESTAMP, Spark adds to
        its date (an implicit cast to DATE), as ``CAST(ts AS DATE)`` gives it."""
        unit = node.args.get("unit")
        if unit is not None and unit.name.upper() != "DAY":
            raise Untranslatable(f"DATE_ADD by {unit.name}")
        x, t = self._operand(node.this, ("date", "timestamp"), "DATE_ADD")
        if t.family == "timestamp":
            x = f"CAST({x} AS DATE)"
        n, nt = self._operand(node.expression, "number", "DATE_ADD's days")
        if nt.family == "number" and not (nt.integer and nt.precision <= 10):
            raise Untranslatable(f"DATE_ADD by a number that is not an INT ({node.sql('spark')})")
        return f"CAST(({x} + CAST({n} AS INTEGER)) AS DATE)", SqlType("date")
