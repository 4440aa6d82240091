"""Opening Delta tables, and the handles kept between reads and refreshes.

Opening a table replays its log from the last checkpoint; within a
:func:`reusing_handles` block each version of a table is opened once, and between refreshes
the newest handle of each table is kept for the next one. Writers take a handle out of the
cache (:func:`writable`) and put it back moved on (:func:`keep_moved`).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from ivm_assets import uris
from ivm_assets.delta import filesystems, io_counts, storage, storage_errors
from ivm_assets.errors import SourceError
from ivm_assets.recent import Recent


def is_delta_table(uri: str) -> bool:
    """Whether ``uri`` holds a Delta table. A local one is recognized by its log folder
    holding a commit file: delta-rs' own check lists the whole log and finds its latest
    version, which grows with the log (2.9 ms after 600 commits against 0.3 ms new, and a
    refresh asks ~13 times: the soak's epoch 300 paid 35 ms a refresh for it). A remote one
    is known to be one when this refresh holds a handle of it or its latest version is
    known (:func:`known_latest`); otherwise by its first commit file (a HEAD request),
    else by a listing of its log. Not delta-rs' ``is_deltatable``: it holds Python's GIL
    while it waits on the store (up to its timeouts and retries, minutes on a dead
    endpoint), which would stop every other thread of the process, the claim's renewals
    among them; pyarrow's calls release it."""
    local = uris.local_path(uri)
    if local is None:
        block = _handles.get()
        if block is not None and any(u == uri for u, _ in block.handles):
            return True  # a table this refresh has read is there for the rest of it
        if known_latest(uri) is not None:
            return True
        if filesystems.exists(commit_file(uri, 0)):
            return True
        # The first commits may have been cleaned up after a checkpoint.
        return any(_is_log_entry(name) for name in filesystems.names_under(f"{uri.rstrip('/')}/_delta_log"))
    log = os.path.join(local, "_delta_log")
    if os.path.isfile(os.path.join(log, "_last_checkpoint")) or os.path.isfile(commit_file(uri, 0)):
        return True
    return _listed_latest(uri) is not None  # log files before a checkpoint were cleaned up


def _is_log_entry(name: str) -> bool:
    """A commit file (``NNNNNNNNNNNNNNNNNNNN.json``) or a checkpoint's pointer or part."""
    return (len(name) == 25 and name.endswith(".json") and name[:20].isdigit()) or name == "_last_checkpoint" or ".checkpoint." in name


@dataclass
class HandleBlock:
    """What a :func:`reusing_handles` block has learnt: a handle per (uri, version), and
    the identity of commit files it checked (see :func:`commit_file_identity`). A caller
    that runs several blocks as one (a refresh of several views, yielding between them)
    passes the same one to each and calls :meth:`keep` at the end."""

    handles: dict[tuple[str, int], DeltaTable] = field(default_factory=dict)
    identities: dict[tuple[str, int], tuple] = field(default_factory=dict)

    def keep(self) -> None:
        """Keep this block's handles for later refreshes (see ``_kept``)."""
        for (uri, version), dt in list(self.handles.items()):
            if dt.version() == version:
                _keep(uri, dt, self.identities.get((uri, version)))


_handles: ContextVar[HandleBlock | None] = ContextVar("ivm_delta_handles", default=None)


# Between refreshes, the newest handle this process holds of each table (least recently
# used first). Opening a table costs ~1.5 ms plus ~0.2 ms per commit since its checkpoint
# locally, and on an object store a listing plus two reads of each such commit file (~26
# requests for a 46-version log); delta-rs' incremental update costs as much as an open
# locally. But a table this process committed to last is, at the next refresh, still at
# the version its own commit moved the handle to, which is the version that refresh reads
# or fences its commit to. A handle is taken out while one refresh uses it, so no two
# threads share one. Each is kept with the identity of its version's commit file: a table
# deleted and created again under the same path has other commit files, and its handle is
# not reused.
_kept: Recent[str, tuple[DeltaTable, tuple]] = Recent(256)


def _forget_under(prefix: str) -> None:
    """Drop the kept handles of tables under ``prefix`` (their storage options changed)."""
    _kept.drop(lambda uri: uri == prefix or uri.startswith(prefix + "/"))


storage.on_change(_forget_under)


def commit_file_identity(uri: str, version: int) -> tuple | None:
    """The identity of commit ``version``'s file (local: inode, size, mtime in ns; object
    store: size and modification time, one HEAD request, remembered for the block). On an
    object store the modification time has whole seconds: a table deleted and created again
    at the same path, reaching the same version within the same second with a commit file of
    the same size, would pass for the old one."""
    block = _handles.get()
    if block is not None and (uri, version) in block.identities:
        return block.identities[(uri, version)]
    found = filesystems.identity(commit_file(uri, version))
    if block is not None and found is not None and not uris.is_local(uri):
        block.identities[(uri, version)] = found
    return found


def _take_kept(uri: str, version: int | None) -> DeltaTable | None:
    """The kept handle of ``uri`` if it is at ``version`` (any version when None) and its
    commit file is still the one it read."""
    found = _kept.take(uri, lambda held: version is None or held[0].version() == version)
    if found is None:
        return None
    dt, identity = found
    return dt if commit_file_identity(uri, dt.version()) == identity else None


def _keep(uri: str, dt: DeltaTable, identity: tuple | None = None) -> None:
    """Keep ``dt`` for later refreshes, with its commit file's ``identity`` (looked up when
    not known)."""
    identity = identity or commit_file_identity(uri, dt.version())
    if identity is None:
        return
    _kept.put(uri, (dt, identity), over=lambda held: held[0].version() <= dt.version())


@contextmanager
def reusing_handles(block: HandleBlock | None = None) -> Iterator[None]:
    """Within the block, each version of a table has its log read once.

    A version of a Delta table never changes, so its handle is kept and handed to every
    reader of that version (the latest version of a local table is found by listing its log
    folder, of a remote one by asking whether the commit after the newest handle's exists,
    so a reader of the latest shares it too). A writer takes the handle out: its commit
    moves the handle to the new version (delta-rs updates it in place). One refresh holds
    the block, so a table re-created under the same path within it is a race the fenced
    commits report, not a stale read that lasts. Nested blocks share the outer cache. When
    the block ends, its handles are kept for the next refresh (see ``_kept``), which uses
    one only if it asks for exactly that version; with ``block`` given, they stay in it
    until its owner calls :meth:`HandleBlock.keep`.
    """
    if _handles.get() is not None:
        yield
        return
    own = block is None
    block = HandleBlock() if block is None else block
    token = _handles.set(block)
    try:
        yield
    finally:
        try:
            if own:
                block.keep()
        finally:
            _handles.reset(token)


def open_table(uri: str, version: int | None = None) -> DeltaTable:
    """The table at ``uri`` (at ``version``; the latest when None), for reading: a kept handle
    when :func:`reusing_handles` is active, or a SourceError saying what is there instead."""
    block = _handles.get()
    if block is None:
        return open_fresh(uri, version)
    if version is None:
        version = known_latest(uri)  # so the latest is a kept handle too when it is one
    if version is not None and (uri, version) in block.handles:
        return block.handles[(uri, version)]
    dt = (_take_kept(uri, version) if version is not None else None) or open_fresh(uri, version)
    block.handles.setdefault((uri, dt.version()), dt)
    return dt


def writable(uri: str, version: int | None = None) -> DeltaTable:
    """A handle to commit through: taken out of the cache, as the commit moves it on."""
    block = _handles.get()
    if block is not None and version is not None and (uri, version) in block.handles:
        return block.handles.pop((uri, version))
    if version is not None:
        kept = _take_kept(uri, version)
        if kept is not None:
            return kept
    return open_fresh(uri, version)


# How many times each handle was moved on in place (by its commits, or brought up to date)
# since it was opened, by id (delta-rs' handles cannot be hashed); an entry goes with its
# handle. A handle moved on in place costs more at each later commit: a 200-row append
# through one moved 300 times took 19 ms, through one opened fresh 5 ms (and its list of
# files 1.8 ms against 0.05); a log cleanup through it undoes that (state tables and
# progress logs get one every 10 epochs), outputs and sources get none. A long-lived
# process commits to an output thousands of times, so a handle is not kept past this many
# moves: the next refresh opens the table again from its checkpoint (~4 ms locally), which
# keeps every commit near a fresh handle's cost (benchmarks/kept_handles.py).
_MOVES_KEPT = 20
_moves: dict[int, int] = {}
_moves_lock = threading.Lock()


def _moved(dt: DeltaTable) -> bool:
    """Count one more in-place move of ``dt``; whether it may still be kept after it."""
    key = id(dt)
    with _moves_lock:
        if key not in _moves:
            weakref.finalize(dt, _forget_moves, key)
        _moves[key] = moves = _moves.get(key, 0) + 1
    return moves < _MOVES_KEPT


def _forget_moves(key: int) -> None:
    with _moves_lock:
        _moves.pop(key, None)


def keep_moved(uri: str, dt: DeltaTable, after: int | None) -> None:
    """Keep a handle a write or MERGE moved on in place to the version after ``after``
    (``create_write_transaction`` does not move its handle, so those are not kept): in the
    block's cache when one is active (kept for the next refresh when it ends), unless it
    was moved too often (see ``_MOVES_KEPT``)."""
    if after is None or dt.version() != after + 1 or not _moved(dt):
        return
    block = _handles.get()
    if block is not None:
        block.handles.setdefault((uri, dt.version()), dt)
    else:
        _keep(uri, dt)


def open_fresh(uri: str, version: int | None) -> DeltaTable:
    io_counts.add("log_reads")
    try:
        with storage_errors.failures(uri):
            return DeltaTable(uri, version=version, storage_options=storage.options_for(uri))
    except TableNotFoundError as exc:
        message = (
            f"expected a Delta table at {uri!r} but found none ({storage.redact(str(exc))}). "
            "Check the path in ivm.yaml, or create the table with deltalake/Spark first."
        )
    except DeltaError as exc:
        message = f"could not open Delta table {uri!r} at version {version}: {storage.redact(str(exc))}"
    raise SourceError(message)


def latest_version(uri: str) -> int:
    known = known_latest(uri)
    return known if known is not None else open_table(uri).version()


def known_latest(uri: str) -> int | None:
    """The table's latest version when known without replaying its log; None otherwise.

    Local: from a listing of its log folder. Remote, within :func:`reusing_handles`: the
    newest handle this refresh holds (or the kept one, its commit file checked) is the
    latest when the commit after it does not exist: one HEAD request, where reopening the
    table lists its log and reads every commit since the checkpoint. Commits are created
    whole with put-if-absent, one version after the other, so no later one can exist
    without that one.
    """
    if uris.is_local(uri):
        return _listed_latest(uri)
    block = _handles.get()
    if block is None:
        return None
    held = [v for u, v in block.handles if u == uri]
    if held:
        newest = max(held)
        return None if filesystems.exists(commit_file(uri, newest + 1)) else newest
    kept = _take_kept(uri, None)
    if kept is None:
        return None
    if filesystems.exists(commit_file(uri, kept.version() + 1)):
        # The table moved on since this process last read it (a source between two sensor
        # ticks or refreshes): this handle is not shared yet, so it is brought up to date in
        # place, reading the new commits only (a listing from its version and a GET each),
        # instead of an open that replays the log from its checkpoint (which it is, once
        # the handle was moved on too often: see ``_MOVES_KEPT``).
        if _moved(kept):
            io_counts.add("log_reads")
            with storage_errors.failures(uri):
                kept.update_incremental()
        else:
            kept = open_fresh(uri, None)
    block.handles.setdefault((uri, kept.version()), kept)
    return kept.version()


def _listed_latest(uri: str) -> int | None:
    """A local table's latest version from a listing of its log folder, without replaying
    the log (None: not a local table, or no commit file found).

    delta-rs and Spark create a commit file whole (a temporary file renamed, or
    put-if-absent) and log cleanup never removes the newest one, so the highest numbered
    ``NNNNNNNNNNNNNNNNNNNN.json`` is the latest commit.
    """
    local = uris.local_path(uri)
    if local is None:
        return None
    try:
        names = os.listdir(os.path.join(local, "_delta_log"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    versions = [int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(versions) if versions else None


def commit_file(uri: str, version: int) -> str:
    """Where commit ``version`` of the table at ``uri`` is (a local path or a URI)."""
    return f"{storage.normalize(uri.removeprefix('file://'))}/_delta_log/{version:020d}.json"
