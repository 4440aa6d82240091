"""Where tables live: storage settings per location, file access beside delta-rs, and
storage failures told in words.

A project hands its ``storage_options`` (``ivm.yaml``, a source's own, or the Dagster
resource's) to :func:`register` for each location it uses: the warehouse root and each
source. Every delta-rs call of :mod:`ivm_assets.delta` then takes the options of
the longest registered prefix of the table's URI (:func:`options_for`).

Why a registry and not options carried on each call: the Delta modules are called from the
operators, the state tables, the engine and the Dagster layer (~25 functions), and the
options are a property of the location, like the delta-rs handles
:mod:`~ivm_assets.delta.handles` keeps per URI between refreshes. The registry is process-wide: two projects in one process that
give one location different settings share the last registration (it replaces the
earlier one and drops the handles opened with it).

Reading parquet footers, row groups and commit files on the driver goes through pyarrow's
own file systems (``S3FileSystem``, ``AzureFileSystem``, ``GcsFileSystem``), built from the
same options. delta-rs' ``DeltaStorageHandler`` would share delta-rs' client and option
names, but as a Python ``FileSystemHandler`` it aborted the interpreter at exit in 4 of 30
runs here ("terminate called without an active exception", exit 134), where pyarrow's
native S3 client did not in 30 of 30.

Secrets (values of keys naming a key, secret, token, password or credential) never leave
this module in text: :func:`redact` masks them in any message, and storage failures are
raised as :class:`~ivm_assets.errors.StorageError` without the client's exception chained.
"""

from __future__ import annotations

import errno
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlparse

import pyarrow.fs as pafs

from ivm_assets.errors import ConfigError, StorageError


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
_filesystems: dict[tuple, pafs.FileSystem] = {}
# Called with a prefix whose options changed: handles opened with the old ones are dropped.
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
    if not options or is_local(prefix):
        return
    prefix = normalize(prefix)
    entry = Registration(prefix, tuple(sorted((str(k), str(v)) for k, v in options.items())), origin)
    with _lock:
        old = _registered.get(prefix)
        _registered[prefix] = entry
        if old is not None and old.options != entry.options:
            _filesystems.clear()
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
def local_path(uri: str) -> str | None:
    """The local path of ``uri`` (a path or ``file://``); None for an object store URI."""
    path = uri.removeprefix("file://")
    return None if "://" in path else path


def is_local(uri: str) -> bool:
    return local_path(uri) is not None


_S3 = ("s3", "s3a")
_AZURE = ("az", "adl", "azure", "abfs", "abfss")
_GCS = ("gs", "gcs")


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system reaching ``uri`` with its registered options, and the path of
    ``uri`` on it."""
    return filesystem_with(uri, registration(uri))


def _build(scheme: str, parsed, entry: Registration, uri: str) -> pafs.FileSystem:
    if scheme in _S3:
        return _s3(entry)
    if scheme in _AZURE:
        return _azure(entry, parsed, uri)
    if scheme in _GCS:
        return _gcs(entry, uri)
    raise StorageError(f"cannot read {uri}: expected a local path or an s3://, az://, abfss:// or gs:// URI, found scheme {scheme!r}")


def _s3(entry: Registration) -> pafs.FileSystem:
    """pyarrow's S3 client with object_store's option names (each key also without its
    ``AWS_`` prefix, as delta-rs accepts them)."""

    def get(*names: str) -> str | None:
        return entry.get(*names, *(n.removeprefix("AWS_") for n in names))

    args: dict = {}
    endpoint = get("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
    if endpoint:
        url = urlparse(endpoint)
        args["endpoint_override"] = url.netloc + url.path.rstrip("/")
        args["scheme"] = url.scheme or "https"
    if region := get("AWS_REGION", "AWS_DEFAULT_REGION"):
        args["region"] = region
    key, secret = get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        args.update(access_key=key, secret_key=secret, session_token=get("AWS_SESSION_TOKEN", "AWS_TOKEN"))
    if (get("AWS_SKIP_SIGNATURE") or "").lower() == "true":
        args["anonymous"] = True
    if (get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST") or "").lower() == "true":
        args["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**args, **_client_limits(entry))


def _client_limits(entry: Registration) -> dict:
    """pyarrow's S3 timeouts and retries from object_store's client options (``timeout``,
    ``connect_timeout``, ``max_retries``), so that a store which stops answering fails the
    driver-side reads when it fails delta-rs', not after the AWS SDK's own defaults."""
    args: dict = {}
    for name, arg in (("timeout", "request_timeout"), ("connect_timeout", "connect_timeout")):
        if (value := entry.get(name)) is not None:
            args[arg] = _seconds(value, name, entry)
    if (retries := entry.get("max_retries")) is not None:
        if not retries.strip().isdigit():
            raise StorageError(f"max_retries in {entry.origin}: expected a whole number of retries, found {retries!r}")
        args["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=int(retries) + 1)
    return args


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|msec|s|sec|secs|seconds?|m|min|mins|minutes?)?\s*$")


def _seconds(text: str, name: str, entry: Registration) -> float:
    """A duration as object_store reads it (``"30s"``, ``"500ms"``, ``"2 minutes"``), in seconds.

    >>> _seconds("500ms", "timeout", Registration("s3://b", ()))
    0.5
    """
    found = _DURATION.match(text)
    if found is None:
        raise StorageError(f"{name} in {entry.origin}: expected a duration such as '30s' or '500ms', found {text!r}")
    unit = (found[2] or "s").lower()
    return float(found[1]) * (0.001 if unit.startswith("ms") else 60 if unit.startswith("m") else 1)


# object_store's defaults for the Azurite emulator (AZURE_STORAGE_USE_EMULATOR): its well-known
# development account, and its Blob endpoint unless AZURITE_BLOB_STORAGE_URL names another.
_EMULATOR_ACCOUNT = "devstoreaccount1"
_EMULATOR_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _azure(entry: Registration, parsed, uri: str) -> pafs.FileSystem:
    """pyarrow's Azure client: account from the options or from an ``abfss://`` host, and
    the endpoint delta-rs uses (``AZURE_STORAGE_ENDPOINT``, or the emulator's)."""

    def get(*names: str) -> str | None:
        return entry.get(*names, *(n.removeprefix("AZURE_STORAGE_") for n in names))

    emulator = (get("AZURE_STORAGE_USE_EMULATOR") or "").lower() == "true"
    account = get("AZURE_STORAGE_ACCOUNT_NAME") or (_EMULATOR_ACCOUNT if emulator else None)
    if account is None and "@" in parsed.netloc:
        account = parsed.netloc.split("@", 1)[1].split(".", 1)[0]
    if account is None:
        raise StorageError(
            f"cannot read {uri}: expected AZURE_STORAGE_ACCOUNT_NAME in {entry.origin} (or an abfss://container@account… URI), found none"
        )
    args: dict = {}
    if key := get("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY") or (_EMULATOR_KEY if emulator else None):
        args["account_key"] = key
    if sas := get("AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_SAS_TOKEN"):
        args["sas_token"] = sas
    for name, arg in (("AZURE_STORAGE_CLIENT_ID", "client_id"), ("AZURE_STORAGE_CLIENT_SECRET", "client_secret"),
                      ("AZURE_STORAGE_TENANT_ID", "tenant_id")):
        if value := get(name, name.replace("STORAGE_", "")):
            args[arg] = value
    endpoint = get("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")
    if emulator:
        endpoint = os.environ.get("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10000")
    if endpoint:
        # delta-rs takes the account's URL (an emulator's ends with /<account>); pyarrow the
        # host, and puts the account in the path itself when the host is an IP address.
        url = urlparse(endpoint)
        args.update(blob_storage_authority=url.netloc, blob_storage_scheme=url.scheme or "https",
                    dfs_storage_authority=url.netloc, dfs_storage_scheme=url.scheme or "https")
    return pafs.AzureFileSystem(account, **args)


def _gcs(entry: Registration, uri: str) -> pafs.FileSystem:
    """pyarrow's GCS client. It takes no service account key: credentials come from its
    default chain (GOOGLE_APPLICATION_CREDENTIALS, or the machine's identity)."""
    given = [k for k, _ in entry.options if k.upper().startswith("GOOGLE_SERVICE_ACCOUNT")]
    if given:
        raise StorageError(
            f"cannot read {uri} on the driver: {given[0]} in {entry.origin} is a delta-rs setting that pyarrow's GCS "
            "client (used for driver-side reads) cannot take; set GOOGLE_APPLICATION_CREDENTIALS to the key file's path "
            "in the environment instead"
        )
    return pafs.GcsFileSystem()


# --- files -----------------------------------------------------------------------------------
def read_bytes(uri: str) -> bytes | None:
    """The content of the file at ``uri``; None when there is none."""
    fs, path = filesystem(uri)
    with failures(uri):
        try:
            with fs.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError:
            return None


def exists(uri: str) -> bool:
    """Whether a file is at ``uri`` (one HEAD request on an object store)."""
    fs, path = filesystem(uri)
    with failures(uri):
        try:
            fs.open_input_stream(path).close()
        except FileNotFoundError:
            return False
    return True


def names_under(uri: str) -> list[str]:
    """The names of the files directly under the folder ``uri`` (one listing; none when
    there is no such folder). A missing bucket or container is a :class:`StorageError`
    (pyarrow lists one as an empty folder)."""
    fs, path = filesystem(uri)
    with failures(uri):
        found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False))
        if not found and local_path(uri) is None:
            container = path.split("/", 1)[0]
            if fs.get_file_info(container).type == pafs.FileType.NotFound:
                raise failure(FileNotFoundError(f"NoSuchBucket: {container}"), uri)
    return [info.base_name for info in found if info.type == pafs.FileType.File]


def identity(uri: str) -> tuple | None:
    """What tells the file at ``uri`` from another one written there later (size and
    modification time; the inode too on a local disk); None when there is none."""
    local = local_path(uri)
    if local is not None:
        import os

        try:
            info = os.stat(local)
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns
    fs, path = filesystem(uri)
    with failures(uri):
        info = fs.get_file_info(path)
    return None if info.type != pafs.FileType.File else (info.size, info.mtime_ns)


def missing_file(uri: str) -> FileNotFoundError:
    """The error for a data file the log names and the store does not have (the engine
    turns it into a rebuild, ``errors.LostDataFile``)."""
    return FileNotFoundError(errno.ENOENT, f"No such file or directory: {uri}", uri)


# --- failures --------------------------------------------------------------------------------
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


_EXECUTOR_IO = re.compile(r"executor I/O of (\S+) failed: ")


def failure(exc: BaseException, uri: str) -> StorageError | None:
    """A :class:`StorageError` naming the table and the setting to check, when ``exc`` (from
    delta-rs or pyarrow, at ``uri``: a table, or a file in one) is a missing bucket, refused
    credentials, an unreachable store or a connection that broke or timed out; a redacted
    copy when its text holds a secret; None otherwise."""
    text = str(exc)
    # A Spark job that failed in an executor's I/O: what it was reading or writing, rather
    # than the table the driver wrapped the job for (spark/executor_io.py words the error).
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
    if scheme in _S3:
        return f"bucket {name!r}"
    if scheme in _AZURE:
        return f"container {name.split('@', 1)[0]!r}"
    if scheme in _GCS:
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
    if scheme in _AZURE:
        return "AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY (or AZURE_STORAGE_SAS_TOKEN)"
    if scheme in _GCS:
        return "GOOGLE_SERVICE_ACCOUNT / GOOGLE_APPLICATION_CREDENTIALS"
    return "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_REGION)"


def _first_marker(text: str, markers: tuple[str, ...]) -> str:
    return next(m for m in markers if m in text)


# --- executors -------------------------------------------------------------------------------
ExecutorIO = Literal["python", "hadoop"]
_executor_io: ExecutorIO = "python"


def filesystem_with(uri: str, entry: Registration | None) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system reaching ``uri`` with ``entry``'s options (None: the store's
    own credential chain), and the path of ``uri`` on it. Spark's executors call it with the
    options their task carries (their Python workers have no registry). Built once per
    process and set of options."""
    local = local_path(uri)
    if local is not None:
        return pafs.LocalFileSystem(), local
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    key = (scheme, parsed.netloc if scheme in _AZURE else "", entry.options if entry else ())
    with _lock:
        fs = _filesystems.get(key)
    if fs is None:
        fs = _build(scheme, parsed, entry or Registration("", (), "the environment"), uri)
        with _lock:
            _filesystems[key] = fs
    if scheme in _AZURE and "@" in parsed.netloc:
        return fs, parsed.netloc.split("@", 1)[0] + parsed.path
    return fs, parsed.netloc + parsed.path


def set_executor_io(mode: ExecutorIO) -> None:
    """How Spark's executors reach tables on object stores, for the whole process:
    ``"python"`` (the default): pyarrow in the executors' Python workers, built from the
    registered options (:mod:`ivm_assets.spark.executor_io`); ``"hadoop"``: Spark's own
    parquet reader through Hadoop's connectors (``s3a://``, ``abfss://``, ``gs://``), for
    clusters that have them, configured with :func:`hadoop_settings`."""
    global _executor_io
    if mode not in ("python", "hadoop"):
        raise ConfigError(f"executor_io: expected 'python' or 'hadoop', found {mode!r}")
    _executor_io = mode


def executor_io() -> ExecutorIO:
    """The mode :func:`set_executor_io` chose."""
    return _executor_io


def hadoop_uri(uri: str, entry: Registration | None = None) -> str:
    """The URI Hadoop's connectors read for a delta-rs URI: ``s3://`` → ``s3a://``,
    ``az://container/path`` → ``abfss://container@<account>.dfs.core.windows.net/path``
    (the account from ``entry``, else the registered options), others unchanged.

    >>> hadoop_uri("s3://lake/orders")
    's3a://lake/orders'
    >>> hadoop_uri("az://c/p", Registration("az://c", (("AZURE_STORAGE_ACCOUNT_NAME", "acct"),)))
    'abfss://c@acct.dfs.core.windows.net/p'
    """
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme == "s3":
        return "s3a://" + uri.split("://", 1)[1]
    if scheme in ("az", "azure", "abfs", "abfss") and "@" not in parsed.netloc:
        entry = entry if entry is not None else registration(uri)
        account = entry.get("AZURE_STORAGE_ACCOUNT_NAME", "ACCOUNT_NAME") if entry is not None else None
        if account is None:
            raise StorageError(f"cannot map {uri} to abfss://: expected AZURE_STORAGE_ACCOUNT_NAME in its storage_options, found none")
        return f"abfss://{parsed.netloc}@{account}.dfs.core.windows.net{parsed.path}"
    return uri


def hadoop_settings(uri: str, entry: Registration | None = None) -> dict[str, str]:
    """The Hadoop configuration (keys without ``spark.hadoop.``) that gives Hadoop's
    connector the access delta-rs gets from the options of ``uri`` (``entry``, else the
    registered ones). S3 settings are per bucket (``fs.s3a.bucket.<bucket>.…``) and Azure
    ones per account, so sources with credentials of their own keep them in one session.

    >>> entry = Registration("s3://lake", (("AWS_ACCESS_KEY_ID", "AK"), ("AWS_REGION", "eu-west-1")))
    >>> hadoop_settings("s3://lake/orders", entry)
    {'fs.s3a.bucket.lake.access.key': 'AK', 'fs.s3a.bucket.lake.endpoint.region': 'eu-west-1'}
    """
    entry = entry if entry is not None else registration(uri)
    if entry is None:
        return {}
    parsed = urlparse(hadoop_uri(uri, entry))
    scheme = parsed.scheme.lower()
    if scheme == "s3a":
        return _s3a_settings(entry, parsed.netloc)
    if scheme in ("abfs", "abfss"):
        return _abfs_settings(entry, parsed.netloc.split("@", 1)[1])
    if scheme in _GCS:
        return _gcs_settings(entry)
    return {}


def _s3a_settings(entry: Registration, bucket: str) -> dict[str, str]:
    def get(*names: str) -> str | None:
        return entry.get(*names, *(n.removeprefix("AWS_") for n in names))

    found: dict[str, str] = {}
    if key := get("AWS_ACCESS_KEY_ID"):
        found["access.key"] = key
    if secret := get("AWS_SECRET_ACCESS_KEY"):
        found["secret.key"] = secret
    if token := get("AWS_SESSION_TOKEN", "AWS_TOKEN"):
        found["session.token"] = token
        found["aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    if endpoint := get("AWS_ENDPOINT_URL", "AWS_ENDPOINT"):
        found["endpoint"] = endpoint
        # An S3-compatible endpoint serves buckets as paths unless told otherwise (delta-rs'
        # default too: virtual-hosted requests only with AWS_VIRTUAL_HOSTED_STYLE_REQUEST).
        found["path.style.access"] = "false" if (get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST") or "").lower() == "true" else "true"
        found["connection.ssl.enabled"] = "false" if endpoint.lower().startswith("http://") else "true"
    if region := get("AWS_REGION", "AWS_DEFAULT_REGION"):
        found["endpoint.region"] = region
    if (get("AWS_SKIP_SIGNATURE") or "").lower() == "true":
        found["aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
    return {f"fs.s3a.bucket.{bucket}.{k}": v for k, v in found.items()}


def _abfs_settings(entry: Registration, host: str) -> dict[str, str]:
    def get(*names: str) -> str | None:
        return entry.get(*names, *(n.removeprefix("AZURE_STORAGE_") for n in names))

    found: dict[str, str] = {}
    if key := get("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY"):
        found["fs.azure.account.key"] = key
    elif sas := get("AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_SAS_TOKEN"):
        found["fs.azure.account.auth.type"] = "SAS"
        found["fs.azure.sas.fixed.token"] = sas
    elif (client := get("AZURE_STORAGE_CLIENT_ID", "AZURE_CLIENT_ID")) and (tenant := get("AZURE_STORAGE_TENANT_ID", "AZURE_TENANT_ID")):
        found["fs.azure.account.auth.type"] = "OAuth"
        found["fs.azure.account.oauth.provider.type"] = "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"
        found["fs.azure.account.oauth2.client.id"] = client
        found["fs.azure.account.oauth2.client.secret"] = get("AZURE_STORAGE_CLIENT_SECRET", "AZURE_CLIENT_SECRET") or ""
        found["fs.azure.account.oauth2.client.endpoint"] = f"https://login.microsoftonline.com/{tenant}/oauth2/token"
    return {f"{k}.{host}": v for k, v in found.items()}


def _gcs_settings(entry: Registration) -> dict[str, str]:
    path = entry.get("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH", "GOOGLE_APPLICATION_CREDENTIALS", "SERVICE_ACCOUNT")
    if path is None:
        return {}  # the connector's own default chain (the machine's identity)
    return {"fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE", "fs.gs.auth.service.account.json.keyfile": path}
