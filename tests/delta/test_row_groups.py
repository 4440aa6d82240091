"""Key lookups on the driver (delta/row_groups.py): the rows read are exactly those whose key
is wanted, in file order, over runs of equal keys that cross row groups, unsorted groups
and NULL keys."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ivm_assets.delta import parquet_cache
from ivm_assets.delta.commit import Epoch
from ivm_assets.delta.row_groups import read_row_groups, select_row_groups
from ivm_assets.delta.snapshot import snapshot_files
from ivm_assets.delta.write import write_epoch


@pytest.fixture(autouse=True)
def _cold_cache():
    parquet_cache.clear()
    yield
    parquet_cache.clear()


def _lookup(tmp_path, keys: list, wanted: list, key_type: pa.DataType, *, group_rows: int = 64) -> tuple[list, list]:
    """(rows read, rows expected) as (key, position) pairs in file order, for a table of ``keys``."""
    uri = str(tmp_path / f"state{len(list(tmp_path.iterdir()))}")
    rows = pa.table({"k": pa.array(keys, key_type), "at": pa.array(range(len(keys)), pa.int64())})
    write_epoch(uri, rows, epoch=Epoch("ivm:t", 1, {}), after=None, mode="overwrite", row_group_rows=group_rows)
    assert pq.ParquetFile(snapshot_files(uri).files[0]).metadata.num_row_groups > 1
    found = read_row_groups(select_row_groups(snapshot_files(uri), key="k", values=pa.array(wanted, key_type)))
    wanted_set = set(wanted)
    expected = [(k, i) for i, k in enumerate(keys) if k in wanted_set or (k is None and None in wanted_set)]
    return list(zip(found.column("k").to_pylist(), found.column("at").to_pylist())), expected


@pytest.mark.parametrize("key_type", [pa.int64(), pa.int32(), pa.int8()])
def test_sorted_keys_with_runs_across_group_boundaries_are_found_exactly(tmp_path, key_type):
    rng = random.Random(7)
    top = 120 if key_type == pa.int8() else 10_000
    keys = sorted(rng.randrange(-top, top) for _ in range(3000))  # runs of equal keys, some crossing groups
    wanted = rng.sample(keys, 40) + rng.sample(range(-top, top), 40) + keys[63:66] + [keys[0], keys[-1], top + 5 if top < 127 else 126]
    found, expected = _lookup(tmp_path, keys, wanted, key_type)
    assert found == expected and len(expected) >= 40


def test_unsorted_groups_and_null_keys_are_matched(tmp_path):
    rng = random.Random(3)
    keys = [rng.randrange(500) for _ in range(1000)]
    wanted = rng.sample(range(500), 30)
    found, expected = _lookup(tmp_path, keys, wanted, pa.int64())
    assert found == expected
    with_nulls = sorted(keys)
    with_nulls[100:110] = [None] * 10
    found, expected = _lookup(tmp_path, with_nulls, [*wanted, None], pa.int64())
    assert found == expected and sum(k is None for k, _ in found) == 10


def test_only_absent_keys_find_nothing(tmp_path):
    found, expected = _lookup(tmp_path, list(range(0, 2000, 2)), [1, 3, 999, 5001], pa.int64())
    assert found == expected == []
