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
change reads it whole and recomputes the window over all of it (correct, not cheap). The
rule is written once, in :mod:`ivm_assets.rules.window`; DuckDB renders it for epochs
computed in process when every call translates (:mod:`ivm_assets.local.expressions`).
"""

from __future__ import annotations

from ivm_assets.operators.base import Operator
from ivm_assets.operators.binding import BoundOperator, Change, EpochBinding
from ivm_assets.rules import window as window_rule
from ivm_assets.state.arrangement import StateTable


class WindowOp(BoundOperator):
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
        out = cx.compute(self.rule(set(inputs)), inputs)  # typed as the window functions give them
        cx.append(self.rows, keyed)
        return out

    def rule(self, present: set[str]):
        """This window's rule on changes (:mod:`ivm_assets.rules.window`) over ``present``."""
        return window_rule.rule(self.input.columns, self.calls, present)

    def describe(self) -> str:
        by = f"PARTITION BY {', '.join(self.partition)}" if self.partition else "one partition (no PARTITION BY)"
        funcs = "; ".join(sql for _, sql in self.calls)
        return f"window {funcs}: {by}, per touched partition −W(old rows) +W(new rows)"
