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
order (:mod:`ivm_assets.sql.order_ties`), so a recompute gives the same rows. −0.0 ties with
0.0 in that order and in a MIN, so a touched partition whose stored rows hold −0.0 fails the
epoch with :class:`~ivm_assets.errors.UnrepeatableRows`, and the view is recomputed.

State: the input rows (z-set) bucketed by the PARTITION BY columns; a change reads the rows
of the partitions it touches. Without PARTITION BY the whole input is one partition: every
change reads it whole and recomputes the window over all of it (correct, not cheap). DuckDB
renders the rule for epochs computed in process when every call translates
(:mod:`ivm_assets.render.duckdb.expressions`).

The rule (:func:`rule`) reads ``delta``, the input's change (consolidated), and ``old``, the stored input
rows of the partitions it touches (when there are any).
"""

from __future__ import annotations

from ivm_assets.errors import UnrepeatableRows
from ivm_assets.ir import rel
from ivm_assets.rules.binding import Change, EpochBinding
from ivm_assets.rules.operator import Operator
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import WEIGHT


def rule(columns: tuple[str, ...], calls: tuple[tuple[str, str], ...], present: set[str]) -> rel.Rel:
    """Δout = W(X_new(P)) − W(X_old(P)), X_new(P) = X_old(P) + ΔX, P the touched partitions.

    Rows are read as they are, zeros signed: each row shows its own value, as in Spark. W(X_old)
    must be what was emitted, and −0.0 ties with 0.0 (Spark may give either the first place,
    or have MIN pick either), so an epoch whose touched partitions already hold a −0.0 fails
    with :class:`~ivm_assets.errors.UnrepeatableRows` and the view is recomputed. A −0.0 the
    change brings is emitted as W gives it; an epoch that touches its partition later
    recomputes the view."""
    delta = rel.Input("delta", columns + (WEIGHT,))
    old = None
    if "old" in present:
        message = f"{UnrepeatableRows.MARKER}: a window over a partition holding -0.0 in a FLOAT or DOUBLE column;"
        old = rel.NoNegativeZero(rel.Input("old", columns + (WEIGHT,)), message)
    new = delta if old is None else rel.Consolidate(rel.Union_((old, delta)), columns)
    out: rel.Rel = rel.Window(new, columns, calls, 1)
    if old is not None:
        out = rel.Union_((out, rel.Window(old, columns, calls, -1)))
    return rel.Consolidate(out, columns + tuple(name for name, _ in calls))


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

    def epoch(self, cx: EpochBinding) -> Change:
        keyed = cx.keyed(cx.consolidated(self.input, self.input.columns), self.partition, self.rows, self.inputs)
        inputs = {"delta": cx.unkeyed(keyed)}
        if (old := cx.lookup(self.rows, keyed, self.partition, reused=True)) is not None:  # the rule reads them twice
            inputs["old"] = old
        out = cx.compute(self.rule_on(set(inputs)), inputs)  # typed as the window functions give them
        cx.append(self.rows, keyed)
        return out

    def rule_on(self, present: set[str]) -> rel.Rel:
        """This window's rule on changes (:func:`rule`) over ``present``."""
        return rule(self.input.columns, self.calls, present)

    def describe(self) -> str:
        by = f"PARTITION BY {', '.join(self.partition)}" if self.partition else "one partition (no PARTITION BY)"
        funcs = "; ".join(sql for _, sql in self.calls)
        return f"window {funcs}: {by}, per touched partition −W(old rows) +W(new rows)"
