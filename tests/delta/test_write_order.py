"""Whole-table writes store each partition's rows sorted by key, so that every row group of a
state file covers a narrow key range. Rows that come sorted by key (a build computed in
process) are handed to delta-rs as they are, which keeps their order within each partition;
any others are sorted by (partition, key) first."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ivm_assets.delta.commit import Epoch
from ivm_assets.delta.snapshot import snapshot_files
from ivm_assets.delta.write import in_order, overwrite_epoch

IN_ORDER = {
    "integers": pa.table({"b": pa.array([0, 0, 1, 1, 2], pa.int32()), "k": [1, 5, 2, 2, 0]}),
    "chunks of other lengths": pa.table({"b": pa.chunked_array([[0, 0], [1, 1, 1]]), "k": pa.chunked_array([[1], [2, 0, 1, 2]])}),
    "strings and decimals": pa.table({"b": [0, 0, 0, 1], "s": ["a", "a", "b", "a"], "d": pa.array([1, 2, 0, 0], pa.decimal128(10, 2))}),
    "dates": pa.table({"b": [0, 1], "d": pa.array([5, 1], pa.date32())}),
}
OUT_OF_ORDER = {
    "a later key first": pa.table({"b": [0, 0, 1], "k": [5, 1, 0]}),
    "a later first column first": pa.table({"b": [1, 0], "k": [0, 1]}),
    "a NULL key": pa.table({"b": [0, 0, 1], "k": pa.array([1, None, 2])}),
    "a NaN key": pa.table({"b": [0, 0], "k": [1.0, float("nan")]}),
    "strings": pa.table({"b": [0, 0], "k": ["b", "a"]}),
}


@pytest.mark.parametrize("name", IN_ORDER)
def test_rows_ascending_on_the_columns_are_in_order(name):
    table = IN_ORDER[name]
    assert in_order(table, table.column_names)


@pytest.mark.parametrize("name", OUT_OF_ORDER)
def test_rows_that_descend_somewhere_or_hold_a_null_or_nan_are_not(name):
    table = OUT_OF_ORDER[name]
    assert not in_order(table, table.column_names)


def _runs(values: list) -> int:
    """How many ascending runs ``values`` is made of."""
    return 1 + sum(1 for a, b in zip(values, values[1:]) if b < a)


@pytest.mark.parametrize("order", ["sorted by key", "sorted by key, in many batches", "shuffled"])
def test_each_partitions_file_holds_its_rows_sorted_by_key(tmp_path, order):
    """20,000 rows in 8 partitions drawn at random: whether they come sorted by key (handed to
    delta-rs as they are) or shuffled (sorted first), each partition's file ascends by key and
    the table holds every row once. Rows sorted but in batches of 2,048 (as DuckDB may hand
    back a sort) reach each file in any order of the batches (delta-rs merges its streams as
    they come; a clean-clone CI run found a state file holding its later keys first): each
    file is then at most one ascending run per batch."""
    rng = random.Random(5)
    keys = sorted(rng.sample(range(10**9), 20_000))
    if order == "shuffled":
        rng.shuffle(keys)
    rows = pa.table({"k": pa.array(keys, pa.int64()), "__bucket": pa.array([rng.randrange(8) for _ in keys], pa.int32())})
    if order.endswith("many batches"):
        rows = pa.Table.from_batches(rows.to_batches(max_chunksize=2048))
    uri = str(tmp_path / "state")
    overwrite_epoch(uri, rows, epoch=Epoch("ivm:t", 1, {}), after=None, partition_by=["__bucket"], sort_by=["k"], row_group_rows=256)
    files = snapshot_files(uri).files
    assert len(files) == 8
    stored = []
    for file in files:
        file_keys = pq.read_table(file, columns=["k"]).column("k").to_pylist()
        assert _runs(file_keys) <= rows.column("k").num_chunks, file
        stored += file_keys
    assert sorted(stored) == sorted(keys)
