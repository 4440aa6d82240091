"""Reading the Delta log: commit files, their operations and metrics, app transactions.

Commit files are read directly (no log replay; on an object store one HEAD and one GET
each, once per process): a commit file never changes.
"""

from __future__ import annotations

import json

from ivm_assets import uris
from ivm_assets.delta import filesystems
from ivm_assets.delta.handles import commit_file, commit_file_identity, is_delta_table, known_latest, open_fresh, open_table
from ivm_assets.recent import Recent


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


def head(uri: str) -> tuple[int, dict] | None:
    """The table's latest version and that commit's info (its custom metadata included);
    None when there is no table."""
    known = known_latest(uri)
    if known is not None:
        info = _commit_info(uri, known)
        if info is not None:
            return known, info
    if not is_delta_table(uri):
        return None
    dt = open_table(uri)
    info = _commit_info(uri, dt.version())
    return dt.version(), info if info is not None else dt.history(1)[0]


def history_between(uri: str, after: int, upto: int) -> list[dict]:
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
    dt = open_fresh(uri, None)
    return [e for e in dt.history(max(dt.version() - after, 1)) if after < e.get("version", -1) <= upto]


# Parsed commit files of object stores by (uri, version, identity of the file): a commit
# file never changes, and reading one costs two requests (HEAD, GET).
_commits: Recent[tuple[str, int, tuple], list[str]] = Recent(1024)


def commit_actions(uri: str, version: int, kind: str) -> list[dict] | None:
    """The ``kind`` actions (``commitInfo``, ``add``, …) of one commit file, in order; None
    when the file is gone (log cleanup)."""
    if uris.is_local(uri):
        try:
            with open(commit_file(uri, version), encoding="utf-8") as f:
                lines = [line for line in f if f'"{kind}"' in line]
        except FileNotFoundError:
            return None
        return _actions_of(lines, kind)
    identity = commit_file_identity(uri, version)
    if identity is None:
        return None
    key = (uri, version, identity)
    lines = _commits.get(key)
    if lines is None:
        data = filesystems.read_bytes(commit_file(uri, version))
        if data is None:
            return None
        lines = data.decode("utf-8").splitlines()
        _commits.put(key, lines)
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
    for entry in history_between(uri, after, upto):
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
    for entry in history_between(uri, after, upto):
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
