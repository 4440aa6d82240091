"""Linear operators: no state, Δout = op(Δin).

Scan, filter, project and UNION ALL distribute over the addition of z-sets, so each applies
itself to the change set row by row and keeps the weights. This holds only for
deterministic expressions, which :mod:`ivm_assets.sql.constructs` guarantees. Each rule is
written once (:func:`scan`, :func:`filter_`, :func:`project`, :func:`union_all`) and bound
once, by its operator, for both engines.

A chain of them is computed as one rule (:func:`fused`): a scan or filter below an
operator, or a projection that only prunes or renames, is bound into the rule above it
unless its change is computed already. Spark plans the chain lazily either way; in process
it saves a DuckDB statement (~1 ms whatever its rows) per link.

Each rule reads the change of its input bound as ``change`` (UNION ALL: ``change<i>``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Col, SparkSql
from ivm_assets.rules.binding import Change, EpochBinding
from ivm_assets.rules.operator import Operator
from ivm_assets.sql.plan import q
from ivm_assets.zset import WEIGHT

if TYPE_CHECKING:
    from ivm_assets.epoch_context import EpochContext

_WEIGHT = ((WEIGHT, Col(WEIGHT)),)


def scan(source_columns: tuple[str, ...], columns: tuple[str, ...]) -> rel.Rel:
    """Δout = Δsource, its columns renamed."""
    change = rel.Input("change", tuple(dict.fromkeys(source_columns)) + (WEIGHT,))  # a column may be read twice
    return rel.Select(change, tuple((c, Col(s)) for s, c in zip(source_columns, columns)) + _WEIGHT)


def filter_(columns: tuple[str, ...], predicate: str) -> rel.Rel:
    """Δout = σ(Δin): the rows where the view's ``predicate`` is true, weights unchanged."""
    change = rel.Input("change", columns + (WEIGHT,))
    return rel.Select(change, tuple((c, Col(c)) for c in columns) + _WEIGHT, SparkSql(predicate))


def project(columns: tuple[str, ...], exprs: tuple[tuple[str, str], ...]) -> rel.Rel:
    """Δout = π(Δin): the view's expressions per row, weights unchanged."""
    change = rel.Input("change", columns + (WEIGHT,))
    return rel.Select(change, tuple((name, SparkSql(sql)) for name, sql in exprs) + _WEIGHT)


def union_all(inputs: tuple[tuple[str, ...], ...], columns: tuple[str, ...]) -> rel.Rel:
    """Δout = Σ Δin_i, the inputs' columns matched by position."""
    parts = tuple(
        rel.Select(rel.Input(f"change{i}", names + (WEIGHT,)), tuple((c, Col(n)) for n, c in zip(names, columns)) + _WEIGHT)
        for i, names in enumerate(inputs)
    )
    return parts[0] if len(parts) == 1 else rel.Union_(parts)


class ScanOp(Operator):
    """The change set of a source (or upstream view) table, its columns renamed.

    Δout = Δsource. On a full refresh the change set is the whole snapshot with weight +1.
    """

    def __init__(self, op_id: str, relation: str, source_columns: tuple[str, ...], columns: tuple[str, ...]) -> None:
        self.id, self.relation, self.source_columns, self.columns = op_id, relation, source_columns, columns

    def unchanged(self, ctx: EpochContext) -> bool:
        return not ctx.full and ctx.change_rows.get(self.relation) == 0

    @property
    def rule(self) -> rel.Rel:
        return scan(self.source_columns, self.columns)

    def epoch(self, cx: EpochBinding) -> Change:
        return cx.compute(*fused(self, cx))

    def describe(self) -> str:
        return f"scan {self.relation} ({', '.join(self.source_columns)}): Δout = Δ{self.relation}"


class FilterOp(Operator):
    """Rows whose predicate is true. Δout = σ(Δin), weights unchanged."""

    def __init__(self, op_id: str, input: Operator, predicate: str) -> None:
        self.id, self.input, self.predicate, self.columns = op_id, input, predicate, input.columns

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def rule(self) -> rel.Rel:
        return filter_(self.columns, self.predicate)

    def epoch(self, cx: EpochBinding) -> Change:
        return cx.compute(*fused(self, cx))

    def describe(self) -> str:
        return f"filter {self.predicate}: Δout = σ(Δin)"


class ProjectOp(Operator):
    """Deterministic expressions per row. Δout = π(Δin), weights unchanged."""

    def __init__(self, op_id: str, input: Operator, exprs: tuple[tuple[str, str], ...]) -> None:
        self.id, self.input, self.exprs = op_id, input, exprs
        self.columns = tuple(n for n, _ in exprs)

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.input,)

    @property
    def rule(self) -> rel.Rel:
        return project(self.input.columns, self.exprs)

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


class UnionAllOp(Operator):
    """Bag union. Δout = Σ Δin_i (columns matched by position)."""

    def __init__(self, op_id: str, inputs: tuple[Operator, ...], columns: tuple[str, ...]) -> None:
        self.id, self._inputs, self.columns = op_id, inputs, columns

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return self._inputs

    @property
    def rule(self) -> rel.Rel:
        return union_all(tuple(i.columns for i in self._inputs), self.columns)

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
