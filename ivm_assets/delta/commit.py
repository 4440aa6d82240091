"""Fenced commits, tagged with the refresh epoch they belong to.

Each commit is tagged with the refresh epoch as a Delta app transaction (:class:`Epoch`) so
an interrupted refresh can tell which tables already hold its work.

Every commit a refresh makes is *fenced*: it lands at exactly the version after the one it
was planned against, or not at all (delta-rs with ``max_commit_retries=0`` compares the
table version and swaps in one put-if-absent of the log file). A lost race surfaces as
:class:`~ivm_assets.errors.CommitConflictError`, never as delta-rs' own text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from ivm_assets.delta import io_counts, storage, storage_errors
from ivm_assets.delta.handles import is_delta_table, keep_moved, latest_version, writable
from ivm_assets.delta.log import history_between, transaction_version
from ivm_assets.delta.properties import INTERNAL_TABLE
from ivm_assets.errors import CommitConflictError
from ivm_assets.spark.arrow import empty_table
from ivm_assets.testing import faults


@dataclass(frozen=True)
class Epoch:
    """Marks a commit as belonging to refresh epoch ``number`` of ``app_id`` (one per view)."""

    app_id: str
    number: int
    metadata: dict[str, str]

    def commit_properties(self, extra: dict[str, str] | None = None) -> CommitProperties:
        """Tagged with the epoch (and ``extra`` metadata), and fenced (no retries: see the module doc)."""
        return CommitProperties(
            custom_metadata={"ivm.epoch": str(self.number), **self.metadata, **(extra or {})},
            app_transactions=[Transaction(self.app_id, self.number)],
            max_commit_retries=0,
        )


# Custom metadata marking a compaction commit: same logical content as the version before.
COMPACTION = "ivm.compaction"


def holds_epoch(uri: str, epoch: Epoch, *, after: int | None = None) -> bool:
    """Whether the table already has a commit of ``epoch`` (an interrupted attempt wrote it).

    delta-rs does not reject an older transaction version, so the comparison is made here.
    ``after``, the table's version when the epoch started: a table still there has no commit
    of it, which is known without delta-rs reading the log's transactions back (on an object
    store, a GET of each commit since the checkpoint).
    """
    if after is not None and latest_version(uri) == after:
        return False
    done = transaction_version(uri, epoch.app_id)
    return done is not None and done >= epoch.number


def fenced_commit(uri: str, after: int | None, commit: Callable[[int | None], bool]) -> None:
    """Run ``commit`` (a fenced commit right after ``after``); a lost race becomes a
    CommitConflictError, with delta-rs' error as its cause."""
    try:
        with storage_errors.failures(uri):
            committed = commit(after)
    except CommitFailedError as exc:
        raise _conflict(uri, after) from exc
    except DeltaError as exc:
        if after is None and is_delta_table(uri):  # created by someone else first
            raise _conflict(uri, after) from exc
        raise
    if committed:
        made_commit()


def made_commit() -> None:
    """After each commit ivm_assets makes: count it for the refresh's statistics and cross
    the crash tests' commit boundary (where one may stop the process)."""
    io_counts.add("commits")
    faults.crossed("commit")


def _conflict(uri: str, after: int | None) -> CommitConflictError:
    return CommitConflictError(uri, expected=after, found=latest_version(uri) if is_delta_table(uri) else None)


def commit_epoch(uri: str, epoch: Epoch, after: int | None, commit: Callable[[int | None], bool]) -> bool:
    """Make an epoch's commit to ``uri`` right after version ``after``; False if it was not needed.

    When another writer committed first: if the table now holds the epoch, another attempt of
    the same epoch (same inputs, so same content) made this commit, and it is skipped; if
    only compactions came in between (same logical content), the commit lands after them;
    anything else is a CommitConflictError and nothing is committed.
    """
    while True:
        try:
            fenced_commit(uri, after, commit)
            return True
        except CommitConflictError as conflict:
            if holds_epoch(uri, epoch):
                return False
            if after is None or conflict.found is None or not _only_compactions(uri, after, conflict.found):
                raise
            after = conflict.found


def _only_compactions(uri: str, after: int, upto: int) -> bool:
    """Whether every commit in (after, upto] is a compaction."""
    commits = history_between(uri, after, upto)
    return len(commits) == upto - after and all(c.get(COMPACTION) == "true" for c in commits)


def commit_metadata(uri: str, metadata: dict[str, str], *, after: int | None, schema: pa.Schema) -> int:
    """An empty commit carrying ``metadata`` (read back by :func:`~ivm_assets.delta.log.head`),
    at exactly version ``after + 1``; with ``after`` None it creates the table (with
    ``schema``) at version 0.

    Returns the new version. Raises CommitConflictError when another writer committed first.
    """
    properties = CommitProperties(custom_metadata=metadata, max_commit_retries=0)

    def attempt(at: int | None) -> bool:
        if at is None:
            DeltaTable.create(
                uri, schema=schema, mode="error", configuration=INTERNAL_TABLE, commit_properties=properties,
                storage_options=storage.options_for(uri),
            )
        else:
            # An append of no rows through the writer, not an empty write transaction: the
            # writer moves the handle to the new version, so the next commit (this refresh's
            # last, or the next refresh's first) does not open the log again (~3 ms a commit).
            dt = writable(uri, at)
            empty = empty_table(pa.schema(dt.schema().to_arrow()))
            write_deltalake(dt, empty, mode="append", commit_properties=properties)
            keep_moved(uri, dt, at)
        return True

    fenced_commit(uri, after, attempt)
    return 0 if after is None else after + 1
