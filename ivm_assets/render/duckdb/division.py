"""Spark's division in DuckDB SQL: DECIMALs divided by :func:`spark_divide`, a Python
function registered on the connection (:func:`register`) that rounds as Spark does (DuckDB
itself divides DECIMALs in floating point), and divisors that fail on zero.
"""

from __future__ import annotations

import decimal

import pyarrow as pa

from ivm_assets.ir import decimal_rules


def nonzero(sql: str) -> str:
    """``sql`` as a divisor: a division by zero fails in DuckDB, and the epoch goes to Spark,
    which decides (an error under ANSI mode, else NULL)."""
    return f"(CASE WHEN {sql} = 0 THEN error('division by zero') ELSE {sql} END)"


def decimal_divide(left: str, right: str, precision: int, scale: int) -> str:
    """DuckDB SQL dividing two DECIMAL values as Spark does (see :func:`spark_divide`)."""
    call = f"{SPARK_DIVIDE}(CAST({left} AS VARCHAR), CAST({nonzero(right)} AS VARCHAR), {precision}, {scale})"
    return f"CAST({call} AS DECIMAL({precision}, {scale}))"


SPARK_DIVIDE = "ivm_spark_divide"


def spark_divide(left: pa.Array, right: pa.Array, precision: pa.Array, scale: pa.Array) -> pa.Array:
    """:func:`ivm_assets.ir.decimal_rules.divide` over DuckDB's text form of the operands; a
    quotient too wide for the result type fails (Spark's overflow: the epoch goes to Spark,
    which reports it as Spark does)."""
    out = []
    for a, b, p, s in zip(left.to_pylist(), right.to_pylist(), precision.to_pylist(), scale.to_pylist()):
        if a is None or b is None:
            out.append(None)
            continue
        q = decimal_rules.divide(decimal.Decimal(a), decimal.Decimal(b), p, s)
        if q is None:
            raise ArithmeticError(f"{a} / {b} does not fit DECIMAL({p}, {s})")
        out.append(str(q))
    return pa.array(out, pa.string())


def register(con) -> None:
    """Make :func:`spark_divide` callable from ``con``'s SQL."""
    con.create_function(SPARK_DIVIDE, spark_divide, ["VARCHAR", "VARCHAR", "INTEGER", "INTEGER"], "VARCHAR", type="arrow")
