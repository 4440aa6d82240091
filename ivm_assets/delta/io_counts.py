"""Delta log reads and commits, counted per refresh (its statistics), not per process.

A refresh opens a :func:`counting` scope; the Delta functions add what they do to the scope
of the context they run in. Contexts keep two refreshes running in threads of one process
apart, and the threads a refresh starts for its commits run in copies of its context
(``contextvars.copy_context().run``), so they count for it. Work outside any scope (a sensor
reading a source's version, a claim's heartbeat renewing it from its own thread) is not
counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal


@dataclass
class IoCounts:
    """What one scope did: Delta logs opened (each replays the log from its last
    checkpoint, or reads the commits since a kept handle's version), change feeds read
    from storage (not taken from an earlier read of the same range, see
    :mod:`~ivm_assets.delta.change_reads`) and commits made."""

    log_reads: int = 0
    change_reads: int = 0
    commits: int = 0
    outer: IoCounts | None = field(default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


_scope: ContextVar[IoCounts | None] = ContextVar("ivm_delta_io_counts", default=None)


@contextmanager
def counting() -> Iterator[IoCounts]:
    """Count the Delta I/O made in this context until the block ends (nested: what the
    inner block counts, the outer one counts too)."""
    counts = IoCounts(outer=_scope.get())
    token = _scope.set(counts)
    try:
        yield counts
    finally:
        _scope.reset(token)


def add(kind: Literal["log_reads", "change_reads", "commits"]) -> None:
    """One more of ``kind`` in the current scope, if there is one."""
    counts = _scope.get()
    while counts is not None:
        with counts._lock:  # commit threads of one refresh add at the same time
            setattr(counts, kind, getattr(counts, kind) + 1)
        counts = counts.outer
