"""A source's large change is read by Spark's executors from the files the Delta log names,
never held on the driver, and its epoch equals the recompute (the threshold is lowered here,
so that a few hundred rows count as large)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from tests.conftest import assert_oracle

from ivm_assets.delta import change_files, change_reads
from ivm_assets.delta.handles import latest_version
from ivm_assets.delta.log import change_rows_between
from ivm_assets.delta.read import read_changes
from ivm_assets.delta.write import create_table, delete_rows, update_rows, write
from ivm_assets.engine import changes as cdc
from ivm_assets.errors import RefreshError

TOTALS = """SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n
FROM orders o JOIN customers c ON o.cust = c.cust
GROUP BY c.region"""


def _orders(ids: range, *, amount: int = 1) -> pa.Table:
    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "cust": pa.array([i % 40 for i in ids], pa.int64()),
        "amount": pa.array([amount * (i % 13) for i in ids], pa.int64()),
        "day": pa.array([f"d{i % 4}" for i in ids], pa.string()),
    })


def _shop(builder, monkeypatch, **settings):
    builder.source("customers", {"cust": pa.array(range(40), pa.int64()), "region": [f"r{c % 5}" for c in range(40)]})
    orders = builder.uri("orders")
    create_table(orders, _orders(range(2000)), partition_by=["day"])
    builder.sources["orders"] = "sources/orders"
    builder.view("totals", TOTALS, **settings)
    project = builder.load()
    assert {r.mode for r in project.refresh()} == {"full"}
    monkeypatch.setattr(cdc, "EXECUTOR_CHANGE_ROWS", 100)
    monkeypatch.setattr(change_reads, "read_changes", _only_small(read_changes))
    return project, orders


def _only_small(read):
    """delta-rs' change read, refusing a range over the (lowered) threshold: such a range
    must reach Spark without its rows passing through the driver."""

    def checked(uri, *, after, upto, columns=None):
        rows = change_rows_between(uri, after, upto)
        assert rows is not None and rows <= cdc.EXECUTOR_CHANGE_ROWS, f"{uri} ({after}, {upto}] read on the driver"
        return read(uri, after=after, upto=upto, columns=columns)

    return checked


def test_a_large_change_is_read_by_the_executors_and_equals_the_recompute(builder, monkeypatch):
    project, orders = _shop(builder, monkeypatch)
    write(orders, _orders(range(2000, 2300), amount=3), mode="append")
    delete_rows(orders, "id % 17 = 0")
    update_rows(orders, set_sql={"amount": "amount + 5"}, predicate="id < 150")
    source = _orders(range(2250, 2400), amount=7)
    (
        DeltaTable(orders).merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all().when_not_matched_insert_all().execute()
    )
    update_rows(orders, set_sql={"amount": "amount"}, predicate="id >= 500 and id < 700")  # no-op UPDATE
    update_rows(builder.uri("customers"), set_sql={"region": "'r9'"}, predicate="cust = 3")  # small: on the driver
    (result,) = project.refresh()
    assert result.mode == "incremental"
    assert result.stats["changes_read_on_executors"] == 1
    # The log's count: the commits' metrics, or the rows of the files they added if more (a
    # no-op UPDATE rewrites whole files; their rows count, and the operators net them).
    assert result.stats["rows_in.orders"] >= change_rows_between(orders, 0, latest_version(orders)) > 100
    assert result.stats["rows_in.customers"] == 2
    assert "read by the executors" in result.engine
    assert_oracle(project)
    # An overwrite with a predicate: no change data file, its removed files' rows are deletes.
    write_deltalake(orders, _orders(range(5001, 5800, 4)), mode="overwrite", predicate="day = 'd1'")
    (result,) = project.refresh()
    assert result.mode == "incremental" and result.stats["changes_read_on_executors"] == 1
    assert_oracle(project)


def _vacuumed(builder, monkeypatch, **settings):
    """A range whose commit dropped a whole partition (its feed: the removed file's rows),
    that file vacuumed since."""
    project, orders = _shop(builder, monkeypatch, **settings)
    write(orders, _orders(range(2000, 2300)), mode="append")
    delete_rows(orders, "day = 'd2'")
    DeltaTable(orders).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    return project


def test_a_vacuumed_removed_file_rebuilds_the_view(builder, monkeypatch):
    project = _vacuumed(builder, monkeypatch)
    (result,) = project.refresh()
    assert result.mode == "full" and "vacuumed" in result.reason
    assert_oracle(project)


def test_a_vacuumed_removed_file_read_on_the_driver_rebuilds_the_view_too(builder, monkeypatch):
    """A small range goes through delta-rs' change read on the driver, which fails on the
    vacuumed file: the same rebuild under `refresh: auto`."""
    project = _vacuumed(builder, monkeypatch)
    monkeypatch.setattr(cdc, "EXECUTOR_CHANGE_ROWS", 10**9)
    monkeypatch.setattr(cdc, "EXECUTOR_CHANGE_BYTES", 1 << 40)
    (result,) = project.refresh()
    assert result.mode == "full" and "change data feed of source orders" in result.reason and "cannot be read" in result.reason
    assert_oracle(project)


def test_a_vacuumed_removed_file_fails_an_incremental_view_clearly(builder, monkeypatch):
    project = _vacuumed(builder, monkeypatch, refresh="incremental")
    with pytest.raises(RefreshError, match=r"change data feed of source orders for versions 1\.\.\d+ cannot be read \(No such file.*full refresh"):
        project.refresh()


def test_a_range_is_large_by_its_rows_or_its_bytes(builder, monkeypatch):
    project, orders = _shop(builder, monkeypatch)
    write(orders, _orders(range(2000, 2050)), mode="append")
    assert cdc.large_range("orders", orders, 0, 1) is None
    monkeypatch.setattr(cdc, "EXECUTOR_CHANGE_ROWS", 49)
    assert cdc.large_range("orders", orders, 0, 1).rows == 50
    monkeypatch.setattr(cdc, "EXECUTOR_CHANGE_ROWS", 10**9)
    monkeypatch.setattr(cdc, "EXECUTOR_CHANGE_BYTES", 1)
    found = cdc.large_range("orders", orders, 0, 1)
    assert found.files.bytes > 1 and {f.weight for f in found.files.files} == {1}


def test_a_range_the_log_counts_no_rows_of_is_read_on_the_driver(builder, monkeypatch):
    # A source with 0 change rows is taken for unchanged: files whose rows the log does not
    # count (a commit without metrics, only change data files) must be counted by a read.
    project, orders = _shop(builder, monkeypatch)
    delete_rows(orders, "id % 7 = 0")  # rows of every file: change data files, no added rows
    monkeypatch.setattr(cdc, "change_rows_between", lambda *a: None)
    monkeypatch.setattr(cdc, "EXECUTOR_CHANGE_BYTES", 1)
    found = change_files.change_files(orders, after=0, upto=1)
    assert found.rows == 0 and found.bytes > 1 and {f.weight for f in found.files} == {None}
    assert cdc.large_range("orders", orders, 0, 1) is None
