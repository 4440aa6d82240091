"""``ORDER BY … LIMIT k [OFFSET m]``: the view keeps the k rows, state a buffer of the first
rows in order and the whole input to refill the buffer from.

The order is total (:mod:`ivm_assets.sql.order_ties` appended every output column), so the
rows in are one defined set even when the query's sort keys tie; a row present n times
takes n places.

State:
- ``top``: the buffer B, a prefix of the input in order, whole rows only (all copies of a
  row or none), of about ``2·(m + k) + 10`` distinct rows; every input row outside B sorts
  after B's last row β.
- ``rows``: the whole input A (z-set, one bucket). Read only to refill B.

Rule on changes, for a change ΔA:
1. B′ = B + (ΔA restricted to rows sorting at or before β). The rest of ΔA sorts after β and
   after all of B′: B′ is still a prefix of A′ = A + ΔA. Nothing of A is read.
2. If B′ holds fewer than m + k rows (deletes drained it) and A′ may hold more, refill:
   B′ = the first rows of A′, read whole (the one step whose cost follows the input's size,
   not the change's). With fewer than m + k rows in all, every change refills, from a
   table that small.
3. B′ is cut back to its first rows (a prefix again), so the buffer stays small.
4. Δout = rows m+1 … m+k of B′ (+) − rows m+1 … m+k of B (−).

Cost per change: one read of B (its file count bounded by compaction), a sort of B + ΔA
in one Spark partition, an append of ΔA to A and of B′ − B to B; a refill reads A.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ivm_assets.delta.tables import WEIGHT
from ivm_assets.operators.base import Batch, EpochContext, Operator, col, consolidate, materialize, nothing
from ivm_assets.sql.plan import SortKey
from ivm_assets.state.arrangement import BUCKET, StateTable, with_bucket

# Distinct rows the buffer keeps beyond twice the rows the view shows.
SLACK = 10


class TopKOp(Operator):
    """ORDER BY … LIMIT … OFFSET over a total order (see module doc for the rule and the state)."""

    def __init__(self, op_id: str, input: Operator, order: tuple[SortKey, ...], limit: int, offset: int) -> None:
        self.id, self.input, self.order, self.limit, self.offset = op_id, input, order, limit, offset
        self.columns = input.columns
        self.target = 2 * (offset + limit) + SLACK
        self.rows = StateTable(operator_id=op_id, name="rows", columns=self.columns, keys=(), layout="zset")
        self.top = StateTable(operator_id=op_id, name="top", columns=self.columns, keys=(), layout="zset")

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.rows, self.top)

    def _sort(self) -> list[Column]:
        def key(name: str, desc: bool, nulls_first: bool) -> Column:
            c = col(name)
            if desc:
                return c.desc_nulls_first() if nulls_first else c.desc_nulls_last()
            return c.asc_nulls_first() if nulls_first else c.asc_nulls_last()

        return [key(*k) for k in self.order]

    def _first(self, rows: DataFrame) -> DataFrame:
        """The first ``target`` distinct rows of ``rows`` (a z-set) in order."""
        return rows.filter(col(WEIGHT) > 0).orderBy(*self._sort()).limit(self.target)

    def _advance(self, old: DataFrame | None, delta: DataFrame) -> DataFrame:
        """B + the part of ΔA that sorts at or before B's last row (step 1)."""
        zero = F.lit(0).cast("bigint")
        tagged = delta.select(*[col(c) for c in self.columns], col(WEIGHT).alias("__d"), zero.alias("__o"))
        if old is not None:
            tagged = tagged.unionByName(old.select(*[col(c) for c in self.columns], zero.alias("__d"), col(WEIGHT).alias("__o")))
        rows = tagged.groupBy(*[col(c) for c in self.columns]).agg(F.sum("__d").alias("__d"), F.sum("__o").alias("__o"))
        # A row is at or before β when some row of B sorts at or after it. One Spark
        # partition: B and ΔA are small.
        after = Window.partitionBy(F.lit(0)).orderBy(*self._sort()).rowsBetween(Window.currentRow, Window.unboundedFollowing)
        in_b = F.max(F.when(col("__o") > 0, 1).otherwise(0)).over(after)
        kept = rows.withColumn("__in_b", in_b).filter(col("__in_b") == 1)
        return kept.select(*[col(c) for c in self.columns], (col("__o") + col("__d")).alias(WEIGHT)).filter(col(WEIGHT) > 0)

    def _shown(self, buffer: DataFrame, sign: int) -> DataFrame:
        """The copies of ``buffer``'s rows at positions m+1 … m+k, with weight ``sign`` each."""
        upto = Window.partitionBy(F.lit(0)).orderBy(*self._sort()).rowsBetween(Window.unboundedPreceding, Window.currentRow)
        before = F.sum(col(WEIGHT)).over(upto) - col(WEIGHT)

        def within(bound: int) -> Column:
            return F.least(col(WEIGHT), F.greatest(F.lit(0), F.lit(bound) - before))

        copies = within(self.offset + self.limit) - within(self.offset)
        shown = buffer.select(*[col(c) for c in self.columns], (copies * sign).cast("bigint").alias(WEIGHT))
        return shown.filter(col(WEIGHT) != 0)

    def step(self, ctx: EpochContext) -> DataFrame:
        change = consolidate(self.input.step(ctx), self.columns)
        batch = with_bucket(change, (), ctx.buckets, [])
        batch = nothing(batch) if self.input.unchanged(ctx) else materialize(batch, small=not ctx.full)
        delta = batch.df.drop(BUCKET)
        if batch.rows == 0 and not ctx.full:
            return delta
        old = None
        if ctx.full:
            new = materialize(self._first(delta), small=True)
        else:
            raw = self.top.read(ctx, batch, ())
            if raw is not None:
                old = self.top.current(raw.df)
                old = old if raw.local else materialize(old, small=True).df  # used three times
            new = materialize(self._first(self._advance(old, delta)), small=True)
            if _copies(new) < self.offset + self.limit:  # drained by deletes: refill from A
                raw_all = self.rows.read(ctx, batch, ())
                everything = consolidate(raw_all.df.unionByName(delta), self.columns) if raw_all is not None else delta
                new = materialize(self._first(everything), small=True)
                ctx.stats["top_k_refills"] = ctx.stats.get("top_k_refills", 0) + 1
        parts = [self._shown(new.df, 1)] + ([self._shown(old, -1)] if old is not None else [])
        out = consolidate(parts[0].unionByName(parts[1]) if len(parts) > 1 else parts[0], self.columns)
        if old is None:
            buffer_change = new.df
        else:
            gone = old.withColumn(WEIGHT, -col(WEIGHT))
            buffer_change = consolidate(new.df.unionByName(gone), self.columns)
        self.rows.write(ctx, batch, [])
        self.top.write(ctx, materialize(with_bucket(buffer_change, (), ctx.buckets, []), small=True), [])
        return out  # lazy: its consumer materializes it once

    def describe(self) -> str:
        order = ", ".join(f"{c} {'DESC' if d else 'ASC'} NULLS {'FIRST' if n else 'LAST'}" for c, d, n in self.order)
        offset = f" OFFSET {self.offset}" if self.offset else ""
        return (
            f"top-k ORDER BY {order} LIMIT {self.limit}{offset}: buffer of the first {self.target} rows, "
            "Δ within the buffer only; refilled from the whole input when deletes drain it"
        )


def _copies(batch: Batch) -> int:
    """Rows (counting copies) in a z-set materialized as small (with its Arrow copy)."""
    return sum(batch.table.column(WEIGHT).to_pylist())
