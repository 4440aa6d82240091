"""Fenced commits: an epoch's commit lands right after the version it was planned against,
is skipped when another attempt of the same epoch made it, and otherwise fails in ivm's words
(no Spark needed)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from ivm_assets.delta import tables as delta
from ivm_assets.delta.tables import Epoch
from ivm_assets.errors import CommitConflictError

ROWS = pa.table({"k": pa.array([1, 2], pa.int64()), "b": pa.array([0, 1], pa.int64())})


def _epoch(n: int) -> Epoch:
    return Epoch("ivm:v", n, {})


def _bag_change(k: int) -> pa.Table:
    return pa.table({"k": pa.array([k], pa.int64()), "b": pa.array([0], pa.int64()), "__ivm_op": ["ins"], "__ivm_copy": pa.array([1], pa.int64())})


def test_two_attempts_of_one_epoch_apply_it_once(tmp_path):
    uri = str(tmp_path / "state")
    assert delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    # Both attempts planned against version 0; the second finds the epoch there and skips.
    assert delta.write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    assert not delta.write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    assert delta.latest_version(uri) == 1 and delta.read_small(uri).num_rows == 4


def test_two_creators_of_one_table_create_it_once(tmp_path):
    uri = str(tmp_path / "output")
    assert delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite", change_feed=True)
    assert not delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite", change_feed=True)
    assert delta.latest_version(uri) == 0


def test_a_merge_of_one_epoch_is_applied_once(tmp_path):
    uri = str(tmp_path / "output")
    delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite", change_feed=True)
    assert delta.apply_bag_change(uri, _bag_change(3), columns=["k", "b"], epoch=_epoch(2), after=0)
    assert not delta.apply_bag_change(uri, _bag_change(3), columns=["k", "b"], epoch=_epoch(2), after=0)
    assert sorted(delta.read_small(uri).column("k").to_pylist()) == [1, 2, 3]


def test_a_table_changed_by_someone_else_refuses_the_commit(tmp_path):
    uri = str(tmp_path / "state")
    delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    delta.write(uri, ROWS, mode="append")  # not an ivm epoch
    with pytest.raises(CommitConflictError, match=r"state is at version 1 but this refresh was to commit right after version 0"):
        delta.write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    with pytest.raises(CommitConflictError):
        delta.apply_bag_change(uri, _bag_change(3), columns=["k", "b"], epoch=_epoch(2), after=0)
    assert delta.latest_version(uri) == 1


def test_an_epoch_commit_lands_after_compactions(tmp_path):
    uri = str(tmp_path / "state")
    delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite", partition_by=["b"])
    assert delta.rewrite(uri, ROWS, after=0, partition_by=["b"], row_group_rows=10)
    assert delta.write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append", partition_by=["b"])
    assert delta.latest_version(uri) == 2 and delta.transaction_version(uri, "ivm:v") == 2


def test_a_compaction_of_a_moved_table_is_skipped(tmp_path):
    uri = str(tmp_path / "state")
    delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    delta.write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    assert not delta.rewrite(uri, ROWS, after=0, partition_by=[], row_group_rows=10)
    assert delta.latest_version(uri) == 1 and delta.read_small(uri).num_rows == 4


def test_each_version_is_read_once_while_handles_are_reused(tmp_path):
    uri = str(tmp_path / "state")
    delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    with delta.reusing_handles():
        before = delta.log_reads
        assert delta.latest_version(uri) == 0  # a listing of the log folder, no log read...
        delta.row_count(uri, 0), delta.file_count(uri, 0), delta.arrow_schema(uri, 0)  # ...one read, then kept
        assert delta.log_reads - before == 1
        # A writer takes the handle out (its commit moves it on): readers of version 0 and 1 see their own.
        assert delta.write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
        assert delta.row_count(uri, 0) == 2 and delta.row_count(uri, 1) == 4
    assert delta.row_count(uri, 0) == 2


def test_a_table_this_process_wrote_last_is_not_read_again_by_the_next_refresh(tmp_path):
    uri = str(tmp_path / "state")
    delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    with delta.reusing_handles():
        assert delta.write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    with delta.reusing_handles():
        before = delta.log_reads
        assert delta.row_count(uri, delta.latest_version(uri)) == 4  # the handle the commit moved on
        assert delta.write_epoch(uri, ROWS, epoch=_epoch(3), after=1, mode="append")
        assert delta.log_reads == before
    # Another writer moves the table on: the kept handle (version 2) is not the version asked for.
    delta.write(uri, ROWS, mode="append")
    with delta.reusing_handles():
        before = delta.log_reads
        assert delta.row_count(uri, delta.latest_version(uri)) == 8
        assert delta.log_reads - before == 1
        with pytest.raises(CommitConflictError):
            delta.write_epoch(uri, ROWS, epoch=_epoch(4), after=2, mode="append")


def test_commits_between_versions_behind_the_latest(tmp_path):
    # delta-rs' history() on an older handle numbers the newest commits from that handle's version.
    uri = str(tmp_path / "t")
    delta.create_table(uri, pa.table({"a": [1, 2, 3]}))
    delta.delete_rows(uri, "a = 1")
    delta.update_rows(uri, set_sql={"a": "a + 1"}, predicate="a = 2")
    with delta.reusing_handles():
        assert [(v, op) for v, op, _ in delta.operations_between(uri, 0, 1)] == [(1, "DELETE")]
        assert [(v, op) for v, op, _ in delta.operations_between(uri, 0, 2)] == [(1, "DELETE"), (2, "UPDATE")]


def test_a_long_log_is_checkpointed(tmp_path):
    # Every refresh commits to the progress log at least twice: opening it must not replay
    # thousands of commits. delta-rs writes a checkpoint every 100 commits, for these too.
    uri = str(tmp_path / "progress")
    delta.commit_metadata(uri, {"n": "0"}, after=None, schema=pa.schema([("a", pa.int64())]))
    for n in range(100):
        delta.commit_metadata(uri, {"n": str(n + 1)}, after=n, schema=None)
    assert (tmp_path / "progress" / "_delta_log" / f"{99:020d}.checkpoint.parquet").exists()
    assert delta.head(uri)[1]["n"] == "100"


def test_a_lookup_of_scattered_keys_skips_row_groups_holding_none_of_them(tmp_path):
    import pyarrow.parquet as pq

    from ivm_assets.delta import parquet_cache

    path = str(tmp_path / "sorted.parquet")
    pq.write_table(pa.table({"k": pa.array(range(400), pa.int64())}), path, row_group_size=100)
    stats = parquet_cache.footer(path, os.path.getsize(path)).stats("k")
    wanted = [5, 350]  # the first and the last group; their range would cover all four
    read = [g for g in range(len(stats)) if not delta._skips(stats[g], wanted, False)]
    assert read == [0, 3]
    assert [g for g in range(4) if not delta._skips(stats[g], [], True)] == []  # only NULLs, none here


def test_a_table_created_again_under_the_same_path_is_not_read_through_a_kept_handle(tmp_path):
    import shutil

    uri = str(tmp_path / "state")
    delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    with delta.reusing_handles():
        assert delta.row_count(uri, 0) == 2
    shutil.rmtree(uri)
    delta.write_epoch(uri, pa.concat_tables([ROWS, ROWS, ROWS]), epoch=_epoch(1), after=None, mode="overwrite")
    with delta.reusing_handles():
        assert delta.row_count(uri, 0) == 6


def test_a_local_table_is_recognized_without_listing_its_log(tmp_path):
    """A folder is a table when its log holds a commit file, also once the first commits
    were cleaned up (a checkpoint pointer then names the table); not when the log is empty."""
    assert not delta.is_delta_table(str(tmp_path / "nothing"))
    (tmp_path / "empty" / "_delta_log").mkdir(parents=True)
    assert not delta.is_delta_table(str(tmp_path / "empty"))
    uri = str(tmp_path / "state")
    delta.write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    for n in range(2, 25):
        delta.write_epoch(uri, ROWS, epoch=_epoch(n), after=n - 2, mode="append")
    delta.clean_log(uri)
    assert not (tmp_path / "state" / "_delta_log" / f"{0:020d}.json").exists()
    assert delta.is_delta_table(uri) and delta.latest_version(uri) == 23
    assert delta.read_small(uri).num_rows == 2 * 24
