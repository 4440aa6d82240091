"""One refresh of a view at a time: a claim with a lease, kept in the view's progress log.

A refresh claims the view before it writes anything: it commits a claim (owner host/pid/run,
since, lease) to ``_ivm/<view>/_progress`` with a compare-and-swap, so of two processes that
read the same state only one can claim. The epoch it plans from that state is recorded in
the same commit (``begin``): the compare-and-swap proves nobody moved the view on while it
planned. The holder renews the claim from a heartbeat thread every third of the lease and
clears it when done, on errors too, in the same commit as its last record when it can
(``finish``). Others poll until it is gone, then read what the holder left: the view up to
date, or the next epoch (or an interrupted one) to run.

A holder that dies (SIGKILL, machine lost) stops renewing. Its claim has expired when its
last renewal is older than the lease by the waiter's clock, or when the waiter itself has
watched the log not move for a whole lease (this one holds whatever the clocks say). Then
the waiter takes over, and the epoch machinery repeats the interrupted epoch exactly once.

The claim keeps refreshes from doing the same work twice; safety does not rest on it. A
holder that was paused past its lease and wakes up after another took over finds each table
commit it still tries refused (every one is fenced to the version its epoch planned
against) or already made by the other, and its next progress commit tells it the claim is
lost.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from ivm_assets.errors import CommitConflictError, RefreshError, ViewBusyError
from ivm_assets.state.progress import Claim, Progress, ProgressState, now

DEFAULT_LEASE_SECONDS = 60.0
DEFAULT_WAIT_SECONDS = 300.0
POLL_SECONDS = 0.5

# Unique to this process: a claim carrying it that no thread of this process holds right
# now was left by an attempt in this process that was interrupted, and can be taken at once.
_PROCESS_TOKEN = uuid.uuid4().hex
# Within a process, refreshes of one view queue on a lock; across processes, on the claim.
_local: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


def new_run_id() -> str:
    return uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class ClaimSettings:
    """How long to wait for another holder, how long a claim holds unrenewed, and the run
    id shown to others (an orchestrator's run id, or a random one)."""

    wait_s: float = DEFAULT_WAIT_SECONDS
    lease_s: float = DEFAULT_LEASE_SECONDS
    run: str = field(default_factory=new_run_id)

    @property
    def owner(self) -> str:
        return f"{socket.gethostname()}/{os.getpid()}/{self.run}"


class HeldClaim:
    """The claim on one view while this process holds it: the view's progress state as of
    this process's last commit, and the only way to commit progress while holding."""

    def __init__(self, progress: Progress, view: str, state: ProgressState) -> None:
        self.progress = progress
        self.view = view
        self._state = state
        self._lock = threading.Lock()  # the heartbeat and the refresh both commit
        self._lost: Claim | None = None  # who took over, once a commit found the claim gone
        self._released = False
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._renew_until_stopped, name=f"ivm-claim-{view}", daemon=True)

    @property
    def state(self) -> ProgressState:
        return self._state

    def commit(self, **changes) -> ProgressState:
        """Commit ``changes`` to the progress state (fields of ProgressState)."""
        with self._lock:
            if self._lost is None:
                try:
                    self._state = self.progress.commit(self._state, **changes)
                    return self._state
                except CommitConflictError:
                    self._lost = self.progress.read().claim
            raise self._lost_error()

    def _lost_error(self) -> RefreshError:
        by = self._lost.holder() if self._lost else "another process"
        return RefreshError(
            f"view {self.view!r}: this refresh lost its claim on the view to {by}: it did not renew its claim "
            f"within its lease of {self._state.claim.lease_s:g} s (was the process paused?). Every commit it made "
            "was fenced, so nothing was applied twice; run `ivm refresh` again if the view is not up to date."
        )

    def start_renewing(self) -> None:
        self._heartbeat.start()

    def _renew_until_stopped(self) -> None:
        assert self._state.claim is not None
        while not self._stop.wait(self._state.claim.lease_s / 3):
            with self._lock:
                if self._lost is not None:
                    return
                try:
                    claim = replace(self._state.claim, renewed=now())
                    self._state = self.progress.commit(self._state, claim=claim)
                except CommitConflictError:
                    self._lost = self.progress.read().claim
                    return
                except Exception:  # a storage hiccup: try at the next tick; the refresh's own commits report lasting trouble
                    continue

    def finish(self, **changes) -> ProgressState:
        """Commit ``changes`` and clear the claim in one commit; the block's end then has
        nothing left to release."""
        self._stop_renewing()
        state = self.commit(claim=None, **changes)
        self._released = True
        return state

    def _stop_renewing(self) -> None:
        self._stop.set()
        if self._heartbeat.is_alive():
            self._heartbeat.join()

    def release(self) -> None:
        """Stop renewing and clear the claim (unless another process has taken it over)."""
        self._stop_renewing()
        with self._lock:
            if self._lost is None and not self._released:
                try:
                    self._state = self.progress.commit(self._state, claim=None)
                except CommitConflictError:
                    pass  # taken over after this refresh's last commit: nothing left to release


Begin = Callable[[ProgressState], dict]


@contextmanager
def hold(progress: Progress, view: str, settings: ClaimSettings, begin: Begin | None = None) -> Iterator[HeldClaim]:
    """Claim ``view`` (waiting up to ``settings.wait_s`` for another holder), renew the claim
    while the block runs, and release it afterwards, also when the block fails.

    ``begin``, given the progress state the claim is taken from, returns the changes to
    commit with the claim (the epoch planned from that state); it runs again if another
    process moves the log first. Its errors propagate with nothing claimed.

    Raises ViewBusyError when another refresh still holds the claim after the wait.
    """
    deadline = time.monotonic() + settings.wait_s
    with _local_guard:
        local = _local.setdefault(progress.uri, threading.Lock())
    if not local.acquire(timeout=min(settings.wait_s, threading.TIMEOUT_MAX)):
        raise ViewBusyError(_busy(view, progress.read().claim))
    try:
        held = HeldClaim(progress, view, _acquire(progress, view, settings, deadline, begin))
        held.start_renewing()
        try:
            yield held
        except BaseException:
            try:
                held.release()
            except Exception:  # the error that stopped the refresh matters more; the lease runs out
                pass
            raise
        held.release()
    finally:
        local.release()


def _acquire(progress: Progress, view: str, settings: ClaimSettings, deadline: float, begin: Begin | None) -> ProgressState:
    seen_version, seen_at = None, time.monotonic()
    while True:
        state = progress.read()
        if state.version != seen_version:
            seen_version, seen_at = state.version, time.monotonic()
        held = state.claim
        stale = held is None or held.token == _PROCESS_TOKEN or held.expired() or time.monotonic() - seen_at > held.lease_s
        if stale:
            changes = begin(state) if begin is not None else {}
            moment = now()
            claim = Claim(settings.owner, _PROCESS_TOKEN, moment, moment, settings.lease_s)
            try:
                return progress.commit(state, claim=claim, **changes)
            except CommitConflictError:
                continue  # another process moved the log first: look again
        left = deadline - time.monotonic()
        if left <= 0:
            raise ViewBusyError(_busy(view, held))
        time.sleep(min(POLL_SECONDS, left))


def _busy(view: str, claim: Claim | None) -> str:
    by = claim.holder() if claim else f"another thread of this process (pid {os.getpid()})"
    return f"view {view} is being refreshed by {by}; try again later or raise --wait"
