"""Storage settings per location (delta/storage.py), the failures and file systems built from
them (delta/storage_errors.py, delta/filesystems.py), and their place in ivm.yaml (config.py)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from ivm_assets.config import load_config
from ivm_assets.delta import filesystems, storage, storage_errors
from ivm_assets.errors import ConfigError, StorageError

S3 = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value"}


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    monkeypatch.setattr(storage, "_registered", {})
    monkeypatch.setattr(filesystems, "_filesystems", {})


def test_a_table_takes_the_options_of_the_longest_registered_prefix():
    storage.register("s3://lake/", S3, origin="ivm.yaml")
    storage.register("s3://lake/partner", {"AWS_REGION": "us-east-1"}, origin="sources.partner")
    storage.register("/local/folder", S3, origin="ivm.yaml")  # local tables need none
    assert storage.options_for("s3://lake/warehouse/v") == S3
    assert storage.options_for("s3://lake/partner/events") == {"AWS_REGION": "us-east-1"}
    assert storage.options_for("s3://lake/partnerX/t") == S3  # a prefix ends at a `/`
    assert storage.options_for("s3://other/t") is None and storage.options_for("/local/folder/t") is None


def test_secret_values_are_masked_in_any_text():
    storage.register("s3://lake", S3, origin="ivm.yaml")
    assert storage.redact("signed with s3cr3t-value by AKIDTEST in eu-west-1") == "signed with *** by *** in eu-west-1"
    assert [k for k in S3 if storage.is_secret(k)] == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
    assert storage.is_secret("AZURE_STORAGE_SAS_TOKEN") and storage.is_secret("google_service_account_key")


def test_storage_failures_name_the_table_and_the_setting():
    storage.register("s3://lake", S3, origin="`storage_options` in /p/ivm.yaml")
    denied = storage_errors.failure(OSError("Kernel error -> 403 Forbidden <Code>SignatureDoesNotMatch</Code>"), "s3://lake/orders")
    assert str(denied) == (
        "the store refused the credentials for the Delta table s3://lake/orders (SignatureDoesNotMatch). "
        "Check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_REGION) in `storage_options` in /p/ivm.yaml."
    )
    missing = storage_errors.failure(OSError("Generic S3 error <Code>NoSuchBucket</Code>"), "s3://lake/orders")
    assert "bucket 'lake' does not exist" in str(missing) and "AWS_ENDPOINT_URL in `storage_options` in /p/ivm.yaml" in str(missing)
    down = storage_errors.failure(OSError("error sending request for url: Connection refused"), "s3://lake/orders")
    assert "cannot connect to the store" in str(down)
    leaky = storage_errors.failure(ValueError("GET https://x/?sig=s3cr3t-value failed"), "s3://lake/orders")
    assert isinstance(leaky, StorageError) and "s3cr3t-value" not in str(leaky) and "sig=***" in str(leaky)
    assert storage_errors.failure(ValueError("some other problem"), "s3://lake/orders") is None


def test_a_failure_is_raised_without_the_client_error_chained():
    storage.register("s3://lake", S3, origin="ivm.yaml")
    with pytest.raises(StorageError) as info:
        with storage_errors.failures("s3://lake/t"):
            raise OSError("403 Forbidden InvalidAccessKeyId AKIDTEST")
    assert info.value.__cause__ is None and info.value.__suppress_context__ and "AKIDTEST" not in str(info.value)
    with pytest.raises(KeyError):  # anything else passes through as it is
        with storage_errors.failures("s3://lake/t"):
            raise KeyError("x")


def test_pyarrow_file_systems_are_built_from_the_same_options():
    storage.register("s3://lake", S3, origin="ivm.yaml")
    fs, path = filesystems.filesystem("s3://lake/warehouse/v/part-0.parquet")
    assert isinstance(fs, pafs.S3FileSystem) and path == "lake/warehouse/v/part-0.parquet" and fs.region == "eu-west-1"
    assert filesystems.filesystem("s3://lake/other")[0] is fs  # one client per store and options
    assert isinstance(filesystems.filesystem("/tmp/x")[0], pafs.LocalFileSystem)
    storage.register("abfss://data@acct.dfs.core.windows.net", {"AZURE_STORAGE_ACCOUNT_KEY": "a2V5"}, origin="ivm.yaml")
    fs, path = filesystems.filesystem("abfss://data@acct.dfs.core.windows.net/wh/t")
    assert isinstance(fs, pafs.AzureFileSystem) and path == "data/wh/t"
    storage.register("gs://lake", {"GOOGLE_SERVICE_ACCOUNT": "/keys/sa.json"}, origin="ivm.yaml")
    with pytest.raises(StorageError, match="GOOGLE_SERVICE_ACCOUNT in ivm.yaml .* GOOGLE_APPLICATION_CREDENTIALS"):
        filesystems.filesystem("gs://lake/t")


def _config(tmp_path, text: str):
    (tmp_path / "ivm.yaml").write_text(text)
    return load_config(tmp_path / "ivm.yaml")


def test_storage_options_in_ivm_yaml(tmp_path, monkeypatch):
    monkeypatch.setenv("IVM_TEST_REGION", "eu-west-1")
    config = _config(
        tmp_path,
        "warehouse: s3://lake/wh\nsources:\n  orders: s3://lake/orders\n  events:\n    path: s3://partner/events\n"
        "    storage_options: {AWS_REGION: us-east-1}\nstorage_options:\n  AWS_REGION: ${IVM_TEST_REGION}\n  AWS_ALLOW_HTTP: true\n",
    )
    assert config.storage_options == {"AWS_REGION": "${IVM_TEST_REGION}", "AWS_ALLOW_HTTP": "true"}  # kept as written
    assert config.source_path("orders") == "s3://lake/orders" and config.source_path("events") == "s3://partner/events"


def test_an_unset_variable_names_the_key_and_the_line(tmp_path, monkeypatch):
    monkeypatch.delenv("IVM_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError) as info:
        _config(tmp_path, "sources:\n  orders:\n    path: s3://lake/o\n    storage_options:\n      AWS_SECRET_ACCESS_KEY: ${IVM_TEST_UNSET}\n")
    assert str(info.value).startswith(
        f"{tmp_path / 'ivm.yaml'}:5: `sources.orders.storage_options.AWS_SECRET_ACCESS_KEY`: refers to environment "
        "variable ${IVM_TEST_UNSET}, which is not set in this process."
    )


def test_a_source_mapping_with_an_unknown_key(tmp_path):
    with pytest.raises(ConfigError, match=r"ivm.yaml:3: unknown key `sources.orders.pth`; expected one of: path, storage_options"):
        _config(tmp_path, "sources:\n  orders:\n    pth: s3://lake/o\n")
