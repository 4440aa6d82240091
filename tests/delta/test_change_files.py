"""A change data feed read by Spark's executors from the files the Delta log names equals
delta-rs' own ``load_cdf`` of the same range, as a multiset of rows with weights."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ivm_assets.delta import change_files, storage
from ivm_assets.delta.handles import latest_version
from ivm_assets.delta.read import read_changes
from ivm_assets.delta.write import create_table, delete_rows, update_rows, write


def _rows(ids: range, *, tag: str = "a") -> pa.Table:
    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "name": pa.array([f"{tag}{i % 7}" if i % 5 else None for i in ids], pa.string()),
        "part": pa.array([f"p{i % 3}" for i in ids], pa.string()),
        "n": pa.array([i % 4 for i in ids], pa.int64()),
    })


def _same_as_load_cdf(spark, uri: str, after: int, upto: int, columns: tuple[str, ...] | None = None) -> Counter:
    found = change_files.change_files(uri, after=after, upto=upto)
    assert found is not None
    frame = change_files.read_on_executors(spark, found, columns)
    expected_table = read_changes(uri, after=after, upto=upto, columns=list(columns) if columns else None)
    assert sorted(frame.columns) == sorted(expected_table.column_names)
    names = [*expected_table.column_names]
    got = Counter(tuple(r[n] for n in names) for r in frame.collect())
    expected = Counter(tuple(r[n] for n in names) for r in expected_table.to_pylist())
    assert got == expected, (after, upto)
    return got


def _edit(uri: str) -> None:
    """Versions 1..6: an append, a delete, an update, a MERGE, a no-op UPDATE, a compaction."""
    write(uri, _rows(range(100, 160), tag="b"), mode="append")
    delete_rows(uri, "id % 9 = 0")
    update_rows(uri, set_sql={"name": "'u'", "n": "n + 10"}, predicate="id < 30")
    source = _rows(range(140, 200), tag="m")
    (
        DeltaTable(uri, storage_options=storage.options_for(uri)).merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all().when_not_matched_insert_all().when_not_matched_by_source_delete("t.id > 190").execute()
    )
    update_rows(uri, set_sql={"n": "n"}, predicate="id >= 50 and id < 70")
    DeltaTable(uri, storage_options=storage.options_for(uri)).optimize.compact()


@pytest.mark.parametrize("partitioned", [False, True], ids=["plain", "partitioned"])
def test_each_commit_and_a_whole_range_equal_load_cdf(spark, tmp_path, partitioned):
    uri = str(tmp_path / "t")
    create_table(uri, _rows(range(100)), partition_by=["part"] if partitioned else None)
    _edit(uri)
    upto = latest_version(uri)
    for version in range(1, upto + 1):
        _same_as_load_cdf(spark, uri, version - 1, version)
    whole = _same_as_load_cdf(spark, uri, 0, upto)
    assert {w for *_, w in whole} == {1, -1}
    _same_as_load_cdf(spark, uri, 1, upto, columns=("n", "part"))


def test_a_commit_without_change_data_files_is_its_added_and_removed_files(spark, tmp_path):
    # delta-rs writes no cdc file where a whole file is dropped or replaced by an overwrite
    # with a predicate: the feed is then the add and remove actions, as the protocol says.
    uri = str(tmp_path / "t")
    create_table(uri, _rows(range(60)), partition_by=["part"])
    write_deltalake(uri, _rows(range(0, 60, 3), tag="r").filter(pa.compute.equal(_rows(range(0, 60, 3))["part"], "p0")),
                    mode="overwrite", predicate="part = 'p0'")
    delete_rows(uri, "part = 'p1'")
    for version in (1, 2):
        found = change_files.change_files(uri, after=version - 1, upto=version)
        assert {f.weight for f in found.files} <= {1, -1}
    _same_as_load_cdf(spark, uri, 0, 2)


def test_a_vacuumed_removed_file_is_reported_missing(tmp_path):
    uri = str(tmp_path / "t")
    create_table(uri, _rows(range(30)), partition_by=["part"])
    delete_rows(uri, "part = 'p1'")
    DeltaTable(uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    (missing,) = change_files.missing_files(change_files.change_files(uri, after=0, upto=1))
    assert "part=p1" in missing


def test_deletion_vectors_are_left_to_delta_rs(tmp_path):
    # delta-rs writes no deletion vectors: the table's protocol is raised by a hand-made
    # commit, as a Spark writer enabling them would.
    uri = str(tmp_path / "t")
    create_table(uri, _rows(range(10)))
    write(uri, _rows(range(10, 20)), mode="append")
    assert change_files.change_files(uri, after=0, upto=1) is not None
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors", "changeDataFeed"]}
    commit = [{"protocol": protocol}, {"commitInfo": {"timestamp": 0, "operation": "SET TBLPROPERTIES", "operationParameters": {}}}]
    (tmp_path / "t" / "_delta_log" / f"{2:020d}.json").write_text("\n".join(json.dumps(a) for a in commit) + "\n")
    assert change_files.change_files(uri, after=0, upto=2) is None
