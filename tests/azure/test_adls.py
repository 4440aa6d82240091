"""A project whose sources and warehouse live on Azure Blob Storage (``az://``), against
Azurite (see conftest.py): the round trip of the S3 tests, and the conditional create the
exactly-once guarantees rest on."""

from __future__ import annotations

import threading
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import write_deltalake

from ivm_assets.delta import filesystems, storage
from ivm_assets.delta.write import delete_rows, write
from ivm_assets.errors import CommitConflictError, StorageError
from ivm_assets.state.progress import Progress
from tests.conftest import assert_oracle
from tests.s3.test_object_storage import ORDERS, SALES

pytestmark = pytest.mark.azure


class AzureProject:
    """A project folder on the local disk whose sources and warehouse are in one container."""

    def __init__(self, root: Path, azurite, spark) -> None:
        self.root, self.azurite, self.spark = root, azurite, spark
        self.base = f"az://{azurite.new_container()}"
        self.sources: dict[str, str] = {}
        (root / "views").mkdir(parents=True, exist_ok=True)
        storage.register(self.base, azurite.options(), origin="the test's AzureProject")

    def source(self, name: str, table: pa.Table) -> str:
        uri = f"{self.base}/sources/{name}"
        write_deltalake(uri, table, configuration={"delta.enableChangeDataFeed": "true"}, storage_options=self.azurite.options())
        self.sources[name] = uri
        return uri

    def load(self, options: dict[str, str] | None = None):
        from ivm_assets import IvmProject

        data = {
            "warehouse": f"{self.base}/warehouse", "sources": self.sources, "state_buckets": 4,
            "storage_options": options or self.azurite.options(),
        }
        (self.root / "ivm.yaml").write_text(yaml.safe_dump(data))
        return IvmProject.load(self.root, spark=self.spark)


@pytest.fixture
def az_project(tmp_path, azurite, spark) -> AzureProject:
    return AzureProject(tmp_path / "project", azurite, spark)


def _shop(p: AzureProject) -> None:
    p.source("orders", pa.Table.from_pylist([{"id": i, "cust": i % 3, "amount": Decimal(i)} for i in range(1, 7)], schema=ORDERS))
    p.source("customers", pa.table({"cust": pa.array([0, 1, 2], pa.int64()), "region": ["eu", "us", "eu"]}))
    (p.root / "views" / "sales.sql").write_text(SALES)


def _change(p: AzureProject, step: int) -> None:
    uri = p.sources["orders"]
    write(uri, pa.Table.from_pylist([{"id": 100 + step, "cust": step % 3, "amount": Decimal(5 + step)}], schema=ORDERS), mode="append")
    delete_rows(uri, f"id = {step}")


def test_first_build_then_incremental_epochs_in_process_and_in_spark_on_az(az_project, monkeypatch):
    _shop(az_project)
    project = az_project.load()
    [first] = project.refresh()
    assert first.mode == "full" and first.reason == "first build"
    assert_oracle(project)
    _change(az_project, 1)
    [result] = project.refresh()
    assert (result.mode, result.engine) == ("incremental", "in process"), result.summary()
    assert result.stats["state_reads_on_driver"] > 0  # pyarrow's Azure client read the touched state
    assert_oracle(project)
    monkeypatch.setenv("IVM_SMALL_EPOCHS", "spark")
    _change(az_project, 2)
    [result] = project.refresh()
    assert result.mode == "incremental" and result.engine.startswith("spark"), result.summary()
    assert_oracle(project)
    [again] = project.refresh()
    assert again.mode == "unchanged"


def test_driver_side_reads_reach_azurite_through_pyarrow(az_project):
    uri = az_project.source("events", pa.table({"id": pa.array([1, 2], pa.int64())}))
    fs, path = filesystems.filesystem(uri)
    assert type(fs).__name__ == "AzureFileSystem" and path == f"{uri.removeprefix('az://')}"
    first = filesystems.read_bytes(f"{uri}/_delta_log/{0:020d}.json")
    assert first is not None and b'"commitInfo"' in first
    assert filesystems.read_bytes(f"{uri}/_delta_log/{1:020d}.json") is None


def test_writers_racing_for_one_version_of_a_progress_log_one_wins_on_az(az_project):
    """Azurite honours the conditional create (``If-None-Match: *``) delta-rs commits with:
    of six threads committing the same version, one wins each round."""
    progress = Progress(f"{az_project.base}/warehouse/_ivm/v/_progress")
    state = progress.read()
    for _ in range(3):
        outcomes: list[object] = []
        start = threading.Barrier(6)

        def commit(state=state) -> None:
            start.wait()
            try:
                outcomes.append(progress.commit(state, started=None, committed=None))
            except CommitConflictError as lost:
                outcomes.append(lost)

        threads = [threading.Thread(target=commit) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        won = [o for o in outcomes if not isinstance(o, CommitConflictError)]
        assert len(won) == 1 and len(outcomes) == 6, outcomes
        state = won[0]
        assert progress.read().version == state.version


def test_a_wrong_account_key_names_the_table_and_the_setting(az_project):
    _shop(az_project)
    wrong = {**az_project.azurite.options(), "AZURE_STORAGE_ACCOUNT_KEY": "d3Jvbmcta2V5LWZvci10aGlzLXRlc3Q="}
    project = az_project.load(wrong)
    with pytest.raises(StorageError) as info:
        project.refresh()
    text = str(info.value)
    assert "refused the credentials" in text and "az://" in text and "AZURE_STORAGE_ACCOUNT_KEY" in text, text
    assert "d3Jvbmcta2V5" not in text and "Kernel error" not in text, text


def test_the_emulator_setting_reaches_the_same_azurite_from_delta_rs_and_pyarrow(azurite, tmp_path, monkeypatch):
    """AZURE_STORAGE_USE_EMULATOR alone: delta-rs takes the endpoint from AZURITE_BLOB_STORAGE_URL
    (default http://127.0.0.1:10000) and the development account; the driver-side reads too."""
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", azurite.endpoint.rsplit("/", 1)[0])
    uri = f"az://{azurite.new_container()}/events"
    options = {"AZURE_STORAGE_USE_EMULATOR": "true"}
    write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}), storage_options=options)
    storage.register(uri, options, origin="the test")
    first = filesystems.read_bytes(f"{uri}/_delta_log/{0:020d}.json")
    assert first is not None and b'"commitInfo"' in first


def test_a_missing_container_names_the_container(az_project):
    az_project.sources = {"orders": "az://ivm-no-such-container/orders"}
    (az_project.root / "views" / "v.sql").write_text("SELECT id FROM orders")
    project = az_project.load()
    with pytest.raises(StorageError) as info:
        project.refresh()
    text = str(info.value)
    assert "container 'ivm-no-such-container' does not exist" in text and "AZURE_STORAGE_ENDPOINT" in text, text
