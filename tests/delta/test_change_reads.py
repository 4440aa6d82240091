"""A source's change between two versions is read from storage once per process: a later read
of the same range (another view refreshed after the same source commit) takes its columns
from the rows kept, and equals a read of its own (no Spark needed)."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

from ivm_assets.delta import change_reads
from ivm_assets.delta.handles import reusing_handles
from ivm_assets.delta.io_counts import counting
from ivm_assets.delta.read import read_changes
from ivm_assets.delta.write import create_table, delete_rows, update_rows, write


def _rows(ids: range) -> pa.Table:
    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "name": pa.array([f"n{i % 7}" for i in ids], pa.string()),
        "n": pa.array([i % 4 for i in ids], pa.int64()),
    })


@pytest.fixture(autouse=True)
def _nothing_kept():
    change_reads.clear()
    yield
    change_reads.clear()


def _sorted(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))


def _edited(uri: str) -> None:
    create_table(uri, _rows(range(20)))
    write(uri, _rows(range(20, 30)), mode="append")
    delete_rows(uri, "id < 5")
    update_rows(uri, set_sql={"n": "n + 10"}, predicate="id = 7")


def test_a_range_is_read_once_for_the_columns_of_every_reader(tmp_path):
    uri = str(tmp_path / "t")
    _edited(uri)
    reads = []
    for columns in (["id", "n"], ["n"], ["id", "name"], ["name"], None, ["n", "id"]):
        with reusing_handles(), counting() as io:
            got = change_reads.read_range(uri, after=0, upto=3, columns=columns)
        reads.append(io.change_reads)
        expected = read_changes(uri, after=0, upto=3, columns=columns)
        assert got.column_names == expected.column_names
        assert _sorted(got) == _sorted(expected)
    # Read: the first columns; a subset of them is kept; a new column reads the range again,
    # every column of it; the rest are subsets of that.
    assert reads == [1, 0, 1, 0, 0, 0]


def test_another_range_or_a_table_created_again_under_the_same_path_is_read_again(tmp_path):
    uri = str(tmp_path / "t")
    _edited(uri)
    with counting() as io:
        change_reads.read_range(uri, after=0, upto=3, columns=["id"])
        change_reads.read_range(uri, after=0, upto=2, columns=["id"])
        change_reads.read_range(uri, after=1, upto=3, columns=["id"])
    assert io.change_reads == 3
    shutil.rmtree(uri)
    create_table(uri, _rows(range(100, 110)))
    for i in range(3):
        write(uri, _rows(range(200 + 10 * i, 205 + 10 * i)), mode="append")
    with counting() as io:
        got = change_reads.read_range(uri, after=0, upto=3, columns=["id"])
    assert io.change_reads == 1
    assert sorted(got.column("id").to_pylist()) == [*range(200, 205), *range(210, 215), *range(220, 225)]


def test_a_column_the_source_lacks_fails_the_read_as_without_the_kept_rows(tmp_path):
    uri = str(tmp_path / "t")
    _edited(uri)
    with pytest.raises(Exception) as direct:
        read_changes(uri, after=0, upto=3, columns=["missing"])
    change_reads.read_range(uri, after=0, upto=3, columns=["id"])
    change_reads.read_range(uri, after=0, upto=3, columns=["n"])  # every column kept now
    with pytest.raises(type(direct.value)):
        change_reads.read_range(uri, after=0, upto=3, columns=["id", "missing"])
