"""The IR (:mod:`ivm_assets.ir.rel`) rendered as Spark DataFrames: lazy, as every
operator's change set is; its consumer materializes it once."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache, reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.ir import decimal_rules
from ivm_assets.ir import rel
from ivm_assets.spark.batches import copies, float_columns, negative_zero
from ivm_assets.sql.plan import q
from ivm_assets.state import consolidate
from ivm_assets.zset import WEIGHT

_JOINS = {"inner": "inner", "left": "left", "semi": "left_semi", "anti": "left_anti"}
_BINARY = {
    "+": Column.__add__, "-": Column.__sub__, "*": Column.__mul__, "/": Column.__truediv__, ">": Column.__gt__,
    "<": Column.__lt__, "<=": Column.__le__, "=": Column.__eq__, "<>": Column.__ne__, "and": Column.__and__,
    "or": Column.__or__,
}
_AGGREGATES = {"sum": F.sum, "min": F.min, "max": F.max, "count": F.count}


def expr(e: rel.Expr, inputs: dict[str, DataFrame]) -> Column:
    """``e`` as a Spark column (``inputs``: where a :class:`~ivm_assets.ir.rel.Null` finds its type)."""
    if isinstance(e, rel.Null):
        return F.lit(None).cast(_input_type(e.like, inputs)) if e.like else F.lit(None)
    if isinstance(e, rel.Col):
        return F.col(q(e.name))
    if isinstance(e, rel.Lit):
        return F.lit(e.value).cast("bigint")
    if isinstance(e, rel.Case):
        case = F.when(expr(e.when, inputs), expr(e.then, inputs))
        return case if e.otherwise is None else case.otherwise(expr(e.otherwise, inputs))
    if isinstance(e, rel.Cast):
        return expr(e.value, inputs).cast(e.to)
    if isinstance(e, rel.Fail):
        return F.when(expr(e.when, inputs), F.raise_error(F.lit(e.message))).otherwise(expr(e.value, inputs))
    if isinstance(e, rel.Average):
        return _decimal_average(e.precision, e.scale, e.ansi)(expr(e.total, inputs), expr(e.count, inputs))
    if isinstance(e, rel.SparkSql):
        return F.expr(e.text)
    args = [expr(a, inputs) for a in e.args]
    if e.op in _BINARY:
        return _BINARY[e.op](*args)
    if e.op == "not":
        return ~args[0]
    if e.op == "neg":
        return -args[0]
    if e.op == "is_null":
        return args[0].isNull()
    if e.op == "is_nan":
        return F.isnan(args[0])
    if e.op == "is_infinite":
        return args[0].isin(float("inf"), float("-inf"))
    if e.op == "negative_zero":
        return negative_zero(args[0])
    if e.op in ("coalesce", "greatest", "least"):
        return getattr(F, e.op)(*args)
    raise ValueError(f"no Spark rendering of {e.op!r}")


def _sort(order: tuple[rel.SortKey, ...], df: DataFrame) -> list[Column]:
    """``order`` as sort columns of ``df``, then each FLOAT/DOUBLE key's sign of zero
    (:data:`~ivm_assets.ir.rel.SortKey`)."""
    floats = set(float_columns(df))

    def key(name: str, desc: bool, nulls_first: bool) -> Column:
        c = F.col(q(name))
        if desc:
            return c.desc_nulls_first() if nulls_first else c.desc_nulls_last()
        return c.asc_nulls_first() if nulls_first else c.asc_nulls_last()

    # −0.0 (true) first where its key ascends.
    signs = {name: negative_zero(F.col(q(name))).asc() if desc else negative_zero(F.col(q(name))).desc()
             for name, desc, _ in reversed(order) if name in floats}
    return [key(*k) for k in order] + [signs[name] for name in dict.fromkeys(n for n, _, _ in order) if name in signs]


def _window(partition: tuple[str, ...], order: tuple[rel.SortKey, ...], df: DataFrame):
    """Each partition in ``order``; without partitions all rows in one (a change's few)."""
    return SparkWindow.partitionBy(*([F.col(q(k)) for k in partition] or [F.lit(0)])).orderBy(*_sort(order, df))


def _input_type(name: str, inputs: dict[str, DataFrame]) -> T.DataType:
    for df in inputs.values():
        if name in df.columns:
            return df.schema[name].dataType
    raise ValueError(f"no input has a column {name!r}")


def render(node: rel.Rel, inputs: dict[str, DataFrame]) -> DataFrame:
    """``node`` over the frames bound to its :class:`~ivm_assets.ir.rel.Input` names."""
    if isinstance(node, rel.Input):
        return inputs[node.name].select(*[F.col(q(c)) for c in node.columns])
    if isinstance(node, rel.Select):
        df = render(node.input, inputs)
        if node.where is not None:
            df = df.filter(expr(node.where, inputs))
        return df.select(*[expr(e, inputs).alias(name) for name, e in node.items])
    if isinstance(node, rel.Join):
        left, right = render(node.left, inputs), render(node.right, inputs)
        # Unqualified names: the IR keeps both sides' names disjoint, so none is ambiguous
        # even when both sides come from one lineage.
        conditions = [F.col(q(a)).eqNullSafe(F.col(q(b))) if node.null_safe else F.col(q(a)) == F.col(q(b)) for a, b in node.on]
        if node.residual is not None:
            conditions.append(expr(node.residual, inputs))
        if not conditions:
            return left.crossJoin(right) if node.kind == "inner" else left.join(right, F.lit(True), _JOINS[node.kind])
        return left.join(right, reduce(lambda a, b: a & b, conditions), _JOINS[node.kind])
    if isinstance(node, rel.Union_):
        frames = [render(i, inputs) for i in node.inputs]
        return reduce(DataFrame.unionByName, frames)
    if isinstance(node, rel.Reduce):
        df = render(node.input, inputs)
        calls = [_AGGREGATES[func](expr(e, inputs)).alias(name) for name, func, e in node.calls]
        if node.signed:
            return consolidate.signed_groups(df, node.keys, calls)
        return df.groupBy(*[F.col(q(k)) for k in node.keys]).agg(*calls)
    if isinstance(node, rel.Repeat):
        df = render(node.input, inputs)
        signed = df.withColumn(node.sign, F.when(F.col(WEIGHT) > 0, 1).otherwise(-1).cast("bigint"))
        repeated = signed.withColumn("__rep", F.explode(F.array_repeat(F.lit(1), copies(F.abs(F.col(WEIGHT))))))
        return repeated.drop("__rep", WEIGHT)
    if isinstance(node, rel.Ordered):
        df = render(node.input, inputs)
        spec = _window(node.partition, node.order, df)
        frames = {
            "running_sum": (F.sum, spec.rowsBetween(SparkWindow.unboundedPreceding, SparkWindow.currentRow)),
            "max_after": (F.max, spec.rowsBetween(SparkWindow.currentRow, SparkWindow.unboundedFollowing)),
        }
        calls = [frames[func][0](expr(e, inputs)).over(frames[func][1]).alias(name) for name, func, e in node.calls]
        return df.select(*[F.col(q(c)) for c in df.columns], *calls)
    if isinstance(node, rel.First):
        df = render(node.input, inputs)
        if not node.partition:  # Spark's top-N: no sort of the whole input in one task
            return df.orderBy(*_sort(node.order, df)).limit(node.n)
        place = F.row_number().over(_window(node.partition, node.order, df))
        return df.withColumn("__n", place).filter(F.col("__n") <= node.n).drop("__n")
    if isinstance(node, rel.Places):
        df = render(node.input, inputs)
        first, last = expr(node.from_, inputs), expr(node.to, inputs)
        places = F.explode(F.sequence((first + 1).cast("int"), last.cast("int")))
        return df.filter(last > first).select(*[F.col(q(c)) for c in df.columns], places.alias(node.name))
    if isinstance(node, rel.Unsigned):
        df = render(node.input, inputs)
        floats = [c for c in float_columns(df) if node.only is None or c in node.only]
        if not floats:
            return df
        return df.select(*[F.when(F.col(q(c)) == 0, F.abs(F.col(q(c)))).otherwise(F.col(q(c))).alias(c) if c in floats else F.col(q(c)) for c in df.columns])
    if isinstance(node, rel.NoNegativeZero):
        df = render(node.input, inputs)
        floats = list(float_columns(df))
        if not floats:
            return df
        found = reduce(lambda a, b: a | b, [negative_zero(F.col(q(c))) for c in floats])
        return df.withColumn(WEIGHT, F.when(found, F.raise_error(F.lit(node.message))).otherwise(F.col(WEIGHT)))
    if isinstance(node, rel.Window):
        repeated = render(rel.positive_copies(node.input), inputs)
        return repeated.select(
            *[F.col(q(c)) for c in node.columns], *[F.expr(sql).alias(name) for name, sql in node.calls],
            F.lit(node.sign).cast("bigint").alias(WEIGHT),
        )
    return consolidate.in_spark(render(node.input, inputs), node.columns)


@lru_cache(maxsize=64)
def _decimal_average(precision: int, scale: int, ansi: bool):
    """A Spark function computing ``s / n`` into DECIMAL(precision, scale) by
    :func:`ivm_assets.ir.decimal_rules.divide` (no SQL expression divides a DECIMAL without
    first rounding to a scale of its own choosing). Evaluated in Python workers, once per
    output row of a group. A quotient too wide for the type is NULL, or under ANSI mode an
    error named as Spark names its own."""

    def average(s: Decimal | None, n: int | None) -> Decimal | None:
        if s is None or not n:
            return None
        quotient = decimal_rules.divide(s, Decimal(n), precision, scale)
        if quotient is None and ansi:
            raise ArithmeticError(f"[{decimal_rules.OVERFLOW}] the average {s} / {n} cannot be represented as Decimal({precision}, {scale})")
        return quotient

    return F.udf(average, T.DecimalType(precision, scale), useArrow=True)
