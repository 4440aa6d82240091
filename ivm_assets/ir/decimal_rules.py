"""Spark's DECIMAL rules, written once for both engines: result types of arithmetic, SUM and AVG,
and the value of a division, rounded as Spark rounds it.

Spark computes a DECIMAL quotient as Java's ``BigDecimal`` does with 38 significant digits,
half up, then rounds it half up to the result type's scale; a value too wide for the result
type is NULL (ANSI off) or an error (ANSI on). AVG over a DECIMAL divides its exact sum by
its count straight into the AVG's own type, DECIMAL(p + 4, s + 4) bounded by 38 digits: one
rounding. (Dividing with SQL's ``/`` first would round twice, at the scale ``/`` derives
and again at the AVG's: 1 / 20202 at DECIMAL(38, 0) is 0.0000 as Spark's AVG, but rounds
to 0.000050 and then to 0.0001.)

>>> divide(Decimal(1), Decimal(20202), 38, 4)
Decimal('0.0000')
>>> divide(Decimal("1E-10"), Decimal(3), *average_type(38, 10))
Decimal('3.333E-11')
>>> divide(Decimal(10) ** 30, Decimal(1), *average_type(38, 10)) is None  # 31 digits do not fit DECIMAL(38, 14)
True
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Context, Decimal

MAX_PRECISION = 38
# Raised (ANSI mode) by a rule computing a DECIMAL value that does not fit its type, as
# Spark names its own overflow.
OVERFLOW = "NUMERIC_VALUE_OUT_OF_RANGE"
# The fewest fractional digits Spark keeps when it narrows a result type to 38 digits.
MIN_ADJUSTED_SCALE = 6

_QUOTIENT = Context(prec=MAX_PRECISION, rounding=ROUND_HALF_UP)
_WIDE = Context(prec=100, rounding=ROUND_HALF_UP)


def parse_type(name: str) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMAL type named as Spark's ``simpleString`` names it; None
    for any other type.

    >>> parse_type("decimal(12,2)"), parse_type("bigint")
    ((12, 2), None)
    """
    found = re.fullmatch(r"decimal\((\d+),(\d+)\)", name)
    return (int(found.group(1)), int(found.group(2))) if found else None


def bounded(precision: int, scale: int) -> tuple[int, int]:
    """Spark's ``DecimalType.bounded``: each of precision and scale capped at 38."""
    return min(precision, MAX_PRECISION), min(scale, MAX_PRECISION)


def divide_type(left: tuple[int, int], right: tuple[int, int]) -> tuple[int, int]:
    """Spark's DECIMAL type of ``left / right`` (precision loss allowed, Spark's default).

    >>> divide_type((38, 10), (20, 0))
    (38, 10)
    """
    (p1, s1), (p2, s2) = left, right
    scale = max(MIN_ADJUSTED_SCALE, s1 + p2 + 1)
    return adjusted_type(p1 - s1 + s2 + scale, scale)


def adjusted_type(precision: int, scale: int) -> tuple[int, int]:
    """Spark's ``DecimalType.adjustPrecisionScale`` (precision loss allowed, Spark's default):
    the type of an arithmetic result whose exact type is DECIMAL(precision, scale). Past 38
    digits the integer digits are kept and the scale reduced, to no fewer than 6 digits; the
    value is then rounded half up to that scale.

    >>> adjusted_type(47, 12), adjusted_type(26, 2)
    ((38, 6), (26, 2))
    """
    if precision <= MAX_PRECISION:
        return precision, scale
    int_digits = precision - scale
    return MAX_PRECISION, max(MAX_PRECISION - int_digits, min(scale, MIN_ADJUSTED_SCALE))


def sum_type(precision: int, scale: int) -> tuple[int, int]:
    """The type of SUM over DECIMAL(precision, scale)."""
    return bounded(precision + 10, scale)


def average_type(precision: int, scale: int) -> tuple[int, int]:
    """The type of AVG over DECIMAL(precision, scale)."""
    return bounded(precision + 4, scale + 4)


def divide(left: Decimal, right: Decimal, precision: int, scale: int) -> Decimal | None:
    """``left / right`` as Spark computes it into DECIMAL(precision, scale): the quotient to
    38 significant digits, then to ``scale`` digits, half up each time; None when it does not
    fit the type (Spark's overflow). ``right`` must not be zero."""
    quotient = _QUOTIENT.divide(left, right).quantize(Decimal(1).scaleb(-scale), context=_WIDE)
    if quotient != 0 and quotient.adjusted() + 1 > precision - scale:
        return None
    return quotient
