"""Numeric functions that DuckDB computes exactly as Spark does, for
:mod:`ivm_assets.render.duckdb.expressions` (whose translator takes these visits).

- ``abs`` of integers, DECIMALs and DOUBLEs, of the argument's type. ``abs`` of an integer
  type's lowest value fails in DuckDB (Spark wraps it without ANSI, fails with it).
- ``round``/``bround`` with a literal scale (half up / half even):
  - of integers: the value itself, of its type, for a scale of at least 0; rounded to a
    negative one exactly, and of its type (past its range, where Spark wraps, the value
    fails in DuckDB);
  - of DECIMAL(p, s), to Spark's type: DECIMAL(p − s + 1 + min(s, d), min(s, d)) for a scale
    d ≥ 0, DECIMAL(max(p − s + 1, 1 − d), 0) below. Both engines round the exact value;
    past the type (Spark's "risk of overflow" at 38 digits) the value fails in DuckDB;
  - of DOUBLEs, as Spark does: ``BigDecimal(Double.toString(x)).setScale(d, mode).toDouble``.
    Java's shortest decimal form is not Python's in every case before JDK 19, so
    :func:`spark_round_double` keeps a value whose digits Java writes all lie above the
    scale (1e299 to two places), rounds an exact value of at most 17 digits (2.5, 0.125) as
    it is, and otherwise both ends of the interval of decimals that read back as ``x``: where
    they agree, every form of ``x`` rounds to that value; where they do not (``x`` is the
    DOUBLE nearest a tie, 2.675 to two places) the value fails in DuckDB, and Spark decides.
    NaN and ±Infinity are kept; zero is +0.0.
- ``floor``/``ceil`` with one argument: of integers the value as a BIGINT; of DECIMAL(p, s) a
  DECIMAL(p − s + 1, 0); of a DOUBLE a BIGINT (NaN, ±Infinity and values past BIGINT fail
  in DuckDB: Java's cast saturates them).
- ``%`` of integers (the wider type; the sign of the dividend in both) and beside a DOUBLE
  (IEEE remainder, as Java's ``%``). A divisor of zero fails. DECIMAL remainders are refused.
- ``pmod`` of integers, as Spark computes it from ``%``.
- ``greatest``/``least``: NULLs skipped, the first of equal values kept, NaN above every
  number, in both; the arguments cast to the type they share.
FLOAT arguments are refused (Spark computes them in single precision).
"""

from __future__ import annotations

import decimal
import math

import pyarrow as pa
from sqlglot import exp

from ivm_assets.ir.decimal_rules import MAX_PRECISION
from ivm_assets.render.duckdb.division import nonzero
from ivm_assets.ir.types import DOUBLE, NULL, SqlType, common_type
from ivm_assets.render.duckdb.sql_types import duckdb_type
from ivm_assets.errors import Untranslatable

SPARK_ROUND_DOUBLE = "ivm_spark_round_double"
_BIGINT = SqlType("number", 20, 0, integer=True)
# More significant digits than Double.toString writes: 17 at most from JDK 19 on, 18 in the
# longest forms older JDKs were found to write (JDK-4511638), one more for margin.
_JAVA_DIGITS = 19


def _rounded(value: decimal.Decimal, scale: int, half_even: bool) -> decimal.Decimal:
    mode = decimal.ROUND_HALF_EVEN if half_even else decimal.ROUND_HALF_UP
    with decimal.localcontext() as ctx:
        ctx.prec = 1000  # room for any DOUBLE's digits at any scale it is rounded to (past it: fails)
        return value.quantize(decimal.Decimal(1).scaleb(-scale), rounding=mode)


def spark_round_double(values: pa.Array, scales: pa.Array, half_even: pa.Array) -> pa.Array:
    """Spark's ``round``/``bround`` of DOUBLEs (see the module doc): fails on a value whose
    rounding depends on which decimal form of it Java writes."""
    out = []
    for x, scale, even in zip(values.to_pylist(), scales.to_pylist(), half_even.to_pylist()):
        if x is None or math.isnan(x) or math.isinf(x):
            out.append(x)
            continue
        exact = decimal.Decimal(x)
        if exact.adjusted() - (_JAVA_DIGITS - 1) >= -scale:
            # Java writes fewer significant digits than _JAVA_DIGITS, none below the scale here:
            # rounding leaves its form as it is, which reads back as x.
            out.append(x + 0.0)  # BigDecimal has no negative zero
            continue
        if len(exact.normalize().as_tuple().digits) <= 17:
            # A short exact value (2.5, 0.125) is the one form every writer gives: its
            # digits end, and any other form in the interval would need more than 17.
            out.append(float(_rounded(exact, scale, even)) + 0.0)
            continue
        # Every decimal form that reads back as x lies between the midpoints to its
        # neighbours (ends included or not: rounding is monotonic, so it does not matter).
        with decimal.localcontext() as ctx:
            ctx.prec = 1000  # exact: a DOUBLE has at most 767 significant digits, a midpoint one more
            low = (exact + decimal.Decimal(math.nextafter(x, -math.inf))) / 2
            high = (exact + decimal.Decimal(math.nextafter(x, math.inf))) / 2
        a, b = _rounded(low, scale, even), _rounded(high, scale, even)
        if a != b:
            raise ArithmeticError(f"round({x!r}, {scale}) depends on the decimal form Java writes (Spark decides)")
        out.append(float(a) + 0.0)  # BigDecimal has no negative zero
    return pa.array(out, pa.float64())


def register(con) -> None:
    """Make :func:`spark_round_double` callable from ``con``'s SQL."""
    con.create_function(SPARK_ROUND_DOUBLE, spark_round_double, ["DOUBLE", "INTEGER", "BOOLEAN"], "DOUBLE", type="arrow")


def literal_int(node: exp.Expression, refusal: str) -> int:
    """An integer literal argument (``-2`` reaches here as a negation of ``2``); anything else
    is refused with ``refusal``."""
    negative = isinstance(node, exp.Neg)
    literal = node.this if negative else node
    if not (isinstance(literal, exp.Literal) and not literal.is_string and literal.this.isdigit()):
        raise Untranslatable(refusal)
    return -int(literal.this) if negative else int(literal.this)


class NumberFunctions:
    """Visits of ``abs``, ``round``/``bround``, ``floor``/``ceil``, ``%``, ``pmod``,
    ``greatest`` and ``least``, taken by the translator of :mod:`ivm_assets.render.duckdb.expressions`,
    whose ``_operand`` they call."""

    def visit_Abs(self, node: exp.Abs) -> tuple[str, SqlType]:
        x, t = self._operand(node.this, ("number", "double"), "ABS")
        return (f"CAST(abs({x}) AS {duckdb_type(t)})" if t.family == "number" else f"abs({x})"), t

    def visit_Round(self, node: exp.Round) -> tuple[str, SqlType]:
        return self._round(node.this, node.args.get("decimals"), half_even=False, what="ROUND")

    def _round(self, value: exp.Expression, decimals: exp.Expression | None, half_even: bool, what: str) -> tuple[str, SqlType]:
        d = 0 if decimals is None else literal_int(decimals, f"{what} with a scale other than an integer literal")
        x, t = self._operand(value, ("number", "double"), what)
        if t.family == "null":
            return "NULL", NULL
        if t.family == "double":
            return f"{SPARK_ROUND_DOUBLE}({x}, {d}, {'TRUE' if half_even else 'FALSE'})", DOUBLE
        call = "round_even" if half_even else "round"
        if t.integer:
            if d >= 0:
                return x, t
            # Spark rounds the exact value and narrows it back to its type (wrapping past
            # its range): here the narrowing fails past the range, and Spark decides.
            return f"CAST({call}(CAST({x} AS DECIMAL({MAX_PRECISION}, 0)), {d}) AS {duckdb_type(t)})", t
        p, s = t.precision, t.scale
        result = SqlType("number", min(p - s + 1 + min(s, d), MAX_PRECISION), min(s, d)) if d >= 0 else SqlType("number", min(max(p - s + 1, 1 - d), MAX_PRECISION), 0)
        return f"CAST({call}(CAST({x} AS DECIMAL({MAX_PRECISION}, {s})), {d}) AS {duckdb_type(result)})", result

    def _bround(self, args: list[exp.Expression]) -> tuple[str, SqlType]:
        if not 1 <= len(args) <= 2:
            raise Untranslatable("BROUND with other than one or two arguments")
        return self._round(args[0], args[1] if len(args) == 2 else None, half_even=True, what="BROUND")

    def _floor_ceil(self, node: exp.Expression, call: str) -> tuple[str, SqlType]:
        if node.args.get("decimals") is not None:
            raise Untranslatable(f"{call.upper()} with a scale")
        x, t = self._operand(node.this, ("number", "double"), call.upper())
        if t.family == "null":
            return "NULL", NULL
        if t.family == "double" or t.integer:
            # An integer as it is: DuckDB's floor and ceil of a BIGINT go through a DOUBLE.
            return f"CAST({x if t.integer else f'{call}({x})'} AS BIGINT)", _BIGINT
        result = SqlType("number", min(t.precision - t.scale + 1, MAX_PRECISION), 0)
        return f"CAST({call}(CAST({x} AS DECIMAL({MAX_PRECISION}, {t.scale}))) AS {duckdb_type(result)})", result

    def visit_Floor(self, node: exp.Floor) -> tuple[str, SqlType]:
        return self._floor_ceil(node, "floor")

    def visit_Ceil(self, node: exp.Ceil) -> tuple[str, SqlType]:
        return self._floor_ceil(node, "ceil")

    def visit_Mod(self, node: exp.Mod) -> tuple[str, SqlType]:
        what = f"% in {node.sql('spark')}"
        (left, lt), (right, rt) = (self._operand(side, ("number", "double"), what) for side in (node.this, node.expression))
        if NULL in (lt, rt):
            return "NULL", NULL
        if DOUBLE in (lt, rt):
            common_type([lt, rt], what)  # refuses a DECIMAL that would widen otherwise than in Spark
            return f"(CAST({left} AS DOUBLE) % CAST({nonzero(right)} AS DOUBLE))", DOUBLE
        if not (lt.integer and rt.integer):
            raise Untranslatable(f"{what}: a DECIMAL remainder")
        t = SqlType("number", max(lt.precision, rt.precision), 0, integer=True)
        return f"CAST(({left} % {nonzero(right)}) AS {duckdb_type(t)})", t

    def _pmod(self, args: list[exp.Expression]) -> tuple[str, SqlType]:
        """``pmod(a, n)`` of integers: Spark's ``r = a % n; r < 0 ? (r + n) % n : r``, in the
        wider type; a zero divisor, or ``r + n`` past the type, fails."""
        if len(args) != 2:
            raise Untranslatable("PMOD with other than two arguments")
        (a, at), (n, nt) = (self._operand(e, "number", "PMOD") for e in args)
        if NULL in (at, nt):
            return "NULL", NULL
        if not (at.integer and nt.integer):
            raise Untranslatable("PMOD of DECIMALs")
        t = SqlType("number", max(at.precision, nt.precision), 0, integer=True)
        to = duckdb_type(t)
        r = f"CAST(({a} % {nonzero(n)}) AS {to})"
        return f"(CASE WHEN {r} < 0 THEN CAST((CAST(({r} + {n}) AS {to}) % {n}) AS {to}) ELSE {r} END)", t

    def _extreme(self, node: exp.Expression, call: str) -> tuple[str, SqlType]:
        items = [self(e) for e in (node.this, *node.expressions)]
        t = common_type([it for _, it in items], call.upper())
        if t.family == "float":
            raise Untranslatable(f"{call.upper()} of FLOATs")
        to = duckdb_type(t)
        args = [f"CAST({sql} AS {to})" if t.family in ("number", "double") else sql for sql, _ in items]
        return f"{call}({', '.join(args)})", t

    def visit_Greatest(self, node: exp.Greatest) -> tuple[str, SqlType]:
        return self._extreme(node, "greatest")

    def visit_Least(self, node: exp.Least) -> tuple[str, SqlType]:
        return self._extreme(node, "least")
