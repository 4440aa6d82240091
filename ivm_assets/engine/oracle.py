"""The correctness oracle: a view's output equals its query run from scratch.

The query (with its ties ordered, as the engine computes it: see
:mod:`ivm_assets.sql.order_ties`) is recomputed by Spark SQL over the sources' snapshots at the versions the last
committed epoch consumed, and compared with the output table as bags. Floating-point
columns are compared after rounding to ``SIGNIFICANT_DIGITS`` significant digits: an
incrementally maintained SUM/AVG over DOUBLE adds the same numbers in another order, so it
may differ from a recompute in the last bits. Two values on either side of a rounding
boundary (a sum of cents, 19530177.549999993 and 19530177.550000004) round one unit apart
in the last digit kept: a row left over on each side that is equal but for such floats is
taken as a match (:func:`_pair_close`). Integer and DECIMAL columns must match exactly.

An output of up to ``DRIVER_ROWS`` rows is compared on the driver: the recompute collected
as Arrow, the output read by delta-rs, both rounded alike in Python. That is one Spark job,
where comparing in Spark takes the output into Spark and a job that groups both (a check
then costs about half). Larger outputs, and those with nested types, are compared in one
Spark job that counts each row +1 in the recompute and −1 in the output.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.delta.handles import reusing_handles
from ivm_assets.delta.read import read_arrow, read_snapshot
from ivm_assets.delta.snapshot import row_count
from ivm_assets.errors import RefreshError
from ivm_assets.state.progress import Progress

SIGNIFICANT_DIGITS = 9
DRIVER_ROWS = 50_000


@dataclass(frozen=True)
class OracleResult:
    """Rows the output lacks (``missing``) or has in excess (``extra``), as counts and samples."""

    view: str
    missing: int
    extra: int
    sample_missing: list[dict]
    sample_extra: list[dict]

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0


def _comparable(c: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        x = c.cast("double")
        digits = F.lit(SIGNIFICANT_DIGITS - 1) - F.floor(F.log10(F.abs(x))).cast("int")
        exact = (x == 0) | x.isNull() | F.isnan(x) | (F.abs(x) == float("inf"))
        return F.when(exact, x).otherwise(_round_sig(x, digits))
    return c


def _round_sig(x: Column, digits: Column) -> Column:
    scale = F.pow(F.lit(10.0), digits)
    return F.round(x * scale) / scale


def _normalize(df: DataFrame) -> DataFrame:
    return df.select(*[_comparable(F.col(f"`{f.name}`"), f.dataType).alias(f.name) for f in df.schema.fields])


def check_view(project, view: str, *, sample_size: int = 5, as_written: bool = False) -> OracleResult:
    """Compare ``view``'s output with its query recomputed at the recorded source versions;
    ``as_written``: the query exactly as the view's file says (not with its ties ordered)."""
    return check_views(project, [view], sample_size=sample_size, as_written=as_written)[0]


def check_views(project, views: Sequence[str], *, sample_size: int = 5, as_written: bool = False) -> list[OracleResult]:
    """:func:`check_view` of each of ``views``; a source snapshot that several of them read at
    one version is registered once."""
    spark = project.spark
    records = {}
    for view in views:
        records[view] = Progress(project.location(view).progress).last_committed()
        if records[view] is None:
            raise RefreshError(f"view {view!r} has never been refreshed; nothing to check")
    # The query as every refresh computes it: with its ties ordered (see order_ties). Compiled
    # before the snapshots are registered: compiling registers empty relations of its own.
    sql = {v: project.views[v].text for v in views} if as_written else {v: c.sql for v, c in project.compile(list(views)).items()}
    registered: dict[str, int] = {}
    results = []
    with reusing_handles():  # an output's log is read once, for its row count and its rows
        for view in views:
            for name, source in records[view].payload["sources"].items():
                if registered.get(name) != source["to"]:
                    read_snapshot(spark, project.relation_uri(name), version=source["to"]).createOrReplaceTempView(name)
                    registered[name] = source["to"]
            output, version = project.location(view).output, records[view].payload["output_version_after"]
            results.append(_compare(view, spark.sql(sql[view]), output, version, sample_size))
    return results


def _compare(view: str, expected: DataFrame, output: str, version: int, sample_size: int) -> OracleResult:
    rows = row_count(output, version)
    if rows is not None and rows <= DRIVER_ROWS and all(_atomic(f.dataType) for f in expected.schema.fields):
        recomputed = expected.limit(DRIVER_ROWS + 1).toArrow()
        actual = read_arrow(output, version)
        same_types = all(
            n in actual.column_names and actual.schema.field(n).type == recomputed.schema.field(n).type for n in recomputed.column_names
        )  # else Spark compares (and names a missing column)
        if recomputed.num_rows <= DRIVER_ROWS and same_types:
            return _compare_on_driver(view, recomputed, actual, sample_size)
    return _compare_in_spark(view, expected, read_snapshot(expected.sparkSession, output, version=version), sample_size)


def _atomic(dtype: T.DataType) -> bool:
    return not isinstance(dtype, (T.ArrayType, T.MapType, T.StructType, T.VariantType))


def _compare_on_driver(view: str, expected: pa.Table, actual: pa.Table, sample_size: int) -> OracleResult:
    names = expected.column_names
    want, have = _bag(expected, names), _bag(actual.select(names), names)
    missing, extra = _pair_close(want - have, have - want)

    def sample(rows: Counter) -> list[dict]:
        return [dict(zip(names, row)) for row in list(rows)[:sample_size]]

    return OracleResult(view, sum(missing.values()), sum(extra.values()), sample(missing), sample(extra))


def _pair_close(missing: Counter, extra: Counter) -> tuple[Counter, Counter]:
    """``missing`` and ``extra`` without the rows they share but for floats one unit apart in
    their last kept digit (rounded by :func:`_comparable_value` on either side of a boundary)."""
    missing, extra = Counter(missing), Counter(extra)
    shapes: dict[tuple, list[tuple]] = {}
    for other in extra:  # rows can pair only when equal in every column but floats
        shapes.setdefault(_shape(other), []).append(other)
    for row in list(missing):
        candidates = shapes.get(_shape(row), [])
        if len(candidates) > _PAIRED_AT_MOST:
            continue  # a mass difference, not rounding: reported as it is
        for other in candidates:
            if missing[row] and extra[other] and all(_close(a, b) for a, b in zip(row, other)):
                n = min(missing[row], extra[other])
                missing[row] -= n
                extra[other] -= n
    return +missing, +extra


_PAIRED_AT_MOST = 1_000


def _hashable(value):
    """A value of a collected Spark row as a key: arrays, maps and structs as tuples."""
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _hashable(v)) for k, v in value.items()))
    return value


def _shape(row: tuple) -> tuple:
    return tuple(None if isinstance(v, float) else v for v in row)


def _close(a, b) -> bool:
    """Equal, or floats one unit apart in their ``SIGNIFICANT_DIGITS``-th digit."""
    if not (isinstance(a, float) and isinstance(b, float)) or a == b or math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return a == b or (a is _NAN and b is _NAN)
    unit = 10 ** (math.floor(math.log10(max(abs(a), abs(b)))) - SIGNIFICANT_DIGITS + 1)
    return abs(a - b) <= unit * 1.000001


def _bag(table: pa.Table, names: list[str]) -> Counter:
    columns = [[_comparable_value(v) for v in _python_values(table.column(n))] for n in names]
    return Counter(zip(*columns)) if columns else Counter({(): table.num_rows})


def _python_values(column: pa.ChunkedArray) -> list:
    """The column's values as Python objects; dates and times as their integer count of days
    or time units, which a Spark date or timestamp outside Python's years 1–9999 has too."""
    kind = column.type
    if pa.types.is_date32(kind):
        column = column.cast(pa.int32())
    elif pa.types.is_timestamp(kind) or pa.types.is_date64(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind):
        column = column.cast(pa.int64())
    return column.to_pylist()


_NAN = float("nan")  # one object: NaN equals only itself, and a bag must count NaN rows as one key


def _comparable_value(value):
    if isinstance(value, float):
        if math.isnan(value):
            return _NAN
        return value if value == 0 or math.isinf(value) else float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return value


def _compare_in_spark(view: str, expected: DataFrame, actual_raw: DataFrame, sample_size: int) -> OracleResult:
    expected = _normalize(expected)
    actual = _normalize(actual_raw.select(*[F.col(f"`{n}`") for n in expected.columns]))
    # One job: +1 per expected row, −1 per actual row; what does not cancel is a difference.
    names = [F.col(f"`{n}`") for n in expected.columns]
    tagged = expected.withColumn("__d", F.lit(1)).unionByName(actual.withColumn("__d", F.lit(-1)))
    diff = tagged.groupBy(*names).agg(F.sum("__d").alias("__d")).filter("__d != 0").collect()
    columns = list(expected.columns)
    missing, extra = _pair_close(
        Counter({tuple(_hashable(r[c]) for c in columns): r["__d"] for r in diff if r["__d"] > 0}),
        Counter({tuple(_hashable(r[c]) for c in columns): -r["__d"] for r in diff if r["__d"] < 0}),
    )

    def sample(rows: Counter) -> list[dict]:
        return [dict(zip(columns, row)) for row in list(rows)[:sample_size]]

    return OracleResult(view, sum(missing.values()), sum(extra.values()), sample(missing), sample(extra))
