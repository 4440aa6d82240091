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

The rule is written once, in :mod:`ivm_assets.rules.top_k`, and rendered by Spark here and
by DuckDB for epochs computed in process; which state is read, and how, is the engine's.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from ivm_assets.operators.base import Batch, EpochContext, Operator, col, consolidate, materialize, nothing, unforced
from ivm_assets.rules import rel, render_spark
from ivm_assets.rules.top_k import TopKRule
from ivm_assets.sql.plan import SortKey
from ivm_assets.state.arrangement import StateTable
from ivm_assets.state.layout import default_hash_types, with_bucket
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

    @property
    def rule(self) -> TopKRule:
        """This operator's rule on changes (:mod:`ivm_assets.rules.top_k`)."""
        return TopKRule(self.row_columns, self.order, self.limit, self.offset, self.partition, self.position, self.target)

    def _refill(self, ctx: EpochContext, batch: Batch, delta: DataFrame, new: Batch) -> Batch:
        """B′ with the partitions left holding fewer than m + k rows refilled from A + ΔA (step 2)."""
        rule = self.rule
        inputs = {"new": new.df, "delta": delta}
        if not self.partition:
            if _copies(new) >= self.offset + self.limit:
                return new
            # The whole input, not the rows of the change's buckets: a change that cancels
            # out (a no-op UPDATE, an insert a filter drops) has no rows, and so no bucket.
            raw = self.rows.read(ctx, None, ())
            ctx.stats["top_k_refills"] = ctx.stats.get("top_k_refills", 0) + 1
        else:
            touched = batch.df.select(*[col(k) for k in self.partition], col(BUCKET)).distinct()
            drained = materialize(render_spark.render(rule.drained(), {"new": new.df, "touched": touched}), small=True)
            if drained.rows == 0:
                return new
            ctx.stats["top_k_refills"] = ctx.stats.get("top_k_refills", 0) + drained.rows
            inputs["drained"] = drained.df
            raw = self.rows.read(ctx, drained, self.partition)
        if raw is not None:
            inputs["rows"] = raw.df
        return materialize(render_spark.render(rule.refilled(set(inputs)), inputs), small=True)

    def step(self, ctx: EpochContext) -> DataFrame:
        rule = self.rule
        change = consolidate(self.input.step(ctx), self.row_columns)
        types = default_hash_types(change, self.partition)
        batch = with_bucket(change, self.partition, ctx.buckets, types)
        batch = nothing(batch) if self.input.unchanged(ctx) else materialize(batch, small=ctx.small)
        if self.partition and not ctx.full and batch.rows == 0:
            return render_spark.render(rel.empty(rule.output({"new"})), {"new": batch.df.drop(BUCKET)})
        # Without partitions the buffer is read whole, so nothing here needs the change's
        # rows: it is computed in the job that computes the new buffer (an empty change
        # leaves the buffer as it is and shows no change). Otherwise it is computed by now.
        delta = unforced(batch).drop(BUCKET)
        inputs = {"delta": delta}
        if ctx.full:
            new = materialize(render_spark.render(rule.full(), inputs), small=True)
        else:
            raw = self.top.read(ctx, batch if self.partition else None, self.partition)
            if raw is not None:
                old = self.top.current(raw)
                inputs["old"] = old if raw.local else materialize(old, small=True).df  # used three times
            new = self._refill(ctx, batch, delta, materialize(render_spark.render(rule.advanced(set(inputs)), inputs), small=True))
        inputs["new"] = new.df
        out = render_spark.render(rule.output(set(inputs)), inputs)
        buffer_change = render_spark.render(rule.buffer_change(set(inputs)), inputs)
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
