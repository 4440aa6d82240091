"""delta-rs locations and storage options as Hadoop's object store connectors take them
(hadoop-aws, hadoop-azure, the GCS connector). No connector is installed here: these check
the mapping, not a read through it."""

from __future__ import annotations

import pytest

from ivm_assets.delta import hadoop_mapping, storage
from ivm_assets.delta.hadoop_mapping import hadoop_settings, hadoop_uri
from ivm_assets.delta.storage import Registration
from ivm_assets.errors import ConfigError, StorageError


def _entry(prefix: str, **options: str) -> Registration:
    return Registration(prefix, tuple(sorted(options.items())), "the test")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://lake/orders", "s3a://lake/orders"),
        ("s3a://lake/orders", "s3a://lake/orders"),
        ("gs://lake/orders", "gs://lake/orders"),
        ("abfss://c@acct.dfs.core.windows.net/p/q", "abfss://c@acct.dfs.core.windows.net/p/q"),
        ("/tmp/local/table", "/tmp/local/table"),
    ],
)
def test_uris(uri, expected):
    assert hadoop_uri(uri, _entry("x")) == expected


def test_an_azure_uri_takes_its_account_from_the_options():
    entry = _entry("az://c", AZURE_STORAGE_ACCOUNT_NAME="acct")
    assert hadoop_uri("az://c/wh/t", entry) == "abfss://c@acct.dfs.core.windows.net/wh/t"
    assert hadoop_uri("az://c/wh/t", _entry("az://c", ACCOUNT_NAME="acct")) == "abfss://c@acct.dfs.core.windows.net/wh/t"
    with pytest.raises(StorageError, match="AZURE_STORAGE_ACCOUNT_NAME"):
        hadoop_uri("az://c/wh/t", _entry("az://c"))


def test_s3_settings_per_bucket():
    entry = _entry(
        "s3://lake", AWS_ACCESS_KEY_ID="AK", AWS_SECRET_ACCESS_KEY="SK", AWS_ENDPOINT_URL="http://127.0.0.1:9000",
        AWS_REGION="eu-west-1", AWS_ALLOW_HTTP="true",
    )
    assert hadoop_settings("s3://lake/orders", entry) == {
        "fs.s3a.bucket.lake.access.key": "AK",
        "fs.s3a.bucket.lake.secret.key": "SK",
        "fs.s3a.bucket.lake.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.bucket.lake.path.style.access": "true",
        "fs.s3a.bucket.lake.connection.ssl.enabled": "false",
        "fs.s3a.bucket.lake.endpoint.region": "eu-west-1",
    }


def test_s3_session_tokens_virtual_hosts_and_anonymous_reads():
    temporary = _entry("s3://b", access_key_id="AK", secret_access_key="SK", session_token="T")  # delta-rs' short names
    found = hadoop_settings("s3://b/t", temporary)
    assert found["fs.s3a.bucket.b.session.token"] == "T" and found["fs.s3a.bucket.b.access.key"] == "AK"
    assert found["fs.s3a.bucket.b.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    hosted = hadoop_settings("s3://b/t", _entry("s3://b", AWS_ENDPOINT_URL="https://s3.example", AWS_VIRTUAL_HOSTED_STYLE_REQUEST="true"))
    assert hosted["fs.s3a.bucket.b.path.style.access"] == "false" and hosted["fs.s3a.bucket.b.connection.ssl.enabled"] == "true"
    anonymous = hadoop_settings("s3://b/t", _entry("s3://b", AWS_SKIP_SIGNATURE="true"))
    assert anonymous == {"fs.s3a.bucket.b.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"}


def test_azure_settings_per_account():
    host = "acct.dfs.core.windows.net"
    key = hadoop_settings("az://c/t", _entry("az://c", AZURE_STORAGE_ACCOUNT_NAME="acct", AZURE_STORAGE_ACCOUNT_KEY="K"))
    assert key == {f"fs.azure.account.key.{host}": "K"}
    sas = hadoop_settings(f"abfss://c@{host}/t", _entry("abfss://c@acct.dfs.core.windows.net", AZURE_STORAGE_SAS_TOKEN="sv=1&sig=x"))
    assert sas == {f"fs.azure.account.auth.type.{host}": "SAS", f"fs.azure.sas.fixed.token.{host}": "sv=1&sig=x"}
    oauth = hadoop_settings(
        "az://c/t",
        _entry("az://c", AZURE_STORAGE_ACCOUNT_NAME="acct", AZURE_STORAGE_CLIENT_ID="id", AZURE_STORAGE_CLIENT_SECRET="s",
               AZURE_STORAGE_TENANT_ID="tenant"),
    )
    assert oauth == {
        f"fs.azure.account.auth.type.{host}": "OAuth",
        f"fs.azure.account.oauth.provider.type.{host}": "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider",
        f"fs.azure.account.oauth2.client.id.{host}": "id",
        f"fs.azure.account.oauth2.client.secret.{host}": "s",
        f"fs.azure.account.oauth2.client.endpoint.{host}": "https://login.microsoftonline.com/tenant/oauth2/token",
    }


def test_gcs_settings():
    assert hadoop_settings("gs://b/t", _entry("gs://b", GOOGLE_SERVICE_ACCOUNT="/keys/sa.json")) == {
        "fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE", "fs.gs.auth.service.account.json.keyfile": "/keys/sa.json",
    }
    assert hadoop_settings("gs://b/t", _entry("gs://b")) == {}


def test_settings_come_from_the_registry_by_default():
    storage.register("s3://mapping-test-bucket/wh", {"AWS_REGION": "us-west-2"}, origin="the test")
    assert hadoop_settings("s3://mapping-test-bucket/wh/t") == {"fs.s3a.bucket.mapping-test-bucket.endpoint.region": "us-west-2"}
    assert hadoop_settings("s3://no-options-bucket/t") == {}


def test_the_executor_io_setting():
    assert hadoop_mapping.executor_io() == "python"
    try:
        hadoop_mapping.set_executor_io("hadoop")
        assert hadoop_mapping.executor_io() == "hadoop"
        with pytest.raises(ConfigError, match="'python' or 'hadoop'"):
            hadoop_mapping.set_executor_io("jvm")  # type: ignore[arg-type]
    finally:
        hadoop_mapping.set_executor_io("python")
