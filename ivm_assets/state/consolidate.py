"""Consolidation: a change set brought to its normal form, one rule for every engine.

A change set is a z-set: rows plus a BIGINT weight ``__w``. Consolidating it sums the
weights of identical rows and drops the rows whose weight is then 0. **The rule** (every
implementation below gives the same rows and types):

- two rows are identical when each column is: NULL equals NULL; in DOUBLE and FLOAT
  columns every NaN equals every other NaN (whatever its bits), and −0.0 does **not**
  equal 0.0; other values by their type's equality (strings by their bytes: ``'a' <> 'a '``);
- the output carries one NaN, the canonical quiet NaN (Java's ``Double.NaN`` and
  ``Float.NaN``: :func:`ivm_assets.zset.normal_nans`), and each zero with its sign.

A zero keeps its sign because Spark's answer keeps it: a projection of −0.0 is −0.0, and
``CAST(x AS STRING)`` of it '-0.0'. Had consolidation grouped rows as Spark's GROUP BY does
(−0.0 with 0.0), a change from −0.0 to 0.0 would cancel and state would hold 0.0 where the
source holds −0.0. Where Spark does group zeros together (GROUP BY, DISTINCT, join keys,
partitions), the operators compare keys as Spark does (:func:`ivm_assets.zset.normal_floats`),
not this rule.

- weights are summed as BIGINT; a sum past its range is an error (Spark under ANSI, DuckDB),
  never a wrapped value; rows whose sum is 0 are dropped;
- the output is the ``columns`` in their order, then ``__w``, each of the input's type;
  with no columns, it is one row holding the total weight, or none when that is 0.

Implementations: :func:`in_spark` (DataFrames), :func:`in_duckdb` (Arrow tables in a DuckDB
connection, :func:`duckdb_sql` its query) and :func:`in_arrow` (Arrow on the driver, for
the types it compares). ``tests/state/test_consolidate.py`` holds them to equal output.

Not this rule: :func:`ivm_assets.state.driver_rows.cancelled` nets only *bitwise* identical
rows of a source's change feed (a row deleted and inserted again unchanged), so that a
change from −0.0 to 0.0 still reaches the operators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm_assets import duckdb_names
from ivm_assets.spark.arrow import empty_table
from ivm_assets.spark.batches import float_columns, negative_zero
from ivm_assets.sql.plan import q
from ivm_assets.state import driver_rows
from ivm_assets.zset import WEIGHT, normal_row_bits

if TYPE_CHECKING:
    import duckdb

__all__ = ["duckdb_sql", "in_arrow", "in_duckdb", "in_spark", "nan_normal_sql", "normal_sql", "output_schema", "signed_groups"]


def output_schema(schema: pa.Schema, columns: tuple[str, ...] | list[str]) -> pa.Schema:
    """The schema of a consolidated change set of ``columns`` taken from ``schema``."""
    return pa.schema([schema.field(c) for c in columns] + [pa.field(WEIGHT, pa.int64())])


def in_spark(df: DataFrame, columns: tuple[str, ...] | list[str]) -> DataFrame:
    """``df`` consolidated on ``columns`` (see the module doc), in Spark.

    Spark's GROUP BY groups by −0.0 as 0.0 and every NaN as the canonical one, and outputs
    those values (its optimizer's NormalizeFloatingNumbers): each float column is grouped
    with a flag saying its value is −0.0 as well, and the flagged groups get their sign
    back. SUM of a BIGINT is a BIGINT and raises on overflow under ANSI (ivm's sessions run
    with ANSI on). A global SUM over no rows is NULL, which the filter drops as it drops 0.
    """
    return signed_groups(df, columns, [F.sum(F.col(WEIGHT)).alias(WEIGHT)]).filter(F.col(WEIGHT) != 0)


def signed_groups(df: DataFrame, keys: tuple[str, ...] | list[str], aggregates: list) -> DataFrame:
    """``df`` grouped by ``keys`` as :func:`in_spark` groups rows (a zero's sign kept,
    every NaN one), with the ``aggregates`` (aliased Spark columns) of each group."""
    types = float_columns(df)
    flags = {c: f"__neg_zero{i}" for i, c in enumerate(keys) if c in types}
    for c, flag in flags.items():
        df = df.withColumn(flag, negative_zero(F.col(q(c))))
    grouped = df.groupBy(*[F.col(q(c)) for c in keys], *flags.values()).agg(*aggregates)
    if not flags:
        return grouped
    signed = {c: F.when(F.col(flag), F.lit(-0.0).cast(types[c])).otherwise(F.col(q(c))).alias(c) for c, flag in flags.items()}
    return grouped.select(*[signed.get(c, F.col(q(c))) for c in keys], *[F.col(q(c)) for c in grouped.columns if c not in keys and c not in flags.values()])


def duckdb_sql(columns: tuple[str, ...] | list[str], schema: pa.Schema, relation: str, order_by: tuple[str, ...] = ()) -> str:
    """The DuckDB query that consolidates the Arrow table registered as ``relation``
    (``schema``) on ``columns``, its rows in the order of ``order_by`` (some of the
    columns; any order when empty); its output is cast to :func:`output_schema` afterwards.

    DuckDB groups −0.0 with 0.0 and NaNs together, and outputs the first value it saw of a
    group: NaNs are made canonical before grouping, and each float column is grouped by its
    sign bit as well, so that a group holds zeros of one sign. SUM of a BIGINT is a HUGEINT
    there; the cast back raises past BIGINT's range.

    >>> print(duckdb_sql(["k", "x"], pa.schema([("k", pa.int64()), ("x", pa.float32()), ("__w", pa.int64())]), "t"))
    SELECT "k", "x", CAST(sum("__w") AS BIGINT) AS "__w"
    FROM (SELECT "k", CASE WHEN isnan("x") THEN CAST('NaN' AS FLOAT) ELSE "x" END AS "x", "__w" FROM t)
    GROUP BY "k", "x", signbit("x") HAVING sum("__w") <> 0
    """
    names = [duckdb_names.q(c) for c in columns]
    floats = [pa.types.is_floating(schema.field(c).type) for c in columns]
    normal = [nan_normal_sql(name, schema.field(c).type) if f else name for c, name, f in zip(columns, names, floats)]
    w = duckdb_names.q(WEIGHT)
    inner = f"SELECT {', '.join([*normal, w])} FROM {relation}"
    by = [*names, *(f"signbit({name})" for name, f in zip(names, floats) if f)]
    grouped = f" GROUP BY {', '.join(by)}" if names else ""
    ordered = f" ORDER BY {', '.join(duckdb_names.q(c) for c in order_by)}" if order_by else ""
    return f"SELECT {', '.join([*names, f'CAST(sum({w}) AS BIGINT) AS {w}'])} FROM ({inner}){grouped} HAVING sum({w}) <> 0{ordered}"


def normal_sql(name: str, t: pa.DataType) -> str:
    """The key column ``name`` (quoted) of type ``t`` with its floats as Spark groups them
    (:func:`ivm_assets.zset.normal_floats`), as a select item."""
    if not pa.types.is_floating(t):
        return name
    return _float_case(name, t, unsigned=True)


def nan_normal_sql(name: str, t: pa.DataType) -> str:
    """The column ``name`` (quoted) of type ``t`` with every NaN of a float the canonical
    one, as a select item."""
    return _float_case(name, t, unsigned=False) if pa.types.is_floating(t) else name


def _float_case(name: str, t: pa.DataType, *, unsigned: bool) -> str:
    sql_type = "FLOAT" if pa.types.is_float32(t) else "DOUBLE"
    zero = f"WHEN {name} = 0 THEN CAST(0 AS {sql_type}) " if unsigned else ""
    return f"CASE WHEN isnan({name}) THEN CAST('NaN' AS {sql_type}) {zero}ELSE {name} END AS {name}"


def in_duckdb(
    con: duckdb.DuckDBPyConnection, table: pa.Table, columns: tuple[str, ...] | list[str], order_by: tuple[str, ...] = ()
) -> pa.Table:
    """``table`` consolidated on ``columns`` (see the module doc) by DuckDB on ``con``, in
    the order of ``order_by``; raises DuckDB's error when a weight sum overflows."""
    out = duckdb_names.arrow_query(con, duckdb_sql(columns, table.schema, "rows", order_by), {"rows": table})
    # DuckDB's own types (a TIMESTAMP WITH TIME ZONE in the connection's zone, its strings)
    # back to the input's.
    return out.cast(output_schema(table.schema, columns))


def in_arrow(rows: pa.Table, columns: tuple[str, ...] | list[str]) -> pa.Table | None:
    """``rows`` consolidated on ``columns`` (see the module doc) with pyarrow, on the driver;
    None when a column's type is not compared here (nested, dictionary, NULL-typed: see
    :func:`~ivm_assets.state.driver_rows.tuple_codes`) or a weight sum might overflow (Arrow
    would wrap it): the caller consolidates in Spark instead.

    >>> t = pa.table({"x": [0.0, -0.0, None, None, -0.0], "__w": pa.array([1, 1, 2, -2, 1], pa.int64())})
    >>> [(str(r["x"]), r["__w"]) for r in in_arrow(t, ["x"]).to_pylist()]
    [('0.0', 1), ('-0.0', 2)]
    """
    columns = tuple(columns)
    if not rows.num_rows:
        return empty_table(output_schema(rows.schema, columns))
    weights = rows.column(WEIGHT).cast(pa.int64())
    low, high = (v.as_py() for v in pc.min_max(weights).values())
    if max(-low, high) * rows.num_rows >= 2**63:
        return None
    # Canonical NaNs make the rule's equality bitwise equality, which Arrow's hashing is.
    normal = normal_row_bits(rows.select(list(columns))).append_column(pa.field(WEIGHT, pa.int64()), weights)
    codes = driver_rows.tuple_codes([(normal, columns)])
    return None if codes is None else driver_rows.sum_weights(normal, columns, WEIGHT, codes[0])
