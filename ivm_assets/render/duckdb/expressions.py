"""Spark SQL expressions that DuckDB evaluates exactly as Spark does, rendered as DuckDB SQL.

Operators hold their expressions as Spark SQL text (:mod:`ivm_assets.sql.plan`). An epoch
computed in process (:mod:`ivm_assets.render.duckdb.epoch`) evaluates them with DuckDB, which must
give the value Spark gives, row for row: a view is never silently wrong. So translation
is by rule, and an expression outside the rules raises :class:`Untranslatable` with the
construct, which keeps that view's epochs in Spark. The rules:

- columns of integer, DECIMAL, STRING, DATE, TIMESTAMP and BOOLEAN type; FLOAT columns
  beside FLOATs and in casts (see :mod:`~ivm_assets.ir.types`); DOUBLE columns in
  comparisons and ``+ − ×`` (IEEE in both engines; an integer or DECIMAL beside a DOUBLE is
  widened to DOUBLE, as Spark does), not ``/`` (Spark's division by zero);
- literals: integers, decimals, strings without backslashes, ``CAST('yyyy-mm-dd' AS DATE)``,
  ``TIMESTAMP 'yyyy-mm-dd hh:mm:ss'`` (a wall time in the session zone, :mod:`~ivm_assets.render.duckdb.casts`),
  TRUE/FALSE/NULL; a date literal plus or minus an ``INTERVAL n DAY|WEEK|MONTH|YEAR`` is
  folded here with Spark's rule (months clamp to the month's last day);
- ``+ - *`` and unary minus over numbers. Spark types DECIMAL results by its own rules
  (:func:`~ivm_assets.ir.decimal_rules.adjusted_type`) and *rounds* half up when they exceed 38
  digits; DuckDB computes the exact value over DECIMAL(38, s) operands and rounds it the same
  way (an exact value past 38 digits, or an overflow, is an error here and Spark decides);
- comparisons, ``<=>``, BETWEEN, IN, IS [NOT] NULL, AND/OR/NOT (three-valued in both), LIKE
  and NOT LIKE with a literal pattern (its escapes, ``\\`` or an ESCAPE character, read as
  Spark reads them), CASE (searched and simple), COALESCE and NULLIF; the operands of one
  comparison must be of one family (numbers, text, dates, …): Spark's implicit casts
  between families ('1.0' = 1) are not mirrored, but DATEs, TIMESTAMP_NTZs and TIMESTAMPs
  are compared as Spark compares them: as instants in the session zone beside a TIMESTAMP
  (a wall time that comes twice as its earlier instant), a DATE as its midnight;
- ``/``: integers, and anything beside a DOUBLE, in double precision as Spark does; DECIMALs by :func:`~ivm_assets.render.duckdb.division.spark_divide`, a
  Python function registered in DuckDB that rounds as Spark does (DuckDB itself divides
  DECIMALs in floating point). A division by zero fails here, and Spark decides;
- casts (:mod:`~ivm_assets.render.duckdb.casts`) where both engines give the same value: between
  numbers (to an integer truncated, to DECIMAL rounded half up), of strings in canonical
  form, to STRING of numbers, dates, timestamps and booleans, of a TIMESTAMP to DATE, of a
  DATE or TIMESTAMP to TIMESTAMP or TIMESTAMP_NTZ; ``to_date(x)``;
- date and time functions (:mod:`~ivm_assets.render.duckdb.date_functions`): parts of a DATE or
  TIMESTAMP in the session zone, ``date_add``/``date_sub``/``add_months``, ``datediff``,
  ``last_day``, ``trunc``, ``date_trunc`` and ``date_format``;
- string functions (:mod:`~ivm_assets.render.duckdb.text_functions`): ``substring``, ``length``,
  ``concat``/``||``, ``concat_ws``, ``left``/``right``, ``replace``,
  ``startswith``/``endswith``/``contains``, ``trim`` of spaces, ``upper``/``lower`` of
  ASCII text;
- numeric functions (:mod:`~ivm_assets.render.duckdb.number_functions`): ``abs``,
  ``round``/``bround``, ``floor``/``ceil``, ``%``, ``pmod``, ``greatest``/``least``; ``IF``, ``nvl2``,
  ``try_divide`` and ``isnan``;
- window functions (the window operator's, :mod:`~ivm_assets.render.duckdb.window_functions`):
  ROW_NUMBER, RANK, DENSE_RANK, LAG, LEAD, COUNT, SUM and AVG of integers and DECIMALs of
  up to 18 digits, MIN and MAX over the default frame or ROWS/RANGE frames without RANGE offsets,
  partitioned and ordered by columns of the value families, NULL order as Spark's;
- other functions and casts: refused.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from functools import lru_cache

from sqlglot import exp, parse_one
from sqlglot.errors import ParseError

from ivm_assets.ir.decimal_rules import MAX_PRECISION, adjusted_type, divide_type
from ivm_assets.duckdb_names import q, string_literal
from ivm_assets.render.duckdb.casts import Casts
from ivm_assets.render.duckdb.date_functions import DateFunctions
from ivm_assets.render.duckdb import division, number_functions
from ivm_assets.render.duckdb.division import decimal_divide, nonzero
from ivm_assets.render.duckdb.number_functions import NumberFunctions
from ivm_assets.render.duckdb.regex_functions import RegexFunctions
from ivm_assets.ir.types import BOOL, DOUBLE, FAMILIES, NULL, SqlType, common_type, compared_type
from ivm_assets.render.duckdb.sql_types import INT_NAMES, as_compared
from ivm_assets.render.duckdb.text_functions import TextFunctions
from ivm_assets.errors import Untranslatable
from ivm_assets.render.duckdb.window_functions import WindowFunctions
from ivm_assets.sql.dialect import DIALECT


def _add_interval(day: dt.date, amount: int, unit: str) -> dt.date:
    """Spark's date ± interval: days exactly, months clamped to the month's last day."""
    if unit in ("DAY", "WEEK"):
        return day + dt.timedelta(days=amount * (7 if unit == "WEEK" else 1))
    months = amount * (12 if unit == "YEAR" else 1)
    year, month = divmod(day.year * 12 + day.month - 1 + months, 12)
    return dt.date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COMPARISONS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=", exp.NullSafeEQ: "IS NOT DISTINCT FROM"}


class _Translator(TextFunctions, RegexFunctions, DateFunctions, NumberFunctions, Casts, WindowFunctions):
    def __init__(self, columns: dict[str, SqlType]) -> None:
        self.columns = columns

    def __call__(self, node: exp.Expression) -> tuple[str, SqlType]:
        visit = getattr(self, f"visit_{type(node).__name__}", None)
        if visit is None:
            raise Untranslatable(f"no in-process rule for {type(node).__name__.upper()} ({node.sql('spark')})")
        if node.args.get("negate") and not isinstance(node, exp.Like):
            # sqlglot marks some negations on the node itself (x NOT LIKE p is a Like with
            # negate): a visitor that does not read the mark would compute the opposite.
            raise Untranslatable(f"no in-process rule for a negated {type(node).__name__.upper()} ({node.sql('spark')})")
        return visit(node)

    def _operand(self, node: exp.Expression, family: str | tuple[str, ...], what: str) -> tuple[str, SqlType]:
        """``node`` translated, refused unless of ``family`` (one or several, or NULL);
        ``what`` names the construct that needs it in the message."""
        sql, t = self(node)
        if t.family not in (*((family,) if isinstance(family, str) else family), "null"):
            raise Untranslatable(f"{what} over a {t.family}")
        return sql, t

    def visit_Paren(self, node: exp.Paren) -> tuple[str, SqlType]:
        sql, t = self(node.this)
        return f"({sql})", t

    def visit_Column(self, node: exp.Column) -> tuple[str, SqlType]:
        if node.table or node.name not in self.columns:
            raise Untranslatable(f"column {node.sql('spark')} is not an input column")
        t = self.columns[node.name]
        if t.family not in FAMILIES:
            raise Untranslatable(f"an expression over a column of type {t.family} ({node.name})")
        return q(node.name), t

    def visit_Literal(self, node: exp.Literal) -> tuple[str, SqlType]:
        text = node.this
        if node.is_string:
            if "\\" in text:
                raise Untranslatable("a string literal with a backslash (escapes differ)")
            return string_literal(text), SqlType("string")
        if re.fullmatch(r"\d+", text):
            if int(text) < 2**63:
                digits = 10 if int(text) < 2**31 else 20
                return text, SqlType("number", digits, 0, integer=True, literal_digits=len(text.lstrip("0")) or 1)
        elif re.fullmatch(r"\d*\.\d+|\d+\.\d*", text):
            whole, frac = text.split(".")
            scale, precision = len(frac), max(len((whole + frac).lstrip("0")), len(frac), 1)
            if precision <= MAX_PRECISION:
                return f"CAST('{text}' AS DECIMAL({precision}, {scale}))", SqlType("number", precision, scale)
        raise Untranslatable(f"the number literal {text}")

    def visit_Boolean(self, node: exp.Boolean) -> tuple[str, SqlType]:
        return ("TRUE" if node.this else "FALSE"), BOOL

    def visit_Null(self, node: exp.Null) -> tuple[str, SqlType]:
        return "NULL", NULL

    def _date_literal(self, node: exp.Expression) -> dt.date | None:
        if isinstance(node, exp.Paren):
            return self._date_literal(node.this)
        if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.DATE and isinstance(node.this, exp.Literal):
            text = node.this.this
            if node.this.is_string and _DATE.fullmatch(text):
                try:
                    return dt.date.fromisoformat(text)
                except ValueError:
                    return None
        if isinstance(node, (exp.Add, exp.Sub)) and isinstance(node.expression, exp.Interval):
            day, interval = self._date_literal(node.this), node.expression
            unit = interval.unit.name.upper().rstrip("S") if interval.unit else ""
            if day is not None and isinstance(interval.this, exp.Literal) and re.fullmatch(r"-?\d+", interval.this.this) and unit in ("DAY", "WEEK", "MONTH", "YEAR"):
                amount = int(interval.this.this) * (1 if isinstance(node, exp.Add) else -1)
                return _add_interval(day, amount, unit)
        return None

    def _arithmetic(self, node: exp.Binary, op: str) -> tuple[str, SqlType]:
        if op in "+-" and (day := self._date_literal(node)) is not None:
            return f"DATE '{day.isoformat()}'", SqlType("date")
        what = node.sql("spark")
        (left, lt), (right, rt) = (self._operand(side, ("number", "double", "float"), f"{op} in {what}") for side in (node.this, node.expression))
        _float_beside_double(lt, rt, f"{op} in {what}")
        if NULL in (lt, rt):
            return "NULL", NULL
        if DOUBLE in (lt, rt):
            # IEEE arithmetic in both engines, bit for bit; no overflow error in either
            # (Spark's ANSI mode leaves DOUBLE alone): the other operand widened first.
            common_type([lt, rt], what)
            return f"(CAST({left} AS DOUBLE) {op} CAST({right} AS DOUBLE))", DOUBLE
        if lt.integer and rt.integer:
            # Spark keeps the wider operand's type (an overflow fails under ANSI mode); the
            # cast makes DuckDB fail too instead of widening, and the epoch goes to Spark.
            digits = max(lt.precision, rt.precision)
            return f"CAST(({left} {op} {right}) AS {INT_NAMES[digits]})", SqlType("number", digits, 0, integer=True)
        (p1, s1), (p2, s2) = lt.as_decimal(), rt.as_decimal()
        exact = s1 + s2 if op == "*" else max(s1, s2)
        precision, scale = adjusted_type(p1 + p2 + 1 if op == "*" else max(p1 - s1, p2 - s2) + exact + 1, exact)
        # Operands widened to 38 digits at their own scale: DuckDB computes the exact value
        # (or fails on overflow), never a narrower intermediate that overflows first.
        value = f"(CAST({left} AS DECIMAL(38, {s1})) {op} CAST({right} AS DECIMAL(38, {s2})))"
        if scale < exact:
            # Spark narrows the type to 38 digits and rounds the exact value half up (away
            # from zero) to its scale, as DuckDB's ROUND of a DECIMAL does. An exact value
            # of more than 38 digits fails in DuckDB, and the epoch runs in Spark.
            if exact > MAX_PRECISION:
                raise Untranslatable(f"{what}: the exact DECIMAL has {exact} fractional digits (DuckDB holds 38; Spark rounds to {scale})")
            value = f"CAST(ROUND({value}, {scale}) AS DECIMAL(38, {scale}))"
        return value, SqlType("number", precision, scale)

    def visit_Div(self, node: exp.Div) -> tuple[str, SqlType]:
        what = f"/ in {node.sql('spark')}"
        (left, lt), (right, rt) = (self._operand(side, ("number", "double", "float"), what) for side in (node.this, node.expression))
        _float_beside_double(lt, rt, what)
        if NULL in (lt, rt):
            return "NULL", NULL
        if DOUBLE in (lt, rt) or (lt.integer and rt.integer):
            # Spark divides integers, and anything beside a DOUBLE, as DOUBLEs (IEEE division,
            # bit for bit in both engines); by zero (−0.0 too) it fails (ANSI) or gives NULL:
            # DuckDB fails here too, and Spark's epoch decides.
            common_type([lt, rt], what)  # refuses a DECIMAL that would widen otherwise than in Spark
            return f"(CAST({left} AS DOUBLE) / CAST({nonzero(right)} AS DOUBLE))", SqlType("double")
        precision, scale = divide_type(lt.as_decimal(), rt.as_decimal())
        return decimal_divide(left, right, precision, scale), SqlType("number", precision, scale)

    def visit_Add(self, node: exp.Add) -> tuple[str, SqlType]:
        return self._arithmetic(node, "+")

    def visit_Sub(self, node: exp.Sub) -> tuple[str, SqlType]:
        return self._arithmetic(node, "-")

    def visit_Mul(self, node: exp.Mul) -> tuple[str, SqlType]:
        return self._arithmetic(node, "*")

    def visit_Neg(self, node: exp.Neg) -> tuple[str, SqlType]:
        sql, t = self._operand(node.this, ("number", "double"), "unary minus")
        return f"(-{sql})", t

    def _compare(self, node: exp.Binary) -> tuple[str, SqlType]:
        (left, lt), (right, rt) = self(node.this), self(node.expression)
        compared = compared_type([lt, rt], node.sql("spark"))
        if compared == DOUBLE:
            # Compared as DOUBLEs, as Spark widens them: NaN equals NaN and is above every
            # other value, −0.0 equals 0.0, in both engines.
            left, right = f"CAST({left} AS DOUBLE)", f"CAST({right} AS DOUBLE)"
        left, right = as_compared(left, lt, compared), as_compared(right, rt, compared)
        return f"({left} {_COMPARISONS[type(node)]} {right})", BOOL

    visit_EQ = visit_NEQ = visit_LT = visit_LTE = visit_GT = visit_GTE = visit_NullSafeEQ = _compare

    def visit_Nullif(self, node: exp.Nullif) -> tuple[str, SqlType]:
        """Spark's ``If(a = b, NULL, a)``: compared as ``=`` compares, typed as ``a``."""
        value, t = self(node.this)
        equal, _ = self._compare(exp.EQ(this=node.this.copy(), expression=node.expression.copy()))
        return f"(CASE WHEN {equal} THEN NULL ELSE {value} END)", t

    def _logic(self, node: exp.Expression, op: str) -> tuple[str, SqlType]:
        (left, _), (right, _) = (self._operand(side, "boolean", op) for side in (node.this, node.expression))
        return f"({left} {op} {right})", BOOL

    def visit_And(self, node: exp.And) -> tuple[str, SqlType]:
        return self._logic(node, "AND")

    def visit_Or(self, node: exp.Or) -> tuple[str, SqlType]:
        return self._logic(node, "OR")

    def visit_Not(self, node: exp.Not) -> tuple[str, SqlType]:
        sql, _ = self._operand(node.this, "boolean", "NOT")
        return f"(NOT {sql})", BOOL

    def visit_IsNan(self, node: exp.IsNan) -> tuple[str, SqlType]:
        """``isnan(x)``: FALSE for NULL, as in Spark (DuckDB's is NULL); a number is cast to
        DOUBLE first, as Spark casts it (never NaN)."""
        x, _ = self._operand(node.this, ("number", "double", "float"), "isnan")
        return f"COALESCE(isnan(CAST({x} AS DOUBLE)), FALSE)", BOOL

    def visit_Is(self, node: exp.Is) -> tuple[str, SqlType]:
        if not isinstance(node.expression, exp.Null):
            raise Untranslatable(f"IS {node.expression.sql('spark')}")
        sql, _ = self(node.this)
        return f"({sql} IS NULL)", BOOL

    def visit_Between(self, node: exp.Between) -> tuple[str, SqlType]:
        (x, xt), (low, lt), (high, ht) = self(node.this), self(node.args["low"]), self(node.args["high"])
        compared = compared_type([xt, lt, ht], node.sql("spark"))
        x, low, high = as_compared(x, xt, compared), as_compared(low, lt, compared), as_compared(high, ht, compared)
        return f"({x} BETWEEN {low} AND {high})", BOOL

    def visit_In(self, node: exp.In) -> tuple[str, SqlType]:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise Untranslatable("IN over a subquery")
        x, xt = self(node.this)
        items = [self(e) for e in node.expressions]
        compared = compared_type([xt, *(t for _, t in items)], node.sql("spark"))
        x, listed = as_compared(x, xt, compared), [as_compared(s, t, compared) for s, t in items]
        return f"({x} IN ({', '.join(listed)}))", BOOL

    def visit_Like(self, node: exp.Like, escape: str = "\\") -> tuple[str, SqlType]:
        """LIKE with a literal pattern (sqlglot has read the literal's string escapes as Spark
        does), its LIKE escapes read as Spark reads them (``escape``: the ESCAPE character,
        ``\\`` by default) and written for DuckDB with ``ESCAPE '\\'``."""
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise Untranslatable("LIKE with a pattern that is not a plain literal")
        x, _ = self._operand(node.this, "string", "LIKE")
        like = f"({x} LIKE {_like_pattern(pattern.this, escape)} ESCAPE '\\')"
        return (f"(NOT {like})" if node.args.get("negate") else like), BOOL

    def visit_Escape(self, node: exp.Escape) -> tuple[str, SqlType]:
        """``LIKE p ESCAPE 'c'`` with one literal escape character."""
        escape = node.expression
        if not isinstance(node.this, exp.Like) or not (isinstance(escape, exp.Literal) and escape.is_string and len(escape.this) == 1):
            raise Untranslatable(f"an ESCAPE clause ({node.sql('spark')})")
        return self.visit_Like(node.this, escape.this)

    def visit_Case(self, node: exp.Case) -> tuple[str, SqlType]:
        if node.this is not None:
            # CASE x WHEN v THEN … is CASE WHEN x = v THEN … in Spark (a NULL x matches
            # nothing), compared as = compares.
            ifs = [exp.If(this=exp.EQ(this=node.this.copy(), expression=b.this.copy()), true=b.args["true"].copy()) for b in node.args["ifs"]]
            default = node.args.get("default")
            return self.visit_Case(exp.Case(ifs=ifs, default=default.copy() if default is not None else None))
        parts, results = [], []
        for branch in node.args["ifs"]:
            cond, _ = self._operand(branch.this, "boolean", "a CASE condition")
            value, vt = self(branch.args["true"])
            parts.append(f"WHEN {cond} THEN {value}")
            results.append(vt)
        default = node.args.get("default")
        if default is not None:
            value, vt = self(default)
            parts.append(f"ELSE {value}")
            results.append(vt)
        return f"(CASE {' '.join(parts)} END)", common_type(results, "CASE")

    def visit_If(self, node: exp.If) -> tuple[str, SqlType]:
        """``IF(c, a, b)``: Spark's CASE WHEN c THEN a ELSE b END."""
        branch = exp.If(this=node.this.copy(), true=node.args["true"].copy())
        default = node.args.get("false")
        return self.visit_Case(exp.Case(ifs=[branch], default=default.copy() if default is not None else None))

    def visit_Nvl2(self, node: exp.Nvl2) -> tuple[str, SqlType]:
        """``nvl2(x, a, b)``: Spark's IF(x IS NOT NULL, a, b)."""
        test = exp.Not(this=exp.Is(this=node.this.copy(), expression=exp.Null()))
        return self.visit_If(exp.If(this=test, true=node.args["true"].copy(), false=node.args["false"].copy()))

    def visit_SafeDivide(self, node: exp.SafeDivide) -> tuple[str, SqlType]:
        """``try_divide(a, b)``: ``a / b``, NULL where ``b`` is zero (in both ANSI modes). A
        DECIMAL quotient past its type fails in DuckDB, and Spark gives its NULL."""
        quotient, t = self.visit_Div(exp.Div(this=node.this.copy(), expression=node.expression.copy()))
        divisor, _ = self(node.expression)
        return f"(CASE WHEN {divisor} = 0 THEN NULL ELSE {quotient} END)", t

    def visit_Anonymous(self, node: exp.Anonymous) -> tuple[str, SqlType]:
        """The functions sqlglot leaves as plain calls: ``to_date``, ``date_format``, ``bround``, ``pmod`` and
        ``regexp`` (``rlike``'s other name)."""
        visits = {"to_date": self._to_date, "date_format": self._date_format, "bround": self._bround, "pmod": self._pmod, "regexp": self._regexp}
        visit = visits.get(str(node.this).lower())
        if visit is None:
            raise Untranslatable(f"no in-process rule for {str(node.this).upper()} ({node.sql('spark')})")
        return visit(node.expressions)

    def visit_Coalesce(self, node: exp.Coalesce) -> tuple[str, SqlType]:
        items = [self(e) for e in [node.this, *node.expressions]]
        return f"COALESCE({', '.join(s for s, _ in items)})", common_type([t for _, t in items], "COALESCE")


def _float_beside_double(lt: SqlType, rt: SqlType, what: str) -> None:
    """Refuse arithmetic on a FLOAT unless beside a DOUBLE, which Spark widens it to exactly
    (FLOAT beside FLOAT, an integer or a DECIMAL is FLOAT or DOUBLE arithmetic depending on
    ANSI mode)."""
    if "float" in (lt.family, rt.family) and DOUBLE not in (lt, rt):
        raise Untranslatable(f"{what} over a float beside another type than DOUBLE")


def _like_pattern(pattern: str, escape: str) -> str:
    """``pattern`` (a LIKE pattern escaped by ``escape``, as Spark reads it) as a DuckDB string
    literal escaped by backslash: the escape before ``%``, ``_`` or itself makes that
    character literal; before anything else, or last, Spark raises: refused."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            nxt = pattern[i + 1] if i + 1 < len(pattern) else None
            if nxt is None or nxt not in ("%", "_", escape):
                raise Untranslatable(f"a LIKE pattern whose escape precedes {nxt!r} (Spark raises)")
            out.append("\\" + nxt if nxt in ("%", "_", "\\") else nxt)
            i += 2
            continue
        out.append("\\\\" if c == "\\" else c)
        i += 1
    return string_literal("".join(out))


@lru_cache(maxsize=4096)
def _parsed(sql: str) -> exp.Expression:
    try:
        return parse_one(sql, dialect=DIALECT)
    except ParseError as exc:
        raise Untranslatable(f"expression not parsed ({exc})") from exc


def register_functions(con) -> None:
    """Register on DuckDB connection ``con`` the Python functions translations call
    (Spark's DECIMAL division, Spark's rounding of DOUBLEs)."""
    division.register(con)
    number_functions.register(con)


def translate(sql: str, columns: dict[str, SqlType]) -> tuple[str, SqlType]:
    """``sql`` (Spark SQL over ``columns``) as DuckDB SQL computing the same value, and its
    type; raises :class:`Untranslatable` naming the construct outside the rules.

    >>> print(translate("`d` < CAST('1994-01-31' AS DATE) + INTERVAL '1' MONTH", {"d": SqlType("date")})[0])
    ("d" < DATE '1994-02-28')
    """
    node = _parsed(sql)
    if isinstance(node, exp.Column) and not node.table and node.name in columns:
        return q(node.name), columns[node.name]  # a value passed on as it is, whatever its type
    return _Translator(columns)(node)
