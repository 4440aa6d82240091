"""What every incremental operator shares: its interface.

An operator is a node of a view's dataflow: it names its inputs, its output columns and the
state tables it keeps, and binds its rule on changes once, for both engines, in
:meth:`Operator.epoch` against the :class:`~ivm_assets.rules.binding.EpochBinding`
protocol. It never touches an engine itself: Spark runs the binding with
:class:`~ivm_assets.render.spark.binding.SparkBinding`, the in-process engine with
:class:`~ivm_assets.render.duckdb.binding.DriverBinding`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ivm_assets.epoch_context import EpochContext
    from ivm_assets.rules.binding import Change, EpochBinding


class Operator(ABC):
    """An incremental operator: turns its inputs' change sets into its own."""

    id: str
    columns: tuple[str, ...]

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return ()

    @property
    def state_tables(self) -> tuple:
        return ()

    @property
    def version(self) -> int:
        """The version of the operator's rule: raised when what its state holds or what it
        outputs changes, so that views built by the older rule are rebuilt."""
        return 1

    def unchanged(self, ctx: EpochContext) -> bool:
        """Whether this epoch's change set is known to be empty before anything runs: in an
        incremental epoch, every operator's output is empty when all its inputs' are (a join
        of two empty changes, an aggregate of none, …), down to sources that did not change.
        A known-empty input is not materialized: that saves a Spark job per unchanged side."""
        return bool(self.inputs) and all(i.unchanged(ctx) for i in self.inputs)

    @abstractmethod
    def epoch(self, cx: EpochBinding) -> Change:
        """This epoch's change set of the operator's output, in ``cx``'s engine."""

    @abstractmethod
    def describe(self) -> str:
        """One line for ``ivm explain``: what the operator does and its rule on changes."""
