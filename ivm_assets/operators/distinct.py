"""SELECT DISTINCT, maintained with per-row counts.

Rule on changes: with c the row's multiplicity before the change and c' = c + Δw after,
    Δout = +1 if c ≤ 0 < c',   −1 if c' ≤ 0 < c,   nothing otherwise.
State: the integrated input as a z-set bucketed by a hash of the whole row; a change reads
the counts of just the rows it touches. The rule is written once, in
:mod:`ivm_assets.rules.distinct`, and rendered by Spark here and by DuckDB for epochs
computed in process.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from ivm_assets.operators.base import EpochContext, Operator, consolidate, materialize, nothing
from ivm_assets.rules import distinct as distinct_rule
from ivm_assets.rules import render_spark
from ivm_assets.state.arrangement import StateTable
from ivm_assets.state.layout import default_hash_types, with_bucket
from ivm_assets.zset import BUCKET


class DistinctOp(Operator):
    """Each distinct row once (see module doc for the rule)."""

    def __init__(self, op_id: str, input: Operator) -> None:
        self.id, self.input, self.columns = op_id, input, input.columns
        self.counts = StateTable(operator_id=op_id, name="counts", columns=self.columns, keys=self.columns, layout="zset")

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.counts,)

    def step(self, ctx: EpochContext) -> DataFrame:
        change = consolidate(self.input.step(ctx), self.columns)
        types = default_hash_types(change, self.columns)
        batch = with_bucket(change, self.columns, ctx.buckets, types)
        batch = nothing(batch) if self.input.unchanged(ctx) else materialize(batch, small=ctx.small)
        delta = batch.df.drop(BUCKET)
        if batch.rows == 0:
            if ctx.full:
                self.counts.write(ctx, batch, types)
            return delta
        inputs = {"delta": delta}
        raw = self.counts.read(ctx, batch, self.columns)
        if raw is not None:
            inputs["old"] = self.counts.current(raw)
        out = render_spark.render(self.rule(set(inputs)), inputs)  # lazy: its consumer materializes it once
        self.counts.write(ctx, batch, types)
        return out

    def rule(self, present: set[str]):
        """This operator's rule on changes (:mod:`ivm_assets.rules.distinct`) over ``present``."""
        return distinct_rule.rule(self.columns, present)

    def describe(self) -> str:
        return "distinct: a row enters when its count rises above 0, leaves when it falls to 0"
