"""What an epoch of one view carries through its operators and state tables, in either engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # state appends are queued here; the rules never touch Spark or Delta themselves
    from pyspark.sql import DataFrame, SparkSession

    from ivm_assets.delta.commit import Epoch
    from ivm_assets.rules.operator import Operator
    from ivm_assets.state.arrangement import StateAppend


@dataclass
class EpochContext:
    """What operators need to process one epoch of one view."""

    spark: SparkSession  # or a LazySession: an epoch run in process never starts it
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
    # State commits (:class:`~ivm_assets.state.arrangement.StateAppend`), made in this order
    # after the output change is planned: writing state computes its rows, and by then every
    # pending change set, the output's too, can be computed in one Spark job.
    writes: list[StateAppend] = field(default_factory=list)
    # Spark's ANSI mode and time zone for the session the view is computed in: what an
    # overflow gives (an error, or NULL) where a rule computes a value outside Spark's own
    # SQL, and where the in-process engine reads timestamps.
    ansi: bool = False
    time_zone: str = "UTC"
    # A full epoch over few source rows (see :mod:`ivm_assets.engine.execute`): its results
    # come to the driver as Arrow, as an incremental epoch's do, instead of being written
    # and kept by the executors.
    small_build: bool = False

    @property
    def small(self) -> bool:
        """Whether the epoch's results are few enough to collect on the driver (see :func:`materialize`)."""
        return not self.full or self.small_build


class FromContext:
    """What an operator's binding (:mod:`ivm_assets.rules.binding`) learns from the epoch
    context alone, the same in both engines: a base of each engine's binding."""

    ctx: EpochContext

    @property
    def full(self) -> bool:
        return self.ctx.full

    @property
    def ansi(self) -> bool:
        return self.ctx.ansi

    @property
    def view(self) -> str:
        return self.ctx.epoch.metadata.get("ivm.view", "")

    def unchanged(self, op: Operator) -> bool:
        return op.unchanged(self.ctx)

    def count(self, stat: str, n: int) -> None:
        self.ctx.stats[stat] = self.ctx.stats.get(stat, 0) + n
