"""Where a view stands (:class:`ViewStatus`): its last epoch, read from its progress, and
which of its sources moved since."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ivm_assets.delta.handles import is_delta_table, latest_version
from ivm_assets.engine.refresh import ViewLocation
from ivm_assets.state.progress import Progress


@dataclass(frozen=True)
class ViewStatus:
    """Where a view stands: its last epoch and whether its sources moved since."""

    view: str
    epoch: int | None
    mode: str | None
    reason: str | None
    source_versions: dict[str, int]
    output_version: int | None
    pending: dict[str, tuple[int, int]]
    interrupted: bool
    refreshing_by: str | None = None  # "host/pid/run since <time>" while a refresh holds the view

    def summary(self) -> str:
        busy = f"; being refreshed by {self.refreshing_by}" if self.refreshing_by else ""
        if self.epoch is None:
            return f"{self.view}: never refreshed{busy}"
        state = "interrupted epoch pending" if self.interrupted else ("stale" if self.pending else "up to date")
        behind = ", ".join(f"{s} {a}→{b}" for s, (a, b) in self.pending.items())
        return (
            f"{self.view}: epoch {self.epoch} ({self.mode}{', ' + self.reason if self.reason else ''}); "
            f"output version {self.output_version}; {state}{': ' + behind if behind else ''}{busy}"
        )


def view_status(view: str, where: ViewLocation, relation_uri: Callable[[str], str]) -> ViewStatus:
    """The status of ``view``, whose progress and output are at ``where``; ``relation_uri``
    names where each table it reads is (a source, or another view's output)."""
    state = Progress(where.progress).read()
    claim = state.claim
    busy = claim.holder() if claim and not claim.expired() else None
    latest = state.latest
    if latest is None:
        return ViewStatus(view, None, None, None, {}, None, {}, False, busy)
    consumed = {s: r["to"] for s, r in latest.payload["sources"].items()}
    pending = {}
    for source, version in consumed.items():
        uri = relation_uri(source)
        now = latest_version(uri) if is_delta_table(uri) else version
        if now != version:
            pending[source] = (version, now)
    out_version = latest_version(where.output) if is_delta_table(where.output) else None
    return ViewStatus(view, latest.epoch, latest.mode, latest.reason, consumed, out_version, pending, state.started is not None, busy)
