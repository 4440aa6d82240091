"""Where tables live: storage settings per location, and what a URI points at.

A project hands its ``storage_options`` (``ivm.yaml``, a source's own, or the Dagster
resource's) to :func:`register` for each location it uses: the warehouse root and each
source. Every delta-rs call of :mod:`ivm_assets.delta` then takes the options of
the longest registered prefix of the table's URI (:func:`options_for`).

Why a registry and not options carried on each call: the Delta modules are called from the
operators, the state tables, the engine and the Dagster layer (~25 functions), and the
options are a property of the location, like the delta-rs handles
:mod:`~ivm_assets.delta.handles` keeps per URI between refreshes. The registry is process-wide: two projects in one process that
give one location different settings share the last registration (it replaces the
earlier one and drops the handles and file systems opened with it).

Secrets (values of keys naming a key, secret, token, password or credential) never leave
the storage modules in text: :func:`redact` masks them in any message, and storage failures
are raised as :class:`~ivm_assets.errors.StorageError` without the client's exception chained
(:mod:`~ivm_assets.delta.storage_errors`). The driver's file access built from the options is
:mod:`~ivm_assets.delta.filesystems`; how Spark's executors reach the stores,
:mod:`~ivm_assets.delta.hadoop_mapping`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ivm_assets import uris


@dataclass(frozen=True)
class Registration:
    """The options for the tables under ``prefix``, and where they were set (named in errors)."""

    prefix: str
    options: tuple[tuple[str, str], ...] = field(repr=False)  # secrets among them: never in a repr
    origin: str = ""

    def get(self, *names: str) -> str | None:
        """The value of the first of ``names`` set (compared case-insensitively, as delta-rs does)."""
        wanted = [n.lower() for n in names]
        found = {k.lower(): v for k, v in self.options}
        return next((found[n] for n in wanted if n in found), None)


_lock = threading.Lock()
_registered: dict[str, Registration] = {}
# Called with a prefix whose options changed: handles and file systems opened with the old ones
# are dropped.
_on_change: list[Callable[[str], None]] = []


def on_change(callback: Callable[[str], None]) -> None:
    """Call ``callback(prefix)`` when the options registered for ``prefix`` change."""
    _on_change.append(callback)


_SECRET_KEY = re.compile(r"SECRET|TOKEN|PASSWORD|CREDENTIAL|_KEY|^KEY|SAS", re.IGNORECASE)


def is_secret(key: str) -> bool:
    """Whether an option's value is a secret (never shown): keys naming a key, secret,
    token, password, SAS or credential (``AWS_SECRET_ACCESS_KEY``, ``AWS_ACCESS_KEY_ID``,
    ``AZURE_STORAGE_ACCOUNT_KEY``, ``GOOGLE_SERVICE_ACCOUNT_KEY``, …)."""
    return bool(_SECRET_KEY.search(key)) or key.lower().endswith("key_id")


def normalize(location: str) -> str:
    """A location without a trailing ``/`` (``s3://b/wh/`` and ``s3://b/wh`` are one place)."""
    stripped = location.rstrip("/")
    return stripped if stripped and not stripped.endswith(":/") else location


def register(prefix: str, options: Mapping[str, str], *, origin: str) -> None:
    """Use ``options`` for every table under ``prefix`` (an object store URI); ``origin`` says
    where they were set ("storage_options in /p/ivm.yaml"). Empty options, and local
    folders (whose tables need none), register nothing."""
    if not options or uris.is_local(prefix):
        return
    prefix = normalize(prefix)
    entry = Registration(prefix, tuple(sorted((str(k), str(v)) for k, v in options.items())), origin)
    with _lock:
        old = _registered.get(prefix)
        _registered[prefix] = entry
    if old is not None and old.options != entry.options:
        for forget in _on_change:
            forget(prefix)


def registration(uri: str) -> Registration | None:
    """The registration of the longest prefix of ``uri`` (None: delta-rs' defaults)."""
    uri = normalize(uri)
    with _lock:
        best = None
        for prefix, entry in _registered.items():
            if (uri == prefix or uri.startswith(prefix + "/")) and (best is None or len(prefix) > len(best.prefix)):
                best = entry
    return best


def options_for(uri: str) -> dict[str, str] | None:
    """The storage options delta-rs gets for the table at ``uri`` (None: none registered)."""
    entry = registration(uri)
    return dict(entry.options) if entry is not None else None


def redact(text: str) -> str:
    """``text`` with every registered secret value replaced by ``***``."""
    with _lock:
        secrets = {v for entry in _registered.values() for k, v in entry.options if is_secret(k) and len(v) >= 4}
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


# --- where a URI points ----------------------------------------------------------------------
S3_SCHEMES = ("s3", "s3a")
AZURE_SCHEMES = ("az", "adl", "azure", "abfs", "abfss")
GCS_SCHEMES = ("gs", "gcs")
