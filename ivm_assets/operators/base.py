"""Change sets (z-sets) and what every incremental operator shares.

A change set is a Spark DataFrame of an operator's columns plus an integer weight ``__w``:
+n means n copies of the row arrive, −n that n copies leave. Operators receive their inputs'
change sets for one epoch and return their own; stateful operators read the part of their
state the change touches (as of the epoch's start) and append the change to it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets.delta.tables import WEIGHT, Epoch
from ivm_assets.spark.arrow import to_arrow, to_spark
from ivm_assets.sql.plan import q


@lru_cache(maxsize=4096)
def col(name: str) -> Column:
    """The column ``name`` (quoted). Cached: an unresolved column is an immutable value, and
    every construction is a round trip to the JVM, which small epochs make by the thousand."""
    return F.col(q(name))


def consolidate(df: DataFrame, columns: tuple[str, ...] | list[str]) -> DataFrame:
    """Sum the weights of identical rows and drop rows whose weight is zero.

    NULLs compare equal here (GROUP BY semantics), as multiset identity requires.
    """
    return df.groupBy(*[col(c) for c in columns]).agg(F.sum(col(WEIGHT)).alias(WEIGHT)).filter(col(WEIGHT) != 0)


@dataclass(frozen=True)
class Batch:
    """A computed change set: the frame, its row count, and (when small) its Arrow copy."""

    df: DataFrame
    rows: int
    table: pa.Table | None = None

    def values(self, column: str) -> list:
        """Distinct values of ``column`` (read from the Arrow copy when there is one)."""
        if self.table is not None:
            return sorted(v for v in pc.unique(self.table.column(column)).to_pylist() if v is not None)
        return sorted(r[0] for r in self.df.select(col(column)).distinct().collect() if r[0] is not None)


def materialize(df: DataFrame, *, small: bool) -> Batch:
    """Compute ``df`` once (later readers reuse the result) and count its rows.

    A ``small`` result (an incremental change) comes back to the driver as Arrow and
    returns as a local relation: later steps over it then cost no extra Spark jobs, and its
    Arrow copy can be committed to a state table as it is. Spark jobs, not data volume,
    dominate the time of small refreshes. A large result (full refresh) stays on the
    executors as a local checkpoint.
    """
    if small:
        table = to_arrow(df)
        return Batch(to_spark(df.sparkSession, table), table.num_rows, table)
    df = df.localCheckpoint(eager=True)
    return Batch(df, df.count())


def nothing(df: DataFrame) -> Batch:
    """A change set known to be empty (see :meth:`Operator.unchanged`), without running it."""
    return Batch(df.limit(0), 0)


def null_safe_match(left: DataFrame, right: DataFrame, pairs: list[tuple[str, str]]) -> Column | None:
    """Join condition ``left.a <=> right.b AND …`` (None when there are no pairs)."""
    cond: Column | None = None
    for a, b in pairs:
        term = left[q(a)].eqNullSafe(right[q(b)])
        cond = term if cond is None else cond & term
    return cond


@dataclass
class EpochContext:
    """What operators need to process one epoch of one view."""

    spark: SparkSession
    epoch: Epoch
    full: bool
    state_root: str
    buckets: int
    changes: dict[str, DataFrame]
    state_versions: dict[str, int | None]
    stats: dict[str, int] = field(default_factory=dict)
    # Each state table's layout as recorded when the epoch was planned (JSON), None if new.
    state_layouts: dict[str, str | None] = field(default_factory=dict)
    # Rows in each relation's change set this epoch (incremental epochs).
    change_rows: dict[str, int] = field(default_factory=dict)


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
