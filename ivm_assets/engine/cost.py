"""The cost model: run the next epoch incrementally, or recompute the view?

Decided before the epoch runs, from what the Delta log already says (no data is read): the
rows the sources' commits in the epoch's range added, deleted or updated (their operation
metrics), against the rows of the sources at the new versions (file statistics). An
incremental epoch costs about its change rows times a per-row price several times higher
than a scan's (state lookups, retractions, a MERGE into the output), plus a fixed price;
a recompute costs a scan of every source row. Past ``MAX_CHANGE_FRACTION`` of the sources'
rows the recompute wins, like Databricks' AUTO refresh policy choosing a full refresh.

Views with ``refresh: incremental`` never switch (the user asked for incremental or an
error), and small sources never do (below ``MIN_SOURCE_ROWS`` both ways take under a
second and the incremental path is the one that keeps state warm). When an estimate is
unavailable (a commit without metrics) the epoch stays incremental.
"""

from __future__ import annotations

from dataclasses import dataclass
from ivm_assets.delta.log import change_rows_between
from ivm_assets.delta.snapshot import row_count


MAX_CHANGE_FRACTION = 0.05
MIN_SOURCE_ROWS = 100_000


@dataclass(frozen=True)
class CostEstimate:
    """Change rows in the epoch's range and source rows at its end (None: unknown)."""

    change_rows: int | None
    source_rows: int | None

    @property
    def fraction(self) -> float | None:
        if self.change_rows is None or not self.source_rows:
            return None
        return self.change_rows / self.source_rows

    def recompute_is_cheaper(self) -> bool:
        fraction = self.fraction
        return fraction is not None and self.source_rows >= MIN_SOURCE_ROWS and fraction > MAX_CHANGE_FRACTION

    def describe(self) -> str:
        """``cost: 2,100,000 change rows vs 6,000,000 source rows (35.0%, above 5%): recompute``."""
        if self.change_rows is None or self.source_rows is None:
            return "cost: change size unknown (a commit without row metrics): incremental"
        share = f"{self.fraction:.1%}" if self.fraction is not None else "n/a"
        if self.recompute_is_cheaper():
            verdict = f"above {MAX_CHANGE_FRACTION:.0%}: recompute is cheaper"
        elif self.source_rows < MIN_SOURCE_ROWS:
            verdict = f"sources under {MIN_SOURCE_ROWS:,} rows: incremental"
        else:
            verdict = f"within {MAX_CHANGE_FRACTION:.0%}: incremental"
        return f"cost: {self.change_rows:,} change rows vs {self.source_rows:,} source rows ({share}, {verdict})"

    def to_json(self) -> dict:
        return {"change_rows": self.change_rows, "source_rows": self.source_rows, "recompute": self.recompute_is_cheaper()}


def estimate(relations: dict[str, str], ranges: dict[str, tuple[int, int]]) -> CostEstimate:
    """The estimate for sources ``ranges`` (name → (after, upto] versions)."""
    change: int | None = 0
    total: int | None = 0
    for name, (after, upto) in ranges.items():
        rows = change_rows_between(relations[name], after, upto) if upto > after else 0
        size = row_count(relations[name], upto)
        change = None if change is None or rows is None else change + rows
        total = None if total is None or size is None else total + size
    return CostEstimate(change, total)
