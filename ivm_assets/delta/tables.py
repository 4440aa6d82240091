"""Every delta-rs call ivm_assets makes lives in this module.

Reads hand Spark DataFrames to the caller (snapshots are read by Spark's executors from the
table's parquet files: by Spark's parquet reader on a local disk, by pyarrow in the executors'
Python workers on an object store, see :mod:`ivm_assets.spark.executor_io`; change feeds are
read by delta-rs and normalized). Small writes (incremental appends, MERGEs) go from Arrow on
the driver through delta-rs; whole-table writes (full refreshes, compactions) are parquet
files written by Spark's executors, on any store, and committed by delta-rs as add actions,
so the driver never holds a whole table. Each commit is tagged
with the refresh epoch as a Delta app transaction so an interrupted refresh can tell which
tables already hold its work.

Every commit a refresh makes is *fenced*: it lands at exactly the version after the one it
was planned against, or not at all (delta-rs with ``max_commit_retries=0`` compares the
table version and swaps in one put-if-absent of the log file). A lost race surfaces as
:class:`~ivm_assets.errors.CommitConflictError`, never as delta-rs' own text.
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction, WriterProperties, write_deltalake
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, create_table_with_add_actions
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets.delta import parquet_cache, storage
from ivm_assets.errors import CommitConflictError, SourceError
from ivm_assets.spark import executor_io
from ivm_assets.testing import faults
from ivm_assets.spark.arrow import arrow_schema as spark_to_arrow_schema, normalize_table, spark_schema, to_arrow, to_spark
from ivm_assets.zset import WEIGHT

CDF_ON = {"delta.enableChangeDataFeed": "true"}
# Tables ivm writes (state, outputs, progress logs) take a commit per refresh or more, and
# each open replays the commits since the last checkpoint (~0.2 ms each; Delta's default is
# one checkpoint per 100 commits). A checkpoint every 10 commits costs ~10 ms once and keeps
# every later open of the table short, however many epochs ran.
OWN_TABLE = {"delta.checkpointInterval": "10"}
# ivm's internal tables (state tables, progress logs) are read only at the versions the
# epoch in flight recorded, and after it committed only at their latest. Delta keeps log
# files 30 days, and delta-rs lists the whole log folder on every commit and open, so a
# commit cost 2.6 ms on a new table and 9.6 ms after 700 commits (measured; the soak's
# progress logs take 2 commits an epoch): their logs are cleaned by ivm (:func:`clean_log`),
# at a point no epoch needs an older version, never by delta-rs after some commit mid-epoch.
INTERNAL_TABLE = {**OWN_TABLE, "delta.logRetentionDuration": "interval 0 seconds", "delta.enableExpiredLogCleanup": "false"}
_CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


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


# --- inspection ---------------------------------------------------------------------------
def is_delta_table(uri: str) -> bool:
    """Whether ``uri`` holds a Delta table. A local one is recognized by its log folder
    holding a commit file: delta-rs' own check lists the whole log and finds its latest
    version, which grows with the log (2.9 ms after 600 commits against 0.3 ms new, and a
    refresh asks ~13 times: the soak's epoch 300 paid 35 ms a refresh for it). A remote one
    is known to be one when this refresh holds a handle of it or its latest version is
    known (:func:`_known_latest`); otherwise by its first commit file (a HEAD request),
    else by a listing of its log. Not delta-rs' ``is_deltatable``: it holds Python's GIL
    while it waits on the store (up to its timeouts and retries, minutes on a dead
    endpoint), which would stop every other thread of the process, the claim's renewals
    among them; pyarrow's calls release it."""
    local = _local_path(uri)
    if local is None:
        block = _handles.get()
        if block is not None and any(u == uri for u, _ in block.handles):
            return True  # a table this refresh has read is there for the rest of it
        if _known_latest(uri) is not None:
            return True
        if storage.exists(_commit_file(uri, 0)):
            return True
        # The first commits may have been cleaned up after a checkpoint.
        return any(_is_log_entry(name) for name in storage.names_under(f"{uri.rstrip('/')}/_delta_log"))
    log = os.path.join(local, "_delta_log")
    if os.path.isfile(os.path.join(log, "_last_checkpoint")) or os.path.isfile(_commit_file(uri, 0)):
        return True
    return _listed_latest(uri) is not None  # log files before a checkpoint were cleaned up


def _is_log_entry(name: str) -> bool:
    """A commit file (``NNNNNNNNNNNNNNNNNNNN.json``) or a checkpoint's pointer or part."""
    return (len(name) == 25 and name.endswith(".json") and name[:20].isdigit()) or name == "_last_checkpoint" or ".checkpoint." in name


# Delta logs opened by this process (each open replays the log from its last checkpoint):
# refresh statistics report how many one refresh made.
log_reads = 0
_log_reads_lock = threading.Lock()


@dataclass
class HandleBlock:
    """What a :func:`reusing_handles` block has learnt: a handle per (uri, version), and
    the identity of commit files it checked (see :func:`_commit_file_identity`). A caller
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
_kept: OrderedDict[str, tuple[DeltaTable, tuple]] = OrderedDict()
_kept_lock = threading.Lock()
_KEPT_TABLES = 256


def _forget_under(prefix: str) -> None:
    """Drop the kept handles of tables under ``prefix`` (their storage options changed)."""
    with _kept_lock:
        for uri in [u for u in _kept if u == prefix or u.startswith(prefix + "/")]:
            del _kept[uri]


storage.on_change(_forget_under)


def _commit_file_identity(uri: str, version: int) -> tuple | None:
    """The identity of commit ``version``'s file (local: inode, size, mtime in ns; object
    store: size and modification time, one HEAD request, remembered for the block). On an
    object store the modification time has whole seconds: a table deleted and created again
    at the same path, reaching the same version within the same second with a commit file of
    the same size, would pass for the old one."""
    block = _handles.get()
    if block is not None and (uri, version) in block.identities:
        return block.identities[(uri, version)]
    found = storage.identity(_commit_file(uri, version))
    if block is not None and found is not None and not is_local(uri):
        block.identities[(uri, version)] = found
    return found


def _take_kept(uri: str, version: int | None) -> DeltaTable | None:
    """The kept handle of ``uri`` if it is at ``version`` (any version when None) and its
    commit file is still the one it read."""
    with _kept_lock:
        found = _kept.get(uri)
        if found is None or (version is not None and found[0].version() != version):
            return None
        del _kept[uri]
    dt, identity = found
    return dt if _commit_file_identity(uri, dt.version()) == identity else None


def _keep(uri: str, dt: DeltaTable, identity: tuple | None = None) -> None:
    """Keep ``dt`` for later refreshes, with its commit file's ``identity`` (looked up when
    not known)."""
    identity = identity or _commit_file_identity(uri, dt.version())
    if identity is None:
        return
    with _kept_lock:
        held = _kept.get(uri)
        if held is not None and held[0].version() > dt.version():
            return
        _kept[uri] = (dt, identity)
        _kept.move_to_end(uri)
        while len(_kept) > _KEPT_TABLES:
            _kept.popitem(last=False)


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
        return _open(uri, version)
    if version is None:
        version = _known_latest(uri)  # so the latest is a kept handle too when it is one
    if version is not None and (uri, version) in block.handles:
        return block.handles[(uri, version)]
    dt = (_take_kept(uri, version) if version is not None else None) or _open(uri, version)
    block.handles.setdefault((uri, dt.version()), dt)
    return dt


def _writable(uri: str, version: int | None = None) -> DeltaTable:
    """A handle to commit through: taken out of the cache, as the commit moves it on."""
    block = _handles.get()
    if block is not None and version is not None and (uri, version) in block.handles:
        return block.handles.pop((uri, version))
    if version is not None:
        kept = _take_kept(uri, version)
        if kept is not None:
            return kept
    return _open(uri, version)


def _open(uri: str, version: int | None) -> DeltaTable:
    global log_reads
    with _log_reads_lock:
        log_reads += 1
    try:
        with storage.failures(uri):
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
    known = _known_latest(uri)
    return known if known is not None else open_table(uri).version()


def _known_latest(uri: str) -> int | None:
    """The table's latest version when known without replaying its log; None otherwise.

    Local: from a listing of its log folder. Remote, within :func:`reusing_handles`: the
    newest handle this refresh holds (or the kept one, its commit file checked) is the
    latest when the commit after it does not exist: one HEAD request, where reopening the
    table lists its log and reads every commit since the checkpoint. Commits are created
    whole with put-if-absent, one version after the other, so no later one can exist
    without that one.
    """
    if is_local(uri):
        return _listed_latest(uri)
    block = _handles.get()
    if block is None:
        return None
    held = [v for u, v in block.handles if u == uri]
    if held:
        newest = max(held)
        return None if storage.exists(_commit_file(uri, newest + 1)) else newest
    kept = _take_kept(uri, None)
    if kept is None:
        return None
    if storage.exists(_commit_file(uri, kept.version() + 1)):
        # The table moved on since this process last read it (a source between two sensor
        # ticks or refreshes): this handle is not shared yet, so it is brought up to date in
        # place, reading the new commits only (a listing from its version and a GET each),
        # instead of an open that replays the log from its checkpoint.
        global log_reads
        with _log_reads_lock:
            log_reads += 1
        with storage.failures(uri):
            kept.update_incremental()
    block.handles.setdefault((uri, kept.version()), kept)
    return kept.version()


def _listed_latest(uri: str) -> int | None:
    """A local table's latest version from a listing of its log folder, without replaying
    the log (None: not a local table, or no commit file found).

    delta-rs and Spark create a commit file whole (a temporary file renamed, or
    put-if-absent) and log cleanup never removes the newest one, so the highest numbered
    ``NNNNNNNNNNNNNNNNNNNN.json`` is the latest commit.
    """
    local = _local_path(uri)
    if local is None:
        return None
    try:
        names = os.listdir(os.path.join(local, "_delta_log"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    versions = [int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(versions) if versions else None


def arrow_schema(uri: str, version: int | None = None) -> pa.Schema:
    return normalize_schema_of(open_table(uri, version))


def normalize_schema_of(dt: DeltaTable) -> pa.Schema:
    return normalize_table(pa.schema(dt.schema().to_arrow()).empty_table()).schema


def table_id(uri: str, version: int) -> str:
    """The id Delta gave the table when it was created (its metadata's ``id``): a table
    deleted and created again under the same path, or copied elsewhere, is told apart by it."""
    return open_table(uri, version).metadata().id


def change_feed_enabled(uri: str, version: int | None = None) -> bool:
    config = open_table(uri, version).metadata().configuration
    return str(config.get("delta.enableChangeDataFeed", "false")).lower() == "true"


def transaction_version(uri: str, app_id: str) -> int | None:
    """The last epoch of ``app_id`` committed to the table, or None (also when no table)."""
    if not is_delta_table(uri):
        return None
    return open_table(uri).transaction_version(app_id)


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


def _history_between(uri: str, after: int, upto: int) -> list[dict]:
    """Commit infos (with their ``version``) of the versions in (after, upto].

    Read from the commit files themselves (no log replay; on an object store one HEAD and
    one GET each, read once per process). delta-rs' ``history()`` reads the newest commits
    in storage whatever version the handle holds, and numbers them down from the handle's
    version (delta-rs 1.6): only a fresh handle of the latest version numbers them right,
    so that is the fallback, for commit files that log cleanup removed.
    """
    infos = [_commit_info(uri, v) for v in range(after + 1, upto + 1)]
    if all(i is not None for i in infos):
        return infos  # type: ignore[return-value]
    dt = _open(uri, None)
    return [e for e in dt.history(max(dt.version() - after, 1)) if after < e.get("version", -1) <= upto]


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a table on the local file system (a path or ``file://``)."""
    return storage.is_local(uri)


def _local_path(uri: str) -> str | None:
    return storage.local_path(uri)


def _commit_file(uri: str, version: int) -> str:
    """Where commit ``version`` of the table at ``uri`` is (a local path or a URI)."""
    return f"{storage.normalize(uri.removeprefix('file://'))}/_delta_log/{version:020d}.json"


# Parsed commit files of object stores by (uri, version, identity of the file): a commit
# file never changes, and reading one costs two requests (HEAD, GET).
_commits: OrderedDict[tuple[str, int, tuple], list[str]] = OrderedDict()
_COMMITS_KEPT = 1024


def commit_actions(uri: str, version: int, kind: str) -> list[dict] | None:
    """The ``kind`` actions (``commitInfo``, ``add``, …) of one commit file, in order; None
    when the file is gone (log cleanup)."""
    if is_local(uri):
        try:
            with open(_commit_file(uri, version), encoding="utf-8") as f:
                lines = [line for line in f if f'"{kind}"' in line]
        except FileNotFoundError:
            return None
        return _actions_of(lines, kind)
    identity = _commit_file_identity(uri, version)
    if identity is None:
        return None
    key = (uri, version, identity)
    with _kept_lock:
        lines = _commits.get(key)
        if lines is not None:
            _commits.move_to_end(key)
    if lines is None:
        data = storage.read_bytes(_commit_file(uri, version))
        if data is None:
            return None
        lines = data.decode("utf-8").splitlines()
        with _kept_lock:
            _commits[key] = lines
            while len(_commits) > _COMMITS_KEPT:
                _commits.popitem(last=False)
    return _actions_of(lines, kind)


def _actions_of(lines: list[str], kind: str) -> list[dict]:
    found = []
    for line in lines:
        if f'"{kind}"' in line:
            action = json.loads(line).get(kind)
            if isinstance(action, dict):
                found.append(action)
    return found


def _commit_info(uri: str, version: int) -> dict | None:
    """The commitInfo action of one commit file, with its ``version``; None when the file
    is gone (log cleanup) or has none."""
    infos = commit_actions(uri, version, "commitInfo")
    return {**infos[0], "version": version} if infos else None


def operations_between(uri: str, after: int, upto: int) -> list[tuple[int, str, dict]]:
    """(version, operation, operationParameters) of each commit in (after, upto]."""
    out = []
    for entry in _history_between(uri, after, upto):
        version = entry.get("version")
        if version is not None and after < version <= upto:
            out.append((version, str(entry.get("operation", "")), entry.get("operationParameters") or {}))
    return sorted(out)


# Rows a commit changed, per operation, from its metrics (delta-rs' names and Delta/Spark's);
# an update counts twice, as the change feed carries its pre- and post-image. Operations
# not listed (OPTIMIZE, VACUUM, properties, columns) change no rows.
_CHANGED_ROWS = {
    "WRITE": {"num_added_rows": 1, "numOutputRows": 1},
    "CREATE TABLE": {"num_added_rows": 1, "numOutputRows": 1},
    "DELETE": {"num_deleted_rows": 1, "numDeletedRows": 1},
    "UPDATE": {"num_updated_rows": 2, "numUpdatedRows": 2},
    "MERGE": {
        "num_target_rows_inserted": 1, "num_target_rows_deleted": 1, "num_target_rows_updated": 2,
        "numTargetRowsInserted": 1, "numTargetRowsDeleted": 1, "numTargetRowsUpdated": 2,
    },
}


def change_rows_between(uri: str, after: int, upto: int) -> int | None:
    """Rows the commits in (after, upto] inserted, deleted or updated (updates twice), from
    their operation metrics; None when a commit that changes rows carries none."""
    total = 0
    for entry in _history_between(uri, after, upto):
        version = entry.get("version")
        if version is None or not after < version <= upto:
            continue
        names = _CHANGED_ROWS.get(str(entry.get("operation", "")))
        if names is None:
            continue
        metrics = entry.get("operationMetrics") or {}
        found = [weight * int(metrics[name]) for name, weight in names.items() if name in metrics]
        if not found:
            return None
        total += sum(found)
    return total


# --- reads --------------------------------------------------------------------------------
def read_snapshot(
    spark: SparkSession,
    uri: str,
    *,
    version: int | None = None,
    partition_filters: list[tuple[str, str, object]] | None = None,
) -> DataFrame:
    """The table's rows at ``version`` as a Spark DataFrame, read by Spark from parquet.

    ``partition_filters`` (delta-rs form, e.g. ``[("__bucket", "in", ["3", "7"])]``) prunes
    files before Spark sees them.
    """
    return read_snapshot_sized(spark, uri, version=version, partition_filters=partition_filters)[0]


def read_snapshot_sized(
    spark: SparkSession,
    uri: str,
    *,
    version: int | None = None,
    partition_filters: list[tuple[str, str, object]] | None = None,
) -> tuple[DataFrame, int]:
    """:func:`read_snapshot`, plus the bytes of the files it reads (from the Delta log)."""
    snap = snapshot_files(uri, version=version, partition_filters=partition_filters)
    return _read_files(spark, snap), snap.bytes


@dataclass(frozen=True)
class SnapshotFiles:
    """The data files of a table version (pruned by partition), and their sizes as the
    Delta log records them (no file is looked at: on an object store that would cost a
    request a file)."""

    table: DeltaTable
    files: list[str]
    sizes: list[int]

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    @property
    def plain_parquet(self) -> bool:
        """Files a parquet reader can read as they are (no deletion vectors, no column
        mapping), on any store: what :func:`read_files_arrow` needs."""
        features = set(self.table.protocol().reader_features or [])
        return not features & {"deletionVectors", "columnMapping"}


def snapshot_files(
    uri: str, *, version: int | None = None, partition_filters: list[tuple[str, str, object]] | None = None
) -> SnapshotFiles:
    dt = open_table(uri, version)
    files = _files(dt, partition_filters)
    index = _file_index(dt)
    return SnapshotFiles(dt, files, [_size(index, f) for f in files])


# Attribute of a handle holding (its version, each data file's size and partition values
# from its add action): built once per version a refresh reads, not once per lookup, and
# gone with the handle (DeltaTable is not hashable, so no weak dictionary can key on it).
_INDEX = "_ivm_file_index"


def _file_key(path: str) -> str:
    """A data file's location as both ``file_uris()`` and the add actions can be matched on."""
    return unquote(path.removeprefix("file://"))


def _file_index(dt: DeltaTable) -> dict[str, tuple[int, dict]]:
    """Data file location → (size in bytes, partition values as text) from the add actions."""
    found = getattr(dt, _INDEX, None)
    if found is not None and found[0] == dt.version():
        return found[1]
    actions = pa.table(dt.get_add_actions(flatten=True))
    root = storage.normalize(_local_path(dt.table_uri) or dt.table_uri)
    columns = {n.removeprefix("partition."): actions.column(n).to_pylist() for n in actions.column_names if n.startswith("partition.")}
    index = {}
    for i, (path, size) in enumerate(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist())):
        values = {c: None if v[i] is None else str(v[i]) for c, v in columns.items()}
        index[_file_key(f"{root}/{path}")] = (int(size), values)
    setattr(dt, _INDEX, (dt.version(), index))
    return index


def _size(index: dict[str, tuple[int, dict]], file: str) -> int:
    """``file``'s size from the log; from the store (a stat, or a HEAD) if its location is
    spelled differently in the add actions than in ``file_uris()``."""
    found = index.get(_file_key(file))
    if found is not None:
        return found[0]
    identity = storage.identity(_file_key(file))
    if identity is None:
        raise storage.missing_file(file)
    return identity[-2]


@dataclass
class ReadCost:
    """What :func:`read_files_arrow` read: row groups, their rows and compressed bytes, and
    how many of those groups were decoded from disk (the others were in the parquet cache)."""

    row_groups: int = 0
    rows: int = 0
    bytes: int = 0
    decoded: int = 0


@dataclass
class RowGroups:
    """The row groups a driver read will decode (chosen by :func:`select_row_groups`), and
    their rows and compressed bytes, known from the footers before anything is decoded."""

    schema: pa.Schema  # the table's columns, partition columns left out
    key: str | None
    present: pa.Array | None  # the wanted non-NULL key values (None: every row)
    keep_nulls: bool
    groups: list[tuple[parquet_cache.Footer, int]]
    rows: int = 0
    bytes: int = 0


def select_row_groups(
    snap: SnapshotFiles,
    *,
    key: str | None = None,
    values: pa.Array | pa.ChunkedArray | Mapping[str, pa.Array] | None = None,
    partition: str | None = None,
) -> RowGroups:
    """The row groups of ``snap``'s files that may hold rows whose ``key`` is in ``values``
    (a NULL in ``values`` wants NULL keys); every row group without ``key``.

    With ``partition``, ``values`` maps that partition column's values (as text) to the key
    values wanted in their files: keys hashed to a bucket are looked for in that bucket's
    files only, so scattered keys cost one row group each, not one per file. Only footers
    are read: a row group whose min/max statistics exclude every wanted value is left out,
    so the choice follows the number of wanted keys, not the size of the files.
    """
    partitions = set(snap.table.metadata().partition_columns)
    schema = pa.schema([f for f in normalize_schema_of(snap.table) if f.name not in partitions])
    if key is None or values is None:
        chosen = RowGroups(schema, None, None, False, [])
        for path, size in zip(snap.files, snap.sizes):
            file = parquet_cache.footer(_file_key(path), size)
            for group in range(len(file.rows)):
                _choose(chosen, file, group)
        return chosen
    by_part = dict(values) if partition is not None else {None: values}
    key_type = schema.field(key).type
    # Per partition: the wanted values sorted (NaN left out: it does not order, and parquet's
    # statistics need not cover it), whether NULL keys are wanted, whether NaN is.
    wanted: dict[str | None, tuple[list, bool, bool]] = {}
    present: list = []
    for part, vals in by_part.items():
        vals = comparable_keys(pc.unique(pa.array(pc.drop_null(vals).to_pylist(), key_type)))
        nan = pa.types.is_floating(key_type) and pc.any(pc.is_nan(vals)).as_py()
        ordered = (pc.filter(vals, pc.invert(pc.is_nan(vals))) if nan else vals).sort().to_pylist()
        wanted[part] = (ordered, by_part[part].null_count > 0, bool(nan))
        present.extend(vals.to_pylist())
    keep_nulls = any(nulls for _, nulls, _ in wanted.values())
    chosen = RowGroups(schema, key, pc.unique(pa.array(present, key_type)), keep_nulls, [])
    file_parts = _partition_values(snap.table, partition) if partition is not None else {}
    # For a file whose partition is not known.
    every = (sorted({v for w in wanted.values() for v in w[0]}), keep_nulls, any(w[2] for w in wanted.values()))
    for path, size in zip(snap.files, snap.sizes):
        location = _file_key(path)
        if partition is None:
            wanted_sorted, nulls, nan = wanted[None]
        elif location not in file_parts:
            wanted_sorted, nulls, nan = every
        elif file_parts[location] not in wanted:
            continue  # a partition none of the keys belongs to
        else:
            wanted_sorted, nulls, nan = wanted[file_parts[location]]
        file = parquet_cache.footer(location, size)
        for group, stats in enumerate(file.stats(key)):
            if nan or not _skips(stats, wanted_sorted, nulls):
                _choose(chosen, file, group)
    return chosen


def _choose(chosen: RowGroups, file: parquet_cache.Footer, group: int) -> None:
    chosen.groups.append((file, group))
    chosen.rows += file.rows[group]
    chosen.bytes += file.bytes[group]


def files_by_partition(snap: SnapshotFiles, column: str) -> dict[str | None, SnapshotFiles] | None:
    """``snap``'s files grouped by their value of partition ``column`` (as text), each group
    a snapshot of its own; None when a file's value is not known."""
    values = _partition_values(snap.table, column)
    groups: dict[str | None, tuple[list[str], list[int]]] = {}
    for path, size in zip(snap.files, snap.sizes):
        key = _file_key(path)
        if key not in values:
            return None
        files, sizes = groups.setdefault(values[key], ([], []))
        files.append(path)
        sizes.append(size)
    return {value: SnapshotFiles(snap.table, files, sizes) for value, (files, sizes) in groups.items()}


def partition_type(dt: DeltaTable, column: str) -> pa.DataType:
    return pa.schema(dt.schema().to_arrow()).field(column).type


def _partition_values(dt: DeltaTable, column: str) -> dict[str, str | None]:
    """Each data file's location (:func:`_file_key`) → its value of partition ``column``, as text."""
    return {key: values.get(column) for key, (_, values) in _file_index(dt).items()}


def read_row_groups(chosen: RowGroups, *, cost: ReadCost | None = None, keep: bool = True) -> pa.Table:
    """The rows of the ``chosen`` row groups, read on the driver by pyarrow (or taken from
    :mod:`~ivm_assets.delta.parquet_cache`), limited to the wanted keys. Each file is read as
    it is and cast to the table's schema (files written at different times may hold
    string_view or string). ``cost``, when given, is added what was looked at; ``keep``:
    whether decoded row groups stay in the cache."""
    if cost is not None:
        cost.row_groups += len(chosen.groups)
        cost.rows += chosen.rows
        cost.bytes += chosen.bytes
    by_file: dict[parquet_cache.Stamp, tuple[parquet_cache.Footer, list[int]]] = {}
    for file, group in chosen.groups:
        by_file.setdefault(file.stamp, (file, []))[1].append(group)
    parts = [chosen.schema.empty_table()]
    for file, groups in by_file.values():
        tables, decoded = parquet_cache.row_groups(file, groups, keep=keep)
        parts.extend(t if t.schema == chosen.schema else _conform(t, chosen.schema) for t in tables)
        if cost is not None:
            cost.decoded += decoded
    rows = pa.concat_tables(parts)
    if chosen.present is None:
        return rows
    wanted = pc.is_in(comparable_keys(rows.column(chosen.key)), value_set=chosen.present)
    if chosen.keep_nulls:
        wanted = pc.or_kleene(wanted, pc.is_null(rows.column(chosen.key)))
    return rows.filter(wanted).combine_chunks()


def read_files_arrow(
    snap: SnapshotFiles,
    *,
    key: str | None = None,
    values: pa.Array | pa.ChunkedArray | None = None,
    cost: ReadCost | None = None,
) -> pa.Table:
    """The rows of ``snap``'s files, read on the driver by pyarrow, without partition columns;
    with ``key``, only rows whose ``key`` is in ``values`` (a NULL in ``values`` keeps NULL keys).

    For small, selective reads: no Spark job, no Spark file index (see
    :func:`select_row_groups` and :func:`read_row_groups`).
    """
    return read_row_groups(select_row_groups(snap, key=key, values=values), cost=cost)


def comparable_keys(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Key values as Spark compares them in joins and groups: floating point with −0.0 as
    0.0 and every NaN as one NaN (Arrow's ``is_in`` and hashing tell them apart); other
    types as they are."""
    if not pa.types.is_floating(values.type):
        return values
    zero, nan = pa.scalar(0.0, values.type), pa.scalar(float("nan"), values.type)
    values = pc.if_else(pc.equal(values, zero), zero, values)
    return pc.if_else(pc.is_nan(values), nan, values)


def _skips(stats: tuple[object, object, int | None] | None, wanted: list, keep_nulls: bool) -> bool:
    """Whether a row group's key statistics (min, max, null count) prove none of its rows
    has a key among ``wanted`` (sorted; or, with ``keep_nulls``, a NULL key).

    Each wanted key is placed among the group's [min, max] by bisection, so keys scattered
    over the whole range (random orders deleted, random customers updated) still skip every
    row group that holds none of them; state rows are sorted by key within a file.
    """
    if stats is None:
        return False
    low, high, null_count = stats
    if keep_nulls and (null_count is None or null_count > 0):
        return False
    if not wanted:
        return True  # only NULLs wanted, and none here
    try:
        first = bisect.bisect_left(wanted, low)
        return first == len(wanted) or wanted[first] > high
    except TypeError:  # statistics of a type the values do not compare with
        return False


def _conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with exactly ``schema``'s columns and types (missing columns as NULLs)."""
    rows = normalize_table(rows)
    names = set(rows.column_names)
    return pa.table(
        [rows.column(f.name).cast(f.type) if f.name in names else pa.nulls(rows.num_rows, f.type) for f in schema],
        schema=schema,
    )


def _files(dt: DeltaTable, partition_filters: list[tuple[str, str, object]] | None) -> list[str]:
    return dt.file_uris(file_pruning_predicate=partition_filters) if partition_filters else dt.file_uris()


def _read_files(spark: SparkSession, snap: SnapshotFiles) -> DataFrame:
    dt, files = snap.table, snap.files
    schema = normalize_schema_of(dt)
    if not snap.plain_parquet:
        # Spark's parquet reader would ignore deletion vectors / mapped names: let delta-rs
        # resolve them (this funnels the rows through the driver, so it is the slow path).
        return to_spark(spark, _read_all(dt.scan()))
    if not files:
        return spark.createDataFrame([], schema=spark_schema(schema))
    target = spark_schema(schema)
    partition_columns = dt.metadata().partition_columns
    if not all(is_local(f) for f in files):
        if storage.executor_io() == "python":
            return _read_on_executors(spark, dt.table_uri, _data_files(snap), schema, partition_columns)
        files = [storage.hadoop_uri(f) for f in files]
    # An explicit schema spares Spark a job that reads every file footer to infer one.
    reader = spark.read.schema(target)
    if partition_columns:
        base = dt.table_uri if is_local(dt.table_uri) else storage.hadoop_uri(dt.table_uri)
        reader = reader.option("basePath", base)
    return reader.parquet(*files).select(*[F.col(f"`{f.name}`") for f in target.fields])


def _data_files(snap: SnapshotFiles) -> list[executor_io.DataFile]:
    """``snap``'s files with their sizes and partition values from the add actions."""
    index = _file_index(snap.table)
    return [
        executor_io.DataFile(_file_key(path), size, tuple(sorted(index.get(_file_key(path), (0, {}))[1].items())))
        for path, size in zip(snap.files, snap.sizes)
    ]


def _read_on_executors(
    spark: SparkSession, uri: str, files: list[executor_io.DataFile], schema: pa.Schema, partition_columns: list[str]
) -> DataFrame:
    """The rows of ``files`` of the table at ``uri`` (an object store), read by Spark's
    executors with pyarrow (this Spark has no Hadoop object store connector)."""
    root = storage.normalize(uri)
    return executor_io.read_files(spark, files, root=root, schema=schema, spark_schema=spark_schema(schema), partitions=partition_columns)


def read_changes(uri: str, *, after: int, upto: int, columns: list[str] | None = None) -> pa.Table:
    """The change data feed of versions (after, upto] as a z-set: ``columns`` (all when None)
    plus ``__w``.

    insert/update_postimage weigh +1, delete/update_preimage −1. Not consolidated.
    Raises DeltaError when the range cannot be read (CDF off, files vacuumed, …), and
    StorageError when the store cannot be reached (a network fault is not a lost feed).
    """
    dt = open_table(uri, upto)
    # delta-rs parses these as SQL identifiers: quoted, so `Order` or `b c` are names, not syntax.
    wanted = [*('"' + c.replace('"', '""') + '"' for c in columns), "_change_type"] if columns is not None else None
    with storage.failures(uri):
        table = normalize_table(_read_all(dt.load_cdf(starting_version=after + 1, ending_version=upto, columns=wanted)))
    weights = pa.array([executor_io.CHANGE_WEIGHTS[t] for t in table.column("_change_type").to_pylist()], pa.int64())
    data_columns = [c for c in table.column_names if c not in _CDF_COLUMNS]
    return table.select(data_columns).append_column(WEIGHT, weights)


def read_small(uri: str) -> pa.Table:
    """A small table (progress records) read whole by delta-rs, without Spark."""
    return _read_all(open_table(uri).scan())


def file_count(uri: str, version: int | None = None) -> int:
    """Number of data files in the table at ``version`` (default: the latest)."""
    return len(open_table(uri, version).file_uris())


def row_count(uri: str, version: int) -> int | None:
    """Rows of the table from the per-file statistics in the Delta log (no data is read);
    None when some file has no statistics."""
    actions = open_table(uri, version).get_add_actions(flatten=True)
    names = list(actions.schema.names)
    if "num_records" not in names:
        return None
    counts = actions.column(names.index("num_records")).to_pylist()
    return None if any(c is None for c in counts) else int(sum(counts))


def snapshot_bytes(uri: str, *, version: int, partition_filters: list[tuple[str, str, object]] | None = None) -> int:
    """Bytes of the files :func:`read_snapshot` would read, from the Delta log."""
    return snapshot_files(uri, version=version, partition_filters=partition_filters).bytes


def _read_all(reader) -> pa.Table:
    """delta-rs streams arro3 batches; pyarrow takes them through the C stream interface."""
    return pa.RecordBatchReader.from_stream(reader).read_all()


# --- writes -------------------------------------------------------------------------------
def write(uri: str, data: DataFrame | pa.Table, *, mode: Literal["append", "overwrite"]) -> None:
    """Append or overwrite in one commit, unfenced: edits of source tables (demo, benchmark,
    tests), which ivm only reads."""
    table = data if isinstance(data, pa.Table) else to_arrow(data)
    with storage.failures(uri):
        write_deltalake(
            uri, table, mode=mode, schema_mode="overwrite" if mode == "overwrite" else None, storage_options=storage.options_for(uri)
        )
    faults.crossed("commit")


def write_epoch(
    uri: str,
    table: pa.Table,
    *,
    epoch: Epoch,
    after: int | None,
    mode: Literal["append", "overwrite"],
    partition_by: list[str] | None = None,
    change_feed: bool = False,
    row_group_rows: int | None = None,
    metadata: dict[str, str] | None = None,
    cache_key: str | None = None,
) -> bool:
    """Commit ``table`` (and ``metadata`` in the commit info) as the epoch's one commit to ``uri``, right after version ``after``
    (None: the commit creates the table). See :func:`_commit_epoch` for what a lost race does.

    ``row_group_rows`` caps parquet row groups: with rows sorted by key, small row groups
    let readers skip the ones whose key range a lookup does not touch. With ``cache_key``
    (the column the rows are sorted by), the files written are held decoded in
    :mod:`~ivm_assets.delta.parquet_cache` for later lookups.
    """

    def attempt(at: int | None) -> bool:
        _write_at(
            uri, table, at, mode=mode, properties=epoch.commit_properties(metadata), partition_by=partition_by,
            change_feed=change_feed, row_group_rows=row_group_rows,
        )
        if cache_key is not None and at is not None:
            _cache_written(uri, at + 1, table, partition_by or [], cache_key)
        return True

    return _commit_epoch(uri, epoch, after, attempt)


def _cache_written(uri: str, version: int, table: pa.Table, partition_by: list[str], key: str) -> None:
    """Hand the files commit ``version`` added to the parquet cache with the rows they were
    written from: ``table``'s rows of each file's partition, in order (a partition written
    as more than one file is left out, as is anything the cache's checks refuse)."""
    if len(partition_by) > 1 or parquet_cache.budget_bytes() <= 0:
        return
    root = storage.normalize(uri.removeprefix("file://"))
    by_value: dict[str | None, list[tuple[str, int]]] = {}
    for add in commit_actions(uri, version, "add") or []:
        values = add.get("partitionValues") or {}
        file = (f"{root}/{unquote(add['path'])}", int(add["size"]))
        by_value.setdefault(values.get(partition_by[0]) if partition_by else None, []).append(file)
    for value, files in by_value.items():
        if len(files) != 1:
            continue
        rows = table
        if partition_by:
            column = table.column(partition_by[0])
            wanted = pc.is_null(column) if value is None else pc.equal(pc.cast(column, pa.string()), value)
            rows = table.filter(wanted).drop_columns(partition_by)
        parquet_cache.remember(parquet_cache.footer(*files[0]), rows, key)


def rewrite(
    uri: str, table: pa.Table, *, after: int, partition_by: list[str], row_group_rows: int, metadata: dict[str, str] | None = None
) -> bool:
    """Replace the table's content by ``table`` (same logical content, fewer files), right
    after version ``after``, with ``metadata`` in the commit info. Returns False, committing
    nothing, when the table moved."""

    def write(at: int | None, properties: CommitProperties) -> None:
        _write_at(uri, table, at, mode="overwrite", properties=properties, partition_by=partition_by, row_group_rows=row_group_rows)

    return _compaction_commit(uri, after, write, metadata)


def _compaction_commit(
    uri: str, after: int, write: Callable[[int | None, CommitProperties], None], metadata: dict[str, str] | None
) -> bool:
    """Make a compaction's commit with ``write`` right after version ``after``, marked as a
    compaction; False, committing nothing, when the table moved."""
    properties = CommitProperties(custom_metadata={COMPACTION: "true", **(metadata or {})}, max_commit_retries=0)

    def attempt(at: int | None) -> bool:
        write(at, properties)
        return True

    try:
        _attempt(uri, after, attempt)
    except CommitConflictError:
        return False
    return True


def apply_bag_change(uri: str, change: pa.Table, *, columns: list[str], epoch: Epoch, after: int) -> bool:
    """Apply a consolidated z-set to a table that stores a bag (duplicates, no key), right
    after version ``after``. See :func:`_commit_epoch` for what a lost race does.

    ``change`` holds ``columns`` plus ``__ivm_op`` and ``__ivm_copy``: one ``del`` row per
    distinct row value whose multiplicity changes (every stored copy of it is deleted), and
    one ``ins`` row per copy to store afterwards. One MERGE does both, so the table moves
    from its old contents to its new ones in a single commit.
    """
    # Parenthesized: DataFusion binds AND tighter than IS NOT DISTINCT FROM.
    match = " AND ".join(f'(t."{c}" IS NOT DISTINCT FROM s."{c}")' for c in columns)
    insert = {f'"{c}"': f's."{c}"' for c in columns}

    def attempt(at: int | None) -> bool:
        target = _writable(uri, at)
        merger = target.merge(
            change,
            predicate=f"(s.__ivm_op = 'del') AND {match}" if columns else "s.__ivm_op = 'del'",
            source_alias="s",
            target_alias="t",
            commit_properties=epoch.commit_properties(),
        )
        metrics = merger.when_matched_delete().when_not_matched_insert(insert, predicate="s.__ivm_op = 'ins'").execute()
        _keep_moved(uri, target, at)
        # A MERGE that changes nothing makes no commit.
        return bool(metrics.get("num_target_rows_deleted", 0) or metrics.get("num_target_rows_inserted", 0))

    return _commit_epoch(uri, epoch, after, attempt)


def overwrite_epoch(
    uri: str,
    rows: DataFrame,
    *,
    epoch: Epoch,
    after: int | None,
    partition_by: list[str] | None = None,
    sort_by: list[str] | None = None,
    change_feed: bool = False,
    metadata: dict[str, str] | None = None,
    row_group_rows: int | None = None,
    few: bool = False,
) -> int:
    """Replace the table's content by ``rows`` (sorted by ``partition_by`` + ``sort_by``) as
    the epoch's one commit, right after version ``after`` (None: create the table). Returns
    the rows written. See :func:`_commit_epoch` for what a lost race does.

    The table gets files written by Spark's executors (:func:`stage_files`, on any store):
    the driver never holds the rows, which a full refresh at scale would not fit. When the
    caller knows the rows are ``few`` (a Spark write job and its file commit protocol cost
    ~0.2 s, more than bringing a few thousand rows to the driver), the rows come to the
    driver as Arrow and delta-rs writes them (``row_group_rows`` caps their row groups).
    """
    partition_by, sort_by = partition_by or [], sort_by or []
    if few:
        table = _sorted(to_arrow(rows), [*partition_by, *sort_by])
        write_epoch(
            uri, table, epoch=epoch, after=after, mode="overwrite", partition_by=partition_by or None,
            change_feed=change_feed, row_group_rows=row_group_rows, metadata=metadata,
        )
        return table.num_rows
    files = stage_files(uri, rows, partition_by=partition_by, sort_by=sort_by, row_group_rows=row_group_rows)
    commit_staged(uri, files, epoch=epoch, after=after, change_feed=change_feed, metadata=metadata)
    return files.rows


def commit_staged(
    uri: str, files: StagedFiles, *, epoch: Epoch, after: int | None, change_feed: bool = False, metadata: dict[str, str] | None = None
) -> None:
    """Replace the table's content by the ``files`` :func:`stage_files` wrote into its folder,
    as the epoch's one commit right after version ``after`` (None: create the table)."""

    def attempt(at: int | None) -> bool:
        properties = epoch.commit_properties(metadata)
        if at is None:
            create_table_with_add_actions(
                uri, DeltaSchema.from_arrow(files.schema), files.actions, mode="error", partition_by=files.partition_by or None,
                configuration=_own_table(change_feed), commit_properties=properties, storage_options=storage.options_for(uri),
            )
        else:
            _commit_files(uri, at, files, properties)
        return True

    _commit_epoch(uri, epoch, after, attempt)


def read_staged(spark: SparkSession, uri: str, files: StagedFiles) -> DataFrame:
    """The rows of staged ``files`` (not committed yet) as Spark reads them, their partition
    columns included: a full refresh computes what it stores once and reads the stored files
    back instead of keeping a copy on the executors."""
    root = _local_path(uri)
    schema = spark_schema(files.schema)
    if not files.actions:
        return spark.createDataFrame([], schema)
    if root is None:
        base = storage.normalize(uri)
        found = [executor_io.DataFile(f"{base}/{a.path}", a.size, tuple(sorted(a.partition_values.items()))) for a in files.actions]
        return _read_on_executors(spark, uri, found, files.schema, files.partition_by)
    paths = [os.path.join(root, a.path) for a in files.actions]
    # With the schema given Spark neither infers it (a job reading a footer) nor guesses the
    # partition columns' types from the folder names.
    rows = spark.read.schema(schema).option("basePath", root).parquet(*paths)
    return rows.select(*[F.col(f"`{f.name}`") for f in schema.fields])


def rewrite_rows(
    uri: str, rows: DataFrame, *, after: int, partition_by: list[str], sort_by: list[str], row_group_rows: int, metadata: dict[str, str]
) -> bool:
    """:func:`rewrite` of a Spark DataFrame (sorted by ``partition_by`` + ``sort_by``): its
    files are written by the executors, as in :func:`overwrite_epoch`."""
    files = stage_files(uri, rows, partition_by=partition_by, sort_by=sort_by, row_group_rows=row_group_rows)
    return _compaction_commit(uri, after, lambda at, properties: _commit_files(uri, at, files, properties), metadata)


def _commit_files(uri: str, at: int | None, files: StagedFiles, properties: CommitProperties) -> None:
    """Replace the content of the table (as of version ``at``) by ``files`` in one commit."""
    _writable(uri, at).create_write_transaction(
        files.actions, mode="overwrite", schema=files.schema, partition_by=files.partition_by or None, commit_properties=properties
    )


def _sorted(table: pa.Table, columns: list[str]) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in columns]) if columns and table.num_rows > 1 else table


@dataclass(frozen=True)
class StagedFiles:
    """Parquet files written into a table's folder and not committed yet."""

    actions: list[AddAction]
    rows: int
    schema: pa.Schema  # the table's schema: every column nullable, as the Arrow path writes it
    partition_by: list[str]


# Parquet row groups of Spark-written files, in bytes (parquet-java's own default is 128 MiB:
# one group per file, which a key lookup could never skip part of).
SPARK_ROW_GROUP_BYTES = 1 << 20


def stage_files(
    uri: str, rows: DataFrame, *, partition_by: list[str], sort_by: list[str], row_group_rows: int | None = None
) -> StagedFiles:
    """Spark's executors write ``rows`` as parquet files into the table's folder, where
    delta-rs puts its own: ``<table>/<k>=<v>/part-….parquet``. Until the driver commits them
    they are not part of the table: a process killed here leaves unreferenced files, which
    readers never see and a later vacuum removes. Each file's row count goes into the Delta
    statistics (the cost model and :func:`row_count` use them). ``row_group_rows`` caps row
    groups by rows too, as the Arrow path does (narrow state rows fill 1 MiB only after
    ~100,000 rows).

    A local table's files are written by Spark's parquet writer into a staging folder and
    moved into place (one rename each, same file system). On an object store, where a
    rename is a copy and this Spark has no connector, the executors write them in place
    with pyarrow (:func:`~ivm_assets.spark.executor_io.write_files`).
    """
    if partition_by:
        rows = rows.repartition(*[F.col(f"`{c}`") for c in partition_by])
    if partition_by or sort_by:
        rows = rows.sortWithinPartitions(*[F.col(f"`{c}`") for c in [*partition_by, *sort_by]])
    schema = _nullable(spark_to_arrow_schema(rows.schema))
    root = _local_path(uri)
    if root is None:
        return _stage_remote(uri, rows, schema, partition_by=partition_by, row_group_rows=row_group_rows)
    staging = os.path.join(root, f"_ivm_staging_{uuid.uuid4().hex}")
    writer = rows.write.option("parquet.block.size", SPARK_ROW_GROUP_BYTES)
    if row_group_rows:
        writer = writer.option("parquet.block.row.count.limit", row_group_rows)
    (
        writer.option("compression", "snappy")
        .partitionBy(*partition_by)
        .parquet(staging)
    )
    actions: list[AddAction] = []
    total = 0
    now_ms = int(time.time() * 1000)
    for folder, _, names in os.walk(staging):
        for name in sorted(n for n in names if n.endswith(".parquet")):
            relative_dir = os.path.relpath(folder, staging)
            parts = [] if relative_dir == "." else relative_dir.split(os.sep)
            partition = dict(p.split("=", 1) for p in parts)
            target_dir = os.path.join(root, *parts)
            os.makedirs(target_dir, exist_ok=True)
            target = os.path.join(target_dir, name)
            os.rename(os.path.join(folder, name), target)
            count = pq.read_metadata(target).num_rows
            total += count
            actions.append(
                AddAction(
                    path="/".join([*parts, name]), size=os.path.getsize(target), partition_values=partition,
                    modification_time=now_ms, data_change=True, stats=json.dumps({"numRecords": count}),
                )
            )
    shutil.rmtree(staging, ignore_errors=True)
    faults.crossed("files")
    return StagedFiles(actions, total, schema, partition_by)


def _stage_remote(uri: str, rows: DataFrame, schema: pa.Schema, *, partition_by: list[str], row_group_rows: int | None) -> StagedFiles:
    """:func:`stage_files` on an object store: each write task puts its files in place under
    names no other attempt uses, and the job's result says which files, how large, how many
    rows (only one attempt of each task counts: a retried one's file is left unreferenced)."""
    with storage.failures(uri):
        written = executor_io.write_files(
            rows, root=storage.normalize(uri), partitions=partition_by, row_group_rows=row_group_rows, row_group_bytes=SPARK_ROW_GROUP_BYTES
        )
    now_ms = int(time.time() * 1000)
    actions = [
        AddAction(
            path=f.path, size=f.size, partition_values=f.partition, modification_time=now_ms, data_change=True,
            stats=json.dumps({"numRecords": f.rows}),
        )
        for f in sorted(written, key=lambda f: f.path)
    ]
    faults.crossed("files")
    return StagedFiles(actions, sum(f.rows for f in written), schema, partition_by)


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, f.type, True) for f in schema])


def _write_at(
    uri: str,
    table: pa.Table,
    after: int | None,
    *,
    mode: Literal["append", "overwrite"],
    properties: CommitProperties,
    partition_by: list[str] | None = None,
    change_feed: bool = False,
    row_group_rows: int | None = None,
) -> None:
    """One write that lands right after version ``after``; ``after`` None creates the table,
    and fails if someone else created it first."""
    creating = after is None
    target = None if creating else _writable(uri, after)
    write_deltalake(
        uri if creating else target,
        table,
        mode="error" if creating else mode,
        partition_by=partition_by,
        writer_properties=WriterProperties(max_row_group_size=row_group_rows) if row_group_rows else None,
        schema_mode="overwrite" if mode == "overwrite" and not creating else None,
        configuration=_own_table(change_feed) if creating else CDF_ON if change_feed else None,
        commit_properties=properties,
        storage_options=storage.options_for(uri) if creating else None,
    )
    if target is not None:
        _keep_moved(uri, target, after)


def _own_table(change_feed: bool) -> dict[str, str]:
    """The configuration a table ivm creates starts with: a view's output carries the change
    feed (downstream views read it) and keeps Delta's log retention (users time-travel it);
    a table without one is internal (state)."""
    return {**OWN_TABLE, **CDF_ON} if change_feed else INTERNAL_TABLE


def clean_log(uri: str) -> None:
    """Remove the log files of an internal table that no version from its last checkpoint on
    needs (:data:`INTERNAL_TABLE`; a table created with Delta's default retention keeps its
    files 30 days). Call only when no epoch in flight reads an older version."""
    if is_delta_table(uri):
        with storage.failures(uri):
            open_table(uri).cleanup_metadata()


def _keep_moved(uri: str, dt: DeltaTable, after: int | None) -> None:
    """Keep a handle a write or MERGE moved on in place to the version after ``after``
    (``create_write_transaction`` does not move its handle, so those are not kept): in the
    block's cache when one is active (kept for the next refresh when it ends)."""
    if after is None or dt.version() != after + 1:
        return
    block = _handles.get()
    if block is not None:
        block.handles.setdefault((uri, dt.version()), dt)
    else:
        _keep(uri, dt)


def _attempt(uri: str, after: int | None, commit: Callable[[int | None], bool]) -> None:
    """Run ``commit`` (a fenced commit right after ``after``); a lost race becomes a
    CommitConflictError, with delta-rs' error as its cause."""
    try:
        with storage.failures(uri):
            committed = commit(after)
    except CommitFailedError as exc:
        raise _conflict(uri, after) from exc
    except DeltaError as exc:
        if after is None and is_delta_table(uri):  # created by someone else first
            raise _conflict(uri, after) from exc
        raise
    if committed:
        faults.crossed("commit")


def _conflict(uri: str, after: int | None) -> CommitConflictError:
    return CommitConflictError(uri, expected=after, found=latest_version(uri) if is_delta_table(uri) else None)


def _commit_epoch(uri: str, epoch: Epoch, after: int | None, commit: Callable[[int | None], bool]) -> bool:
    """Make an epoch's commit to ``uri`` right after version ``after``; False if it was not needed.

    When another writer committed first: if the table now holds the epoch, another attempt of
    the same epoch (same inputs, so same content) made this commit, and it is skipped; if
    only compactions came in between (same logical content), the commit lands after them;
    anything else is a CommitConflictError and nothing is committed.
    """
    while True:
        try:
            _attempt(uri, after, commit)
            return True
        except CommitConflictError as conflict:
            if holds_epoch(uri, epoch):
                return False
            if after is None or conflict.found is None or not _only_compactions(uri, after, conflict.found):
                raise
            after = conflict.found


def _only_compactions(uri: str, after: int, upto: int) -> bool:
    """Whether every commit in (after, upto] is a compaction."""
    commits = _history_between(uri, after, upto)
    return len(commits) == upto - after and all(c.get(COMPACTION) == "true" for c in commits)


def commit_metadata(uri: str, metadata: dict[str, str], *, after: int | None, schema: pa.Schema) -> int:
    """An empty commit carrying ``metadata`` (read back by :func:`head`), at exactly version
    ``after + 1``; with ``after`` None it creates the table (with ``schema``) at version 0.

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
            dt = _writable(uri, at)
            empty = pa.schema(dt.schema().to_arrow()).empty_table()
            write_deltalake(dt, empty, mode="append", commit_properties=properties)
            _keep_moved(uri, dt, at)
        return True

    _attempt(uri, after, attempt)
    return 0 if after is None else after + 1


def head(uri: str) -> tuple[int, dict] | None:
    """The table's latest version and that commit's info (its custom metadata included);
    None when there is no table."""
    known = _known_latest(uri)
    if known is not None:
        info = _commit_info(uri, known)
        if info is not None:
            return known, info
    if not is_delta_table(uri):
        return None
    dt = open_table(uri)
    info = _commit_info(uri, dt.version())
    return dt.version(), info if info is not None else dt.history(1)[0]


def create_table(uri: str, data: pa.Table | pa.RecordBatchReader, *, partition_by: list[str] | None = None) -> None:
    """A new table with the change data feed on (demo and benchmark sources, tests); a
    reader is written as it streams, for tables larger than memory."""
    with storage.failures(uri):
        write_deltalake(uri, data, mode="error", partition_by=partition_by, configuration=CDF_ON, storage_options=storage.options_for(uri))


def delete_rows(uri: str, predicate: str) -> None:
    """Delete the rows matching a DataFusion SQL ``predicate`` (source edits: demo, benchmark, tests)."""
    _writable(uri).delete(predicate)


def update_rows(uri: str, *, set_sql: dict[str, str], predicate: str) -> None:
    """Set columns to SQL expressions where ``predicate`` holds (source edits: demo, benchmark, tests)."""
    _writable(uri).update(updates=set_sql, predicate=predicate)


def remove_tables_except(root: str, kept: list[str]) -> int:
    """Delete the Delta tables directly under ``root`` whose folder is not in ``kept`` (and
    does not start with ``_``, which is ivm's own bookkeeping); returns how many.

    Used for state tables a new plan no longer names, on any store (on an object store, a
    listing of ``root`` and one of each table removed).
    """
    fs, path = storage.filesystem(root)
    with storage.failures(root):
        children = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    removed = 0
    for child in sorted(children, key=lambda c: c.base_name):
        name = child.base_name
        uri = f"{storage.normalize(root)}/{name}"
        if child.type != pafs.FileType.Directory or name.startswith("_") or name in kept or not is_delta_table(uri):
            continue
        with storage.failures(uri):
            fs.delete_dir(child.path)
        removed += 1
    return removed
