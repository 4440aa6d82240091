"""Linear operators: no state, Δout = op(Δin).

Scan, filter, project and UNION ALL distribute over the addition of z-sets, so each applies
itself to the change set row by row and keeps the weights. This holds only for
deterministic expressions, which :mod:`ivm_assets.sql.constructs` guarantees. The rules are
written once, in :mod:`ivm_assets.rules.linear`, and rendered by Spark here and by DuckDB
for epochs computed in process.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from ivm_assets.epoch_context import EpochContext
from ivm_assets.operators.base import Operator
from ivm_assets.rules import linear, rel, render_spark
from ivm_assets.sql.plan import q


class ScanOp(Operator):
    """The change set of a source (or upstream view) table, its columns renamed.

    Δout = Δsource. On a full refresh the change set is the whole snapshot with weight +1.
    """

    def __init__(self, op_id: str, relation: str, source_columns: tuple[str, ...], columns: tuple[str, ...]) -> None:
        self.id, self.relation, self.source_columns, self.columns = op_id, relation, source_columns, columns

    def unchanged(self, ctx: EpochContext) -> bool:
        return not ctx.full and ctx.change_rows.get(self.relation) == 0

    @property
    def rule(self) -> rel.Rel:
        return linear.scan(self.source_columns, self.columns)

    def step(self, ctx: EpochContext) -> DataFrame:
        return render_spark.render(self.rule, {"change": ctx.changes[self.relation]})

    def describe(self) -> str:
        return f"scan {self.relation} ({', '.join(self.source_columns)}): Δout = Δ{self.relation}"


class FilterOp(Operator):
    """Rows whose predicate is true. Δout = σ(Δin), weights unchanged."""

    def __init__(self, op_id: str, input: Operator, predicate: str) -> None:
        self.id, self.input, self.predicate, self.columns = op_id, input, predicate, input.columns

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def rule(self) -> rel.Rel:
        return linear.filter_(self.columns, self.predicate)

    def step(self, ctx: EpochContext) -> DataFrame:
        return render_spark.render(self.rule, {"change": self.input.step(ctx)})

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

    @property
    def rule(self) -> rel.Rel:
        return linear.project(self.input.columns, self.exprs)

    @property
    def passes_through(self) -> bool:
        """Every column is an input column as it is (a pruning or renaming projection), so
        each has its input's type.

        >>> scan = ScanOp("s", "orders", ("id", "amount"), ("id", "amount"))
        >>> ProjectOp("p", scan, (("key", "`id`"),)).passes_through
        True
        >>> ProjectOp("p", scan, (("key", "`id` + 1"),)).passes_through
        False
        """
        inputs = {q(c) for c in self.input.columns}
        return all(sql in inputs for _, sql in self.exprs)

    def step(self, ctx: EpochContext) -> DataFrame:
        return render_spark.render(self.rule, {"change": self.input.step(ctx)})

    def describe(self) -> str:
        return "project " + ", ".join(f"{e} AS {n}" for n, e in self.exprs) + ": Δout = π(Δin)"


class UnionAllOp(Operator):
    """Bag union. Δout = Σ Δin_i (columns matched by position)."""

    def __init__(self, op_id: str, inputs: tuple[Operator, ...], columns: tuple[str, ...]) -> None:
        self.id, self._inputs, self.columns = op_id, inputs, columns

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return self._inputs

    @property
    def rule(self) -> rel.Rel:
        return linear.union_all(tuple(i.columns for i in self._inputs), self.columns)

    def step(self, ctx: EpochContext) -> DataFrame:
        return render_spark.render(self.rule, {f"change{n}": i.step(ctx) for n, i in enumerate(self._inputs)})

    def describe(self) -> str:
        return f"union all of {len(self._inputs)} inputs: Δout = Σ Δin"
