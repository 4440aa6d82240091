"""Value types as the in-process renderer reasons with them (:class:`SqlType`), and Spark's
rules for them: an Arrow column's type, the type several values share (CASE branches, IN
lists, comparisons: :func:`common_type`, :func:`compared_type`). DECIMAL result types are
:mod:`ivm_assets.ir.decimal_rules`'; how DuckDB names and compares these types is
:mod:`ivm_assets.render.duckdb.sql_types`'.

A rule Spark applies that is not modelled here (an implicit cast between families, a
DECIMAL converted to DOUBLE with two roundings) raises :class:`~ivm_assets.errors.Untranslatable`:
the expression is computed by Spark alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ivm_assets.ir.decimal_rules import MAX_PRECISION
from ivm_assets.errors import Untranslatable


@dataclass(frozen=True)
class SqlType:
    """A value's type as far as the rules need it: family, and DECIMAL precision/scale (an
    integer of n digits counts as DECIMAL(n, 0), as Spark widens it)."""

    family: str  # number | string | date | timestamp | boolean | null
    precision: int = 0
    scale: int = 0
    integer: bool = False
    # An integer literal's own digits: Spark gives it DECIMAL(digits, 0) beside a DECIMAL
    # (spark.sql.legacy.literal.pickMinimumPrecision, on by default), a column its type's.
    literal_digits: int = 0
    # A TIMESTAMP_NTZ: a wall time, which becomes an instant only in the session zone.
    wall: bool = False

    def as_decimal(self) -> tuple[int, int]:
        """(precision, scale) of this number as Spark's DECIMAL arithmetic sees it."""
        return (self.literal_digits or self.precision, self.scale)


# Families of values the rules handle (ordered and compared alike in both engines).
VALUE_FAMILIES = ("number", "string", "date", "timestamp", "boolean")
# DOUBLE values enter expressions (comparisons, + − ×), not keys, orders or MIN/MAX: there
# −0.0 and NaN would need Spark's normalisation, which the operators' rules do not mirror.
# FLOAT values only meet FLOATs (comparisons, CASE, COALESCE) and casts: Spark widens a FLOAT
# beside other numbers by rules that depend on ANSI mode (to FLOAT or to DOUBLE), and
# computes FLOAT arithmetic in single precision.
FAMILIES = (*VALUE_FAMILIES, "double", "float", "null")
DOUBLE = SqlType("double")
NULL = SqlType("null")
BOOL = SqlType("boolean")
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}


def arrow_type(t: pa.DataType) -> SqlType:
    """The :class:`SqlType` of a column of Arrow type ``t``; a type outside the rules is a
    family of its own (its name), which only a bare column reference may pass on."""
    if pa.types.is_integer(t):
        return SqlType("number", _INT_DIGITS[t.bit_width], 0, integer=True)
    if pa.types.is_decimal(t):
        return SqlType("number", t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return SqlType("string")
    if pa.types.is_date32(t):
        return SqlType("date")
    if pa.types.is_timestamp(t):
        return SqlType("timestamp", wall=t.tz is None)
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_float64(t):
        return DOUBLE
    if pa.types.is_float32(t):
        return SqlType("float")
    return SqlType(str(t))


def common_type(types: list[SqlType], what: str) -> SqlType:
    """The type values of ``types`` share (CASE branches, IN lists, comparisons)."""
    known = [t for t in types if t.family != "null"]
    if not known:
        return NULL
    families = {t.family for t in known}
    if "double" in families and families <= {"number", "double", "float"} and len(families) > 1:
        for t in known:
            widens_exactly(t, what)
        return DOUBLE  # Spark widens integers, DECIMALs and FLOATs (exactly) to DOUBLE beside a DOUBLE
    if len(families) > 1:
        raise Untranslatable(f"{what} compares or mixes {' and '.join(sorted(families))} (Spark casts implicitly)")
    if len({t.wall for t in known}) > 1:
        raise Untranslatable(f"{what} mixes TIMESTAMP and TIMESTAMP_NTZ (Spark casts implicitly)")
    if known[0].family != "number":
        return known[0]
    scale = max(t.scale for t in known)
    digits = max(t.precision - t.scale for t in known)
    return SqlType("number", min(digits + scale, MAX_PRECISION), scale, integer=all(t.integer for t in known))


def compared_type(types: list[SqlType], what: str) -> SqlType:
    """The type values of ``types`` are compared as (``=``, ``<``, BETWEEN, IN): their
    :func:`common_type`, but DATEs, TIMESTAMP_NTZs and TIMESTAMPs together are compared as
    the widest: a DATE as its midnight, and beside a TIMESTAMP each as an instant in the
    session zone (see :func:`as_compared`)."""
    known = [t for t in types if t.family != "null"]
    if known and {t.family for t in known} <= {"date", "timestamp"} and len({(t.family, t.wall) for t in known}) > 1:
        instant = any(t.family == "timestamp" and not t.wall for t in known)
        return SqlType("timestamp", wall=not instant)
    return common_type(types, what)


def widens_exactly(t: SqlType, what: str) -> None:
    """Refuse a DECIMAL that DuckDB might convert to DOUBLE differently from Spark.

    Spark converts a DECIMAL to the nearest DOUBLE (``BigDecimal.doubleValue``). DuckDB
    converts the unscaled integer, then divides by 10^scale: one correctly rounded division
    of two exact values while the unscaled value has at most 15 digits (below 2^53), but two
    roundings beyond. Integers convert alike in both (to the nearest DOUBLE).
    """
    if t.family == "number" and not t.integer and t.as_decimal()[0] > 15:
        raise Untranslatable(f"{what}: a DECIMAL of {t.as_decimal()[0]} digits widened to DOUBLE (rounded differently)")
