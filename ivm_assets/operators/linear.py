"""Linear operators: no state, Δout = op(Δin).

Scan, filter, project and UNION ALL distribute over the addition of z-sets, so each applies
itself to the change set row by row and keeps the weights. This holds only for
deterministic expressions, which :mod:`ivm_assets.sql.constructs` guarantees. The rules are
written once, in :mod:`ivm_assets.rules.linear`, and bound once, here, for both engines.

A chain of them is computed as one rule (:func:`fused`): a scan or filter below an
operator, or a projection that only prunes or renames, is bound into the rule above it
unless its change is computed already. Spark plans the chain lazily either way; in process
it saves a DuckDB statement (~1 ms whatever its rows) per link.
"""

from __future__ import annotations

from ivm_assets.epoch_context import EpochContext
from ivm_assets.operators.base import Operator
from ivm_assets.operators.binding import BoundOperator, Change, EpochBinding
from ivm_assets.rules import linear, rel
from ivm_assets.sql.plan import q


class ScanOp(BoundOperator):
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

    def epoch(self, cx: EpochBinding) -> Change:
        return cx.compute(*fused(self, cx))

    def describe(self) -> str:
        return f"scan {self.relation} ({', '.join(self.source_columns)}): Δout = Δ{self.relation}"


class FilterOp(BoundOperator):
    """Rows whose predicate is true. Δout = σ(Δin), weights unchanged."""

    def __init__(self, op_id: str, input: Operator, predicate: str) -> None:
        self.id, self.input, self.predicate, self.columns = op_id, input, predicate, input.columns

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def rule(self) -> rel.Rel:
        return linear.filter_(self.columns, self.predicate)

    def epoch(self, cx: EpochBinding) -> Change:
        return cx.compute(*fused(self, cx))

    def describe(self) -> str:
        return f"filter {self.predicate}: Δout = σ(Δin)"


class ProjectOp(BoundOperator):
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

    def epoch(self, cx: EpochBinding) -> Change:
        return cx.compute(*fused(self, cx))

    def describe(self) -> str:
        return "project " + ", ".join(f"{e} AS {n}" for n, e in self.exprs) + ": Δout = π(Δin)"


class UnionAllOp(BoundOperator):
    """Bag union. Δout = Σ Δin_i (columns matched by position)."""

    def __init__(self, op_id: str, inputs: tuple[Operator, ...], columns: tuple[str, ...]) -> None:
        self.id, self._inputs, self.columns = op_id, inputs, columns

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return self._inputs

    @property
    def rule(self) -> rel.Rel:
        return linear.union_all(tuple(i.columns for i in self._inputs), self.columns)

    def epoch(self, cx: EpochBinding) -> Change:
        parts = {f"change{n}": cx.change(i) for n, i in enumerate(self._inputs)}
        cx.unions_alike(tuple(parts.values()))
        return cx.compute(self.rule, parts)

    def describe(self) -> str:
        return f"union all of {len(self._inputs)} inputs: Δout = Σ Δin"


def fused(op: ScanOp | FilterOp | ProjectOp, cx: EpochBinding) -> tuple[rel.Rel, dict[str, Change]]:
    """``op``'s rule and the change it reads, with the scans and filters below it (and
    projections that prune or rename) bound into the rule unless ``cx`` holds their change
    already. Only those are inlined: their columns pass through with their types, so
    ``op``'s own expressions are typed as if its input had been computed first."""
    if isinstance(op, ScanOp):
        return op.rule, {"change": cx.source(op.relation)}
    child = op.input
    inlined = isinstance(child, (ScanOp, FilterOp)) or isinstance(child, ProjectOp) and child.passes_through
    if inlined and not cx.held(child):
        inner, inputs = fused(child, cx)
        return rel.bound(op.rule, "change", inner), inputs
    return op.rule, {"change": cx.change(child)}
