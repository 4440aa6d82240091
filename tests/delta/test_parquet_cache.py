"""The in-process cache of parquet footers and decoded row groups (delta/parquet_cache.py)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ivm_assets.delta import parquet_cache


@pytest.fixture(autouse=True)
def _cold_cache():
    parquet_cache.clear()
    yield
    parquet_cache.clear()


def _write(path: str, values: range, group_rows: int = 100) -> None:
    pq.write_table(pa.table({"k": pa.array(values, pa.int64()), "v": pa.array([str(v) for v in values])}), path, row_group_size=group_rows)


def test_a_warm_read_returns_the_rows_a_cold_read_decoded(tmp_path):
    path = str(tmp_path / "a.parquet")
    _write(path, range(400))
    file = parquet_cache.footer(path)
    cold = parquet_cache.row_groups(file, [1, 3])
    assert parquet_cache.held_bytes() > 0
    warm = parquet_cache.row_groups(parquet_cache.footer(path), [3, 1])
    assert [t.column("k").to_pylist()[0] for t in cold] == [100, 300]
    assert warm[0].equals(cold[1]) and warm[1].equals(cold[0])
    assert parquet_cache.footer(path) is file  # the footer was read once


def test_a_file_rewritten_at_the_same_path_is_read_again(tmp_path):
    # Delta never does this (new versions add files under new names); the cache still keys
    # on size and modification time, so a tool that did would not get stale rows.
    path = str(tmp_path / "a.parquet")
    _write(path, range(400))
    before = parquet_cache.row_groups(parquet_cache.footer(path), [0])[0]
    _write(path, range(1000, 1600))
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    after = parquet_cache.row_groups(parquet_cache.footer(path), [0])[0]
    assert before.column("k")[0].as_py() == 0 and after.column("k")[0].as_py() == 1000
    assert parquet_cache.footer(path).stats("k")[0][:2] == (1000, 1099)


def test_the_budget_bounds_what_is_held_and_zero_turns_it_off(tmp_path, monkeypatch):
    path = str(tmp_path / "a.parquet")
    _write(path, range(2000))
    file = parquet_cache.footer(path)
    one_group = parquet_cache.row_groups(file, [0])[0].nbytes
    parquet_cache.clear()
    monkeypatch.setenv(parquet_cache.BUDGET_ENV, str(3.5 * one_group / (1 << 20)))
    parquet_cache.row_groups(parquet_cache.footer(path), list(range(20)))
    assert 0 < parquet_cache.held_bytes() <= 3.5 * one_group
    parquet_cache.clear()
    monkeypatch.setenv(parquet_cache.BUDGET_ENV, "0")
    rows = parquet_cache.row_groups(parquet_cache.footer(path), [0, 5])
    assert parquet_cache.held_bytes() == 0 and rows[1].column("k")[0].as_py() == 500


def test_statistics_of_a_missing_column_choose_every_group(tmp_path):
    path = str(tmp_path / "a.parquet")
    _write(path, range(300))
    assert parquet_cache.footer(path).stats("nope") == [None, None, None]
