"""Files held indexed by their integer key (delta/key_index.py, parquet_cache.whole_file):
a lookup through the index finds exactly the rows a lookup by row group finds, and a file
is indexed only when a lookup wants at least half of it."""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ivm_assets.delta import parquet_cache
from ivm_assets.delta.commit import Epoch
from ivm_assets.delta.key_index import index, positions
from ivm_assets.delta.row_groups import ReadCost, read_row_groups, select_row_groups
from ivm_assets.delta.snapshot import snapshot_files
from ivm_assets.delta.write import write_epoch
from ivm_assets.settings import STATE_CACHE_ENV


@pytest.fixture(autouse=True)
def _cold_cache():
    parquet_cache.clear()
    yield
    parquet_cache.clear()


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_files_indexed_over_the_rows_they_share_find_what_their_own_rows_hold(order):
    # A build's rows in key order, its partitions interleaved: each part's index points into
    # the shared rows, and finds what an index of a copy of its own rows finds.
    rng = random.Random(5)
    keys = [rng.randrange(0, 300) if rng.random() > 0.05 else None for _ in range(3000)]
    if order == "sorted":
        keys = sorted(keys, key=lambda k: (k is not None, k))
    rows = pa.table({"k": pa.array(keys, pa.int64()), "at": pa.array(range(len(keys)), pa.int64())})
    rows = pa.Table.from_batches(rows.to_batches(max_chunksize=700))  # as DuckDB hands a build's rows
    part_of = np.array([rng.randrange(3) for _ in keys])
    parts = {p: np.flatnonzero(part_of == p) for p in range(3)}
    made = positions(rows, "k", parts)
    assert made is not None and positions(rows.cast(pa.schema([("k", pa.string()), ("at", pa.int64())])), "k", parts) is None
    wanted = np.array(sorted(rng.sample(range(-5, 305), 60)), np.int64)
    for part, mine in parts.items():
        shared = made[part]
        alone = index(rows.take(mine), "k")
        for keep_nulls in (False, True):
            found = sorted(shared.lookup(wanted, keep_nulls).column("at").to_pylist())
            assert found == sorted(alone.lookup(wanted, keep_nulls).column("at").to_pylist())
            assert found == sorted(shared.own().lookup(wanted, keep_nulls).column("at").to_pylist())
        assert shared.row_count == len(mine) and shared.own().rows.num_rows == len(mine) and shared.own().share == 1.0
    # Each is charged its part of the shared rows' bytes, not all of them; the rows were
    # joined into one chunk once, for all of them, by the first lookup.
    assert sum(made[p].nbytes for p in parts) < 2 * rows.nbytes
    assert made[0].source is made[1].source is made[2].source
    assert all(column.num_chunks == 1 for column in made[0].rows.columns) and rows.column(0).num_chunks > 1


@pytest.mark.parametrize("key_type", [pa.int64(), pa.int32(), pa.int8()])
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_a_lookup_finds_the_rows_of_the_wanted_keys_in_file_order(key_type, order):
    rng = random.Random(11)
    keys = [rng.randrange(-100, 100) if rng.random() > 0.05 else None for _ in range(2000)]
    if order == "sorted":
        keys = sorted(keys, key=lambda k: (k is not None, k))  # NULLs first, as Spark sorts
    rows = pa.table({"k": pa.array(keys, key_type), "at": pa.array(range(len(keys)), pa.int64())})
    made = index(rows, "k")
    assert made is not None
    for wanted, nulls in [(rng.sample(range(-110, 110), 30), False), ([5], True), ([], True), ([], False), ([127], False)]:
        found = made.lookup(np.unique(np.array(wanted, np.int64)), nulls)
        expected = [i for i, k in enumerate(keys) if k in set(wanted) or (nulls and k is None)]
        assert found.column("at").to_pylist() == expected
        assert found.schema == rows.schema


def test_keys_of_other_types_are_not_indexed():
    for values in (pa.array([1.5, 2.5]), pa.array(["a", "b"]), pa.array([1, 2], pa.uint64())):
        assert index(pa.table({"k": values}), "k") is None


def _state(tmp_path, keys: list, *, buckets: int = 2, group_rows: int = 50, name: str = "state") -> str:
    """A table of ``keys`` (and ``at``, each row's position) in ``buckets`` partitions, each
    file sorted by key in groups of ``group_rows``."""
    uri = str(tmp_path / name)
    rows = pa.table({
        "k": pa.array(keys, pa.int64()), "at": pa.array(range(len(keys)), pa.int64()),
        "__bucket": pa.array([(k or 0) % buckets for k in keys], pa.int32()),
    })
    rows = rows.sort_by([("__bucket", "ascending"), ("k", "ascending")])
    write_epoch(uri, rows, epoch=Epoch("ivm:t", 1, {}), after=None, mode="overwrite", partition_by=["__bucket"], row_group_rows=group_rows)
    return uri


def _lookup(uri: str, wanted: list) -> tuple[list[tuple], ReadCost]:
    cost = ReadCost()
    by_bucket: dict[str, list] = {}
    for k in wanted:
        by_bucket.setdefault(str((k or 0) % 2), []).append(k)
    chosen = select_row_groups(
        snapshot_files(uri), key="k", values={b: pa.array(v, pa.int64()) for b, v in by_bucket.items()}, partition="__bucket",
    )
    found = read_row_groups(chosen, cost=cost)
    return sorted(zip(found.column("at").to_pylist(), found.column("k").to_pylist())), cost


def test_scattered_keys_index_the_files_and_read_what_row_groups_read(tmp_path, monkeypatch):
    rng = random.Random(5)
    keys = [rng.randrange(10_000) for _ in range(4000)] + [None] * 7
    uri = _state(tmp_path, keys)
    scattered = rng.sample(range(10_000), 300) + [None]
    monkeypatch.setenv(STATE_CACHE_ENV, "0")  # nothing held: every lookup reads row groups
    by_groups, cost = _lookup(uri, scattered)
    assert cost.indexed == 0 and cost.row_groups > 0
    monkeypatch.delenv(STATE_CACHE_ENV)
    first, cost = _lookup(uri, scattered)  # the keys touch most groups: both files are indexed
    assert first == by_groups and cost.indexed == 2 and cost.row_groups == 0 and cost.decoded > 0
    assert len(by_groups) == sum(1 for k in keys if k in set(scattered) or k is None)
    again, cost = _lookup(uri, scattered[:10])
    assert again == [r for r in by_groups if r[1] in set(scattered[:10])]
    assert cost.indexed == 2 and cost.decoded == 0 and cost.rows == len(again)


def test_a_few_keys_read_their_row_groups_and_index_nothing(tmp_path):
    rng = random.Random(6)
    uri = _state(tmp_path, [rng.randrange(10_000) for _ in range(4000)])
    found, cost = _lookup(uri, [17, 4242])
    assert cost.indexed == 0 and 0 < cost.row_groups <= 4
    assert all(k in (17, 4242) for _, k in found)
    assert not any(isinstance(k[1], str) for k in parquet_cache._groups.keys())  # the first lookup of each file


def test_a_file_looked_up_again_by_scattered_keys_is_indexed_and_by_a_few_is_not(tmp_path):
    rng = random.Random(8)
    uri = _state(tmp_path, [rng.randrange(10_000) for _ in range(4000)])  # 40 groups a file
    for _ in range(3):  # a contiguous range touches a group or two: never worth a whole decode
        few, cost = _lookup(uri, [4242, 4243])
        assert cost.indexed == 0 and cost.row_groups <= 2
    scattered = list(range(0, 10_000, 625))  # 8 keys a file: a fifth of its groups
    found, cost = _lookup(uri, scattered)  # files looked up before: a long-lived process
    assert cost.indexed == 2 and cost.row_groups == 0
    fresh = _state(tmp_path, [rng.randrange(10_000) for _ in range(4000)], name="fresh")
    first, cost = _lookup(fresh, scattered)  # a first lookup reads the groups it touches
    assert cost.indexed == 0 and cost.row_groups >= 12
    again, cost = _lookup(fresh, scattered)
    assert again == first and cost.indexed == 2 and cost.row_groups == 0


def test_a_file_too_large_for_a_quarter_of_the_budget_is_not_indexed(tmp_path, monkeypatch):
    path = str(tmp_path / "a.parquet")
    pq.write_table(pa.table({"k": pa.array(range(100_000), pa.int64())}), path, row_group_size=1000)
    file = parquet_cache.footer(path, os.path.getsize(path))
    monkeypatch.setenv(STATE_CACHE_ENV, str(3 * file.decoded_bytes / (1 << 20)))
    schema = pa.schema({"k": pa.int64()})
    assert parquet_cache.whole_file(file, list(range(100)), schema, "k") == (None, 0)


def test_a_file_half_held_already_is_indexed_by_the_next_lookup(tmp_path):
    path = str(tmp_path / "a.parquet")
    pq.write_table(pa.table({"k": pa.array(range(1000), pa.int64())}), path, row_group_size=100)
    file = parquet_cache.footer(path, os.path.getsize(path))
    schema = pa.schema({"k": pa.int64()})
    parquet_cache.row_groups(file, [0, 1, 2], schema)
    assert parquet_cache.whole_file(file, [9], schema, "k") == (None, 0)  # 4 of 10 groups: not yet
    parquet_cache.row_groups(file, [3], schema)
    made, decoded = parquet_cache.whole_file(file, [9], schema, "k")
    assert made is not None and decoded == 6  # the 4 groups held were not decoded again
    assert made.lookup(np.array([5, 555, 999]), False).column("k").to_pylist() == [5, 555, 999]
    assert not any(isinstance(g, int) for _, g in parquet_cache._groups.keys())  # held once, as the index
    assert parquet_cache.held_bytes() == made.nbytes


def test_a_compaction_on_the_driver_leaves_its_files_held_indexed(tmp_path):
    from ivm_assets.delta.maintenance import rewrite

    rng = random.Random(9)
    uri = _state(tmp_path, [rng.randrange(10_000) for _ in range(4000)])
    compacted = pa.table({
        "k": pa.array(range(0, 8000, 2), pa.int64()), "at": pa.array(range(4000), pa.int64()),
        "__bucket": pa.array([k % 2 for k in range(0, 8000, 2)], pa.int32()),
    }).sort_by([("__bucket", "ascending"), ("k", "ascending")])
    assert rewrite(uri, compacted, after=0, partition_by=["__bucket"], row_group_rows=50, cache_key="k")
    found, cost = _lookup(uri, [10, 4000, 7998])
    assert [k for _, k in found] == [10, 4000, 7998]
    assert cost.decoded == 0 and cost.indexed == 1  # every key in bucket 0: one file looked up


def test_an_append_sorted_by_bucket_is_held_indexed_over_its_rows(tmp_path):
    # A state append: rows sorted by bucket, then key, NULL keys among them. Each file the
    # commit adds is held as an index into the one table of rows written, so a lookup of
    # the next refresh decodes only the earlier files, and finds what a cold read finds.
    first = list(range(0, 400, 3))
    uri = _state(tmp_path, first)
    keys = [1, 2, 5, None, 8, 11, None, 200, 201, 4000]
    rows = pa.table({
        "k": pa.array(keys, pa.int64()), "at": pa.array(range(1000, 1000 + len(keys)), pa.int64()),
        "__bucket": pa.array([(k or 0) % 2 for k in keys], pa.int32()),
    }).sort_by([("__bucket", "ascending"), ("k", "ascending")])
    parquet_cache.clear()
    assert write_epoch(uri, rows, epoch=Epoch("ivm:t", 2, {}), after=0, mode="append", partition_by=["__bucket"],
                       row_group_rows=50, cache_key="k")
    held = [parquet_cache._groups.get(k) for k in parquet_cache._groups.keys() if k[1] == "k"]
    assert len(held) == 2 and held[0].source is held[1].source  # one index per file, both over the rows written
    wanted = [2, 3, 8, 201, 4000, 6]
    expected = sorted([(i, k) for i, k in enumerate(first) if k in wanted] + [(1000 + i, k) for i, k in enumerate(keys) if k in wanted])
    warm, warm_cost = _lookup(uri, wanted)
    parquet_cache.clear()
    cold, cold_cost = _lookup(uri, wanted)
    assert warm == cold == expected
    assert 0 < warm_cost.decoded < cold_cost.decoded  # the append's files were not decoded
