"""The progress log: the latest commit carries the whole state, and every commit is a
compare-and-swap on the log's version (no Spark needed)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from ivm_assets.errors import CommitConflictError
from ivm_assets.state.progress import EpochRecord, Progress, ProgressState


def _record(epoch: int, status: str) -> EpochRecord:
    return EpochRecord(epoch, status, "incremental", None, {"sources": {"t": {"from": 0, "to": epoch}}}, datetime.now(timezone.utc))


def test_latest_commit_carries_the_whole_state(tmp_path):
    progress = Progress(str(tmp_path / "_progress"))
    assert progress.read() == ProgressState(None) and progress.latest() is None
    state = progress.commit(progress.read(), committed=_record(1, "committed"))
    state = progress.commit(state, started=_record(2, "started"))
    assert state.version == 1
    again = progress.read()
    assert again == state
    assert progress.latest().epoch == 2 and progress.last_committed().epoch == 1


def test_a_commit_from_an_outdated_state_fails(tmp_path):
    progress = Progress(str(tmp_path / "_progress"))
    first = progress.commit(progress.read(), committed=_record(1, "committed"))
    progress.commit(first, started=_record(2, "started"))
    with pytest.raises(CommitConflictError, match="right after version 0"):
        progress.commit(first, started=_record(2, "started"))
    assert progress.read().version == 1


def test_two_creators_of_the_log_cannot_both_win(tmp_path):
    progress = Progress(str(tmp_path / "_progress"))
    empty = progress.read()
    progress.commit(empty, started=_record(1, "started"))
    with pytest.raises(CommitConflictError, match="to create it"):
        progress.commit(empty, started=_record(1, "started"))
    assert progress.read().version == 0


def test_a_log_of_rows_written_by_earlier_releases_is_read(tmp_path):
    uri = str(tmp_path / "_progress")
    schema = pa.schema([("epoch", pa.int64()), ("status", pa.string()), ("mode", pa.string()), ("reason", pa.string()),
                        ("payload", pa.string()), ("recorded_at", pa.timestamp("us", tz="UTC"))])
    at = datetime.now(timezone.utc)
    for epoch, status in [(1, "started"), (1, "committed"), (2, "started")]:
        row = {"epoch": epoch, "status": status, "mode": "full", "reason": None, "payload": json.dumps({"n": epoch}), "recorded_at": at}
        write_deltalake(uri, pa.Table.from_pylist([row], schema=schema), mode="append")
    progress = Progress(uri)
    state = progress.read()
    assert (state.committed.epoch, state.committed.payload, state.started.epoch) == (1, {"n": 1}, 2)
    moved = progress.commit(state, started=None, committed=_record(2, "committed"))
    assert progress.read() == moved and moved.version == 3
