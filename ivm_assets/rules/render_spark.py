"""The IR (:mod:`ivm_assets.rules.rel`) rendered as Spark DataFrames: lazy, as every
operator's change set is; its consumer materializes it once."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.operators.base import copies
from ivm_assets.rules import rel
from ivm_assets.sql.plan import q
from ivm_assets.state import consolidate
from ivm_assets.zset import WEIGHT

_JOINS = {"inner": "inner", "left": "left", "semi": "left_semi", "anti": "left_anti"}
_BINARY = {
    "+": Column.__add__, "-": Column.__sub__, "*": Column.__mul__, ">": Column.__gt__, "<=": Column.__le__,
    "=": Column.__eq__, "<>": Column.__ne__, "and": Column.__and__,
}


def expr(e: rel.Expr, inputs: dict[str, DataFrame]) -> Column:
    """``e`` as a Spark column (``inputs``: where a :class:`~ivm_assets.rules.rel.Null` finds its type)."""
    if isinstance(e, rel.Null):
        return F.lit(None).cast(_input_type(e.like, inputs))
    if isinstance(e, rel.Col):
        return F.col(q(e.name))
    if isinstance(e, rel.Lit):
        return F.lit(e.value).cast("bigint")
    if isinstance(e, rel.Case):
        return F.when(expr(e.when, inputs), expr(e.then, inputs)).otherwise(expr(e.otherwise, inputs))
    if isinstance(e, rel.SparkSql):
        return F.expr(e.text)
    args = [expr(a, inputs) for a in e.args]
    if e.op in _BINARY:
        return _BINARY[e.op](*args)
    if e.op == "not":
        return ~args[0]
    if e.op == "is_null":
        return args[0].isNull()
    if e.op in ("coalesce", "greatest", "least"):
        return getattr(F, e.op)(*args)
    raise ValueError(f"no Spark rendering of {e.op!r}")


def _input_type(name: str, inputs: dict[str, DataFrame]) -> T.DataType:
    for df in inputs.values():
        if name in df.columns:
            return df.schema[name].dataType
    raise ValueError(f"no input has a column {name!r}")


def render(node: rel.Rel, inputs: dict[str, DataFrame]) -> DataFrame:
    """``node`` over the frames bound to its :class:`~ivm_assets.rules.rel.Input` names."""
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
        conditions = [F.col(q(a)) == F.col(q(b)) for a, b in node.on]
        if node.residual is not None:
            conditions.append(expr(node.residual, inputs))
        if not conditions:
            return left.crossJoin(right) if node.kind == "inner" else left.join(right, F.lit(True), _JOINS[node.kind])
        return left.join(right, reduce(lambda a, b: a & b, conditions), _JOINS[node.kind])
    if isinstance(node, rel.Union_):
        frames = [render(i, inputs) for i in node.inputs]
        return reduce(DataFrame.unionByName, frames)
    if isinstance(node, rel.GroupSum):
        df = render(node.input, inputs)
        sums = [F.sum(expr(e, inputs)).cast("bigint").alias(name) for name, e in node.sums]
        return df.groupBy(*[F.col(q(k)) for k in node.keys]).agg(*sums)
    if isinstance(node, rel.Window):
        rows = render(node.input, inputs).filter(F.col(WEIGHT) > 0)
        repeated = rows.withColumn("__rep", F.explode(F.array_repeat(F.lit(1), copies(F.col(WEIGHT)))))
        return repeated.select(
            *[F.col(q(c)) for c in node.columns], *[F.expr(sql).alias(name) for name, sql in node.calls],
            F.lit(node.sign).cast("bigint").alias(WEIGHT),
        )
    return consolidate.in_spark(render(node.input, inputs), node.columns)
