"""Moving data between Arrow (what delta-rs speaks) and Spark DataFrames.

delta-rs hands out Arrow types Spark rejects or maps differently (``string_view``, unsigned
integers, millisecond or nanosecond timestamps); they are normalized here, once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T


def _normal_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_unsigned_integer(t):
        return pa.int64()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(_normal_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _normal_type(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_normal_type(t.key_type), _normal_type(t.item_type))
    return t


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """The schema with every type replaced by one Spark reads the same way."""
    return pa.schema([pa.field(f.name, _normal_type(f.type), f.nullable) for f in schema])


def normalize_table(table: pa.Table) -> pa.Table:
    """Cast ``table`` to :func:`normalize_schema` of its schema (no-op when already normal)."""
    target = normalize_schema(table.schema)
    return table if target == table.schema else table.cast(target)


def empty_table(schema: pa.Schema) -> pa.Table:
    """No rows of ``schema`` (one empty chunk per column, as ``schema.empty_table()`` makes
    them, which takes pyarrow 26 over a millisecond: a state read made one each time)."""
    return pa.table([pa.array([], f.type) for f in schema], schema=schema)


_one_partition: ContextVar[bool] = ContextVar("ivm_one_partition", default=False)


@contextmanager
def one_partition_locals() -> Iterator[None]:
    """Inside the block (this thread), :func:`to_spark` frames are one partition each.

    Spark reports no partitioning for a local relation, so every join and aggregate above
    one shuffles its input first (one more stage, ~25–40 ms, per exchange). One partition
    (``coalesce(1)``: no shuffle) is *SinglePartition*, which satisfies every join's and
    aggregate's required distribution, and unions of such frames stay one partition: a
    plan over small change sets then runs as a single stage. For small epochs only; a
    large frame would lose its parallelism.
    """
    token = _one_partition.set(True)
    try:
        yield
    finally:
        _one_partition.reset(token)


def to_spark(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A Spark DataFrame over an Arrow table, types normalized (one partition inside
    :func:`one_partition_locals`)."""
    table = normalize_table(table)
    if table.num_rows == 0:
        return spark.createDataFrame([], schema=spark_schema(table.schema))
    # One chunk: pyspark 4.3 drops every record batch after an empty one (a pyarrow dataset
    # read yields one batch per file, empty where a file has no matching row). The schema is
    # given: left to infer it, pyspark reads a timestamp without a time zone as a TIMESTAMP
    # (unless spark.sql.timestampType says otherwise) and shifts its wall time from the
    # session time zone to UTC: a TIMESTAMP_NTZ change would meet its state as another type
    # and, outside UTC, another value.
    df = spark.createDataFrame(table.combine_chunks(), schema=spark_schema(table.schema))
    return df.coalesce(1) if _one_partition.get() else df


def to_arrow(df: DataFrame) -> pa.Table:
    """Collect a (small) DataFrame to the driver as Arrow."""
    return df.toArrow()


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of an Arrow schema (used for empty frames)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(normalize_schema(schema))


def spark_type(arrow_type: pa.DataType) -> T.DataType:
    """The Spark type of an Arrow column, as :func:`to_spark` reads it."""
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(_normal_type(arrow_type))


def spark_type_name(arrow_type: pa.DataType) -> str:
    """The Spark type of an Arrow column, as Spark's ``simpleString`` names it (``decimal(12,2)``)."""
    return spark_type(arrow_type).simpleString()


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of a Spark schema, as :func:`to_arrow` would produce it (timestamps in
    UTC, the session time zone ivm sets)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return normalize_schema(to_arrow_schema(schema, timezone="UTC"))
