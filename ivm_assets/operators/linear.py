"""Linear operators: no state, Δout = op(Δin).

Scan, filter, project and UNION ALL distribute over the addition of z-sets, so each applies
itself to the change set row by row and keeps the weights. This holds only for
deterministic expressions, which :mod:`ivm_assets.sql.constructs` guarantees.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm_assets.operators.base import EpochContext, Operator, col
from ivm_assets.zset import WEIGHT


class ScanOp(Operator):
    """The change set of a source (or upstream view) table, its columns renamed.

    Δout = Δsource. On a full refresh the change set is the whole snapshot with weight +1.
    """

    def __init__(self, op_id: str, relation: str, source_columns: tuple[str, ...], columns: tuple[str, ...]) -> None:
        self.id, self.relation, self.source_columns, self.columns = op_id, relation, source_columns, columns

    def unchanged(self, ctx: EpochContext) -> bool:
        return not ctx.full and ctx.change_rows.get(self.relation) == 0

    def step(self, ctx: EpochContext) -> DataFrame:
        changes = ctx.changes[self.relation]
        return changes.select(
            *[col(s).alias(c) for s, c in zip(self.source_columns, self.columns)], col(WEIGHT)
        )

    def describe(self) -> str:
        return f"scan {self.relation} ({', '.join(self.source_columns)}): Δout = Δ{self.relation}"


class FilterOp(Operator):
    """Rows whose predicate is true. Δout = σ(Δin), weights unchanged."""

    def __init__(self, op_id: str, input: Operator, predicate: str) -> None:
        self.id, self.input, self.predicate, self.columns = op_id, input, predicate, input.columns

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    def step(self, ctx: EpochContext) -> DataFrame:
        return self.input.step(ctx).filter(F.expr(self.predicate))

    def describe(self) -> str:
        return f"filter {self.predicate}: Δout = σ(Δin)"


class ProjectOp(Operator):
    """Deterministic expressions per row. Δout = π(Δin), weights unchanged."""

    def __init__(self, op_id: str, input: Operator, exprs: tuple[tuple[str, str], ...]) -> None:
        self.id, self.input, self.exprs = op_id, input, exprs
        self.columns = tuple(n for n, _ in exprs)

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    def step(self, ctx: EpochContext) -> DataFrame:
        return self.input.step(ctx).select(*[F.expr(e).alias(n) for n, e in self.exprs], col(WEIGHT))

    def describe(self) -> str:
        return "project " + ", ".join(f"{e} AS {n}" for n, e in self.exprs) + ": Δout = π(Δin)"


class UnionAllOp(Operator):
    """Bag union. Δout = Σ Δin_i (columns matched by position)."""

    def __init__(self, op_id: str, inputs: tuple[Operator, ...], columns: tuple[str, ...]) -> None:
        self.id, self._inputs, self.columns = op_id, inputs, columns

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return self._inputs

    def step(self, ctx: EpochContext) -> DataFrame:
        parts = [i.step(ctx).toDF(*self.columns, WEIGHT) for i in self._inputs]
        return reduce(DataFrame.unionAll, parts)

    def describe(self) -> str:
        return f"union all of {len(self._inputs)} inputs: Δout = Σ Δin"
