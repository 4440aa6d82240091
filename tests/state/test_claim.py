"""The refresh claim: one holder per view, waiters see who holds it, lapsed claims are taken
over, a holder learns when it lost its claim (no Spark needed)."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from datetime import timedelta

import pytest

from ivm_assets.errors import RefreshError, ViewBusyError
from ivm_assets.state import claim as claims
from ivm_assets.state.claim import ClaimSettings, hold
from ivm_assets.state.progress import Claim, EpochRecord, Progress, now

BUSY = r"view v is being refreshed by elsewhere/7/their-run since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; try again later or raise --wait"


@pytest.fixture
def progress(tmp_path) -> Progress:
    return Progress(str(tmp_path / "_progress"))


def _claimed_elsewhere(progress: Progress, *, renewed_ago: float = 0.0, lease: float = 60.0, token: str = "theirs") -> None:
    moment = now() - timedelta(seconds=renewed_ago)
    progress.commit(progress.read(), claim=Claim("elsewhere/7/their-run", token, moment, moment, lease))


def test_the_holder_is_recorded_until_it_releases(progress):
    with hold(progress, "v", ClaimSettings(wait_s=0, run="mine")) as held:
        assert progress.read().claim.owner == f"{socket.gethostname()}/{os.getpid()}/mine"
        held.commit(started=None)
    assert progress.read().claim is None


def test_a_busy_view_fails_after_the_wait_naming_the_holder(progress):
    _claimed_elsewhere(progress)
    with pytest.raises(ViewBusyError, match=BUSY):
        with hold(progress, "v", ClaimSettings(wait_s=0.6)):
            pass
    assert progress.read().claim.owner == "elsewhere/7/their-run"


def test_a_claim_not_renewed_within_its_lease_is_taken_over(progress):
    _claimed_elsewhere(progress, renewed_ago=10, lease=5)
    with hold(progress, "v", ClaimSettings(wait_s=0, run="mine")):
        assert progress.read().claim.owner.endswith("/mine")


def test_a_log_that_does_not_move_for_a_lease_lapses_whatever_the_clocks(progress):
    _claimed_elsewhere(progress, renewed_ago=-3600, lease=0.5)  # the holder's clock runs an hour ahead
    with hold(progress, "v", ClaimSettings(wait_s=30, run="mine")):
        assert progress.read().claim.owner.endswith("/mine")


def test_a_claim_left_by_this_process_is_taken_at_once(progress):
    _claimed_elsewhere(progress, token=claims._PROCESS_TOKEN)  # an interrupted attempt of ours
    with hold(progress, "v", ClaimSettings(wait_s=0, run="mine")):
        assert progress.read().claim.owner.endswith("/mine")


def test_the_holder_renews_its_claim(progress):
    with hold(progress, "v", ClaimSettings(wait_s=0, lease_s=0.3)) as held:
        first = held.state.claim
        while progress.read().claim.renewed == first.renewed:
            time.sleep(0.05)
        assert progress.read().claim.since == first.since
    assert progress.read().claim is None


def test_a_holder_that_lost_its_claim_is_told_and_leaves_the_new_one(progress):
    with hold(progress, "v", ClaimSettings(wait_s=0)) as held:
        _claimed_elsewhere(progress)  # taken over, as if this holder had been paused past its lease
        with pytest.raises(RefreshError, match=r"lost its claim on the view to elsewhere/7/their-run since .*nothing was applied twice"):
            held.commit(started=None)
    assert progress.read().claim.owner == "elsewhere/7/their-run"


def test_threads_of_one_process_take_turns(progress):
    holding, done = threading.Event(), threading.Event()

    def first() -> None:
        with hold(progress, "v", ClaimSettings(wait_s=0, run="first")):
            holding.set()
            done.wait(30)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        holding.wait(30)
        with pytest.raises(ViewBusyError, match=re.escape(f"by {socket.gethostname()}/{os.getpid()}/first since")):
            with hold(progress, "v", ClaimSettings(wait_s=0.3)):
                pass
    finally:
        done.set()
        thread.join()
    with hold(progress, "v", ClaimSettings(wait_s=0, run="second")):
        assert progress.read().claim.owner.endswith("/second")


def _record(epoch: int, status: str) -> EpochRecord:
    return EpochRecord(epoch, status, "incremental", None, {"n": epoch}, now())


def test_the_planned_epoch_is_committed_with_the_claim_and_the_last_record_with_its_release(progress):
    progress.commit(progress.read(), committed=_record(1, "committed"))
    before = progress.read().version
    seen = []

    def begin(state):
        seen.append(state.version)
        return {"started": _record(state.committed.epoch + 1, "started")}

    with hold(progress, "v", ClaimSettings(wait_s=0, run="mine"), begin) as held:
        state = progress.read()
        assert state.version == before + 1 and state.claim is not None and state.started.epoch == 2
        held.finish(committed=_record(2, "committed"), started=None)
    state = progress.read()
    assert state.version == before + 2 and state.claim is None and state.started is None and state.committed.epoch == 2
    assert seen == [before]


def test_a_plan_that_fails_claims_nothing(progress):
    def begin(state):
        raise RefreshError("the plan failed")

    with pytest.raises(RefreshError, match="the plan failed"):
        with hold(progress, "v", ClaimSettings(wait_s=0), begin):
            pass
    assert progress.read().version is None
