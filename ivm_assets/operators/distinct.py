"""SELECT DISTINCT, maintained with per-row counts.

Rule on changes: with c the row's multiplicity before the change and c' = c + Δw after,
    Δout = +1 if c ≤ 0 < c',   −1 if c' ≤ 0 < c,   nothing otherwise.
State: the integrated input as a z-set bucketed by a hash of the whole row; a change reads
the counts of just the rows it touches.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm_assets.operators.base import EpochContext, Operator, col, consolidate, materialize, nothing, null_safe_match
from ivm_assets.state.arrangement import StateTable, default_hash_types, with_bucket
from ivm_assets.zset import BUCKET, WEIGHT


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
        batch = nothing(batch) if self.input.unchanged(ctx) else materialize(batch, small=not ctx.full)
        delta = batch.df.drop(BUCKET)
        if batch.rows == 0:
            if ctx.full:
                self.counts.write(ctx, batch, types)
            return delta
        raw = self.counts.read(ctx, batch, self.columns)
        old = self.counts.current(raw) if raw is not None else None
        if old is None:
            joined = delta.withColumn("__old", F.lit(0).cast("bigint"))
        else:
            o = old.select(*[col(c).alias(f"o_{c}") for c in self.columns], col(WEIGHT).alias("__old"))
            joined = delta.join(o, null_safe_match(delta, o, [(c, f"o_{c}") for c in self.columns]), "left").fillna(0, ["__old"])
        before, after = col("__old"), col("__old") + col(WEIGHT)
        flip = F.when((before <= 0) & (after > 0), 1).when((before > 0) & (after <= 0), -1).otherwise(0)
        # Lazy: its consumer materializes it once.
        out = joined.select(*[col(c) for c in self.columns], flip.cast("bigint").alias(WEIGHT)).filter(col(WEIGHT) != 0)
        self.counts.write(ctx, batch, types)
        return out

    def describe(self) -> str:
        return "distinct: a row enters when its count rises above 0, leaves when it falls to 0"
