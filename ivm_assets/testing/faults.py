"""Fault injection for the crash tests: the tests' hooks in the product code.

Product code calls :func:`crossed` once at each boundary a crash test may stop at (after a
commit, after Spark's executors put a table's new files in place) and
:func:`write_task_finished` once per write task on the executors; without the variables
below set, each only counts or returns.

- ``IVM_CRASH_AFTER_COMMITS=N`` kills the process with SIGKILL right after its N-th commit,
  which is how the tests prove that a refresh killed between any two commits recovers.
- ``IVM_CRASH_AFTER_FILE_WRITES=N`` does the same right after the N-th time Spark's
  executors put a table's new files in place, before the driver commits them.
- ``IVM_CRASH_MODE=raise`` raises :class:`SimulatedCrash` instead (same state on disk, no
  new process and Spark session per crash point).
- ``IVM_FAIL_FIRST_WRITE_ATTEMPT`` (in the environment Spark's Python workers inherit)
  fails each write task's first attempt after it wrote its files, as a task whose executor
  was lost would; Spark retries it where the master allows (``local[2,2]``).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Literal

from pyspark import TaskContext

Boundary = Literal["commit", "files"]
CRASH_AFTER: dict[Boundary, str] = {"commit": "IVM_CRASH_AFTER_COMMITS", "files": "IVM_CRASH_AFTER_FILE_WRITES"}
CRASH_MODE = "IVM_CRASH_MODE"
FAIL_FIRST_WRITE_ATTEMPT = "IVM_FAIL_FIRST_WRITE_ATTEMPT"

_crossed_count: dict[Boundary, int] = {boundary: 0 for boundary in CRASH_AFTER}
# An epoch computed in process commits its tables from several threads: counts are updated
# under this lock, so that none is lost (a crash point is the N-th commit, whichever thread).
_count_lock = threading.Lock()


class SimulatedCrash(BaseException):
    """Raised at a commit boundary when IVM_CRASH_MODE=raise (never caught by ivm_assets)."""


def reset_commit_count() -> None:
    for boundary in _crossed_count:
        _crossed_count[boundary] = 0


def crossed(boundary: Boundary) -> None:
    """Count one crossing of ``boundary``; crash here when the tests asked for it."""
    with _count_lock:
        _crossed_count[boundary] += 1
        count = _crossed_count[boundary]
    limit = os.environ.get(CRASH_AFTER[boundary])
    if limit is not None and count >= int(limit):
        if os.environ.get(CRASH_MODE) == "raise":
            raise SimulatedCrash(f"simulated crash after {boundary} {count}")
        os.kill(os.getpid(), signal.SIGKILL)


def write_task_finished() -> None:
    """Called on an executor by a write task that wrote files, before it reports them: fails
    the task's first attempt when the tests asked for it."""
    if os.environ.get(FAIL_FIRST_WRITE_ATTEMPT) and TaskContext.get().attemptNumber() == 0:
        raise RuntimeError("simulated failure of a write task's first attempt, after its files were written")
