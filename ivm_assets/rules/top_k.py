"""``ORDER BY … LIMIT k [OFFSET m]``'s rule on changes, written once for both engines (its
derivation and state are :mod:`ivm_assets.operators.top_k`'s module doc): a buffer B of the
first rows in order, advanced by the part of a change that sorts within it, refilled from
the whole input where deletes drained it, and the rows at places m+1 … m+k shown.

Steps, because the engines read state between them (relations bound by name):

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

from ivm_assets.rules import rel
from ivm_assets.rules.rel import Call, Case, Col, Lit, SortKey, add, and_, gt, keep, sub
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
        order sorts rows tied but for a zero's sign −0.0 first (:data:`~ivm_assets.rules.rel.SortKey`),
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
