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
in one Spark partition, an append of ΔA to A and of B′ − B to B; a refill reads A. Without
partitions ΔA and B′ are computed in one Spark job (B is read whole, so ΔA's rows are not
needed before B′ is planned).

Per group (``ROW_NUMBER() OVER (PARTITION BY g …) <= k``, see
:mod:`ivm_assets.sql.top_k_per_group`) all of this holds per partition: both tables are
bucketed by the partition columns, a change reads the buffers of the partitions it touches,
and a refill reads A for just the partitions drained. The place of each copy (the
ROW_NUMBER value) is then an output column.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ivm_assets.operators.base import (
    Batch, EpochContext, Operator, col, consolidate, materialize, nothing, null_safe_match, unforced,
)
from ivm_assets.sql.plan import SortKey
from ivm_assets.state.arrangement import StateTable, default_hash_types, with_bucket
from ivm_assets.zset import BUCKET, WEIGHT

# Distinct rows the buffer keeps beyond twice the rows the view shows.
SLACK = 10


class TopKOp(Operator):
    """ORDER BY … LIMIT … OFFSET over a total order, of the whole input or per partition
    (see module doc for the rule and the state)."""

    def __init__(
        self,
        op_id: str,
        input: Operator,
        order: tuple[SortKey, ...],
        limit: int,
        offset: int,
        partition: tuple[str, ...] = (),
        position: str | None = None,
    ) -> None:
        self.id, self.input, self.order, self.limit, self.offset = op_id, input, order, limit, offset
        self.partition, self.position = partition, position
        self.row_columns = input.columns
        self.columns = input.columns + ((position,) if position else ())
        self.target = 2 * (offset + limit) + SLACK
        self.rows = StateTable(operator_id=op_id, name="rows", columns=input.columns, keys=partition, layout="zset")
        self.top = StateTable(operator_id=op_id, name="top", columns=input.columns, keys=partition, layout="zset")

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

    def _window(self):
        """Each partition in order. Without partitions one Spark partition: the rows a change
        sorts (buffer and change) are few."""
        return Window.partitionBy(*([col(k) for k in self.partition] or [F.lit(0)])).orderBy(*self._sort())

    def _first(self, rows: DataFrame) -> DataFrame:
        """The first ``target`` distinct rows of each partition of ``rows`` (a z-set) in order."""
        rows = rows.filter(col(WEIGHT) > 0)
        if not self.partition:
            return rows.orderBy(*self._sort()).limit(self.target)
        place = F.row_number().over(self._window())
        return rows.withColumn("__n", place).filter(col("__n") <= self.target).drop("__n")

    def _advance(self, old: DataFrame | None, delta: DataFrame) -> DataFrame:
        """B + the part of ΔA that sorts at or before B's last row (step 1)."""
        zero = F.lit(0).cast("bigint")
        cols = [col(c) for c in self.row_columns]
        tagged = delta.select(*cols, col(WEIGHT).alias("__d"), zero.alias("__o"))
        if old is not None:
            tagged = tagged.unionByName(old.select(*cols, zero.alias("__d"), col(WEIGHT).alias("__o")))
        rows = tagged.groupBy(*cols).agg(F.sum("__d").alias("__d"), F.sum("__o").alias("__o"))
        # A row is at or before β when some row of B sorts at or after it.
        after = self._window().rowsBetween(Window.currentRow, Window.unboundedFollowing)
        in_b = F.max(F.when(col("__o") > 0, 1).otherwise(0)).over(after)
        kept = rows.withColumn("__in_b", in_b).filter(col("__in_b") == 1)
        return kept.select(*cols, (col("__o") + col("__d")).alias(WEIGHT)).filter(col(WEIGHT) > 0)

    def _shown(self, buffer: DataFrame, sign: int) -> DataFrame:
        """The copies of ``buffer``'s rows at places m+1 … m+k, with weight ``sign`` each
        (with ``position``: one row per copy, holding its place)."""
        upto = self._window().rowsBetween(Window.unboundedPreceding, Window.currentRow)
        placed = buffer.withColumn("__before", F.sum(col(WEIGHT)).over(upto) - col(WEIGHT))
        first = F.greatest(col("__before"), F.lit(self.offset))
        last = F.least(col("__before") + col(WEIGHT), F.lit(self.offset + self.limit))
        cols = [col(c) for c in self.row_columns]
        if self.position:
            shown = placed.filter(last > first).select(
                *cols, F.explode(F.sequence((first + 1).cast("int"), last.cast("int"))).alias(self.position),
                F.lit(sign).cast("bigint").alias(WEIGHT),
            )
            return shown
        shown = placed.select(*cols, (F.greatest(last - first, F.lit(0)) * sign).cast("bigint").alias(WEIGHT))
        return shown.filter(col(WEIGHT) != 0)

    def _refill(self, ctx: EpochContext, batch: Batch, delta: DataFrame, new: Batch) -> Batch:
        """B′ with the partitions left holding fewer than m + k rows refilled from A + ΔA (step 2)."""
        need = self.offset + self.limit
        if not self.partition:
            if _copies(new) >= need:
                return new
            # The whole input, not the rows of the change's buckets: a change that cancels
            # out (a no-op UPDATE, an insert a filter drops) has no rows, and so no bucket.
            raw = self.rows.read(ctx, None, ())
            everything = consolidate(raw.df.unionByName(delta), self.row_columns) if raw is not None else delta
            ctx.stats["top_k_refills"] = ctx.stats.get("top_k_refills", 0) + 1
            return materialize(self._first(everything), small=True)
        keys = [col(k) for k in self.partition]
        sizes = new.df.groupBy(*keys).agg(F.sum(col(WEIGHT)).alias("__c"))
        sizes = sizes.select(*[col(k).alias(f"__k{i}") for i, k in enumerate(self.partition)], col("__c"))
        touched = batch.df.select(*keys, col(BUCKET)).distinct()
        pairs = [(k, f"__k{i}") for i, k in enumerate(self.partition)]
        drained = touched.join(sizes, null_safe_match(touched, sizes, pairs), "left").filter(F.coalesce(col("__c"), F.lit(0)) < need)
        drained = materialize(drained.select(*keys, col(BUCKET)), small=True)
        if drained.rows == 0:
            return new
        ctx.stats["top_k_refills"] = ctx.stats.get("top_k_refills", 0) + drained.rows
        marks = drained.df.select(*[col(k).alias(f"__k{i}") for i, k in enumerate(self.partition)])

        def of_drained(df: DataFrame, how: str) -> DataFrame:
            return df.join(marks, null_safe_match(df, marks, pairs), how)

        raw = self.rows.read(ctx, drained, self.partition)
        mine = of_drained(delta, "left_semi")
        everything = consolidate(raw.df.unionByName(mine), self.row_columns) if raw is not None else mine
        return materialize(of_drained(new.df, "left_anti").unionByName(self._first(everything)), small=True)

    def step(self, ctx: EpochContext) -> DataFrame:
        change = consolidate(self.input.step(ctx), self.row_columns)
        types = default_hash_types(change, self.partition)
        batch = with_bucket(change, self.partition, ctx.buckets, types)
        batch = nothing(batch) if self.input.unchanged(ctx) else materialize(batch, small=not ctx.full)
        if self.partition and not ctx.full and batch.rows == 0:
            return self._shown(batch.df.drop(BUCKET), 1)
        # Without partitions the buffer is read whole, so nothing here needs the change's
        # rows: it is computed in the job that computes the new buffer (an empty change
        # leaves the buffer as it is and shows no change). Otherwise it is computed by now.
        delta = unforced(batch).drop(BUCKET)
        old = None
        if ctx.full:
            new = materialize(self._first(delta), small=True)
        else:
            raw = self.top.read(ctx, batch if self.partition else None, self.partition)
            if raw is not None:
                old = self.top.current(raw)
                old = old if raw.local else materialize(old, small=True).df  # used three times
            new = self._refill(ctx, batch, delta, materialize(self._first(self._advance(old, delta)), small=True))
        parts = [self._shown(new.df, 1)] + ([self._shown(old, -1)] if old is not None else [])
        out = consolidate(parts[0].unionByName(parts[1]) if len(parts) > 1 else parts[0], self.columns)
        if old is None:
            buffer_change = new.df
        else:
            gone = old.withColumn(WEIGHT, -col(WEIGHT))
            buffer_change = consolidate(new.df.unionByName(gone), self.row_columns)
        self.rows.write(ctx, batch, types)
        self.top.write(ctx, materialize(with_bucket(buffer_change, self.partition, ctx.buckets, types), small=True), types)
        return out  # lazy: its consumer materializes it once

    def describe(self) -> str:
        order = ", ".join(f"{c} {'DESC' if d else 'ASC'} NULLS {'FIRST' if n else 'LAST'}" for c, d, n in self.order)
        offset = f" OFFSET {self.offset}" if self.offset else ""
        per = f" per partition of {', '.join(self.partition)}" if self.partition else ""
        place = f" (place as {self.position})" if self.position else ""
        return (
            f"top-k ORDER BY {order} LIMIT {self.limit}{offset}{per}{place}: buffer of the first {self.target} rows, "
            "Δ within the buffer only; refilled from the input when deletes drain it"
        )


def _copies(batch: Batch) -> int:
    """Rows (counting copies) in a z-set materialized as small (with its Arrow copy)."""
    return sum(batch.table.column(WEIGHT).to_pylist())
