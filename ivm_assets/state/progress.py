"""The progress log of a view: one Delta table of epoch records under ``_ivm/<view>/_progress``.

An epoch is written as ``started`` before anything else is committed. That record fixes the
epoch's inputs: the source version ranges and the version of every state table and of the
output at the start. ``committed`` is appended last. A ``started`` record without its
``committed`` one means the previous attempt was interrupted: the next refresh repeats the
same epoch from the same inputs, skipping tables that already carry the epoch's app
transaction, so nothing is applied twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

import pyarrow as pa

from ivm_assets.delta import tables as delta

_SCHEMA = pa.schema(
    [
        ("epoch", pa.int64()),
        ("status", pa.string()),
        ("mode", pa.string()),
        ("reason", pa.string()),
        ("payload", pa.string()),
        ("recorded_at", pa.timestamp("us", tz="UTC")),
    ]
)


@dataclass(frozen=True)
class EpochRecord:
    epoch: int
    status: str
    mode: str
    reason: str | None
    payload: dict
    recorded_at: datetime


class Progress:
    """Reads and appends the epoch records of one view."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def records(self) -> list[EpochRecord]:
        if not delta.is_delta_table(self.uri):
            return []
        rows = delta.read_small(self.uri).to_pylist()
        out = [
            EpochRecord(r["epoch"], r["status"], r["mode"], r["reason"], json.loads(r["payload"]), r["recorded_at"])
            for r in rows
        ]
        return sorted(out, key=lambda r: (r.epoch, r.status == "committed"))

    def latest(self) -> EpochRecord | None:
        records = self.records()
        return records[-1] if records else None

    def last_committed(self) -> EpochRecord | None:
        committed = [r for r in self.records() if r.status == "committed"]
        return committed[-1] if committed else None

    def append(self, *, epoch: int, status: str, mode: str, reason: str | None, payload: dict) -> None:
        row = {
            "epoch": epoch,
            "status": status,
            "mode": mode,
            "reason": reason,
            "payload": json.dumps(payload, sort_keys=True),
            "recorded_at": datetime.now(timezone.utc),
        }
        delta.write(self.uri, pa.Table.from_pylist([row], schema=_SCHEMA), mode="append")
