"""The progress log of a view: a Delta table under ``_ivm/<view>/_progress`` whose commits
are the view's records.

Each commit is an empty Delta commit whose custom metadata (``ivm.progress``) holds the
view's *complete* progress state as JSON: the last committed epoch, the epoch in flight
(``started``) if any, and the refresh claim if one is held (see ``state/claim.py``). So
reading the latest commit tells everything, and no data files accumulate however many
epochs run. Each commit lands at exactly the version after the one its writer read, or
fails (a compare-and-swap on the log): two processes can never both move the view on
from the same state.

An epoch is recorded as ``started`` before anything else is committed. That record fixes
the epoch's inputs: the source version ranges and the version of every state table and of
the output at the start. ``committed`` replaces it last. A ``started`` epoch without its
``committed`` one means the previous attempt was interrupted: the next refresh repeats the
same epoch from the same inputs, skipping tables that already carry the epoch's app
transaction, so nothing is applied twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import pyarrow as pa

from ivm_assets.delta.commit import commit_metadata
from ivm_assets.delta.log import head
from ivm_assets.delta.read import read_small

KEY = "ivm.progress"
# Progress tables hold no rows; Delta still wants a schema.
_SCHEMA = pa.schema([("note", pa.string())])


@dataclass(frozen=True)
class EpochRecord:
    epoch: int
    status: str  # "started" | "committed"
    mode: str
    reason: str | None
    payload: dict
    recorded_at: datetime | None

    def to_json(self) -> dict:
        at = self.recorded_at.isoformat() if self.recorded_at else None
        return {"epoch": self.epoch, "status": self.status, "mode": self.mode, "reason": self.reason, "payload": self.payload, "recorded_at": at}

    @classmethod
    def from_json(cls, d: dict) -> EpochRecord:
        at = datetime.fromisoformat(d["recorded_at"]) if d.get("recorded_at") else None
        return cls(d["epoch"], d["status"], d["mode"], d.get("reason"), d["payload"], at)


@dataclass(frozen=True)
class Claim:
    """Who is refreshing the view, since when, and until when the claim holds unrenewed."""

    owner: str  # host/pid/run, shown to users
    token: str  # unique per process: a process can tell its own abandoned claims
    since: datetime
    renewed: datetime
    lease_s: float

    def expired(self, at: datetime | None = None) -> bool:
        """Whether the lease ran out unrenewed, by this machine's clock (``at``: now)."""
        return ((at or now()) - self.renewed).total_seconds() > self.lease_s

    def holder(self) -> str:
        """Who holds the claim and since when, as users see it."""
        return f"{self.owner} since {self.since:%Y-%m-%d %H:%M:%S} UTC"

    def to_json(self) -> dict:
        return {"owner": self.owner, "token": self.token, "since": self.since.isoformat(), "renewed": self.renewed.isoformat(), "lease_s": self.lease_s}

    @classmethod
    def from_json(cls, d: dict) -> Claim:
        return cls(d["owner"], d["token"], datetime.fromisoformat(d["since"]), datetime.fromisoformat(d["renewed"]), float(d["lease_s"]))


@dataclass(frozen=True)
class ProgressState:
    """The view's progress as of progress-table ``version`` (None: no table yet)."""

    version: int | None
    committed: EpochRecord | None = None
    started: EpochRecord | None = None
    claim: Claim | None = None

    @property
    def latest(self) -> EpochRecord | None:
        """The epoch in flight if there is one, else the last committed one."""
        return self.started or self.committed

    def to_json(self) -> str:
        return json.dumps(
            {
                "committed": self.committed.to_json() if self.committed else None,
                "started": self.started.to_json() if self.started else None,
                "claim": self.claim.to_json() if self.claim else None,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, version: int, text: str) -> ProgressState:
        d = json.loads(text)
        return cls(
            version,
            EpochRecord.from_json(d["committed"]) if d.get("committed") else None,
            EpochRecord.from_json(d["started"]) if d.get("started") else None,
            Claim.from_json(d["claim"]) if d.get("claim") else None,
        )


def now() -> datetime:
    return datetime.now(timezone.utc)


class Progress:
    """Reads the progress state of one view and moves it on, one compare-and-swap at a time."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def read(self) -> ProgressState:
        found = head(self.uri)
        if found is None:
            return ProgressState(None)
        version, info = found
        if KEY in info:
            return ProgressState.from_json(version, info[KEY])
        return _from_rows(version, read_small(self.uri).to_pylist())

    def latest(self) -> EpochRecord | None:
        return self.read().latest

    def last_committed(self) -> EpochRecord | None:
        return self.read().committed

    def commit(self, state: ProgressState, **changes) -> ProgressState:
        """``state`` with ``changes`` (fields of ProgressState), committed right after
        ``state.version``. Raises CommitConflictError when the log moved since ``state``."""
        new = replace(state, **changes)
        version = commit_metadata(self.uri, {KEY: new.to_json()}, after=state.version, schema=_SCHEMA)
        return replace(new, version=version)


def _from_rows(version: int, rows: list[dict]) -> ProgressState:
    """The state kept by earlier releases as one row per record; the next commit carries it
    on as metadata."""
    records = sorted(
        (EpochRecord(r["epoch"], r["status"], r["mode"], r["reason"], json.loads(r["payload"]), r["recorded_at"]) for r in rows),
        key=lambda r: (r.epoch, r.status == "committed"),
    )
    committed = [r for r in records if r.status == "committed"]
    started = records[-1] if records and records[-1].status == "started" else None
    return ProgressState(version, committed[-1] if committed else None, started)
