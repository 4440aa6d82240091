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

The rule (:class:`TopKRule`) is bound to its inputs once for both engines
(:meth:`TopKOp.epoch`); how state is read is the engine's. Steps, because the engines read state between them (relations bound by name):

1. :meth:`TopKRule.advanced`: B′ = the first rows of B + ΔA's rows at or before B's last
   (``delta``, ``old``: B's rows for the partitions ΔA touches).
2. :meth:`TopKRule.drained`: the partitions ΔA touches (``touched``, with their buckets)
   where B′ (``new``) holds fewer than m + k rows; :meth:`TopKRule.refilled`: B′ with those
   refilled from A's rows there (``rows``) + ΔA.
3. :meth:`TopKRule.output` and :meth:`TopKRule.buffer_change`: Δout = shown(B′) − shown(B),
   and B′ − B, which the buffer's state table appends.
"""

from __future__ import annotations

from dataclasses import dataclass


from ivm_assets.ir import rel
from ivm_assets.ir.rel import Call, Case, Col, Lit, SortKey, add, and_, gt, keep, sub
from ivm_assets.rules.binding import Change, EpochBinding
from ivm_assets.rules.operator import Operator
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import BUCKET, WEIGHT


@dataclass(frozen=True)
class TopKRule:
    """What the rule needs of the operator: the input's columns, the (total) order, LIMIT and
    OFFSET, the partition columns (a per-group top-k), the name of the place column (the
    per-group ROW_NUMBER, or None) and the buffer's size in distinct rows."""

    columns: tuple[str, ...]
    order: tuple[SortKey, ...]
    limit: int
    offset: int
    partition: tuple[str, ...]
    position: str | None
    target: int

    @property
    def output_columns(self) -> tuple[str, ...]:
        return self.columns + ((self.position,) if self.position else ())

    def _input(self, name: str) -> rel.Rel:
        """A relation the epoch binds. Its zeros keep their sign: −0.0 and 0.0 are one
        partition (both engines partition, group and join them as Spark does), and the
        order sorts rows tied but for a zero's sign −0.0 first (:data:`~ivm_assets.ir.rel.SortKey`),
        so that they come in the same order each time, and shown(B) recomputed is what was
        emitted."""
        return rel.Input(name, self.columns + (WEIGHT,))

    def _first(self, rows: rel.Rel) -> rel.Rel:
        """The first ``target`` distinct rows of each partition of ``rows`` (a z-set) in order."""
        positive = rel.Select(rows, tuple((c, Col(c)) for c in rel.columns(rows)), gt(Col(WEIGHT), Lit(0)))
        return rel.First(positive, self.partition, self.order, self.target)

    def full(self) -> rel.Rel:
        """A full refresh's buffer: the first rows of the input (``delta``)."""
        return self._first(self._input("delta"))

    def advanced(self, present: set[str]) -> rel.Rel:
        """B′: the first rows of B + the part of ΔA that sorts at or before B's last row (a
        row is there when some row of B sorts at or after it)."""
        tagged: rel.Rel = keep(self._input("delta"), self.columns, __d=Col(WEIGHT), __o=Lit(0))
        if "old" in present:
            tagged = rel.Union_((tagged, keep(self._input("old"), self.columns, __d=Lit(0), __o=Col(WEIGHT))))
        rows = rel.group_sum(tagged, self.columns, (("__d", Col("__d")), ("__o", Col("__o"))), signed=True)
        in_b = Case(gt(Col("__o"), Lit(0)), Lit(1), Lit(0))
        ranked = rel.Ordered(rows, self.partition, self.order, (("__in_b", "max_after", in_b),))
        weight = add(Col("__o"), Col("__d"))
        kept = rel.Select(ranked, tuple((c, Col(c)) for c in self.columns) + ((WEIGHT, weight),),
                          and_(Call("=", (Col("__in_b"), Lit(1))), gt(weight, Lit(0))))
        return self._first(kept)

    def _marks(self) -> tuple[rel.Rel, tuple[tuple[str, str], ...]]:
        """The drained partitions (``drained``), their keys renamed apart, and the join on them."""
        marks = rel.Select(rel.Input("drained", self.partition + (BUCKET,)), tuple((f"__k_{k}", Col(k)) for k in self.partition))
        return marks, tuple((k, f"__k_{k}") for k in self.partition)

    def drained(self) -> rel.Rel:
        """The partitions ΔA touches (``touched``: their keys and buckets) where B′ (``new``)
        holds fewer than m + k rows, counting copies."""
        sizes = rel.group_sum(rel.Input("new", self.columns + (WEIGHT,)), self.partition, (("__c", Col(WEIGHT)),))
        sizes = rel.Select(sizes, tuple((f"__k_{k}", Col(k)) for k in self.partition) + (("__c", Col("__c")),))
        touched = rel.Input("touched", self.partition + (BUCKET,))
        joined = rel.Join(touched, sizes, tuple((k, f"__k_{k}") for k in self.partition), "left", null_safe=True)
        short = Call("<", (rel.coalesce(Col("__c"), Lit(0)), Lit(self.offset + self.limit)))
        return rel.Select(joined, tuple((c, Col(c)) for c in self.partition + (BUCKET,)), short)

    def refilled(self, present: set[str]) -> rel.Rel:
        """B′ with the drained partitions (``drained``; without partitions, all of B′) refilled:
        the first rows of A there (``rows``, when A has any) + ΔA there (``delta``)."""
        delta: rel.Rel = self._input("delta")
        kept: rel.Rel | None = None
        if self.partition:
            marks, on = self._marks()
            delta = rel.Join(delta, marks, on, "semi", null_safe=True)
            kept = rel.Join(self._input("new"), marks, on, "anti", null_safe=True)
        everything = rel.Consolidate(rel.Union_((self._input("rows"), delta)), self.columns) if "rows" in present else delta
        refill = self._first(everything)
        return refill if kept is None else rel.Union_((kept, refill))

    def _shown(self, buffer: rel.Rel, sign: int) -> rel.Rel:
        """The copies of ``buffer``'s rows at places m+1 … m+k, with weight ``sign`` each
        (with ``position``: one row per copy, holding its place)."""
        placed = rel.Ordered(buffer, self.partition, self.order, (("__run", "running_sum", Col(WEIGHT)),))
        before = sub(Col("__run"), Col(WEIGHT))
        first = Call("greatest", (before, Lit(self.offset)))
        last = Call("least", (add(before, Col(WEIGHT)), Lit(self.offset + self.limit)))
        row = tuple((c, Col(c)) for c in self.columns)
        if self.position:
            each = rel.Places(placed, self.position, first, last)
            return rel.Select(each, row + ((self.position, Col(self.position)), (WEIGHT, Lit(sign))))
        return rel.Select(placed, row + ((WEIGHT, rel.mul(sub(last, first), Lit(sign))),), gt(last, first))

    def output(self, present: set[str]) -> rel.Rel:
        """Δout = shown(B′) − shown(B), from ``new`` and, when there was a buffer, ``old``."""
        parts = [self._shown(self._input("new"), 1)]
        if "old" in present:
            parts.append(self._shown(self._input("old"), -1))
        return rel.Consolidate(parts[0] if len(parts) == 1 else rel.Union_(tuple(parts)), self.output_columns)

    def buffer_change(self, present: set[str]) -> rel.Rel:
        """B′ − B, what the buffer's state table appends."""
        if "old" not in present:
            return self._input("new")
        gone = rel.Select(self._input("old"), tuple((c, Col(c)) for c in self.columns) + ((WEIGHT, Call("neg", (Col(WEIGHT),))),))
        return rel.Consolidate(rel.Union_((self._input("new"), gone)), self.columns)


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
        """This operator's rule on changes (:class:`TopKRule`)."""
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

