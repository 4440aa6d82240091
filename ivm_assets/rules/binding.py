"""What an operator's epoch asks of the engine that runs it: the seam between a rule's
binding, written once per operator, and the two engines.

An operator's incremental rule (:mod:`ivm_assets.rules`) is a relational expression over
named inputs: its input's change, the state rows the change touches. Which inputs those are
(which state table is read for which keys, what is appended where, what an empty change
skips) is the operator's *binding*, and it is the same whichever engine computes the rule.
Every operator writes it once, in ``epoch(cx)``; Spark runs it
with :class:`~ivm_assets.render.spark.binding.SparkBinding` (change sets are lazy
DataFrames, keyed ones materialized :class:`~ivm_assets.spark.batches.Batch`\\ es) and the
in-process engine with :class:`~ivm_assets.render.duckdb.binding.DriverBinding` (Arrow tables, the
state read on the driver, DuckDB computing the rule). One operator has a Spark step of its
own beside its binding: the inner join (:mod:`ivm_assets.render.spark.inner_join`).

A value of the engine's own (a change set) is opaque to the operator: it only passes it
from one call to the next. State is only appended to, and only through :meth:`append`,
which queues the commit; nothing is written while the operators run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ivm_assets.ir.rel import Rel
    from ivm_assets.rules.aggregate_steps import AggregateRule
    from ivm_assets.rules.operator import Operator
    from ivm_assets.state.spec import StateTable

Change = Any  # an engine's change set: a Spark DataFrame or Batch, an Arrow table


class EpochBinding(Protocol):
    """One epoch of one view, as an operator's binding sees it (see the module doc)."""

    @property
    def full(self) -> bool:
        """Whether the epoch is a build: every change is the whole input, state starts empty."""

    @property
    def ansi(self) -> bool:
        """Whether the project's Spark runs with ANSI mode on (the rules follow it)."""

    @property
    def view(self) -> str:
        """The view whose epoch this is (for messages)."""

    def unchanged(self, op: Operator) -> bool:
        """Whether ``op``'s change is known empty before anything runs (:meth:`Operator.unchanged`)."""

    def source(self, relation: str) -> Change:
        """The change set of the source (or upstream view) ``relation`` this epoch."""

    def change(self, op: Operator) -> Change:
        """``op``'s change this epoch, as it is (not consolidated)."""

    def held(self, op: Operator) -> bool:
        """Whether ``op``'s change is computed already, so that a rule reading it reads it
        rather than computing ``op``'s rule again inside its own (:func:`~ivm_assets.rules.linear.fused`)."""

    def unions_alike(self, changes: tuple[Change, ...]) -> None:
        """Make sure the engine unions ``changes`` by position as Spark does; in process,
        inputs typed differently (Spark widens them to a common type) send the epoch to Spark."""

    def aggregated(self, op: Operator, *, fused: bool) -> Change:
        """``op``'s change as an aggregate takes it: consolidated in an incremental epoch.
        ``fused``: only one rule reads it, and the engine may consolidate it in the same
        computation (in process, a statement less); it then passes only to :meth:`constant`,
        :meth:`type_name`, :meth:`columns`, :meth:`aggregates_alike` and :meth:`compute`."""

    def constant(self, change: Change, name: str, value: int) -> Change:
        """``change`` with an INT column ``name`` of ``value``."""

    def type_name(self, change: Change, column: str) -> str:
        """The Spark type of ``column`` of ``change``, as Spark names it (``simpleString``)."""

    def columns(self, change: Change) -> tuple[str, ...]:
        """The columns of ``change``."""

    def aggregates_alike(self, change: Change, rule: AggregateRule, values: tuple[int, ...]) -> None:
        """Make sure the engine sums and orders the arguments of ``rule``'s aggregates (the
        ``values`` ones: MIN, MAX, COUNT(DISTINCT)) as Spark does; in process, a type it
        treats otherwise sends the epoch to Spark."""

    def stored(self, change: Change, table: StateTable, columns: tuple[str, ...]) -> Change:
        """``change``'s ``columns`` typed as ``table`` stores them (in a build: as they are),
        and its other columns after them."""

    def reads_whole(self, table: StateTable) -> bool:
        """Whether reading ``table`` whole costs this engine less than keying the change
        first to read just the keys it touches (Spark: a job saved, for a small table)."""

    def empty(self, change: Change) -> bool:
        """Whether ``change`` is known to hold no rows without computing anything more."""

    def consolidated(self, op: Operator, columns: tuple[str, ...]) -> Change:
        """``op``'s change this epoch, consolidated on ``columns`` (one row per distinct row,
        weights summed, zero weights dropped)."""

    def tagged(self, ops: tuple[Operator, ...], columns: tuple[str, ...], tag: str) -> Change:
        """The changes of ``ops`` renamed to ``columns`` (by position), each row tagged with
        its input's index in column ``tag``, as one change consolidated on the columns and
        the tag."""

    def keyed(self, change: Change, keys: tuple[str, ...], table: StateTable, inputs: tuple[Operator, ...]) -> Change:
        """``change`` with its bucket in ``table`` over ``keys``, computed once: what
        :meth:`rows`, :meth:`lookup` and :meth:`append` take. Known empty when ``inputs``
        are given and every one of them is unchanged."""

    def kept(self, change: Change) -> Change:
        """``change`` computed once, for a rule that reads it more than once or counts it."""

    def copies(self, kept: Change) -> int:
        """The rows of a kept change, counting copies (the sum of its weights)."""

    def distinct(self, keyed: Change, columns: tuple[str, ...]) -> Change:
        """The distinct values of ``columns`` of a keyed change (no weight)."""

    def orders_alike(self, change: Change, columns: tuple[str, ...], what: str) -> None:
        """Make sure the engine orders and groups ``columns`` as Spark does; in process, a
        type it orders otherwise sends the epoch to Spark (``what`` names the use)."""

    def count(self, stat: str, n: int) -> None:
        """Add ``n`` to the refresh's statistic ``stat``."""

    def pair(self, op: Operator) -> tuple[Change, Change, dict[str, Change]]:
        """The two changes of ``op`` (a :class:`~ivm_assets.rules.keyed_pair.KeyedPair`),
        consolidated, each keyed by its keys with each pair of keys hashed alike, without
        their rows with a NULL key; and those rows (by side: ``left``, ``right``)."""

    def not_in_changes(self, op: Operator) -> tuple[Change, Change, Change, Change, Change]:
        """The two changes of ``op`` (a :class:`~ivm_assets.rules.semi_join.NotInOp`),
        consolidated, the right one with ``__null`` (whether its value is NULL), each key
        pair hashed alike: the left change's rows with a group and a value keyed for table
        ``left``, its rows with a group keyed for ``left_groups``, its rows without a group
        (not keyed: they always pass); the right change's rows with a group and a value
        keyed for ``values``, its rows with a group keyed for ``groups``."""

    def probe(self, change: Change, keys: tuple[str, ...], table: StateTable) -> Change:
        """``change`` keyed by ``keys`` (its names for ``table``'s keys) to look ``table`` up,
        hashed as this epoch hashes that table's keys; computed once."""

    def present(self, keyed: Change, keys: tuple[str, ...]) -> Change:
        """The rows of a keyed change whose ``keys`` are all present (a NULL matches nothing)."""

    def rows(self, keyed: Change) -> int:
        """The rows of a keyed change."""

    def unkeyed(self, keyed: Change, columns: tuple[str, ...] | None = None, *, lazily: bool = False) -> Change:
        """A keyed change without its bucket (only ``columns`` and the weight, if given).
        ``lazily``: planned without computing the keyed change, so that the computation of
        whatever reads it computes it too (Spark: one job for an output and a state commit)."""

    def lookup(
        self, table: StateTable, keyed: Change | None, keys: tuple[str, ...], *, like: Change | None = None, reused: bool = False,
    ) -> Change | None:
        """``table``'s current rows (consolidated) whose ``table.keys`` equal the ``keys`` of
        a row of ``keyed`` (None: every row), typed as the columns of ``like`` (default: the
        keyed change's); None when the state is empty. ``reused``: the rule reads them more
        than once."""

    def lookup_keys(self, table: StateTable, parts: list[tuple[Change, tuple[str, ...]]]) -> Change | None:
        """``table``'s current rows whose keys equal those of a row of some keyed change of
        ``parts`` (each with the names of its key columns; the table's own side first); None
        when the state is empty or every part is."""

    def compute(self, node: Rel, inputs: dict[str, Change], columns: tuple[str, ...] | None = None, like: tuple[Change, ...] = ()) -> Change:
        """The rule ``node`` over ``inputs``; with ``columns``, typed as the first of the
        changes ``like`` with a column of that name (and the weight)."""

    def append(self, table: StateTable, keyed: Change) -> None:
        """Queue ``keyed`` to be appended to ``table`` (a build: to replace it)."""

