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
(in one Spark partition, or by DuckDB in process), an append of ΔA to A and of B′ − B to B;
a refill reads A. An empty ΔA changes nothing and reads nothing.

Per group (``ROW_NUMBER() OVER (PARTITION BY g …) <= k``, see
:mod:`ivm_assets.sql.top_k_per_group`) all of this holds per partition: both tables are
bucketed by the partition columns, a change reads the buffers of the partitions it touches,
and a refill reads A for just the partitions drained. The place of each copy (the
ROW_NUMBER value) is then an output column.

The rule is written once, in :mod:`ivm_assets.rules.top_k`, and bound to its inputs once for
both engines (:meth:`TopKOp.epoch`, :mod:`ivm_assets.operators.binding`); how state is read
is the engine's.
"""

from __future__ import annotations

from ivm_assets.operators.base import Operator
from ivm_assets.operators.binding import BoundOperator, Change, EpochBinding
from ivm_assets.rules import rel
from ivm_assets.rules.top_k import TopKRule
from ivm_assets.sql.plan import SortKey
from ivm_assets.state.arrangement import StateTable
from ivm_assets.zset import BUCKET

# Distinct rows the buffer keeps beyond twice the rows the view shows.
SLACK = 10


class TopKOp(BoundOperator):
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

    def epoch(self, cx: EpochBinding) -> Change:
        rule = self.rule
        keyed = cx.keyed(cx.consolidated(self.input, self.row_columns), self.partition, self.rows, self.inputs)
        delta = cx.unkeyed(keyed)
        cx.orders_alike(delta, (*(k[0] for k in self.order), *self.partition), "top-k ordered or partitioned by")
        if not cx.full and cx.rows(keyed) == 0:  # the buffer stays as it is, and nothing shown changes
            return cx.compute(rel.empty(rule.output({"new"})), {"new": delta})
        inputs = {"delta": delta}
        if cx.full:
            new = cx.kept(cx.compute(rule.full(), inputs, self.row_columns, like=(delta,)))
        else:
            # Without partitions the buffer is read whole; with them, its partitions ΔA touches.
            old = cx.lookup(self.top, keyed if self.partition else None, self.partition, like=delta, reused=True)
            if old is not None:
                inputs["old"] = old
            advanced = cx.kept(cx.compute(rule.advanced(set(inputs)), inputs, self.row_columns, like=(delta,)))
            new = self._refilled(cx, keyed, delta, advanced)
        inputs["new"] = new
        out = cx.compute(rule.output(set(inputs)), inputs)
        buffer_change = cx.compute(rule.buffer_change(set(inputs)), inputs, self.row_columns, like=(delta,))
        cx.append(self.rows, keyed)
        cx.append(self.top, cx.keyed(buffer_change, self.partition, self.top, ()))
        return out

    def _refilled(self, cx: EpochBinding, keyed: Change, delta: Change, new: Change) -> Change:
        """B′ with the partitions left holding fewer than m + k rows refilled from A + ΔA (step 2)."""
        rule = self.rule
        inputs = {"new": new, "delta": delta}
        if not self.partition:
            if cx.copies(new) >= self.offset + self.limit:
                return new
            # The whole input, not the rows of the change's buckets.
            rows = cx.lookup(self.rows, None, (), like=delta)
            cx.count("top_k_refills", 1)
        else:
            touched = cx.distinct(keyed, (*self.partition, BUCKET))
            drained = cx.kept(cx.compute(rule.drained(), {"new": new, "touched": touched}))
            if cx.rows(drained) == 0:
                return new
            cx.count("top_k_refills", cx.rows(drained))
            inputs["drained"] = drained
            rows = cx.lookup(self.rows, drained, self.partition, like=delta)
        if rows is not None:
            inputs["rows"] = rows
        return cx.kept(cx.compute(rule.refilled(set(inputs)), inputs, self.row_columns, like=(delta,)))

    def describe(self) -> str:
        order = ", ".join(f"{c} {'DESC' if d else 'ASC'} NULLS {'FIRST' if n else 'LAST'}" for c, d, n in self.order)
        offset = f" OFFSET {self.offset}" if self.offset else ""
        per = f" per partition of {', '.join(self.partition)}" if self.partition else ""
        place = f" (place as {self.position})" if self.position else ""
        return (
            f"top-k ORDER BY {order} LIMIT {self.limit}{offset}{per}{place}: buffer of the first {self.target} rows, "
            "Δ within the buffer only; refilled from the input when deletes drain it"
        )

