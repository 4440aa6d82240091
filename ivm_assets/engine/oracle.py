"""The correctness oracle: a view's output equals its query run from scratch.

The query (with its ties ordered, as the engine computes it: see
:mod:`ivm_assets.sql.order_ties`) is recomputed by Spark SQL over the sources' snapshots at the versions the last
committed epoch consumed, and compared with the output table as bags (``EXCEPT ALL`` both
ways). Floating-point columns are compared after rounding to ``SIGNIFICANT_DIGITS``
significant digits: an incrementally maintained SUM/AVG over DOUBLE adds the same numbers
in another order, so it may differ from a recompute in the last bits. Integer and DECIMAL
columns must match exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.delta.read import read_snapshot
from ivm_assets.errors import RefreshError
from ivm_assets.state.progress import Progress

SIGNIFICANT_DIGITS = 9


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
    spark = project.spark
    record = Progress(project.location(view).progress).last_committed()
    if record is None:
        raise RefreshError(f"view {view!r} has never been refreshed; nothing to check")
    # The query as every refresh computes it: with its ties ordered (see order_ties). Compiled
    # before the snapshots are registered: compiling registers empty relations of its own.
    sql = project.views[view].text if as_written else project.compile([view])[view].sql
    for name, source in record.payload["sources"].items():
        read_snapshot(spark, project.relation_uri(name), version=source["to"]).createOrReplaceTempView(name)
    expected = _normalize(spark.sql(sql))
    actual_raw = read_snapshot(spark, project.location(view).output, version=record.payload["output_version_after"])
    actual = _normalize(actual_raw.select(*[F.col(f"`{n}`") for n in expected.columns]))
    # One job: +1 per expected row, −1 per actual row; what does not cancel is a difference.
    names = [F.col(f"`{n}`") for n in expected.columns]
    tagged = expected.withColumn("__d", F.lit(1)).unionByName(actual.withColumn("__d", F.lit(-1)))
    diff = tagged.groupBy(*names).agg(F.sum("__d").alias("__d")).filter("__d != 0").collect()
    missing = [r for r in diff if r["__d"] > 0]
    extra = [r for r in diff if r["__d"] < 0]

    def sample(rows):
        return [{k: v for k, v in r.asDict().items() if k != "__d"} for r in rows[:sample_size]]

    return OracleResult(view, sum(r["__d"] for r in missing), -sum(r["__d"] for r in extra), sample(missing), sample(extra))
