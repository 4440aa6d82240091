"""Value types as the in-process translation sees them (:class:`SqlType`), and Spark's rules
for them: an Arrow column's type, the type several values share, a DECIMAL result's type.

A rule Spark applies that DuckDB would not (a DECIMAL rounded to fit 38 digits, a DECIMAL
converted to DOUBLE with two roundings) raises :class:`~ivm_assets.errors.Untranslatable`.
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
INT_NAMES = {3: "TINYINT", 5: "SMALLINT", 10: "INTEGER", 20: "BIGINT"}


def integer_name(digits: int) -> str:
    """The integer type of a value of ``digits`` digits (a COUNT's 19 is a BIGINT)."""
    return next(name for bound, name in INT_NAMES.items() if digits <= bound) if digits <= 20 else "HUGEINT"


def duckdb_type(t: SqlType) -> str | None:
    """The DuckDB type that holds Spark's values of type ``t`` (None: a family without one here)."""
    if t.family == "number":
        return integer_name(t.precision) if t.integer else f"DECIMAL({t.precision}, {t.scale})"
    return {"double": "DOUBLE", "float": "FLOAT", "string": "VARCHAR", "date": "DATE", "boolean": "BOOLEAN"}.get(t.family)


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


def as_compared(x: str, t: SqlType, compared: SqlType) -> str:
    """``x``, a value of type ``t``, as it is compared with values of the :func:`compared_type`
    ``compared``: a DATE or timestamp as a timestamp of that kind (:func:`as_timestamp`),
    anything else as it is."""
    if compared.family != "timestamp" or t.family == "null":
        return x
    return as_timestamp(x, t, wall=compared.wall)


def as_timestamp(x: str, t: SqlType, *, wall: bool) -> str:
    """``x``, a DATE or a timestamp of type ``t``, as Spark casts it to a TIMESTAMP_NTZ
    (``wall``: a DATE its midnight, a TIMESTAMP its wall time in the session zone, DuckDB's
    casts alike) or to a TIMESTAMP (a DATE's midnight or a TIMESTAMP_NTZ's wall time its
    instant in the session zone, :func:`wall_to_instant`)."""
    if t.family == "timestamp" and t.wall == wall:
        return x
    if wall:
        return f"CAST({x} AS TIMESTAMP)"
    return wall_to_instant(x if t.family == "timestamp" else f"CAST({x} AS TIMESTAMP)")


def wall_to_instant(x: str) -> str:
    """``x``, a DuckDB TIMESTAMP (a wall time), as the TIMESTAMPTZ Spark makes of it in the
    session zone (the DuckDB connection's): Java's ``ZonedDateTime.of``, which takes the
    earlier offset for a wall time that occurs twice (a daylight-saving overlap) and moves a
    wall time in a gap forward by the gap. DuckDB's own cast agrees in gaps but takes the
    later offset in overlaps; the same wall time read three hours earlier and moved three
    hours on is the earlier instant when it shows the same wall time (an overlap of up to
    three hours), and is taken when it is earlier."""
    later = f"CAST({x} AS TIMESTAMPTZ)"
    earlier = f"(CAST({x} - INTERVAL 3 HOUR AS TIMESTAMPTZ) + INTERVAL 3 HOUR)"
    return f"(CASE WHEN CAST({earlier} AS TIMESTAMP) = {x} AND {earlier} < {later} THEN {earlier} ELSE {later} END)"


def widens_exactly(t: SqlType, what: str) -> None:
    """Refuse a DECIMAL that DuckDB might convert to DOUBLE differently from Spark.

    Spark converts a DECIMAL to the nearest DOUBLE (``BigDecimal.doubleValue``). DuckDB
    converts the unscaled integer, then divides by 10^scale: one correctly rounded division
    of two exact values while the unscaled value has at most 15 digits (below 2^53), but two
    roundings beyond. Integers convert alike in both (to the nearest DOUBLE).
    """
    if t.family == "number" and not t.integer and t.as_decimal()[0] > 15:
        raise Untranslatable(f"{what}: a DECIMAL of {t.as_decimal()[0]} digits widened to DOUBLE (rounded differently)")
