"""Window functions (``… OVER (PARTITION BY … ORDER BY … frame)``), recomputed for just the
partitions a change touches.

A window function's value for a row depends only on the rows of its partition, so the
output rows of a partition change only when its input rows do. Rule on changes, with P the
partitions (values of the PARTITION BY columns, NULL a value like any other) that ΔX touches:

    Δout = W(X_new(P)) − W(X_old(P)),    X_new(P) = X_old(P) + ΔX

where W computes the window functions over the given rows with Spark, a row present n times
as n rows. A partition emptied by the change retracts all its rows; a row moving between
partitions is a delete in one and an insert in the other, both recomputed. Functions whose
value depends on the order among ties (ROW_NUMBER, LAG, LEAD, ROWS frames) see a total
order (:mod:`ivm_assets.sql.order_ties`), so a recompute gives the same rows.

State: the input rows (z-set) bucketed by the PARTITION BY columns; a change reads the rows
of the partitions it touches. Without PARTITION BY the whole input is one partition: every
change reads it whole and recomputes the window over all of it (correct, not cheap).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm_assets.operators.base import EpochContext, Operator, col, consolidate, copies, materialize, nothing
from ivm_assets.state.arrangement import StateTable, default_hash_types, with_bucket
from ivm_assets.zset import BUCKET, WEIGHT


class WindowOp(Operator):
    """The input's columns plus window functions over one PARTITION BY (see module doc)."""

    def __init__(self, op_id: str, input: Operator, partition: tuple[str, ...], calls: tuple[tuple[str, str], ...]) -> None:
        self.id, self.input, self.partition, self.calls = op_id, input, partition, calls
        self.columns = input.columns + tuple(name for name, _ in calls)
        self.rows = StateTable(operator_id=op_id, name="rows", columns=input.columns, keys=partition, layout="zset")

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.rows,)

    def _window(self, rows: DataFrame, sign: int) -> DataFrame:
        """W(rows): each row repeated as many times as its weight, the functions computed."""
        repeated = rows.filter(col(WEIGHT) > 0).withColumn(
            "__rep", F.explode(F.array_repeat(F.lit(1), copies(col(WEIGHT))))
        )
        return repeated.select(
            *[col(c) for c in self.input.columns],
            *[F.expr(sql).alias(name) for name, sql in self.calls],
            F.lit(sign).cast("bigint").alias(WEIGHT),
        )

    def step(self, ctx: EpochContext) -> DataFrame:
        change = consolidate(self.input.step(ctx), self.input.columns)
        types = default_hash_types(change, self.partition)
        batch = with_bucket(change, self.partition, ctx.buckets, types)
        batch = nothing(batch) if self.input.unchanged(ctx) else materialize(batch, small=not ctx.full)
        delta = batch.df.drop(BUCKET)
        raw = self.rows.read(ctx, batch, self.partition)
        old = self.rows.current(raw) if raw is not None else None
        if old is not None and not raw.local:
            old = materialize(old, small=not ctx.full).df  # read once, used twice
        new = consolidate(old.unionByName(delta), self.input.columns) if old is not None else delta
        out = self._window(new, 1)
        if old is not None:
            out = out.unionByName(self._window(old, -1))
        self.rows.write(ctx, batch, types)
        return consolidate(out, self.columns)  # lazy: its consumer materializes it once

    def describe(self) -> str:
        by = f"PARTITION BY {', '.join(self.partition)}" if self.partition else "one partition (no PARTITION BY)"
        funcs = "; ".join(sql for _, sql in self.calls)
        return f"window {funcs}: {by}, per touched partition −W(old rows) +W(new rows)"
