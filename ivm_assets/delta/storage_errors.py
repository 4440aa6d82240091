"""Storage failures told in words: a storage client's exception (delta-rs or pyarrow) turned
into a :class:`~ivm_assets.errors.StorageError` that names the table and the setting to check,
with the registered secrets masked (:func:`~ivm_assets.delta.storage.redact`) and the client's
own exception not chained (its text might hold a URL with a SAS token).
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

from ivm_assets.delta.storage import AZURE_SCHEMES, GCS_SCHEMES, S3_SCHEMES, Registration, redact, registration
from ivm_assets.errors import StorageError


def missing_file(uri: str) -> FileNotFoundError:
    """The error for a data file the log names and the store does not have (the engine
    turns it into a rebuild, ``errors.LostDataFile``)."""
    return FileNotFoundError(errno.ENOENT, f"No such file or directory: {uri}", uri)


_NO_BUCKET = ("NoSuchBucket", "NO_SUCH_BUCKET", "ContainerNotFound", "bucket does not exist", "NoSuchContainer")
# delta-rs (object_store) quotes the store's error codes; pyarrow's S3 client spells them its own way.
_REFUSED_CREDENTIALS = (
    "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "AuthenticationFailed", "AuthorizationFailure",
    "InvalidClientTokenId", "ExpiredToken", "403 Forbidden",
    "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH", "ACCESS_DENIED", "EXPIRED_TOKEN",
)
# No connection at all: nothing listens at the endpoint, or its name does not resolve.
_UNREACHABLE = ("Connection refused", "dns error", "Couldn't connect", "tcp connect error", "curlCode: 6,", "curlCode: 7,")
# A connection that broke or went silent mid-request, after the client's own retries: object_store
# (reqwest) words, then the AWS SDK's (pyarrow) and curl's.
_INTERRUPTED = (
    "timed out", "error sending request", "body error", "connection closed", "Connection reset", "reset by peer",
    "Broken pipe", "NETWORK_CONNECTION", "REQUEST_TIMEOUT", "Timeout was reached", "Failure when receiving data",
    "Failure when sending data", "IncompleteBody", "unexpected end of file",
)


_EXECUTOR_IO = re.compile(r"executor I/O of (\S+) failed: [^\n]*")


def executor_failure(exc: BaseException) -> StorageError | None:
    """The :class:`StorageError` of a Spark job that failed in an executor's I/O (see
    :func:`failure`), whichever driver call ran the job (a write, or a collect of rows the
    executors read); None when ``exc`` is something else."""
    found = _EXECUTOR_IO.search(str(exc))
    if found is None:
        return None
    return failure(exc, found[1]) or StorageError(redact(found[0]))


def failure(exc: BaseException, uri: str) -> StorageError | None:
    """A :class:`StorageError` naming the table and the setting to check, when ``exc`` (from
    delta-rs or pyarrow, at ``uri``: a table, or a file in one) is a missing bucket, refused
    credentials, an unreachable store or a connection that broke or timed out; a redacted
    copy when its text holds a secret; None otherwise."""
    text = str(exc)
    # A Spark job that failed in an executor's I/O: what it was reading or writing, rather
    # than the table the driver wrapped the job for (delta/executor_io.py words the error).
    if found := _EXECUTOR_IO.search(text):
        uri = found[1]
    entry = registration(uri)
    origin = entry.origin if entry is not None else "the environment (no storage_options registered for it)"
    store = _store_of(uri)
    table = _table_named(uri)
    if any(m in text for m in _NO_BUCKET):
        return StorageError(
            f"cannot reach {table}: its {store} does not exist. Check the path in ivm.yaml, or create the "
            f"{store}; the endpoint comes from {_endpoint_hint(entry)} in {origin}."
        )
    if any(m in text for m in _REFUSED_CREDENTIALS):
        keys = _credential_keys(uri)
        return StorageError(
            f"the store refused the credentials for {table} ({_first_marker(text, _REFUSED_CREDENTIALS)}). "
            f"Check {keys} in {origin}."
        )
    if any(m in text for m in _UNREACHABLE):
        return StorageError(
            f"cannot connect to the store of {table}. Check {_endpoint_hint(entry)} in {origin}, and that "
            "the store is up."
        )
    if any(m in text for m in _INTERRUPTED):
        return StorageError(
            f"the connection to the store broke or timed out while reaching {table} "
            f"({_first_marker(text, _INTERRUPTED)}, after the storage client's retries). Check the network to the "
            f"store ({_endpoint_hint(entry)} in {origin}); on a slow or unreliable link raise `timeout` or "
            "`max_retries` there. Run the refresh again: an interrupted epoch is finished, never applied twice."
        )
    if redact(text) != text:
        return StorageError(f"storage error at {uri}: {redact(text)}")
    return None


def _table_named(uri: str) -> str:
    """How an error names the table at ``uri`` (or the table a log file ``uri`` belongs to)."""
    table, in_log, _ = uri.partition("/_delta_log/")
    return f"the Delta table {table}" if in_log or not uri.endswith(".parquet") else f"the file {uri} of a Delta table"


@contextmanager
def failures(uri: str) -> Iterator[None]:
    """Raise :func:`failure`'s error instead of a storage client's own when it has one, with
    the client's exception not chained (its text might hold a URL with a SAS token)."""
    found: StorageError | None = None
    try:
        yield
    except Exception as exc:  # delta-rs raises DeltaError or OSError, pyarrow OSError
        if isinstance(exc, (StorageError, FileNotFoundError)):
            raise
        found = failure(exc, uri)
        if found is None:
            raise
    if found is not None:
        raise found from None


def _store_of(uri: str) -> str:
    scheme = urlparse(uri).scheme.lower()
    name = urlparse(uri).netloc
    if scheme in S3_SCHEMES:
        return f"bucket {name!r}"
    if scheme in AZURE_SCHEMES:
        return f"container {name.split('@', 1)[0]!r}"
    if scheme in GCS_SCHEMES:
        return f"bucket {name!r}"
    return "location"


def _endpoint_hint(entry: Registration | None) -> str:
    if entry is not None:
        for key, _ in entry.options:
            if "ENDPOINT" in key.upper() or "USE_EMULATOR" in key.upper():
                return key
    return "the endpoint setting (AWS_ENDPOINT_URL)"


def _credential_keys(uri: str) -> str:
    scheme = urlparse(uri).scheme.lower()
    if scheme in AZURE_SCHEMES:
        return "AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY (or AZURE_STORAGE_SAS_TOKEN)"
    if scheme in GCS_SCHEMES:
        return "GOOGLE_SERVICE_ACCOUNT / GOOGLE_APPLICATION_CREDENTIALS"
    return "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_REGION)"


def _first_marker(text: str, markers: tuple[str, ...]) -> str:
    return next(m for m in markers if m in text)
