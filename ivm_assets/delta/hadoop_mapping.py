"""How Spark's executors reach tables on object stores, and for clusters with Hadoop's
connectors, the URIs and Hadoop configuration that give those connectors the access
delta-rs gets from each location's registered options (:mod:`~ivm_assets.delta.storage`).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlparse

from ivm_assets.delta.storage import GCS_SCHEMES, Registration, registration
from ivm_assets.errors import ConfigError, StorageError

ExecutorIO = Literal["python", "hadoop"]
_executor_io: ExecutorIO = "python"


def set_executor_io(mode: ExecutorIO) -> None:
    """How Spark's executors reach tables on object stores, for the whole process:
    ``"python"`` (the default): pyarrow in the executors' Python workers, built from the
    registered options (:mod:`ivm_assets.delta.executor_io`); ``"hadoop"``: Spark's own
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
    if scheme in GCS_SCHEMES:
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
