"""DuckDB's side of the value types (:class:`~ivm_assets.ir.types.SqlType`): the DuckDB type
that holds Spark's values of a type, and DATEs and timestamps compared as Spark compares
them (as instants in the session zone beside a TIMESTAMP), written as DuckDB SQL."""

from __future__ import annotations

from ivm_assets.ir.types import SqlType

INT_NAMES = {3: "TINYINT", 5: "SMALLINT", 10: "INTEGER", 20: "BIGINT"}


def integer_name(digits: int) -> str:
    """The integer type of a value of ``digits`` digits (a COUNT's 19 is a BIGINT)."""
    return next(name for bound, name in INT_NAMES.items() if digits <= bound) if digits <= 20 else "HUGEINT"


def duckdb_type(t: SqlType) -> str | None:
    """The DuckDB type that holds Spark's values of type ``t`` (None: a family without one here)."""
    if t.family == "number":
        return integer_name(t.precision) if t.integer else f"DECIMAL({t.precision}, {t.scale})"
    return {"double": "DOUBLE", "float": "FLOAT", "string": "VARCHAR", "date": "DATE", "boolean": "BOOLEAN"}.get(t.family)


def as_compared(x: str, t: SqlType, compared: SqlType) -> str:
    """``x``, a value of type ``t``, as it is compared with values of the :func:`~ivm_assets.ir.types.compared_type`
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
