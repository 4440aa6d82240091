"""What every incremental operator shares: its interface, and how an input's change set is
taken.

Operators receive their inputs' change sets (z-sets: :mod:`ivm_assets.spark.batches`) for
one epoch and return their own; stateful operators read the part of their state the change
touches (as of the epoch's start) and append the change to it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from pyspark.sql import DataFrame

from ivm_assets.epoch_context import EpochContext
from ivm_assets.state.consolidate import in_spark as consolidate  # operators call it by its plain name


def input_change(ctx: EpochContext, op: Operator) -> DataFrame:
    """``op``'s change as joins (of every kind) and aggregates take it: consolidated in an
    incremental epoch, so that a row inserted and deleted again cancels before it costs a
    state lookup; as it is in a full refresh, where every weight is positive, these
    operators treat two copies of a row as one row of weight 2, and consolidating would
    group the whole input by all its columns."""
    change = op.step(ctx)
    return change if ctx.full else consolidate(change, op.columns)


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
    def step(self, ctx: EpochContext) -> DataFrame:
        """This epoch's change set of the operator's output."""

    @abstractmethod
    def describe(self) -> str:
        """One line for ``ivm explain``: what the operator does and its rule on changes."""
