"""Fenced commits: an epoch's commit lands right after the version it was planned against,
is skipped when another attempt of the same epoch made it, and otherwise fails in ivm's words
(no Spark needed)."""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from ivm_assets.delta.commit import Epoch, commit_metadata
from ivm_assets.delta.handles import _MOVES_KEPT, is_delta_table, latest_version, reusing_handles
from ivm_assets.delta.io_counts import counting
from ivm_assets.delta.log import head, operations_between, transaction_version
from ivm_assets.delta.maintenance import clean_log, rewrite
from ivm_assets.delta.read import read_small
from ivm_assets.delta.row_groups import stats_exclude
from ivm_assets.delta.snapshot import arrow_schema, file_count, row_count
from ivm_assets.delta.write import apply_bag_change, create_table, delete_rows, update_rows, write, write_epoch
from ivm_assets.errors import CommitConflictError

ROWS = pa.table({"k": pa.array([1, 2], pa.int64()), "b": pa.array([0, 1], pa.int64())})


def _epoch(n: int) -> Epoch:
    return Epoch("ivm:v", n, {})


def _bag_change(k: int) -> pa.Table:
    return pa.table({"k": pa.array([k], pa.int64()), "b": pa.array([0], pa.int64()), "__ivm_op": ["ins"], "__ivm_copy": pa.array([1], pa.int64())})


def test_two_attempts_of_one_epoch_apply_it_once(tmp_path):
    uri = str(tmp_path / "state")
    assert write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    # Both attempts planned against version 0; the second finds the epoch there and skips.
    assert write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    assert not write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    assert latest_version(uri) == 1 and read_small(uri).num_rows == 4


def test_two_creators_of_one_table_create_it_once(tmp_path):
    uri = str(tmp_path / "output")
    assert write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite", change_feed=True)
    assert not write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite", change_feed=True)
    assert latest_version(uri) == 0


def test_a_merge_of_one_epoch_is_applied_once(tmp_path):
    uri = str(tmp_path / "output")
    write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite", change_feed=True)
    assert apply_bag_change(uri, _bag_change(3), columns=["k", "b"], epoch=_epoch(2), after=0)
    assert not apply_bag_change(uri, _bag_change(3), columns=["k", "b"], epoch=_epoch(2), after=0)
    assert sorted(read_small(uri).column("k").to_pylist()) == [1, 2, 3]


def test_a_table_changed_by_someone_else_refuses_the_commit(tmp_path):
    uri = str(tmp_path / "state")
    write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    write(uri, ROWS, mode="append")  # not an ivm epoch
    with pytest.raises(CommitConflictError, match=r"state is at version 1 but this refresh was to commit right after version 0"):
        write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    with pytest.raises(CommitConflictError):
        apply_bag_change(uri, _bag_change(3), columns=["k", "b"], epoch=_epoch(2), after=0)
    assert latest_version(uri) == 1


def test_an_epoch_commit_lands_after_compactions(tmp_path):
    uri = str(tmp_path / "state")
    write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite", partition_by=["b"])
    assert rewrite(uri, ROWS, after=0, partition_by=["b"], row_group_rows=10)
    assert write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append", partition_by=["b"])
    assert latest_version(uri) == 2 and transaction_version(uri, "ivm:v") == 2


def test_a_compaction_of_a_moved_table_is_skipped(tmp_path):
    uri = str(tmp_path / "state")
    write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    assert not rewrite(uri, ROWS, after=0, partition_by=[], row_group_rows=10)
    assert latest_version(uri) == 1 and read_small(uri).num_rows == 4


def test_each_version_is_read_once_while_handles_are_reused(tmp_path):
    uri = str(tmp_path / "state")
    write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    with reusing_handles(), counting() as io:
        assert latest_version(uri) == 0  # a listing of the log folder, no log read...
        row_count(uri, 0), file_count(uri, 0), arrow_schema(uri, 0)  # ...one read, then kept
        assert io.log_reads == 1
        # A writer takes the handle out (its commit moves it on): readers of version 0 and 1 see their own.
        assert write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
        assert row_count(uri, 0) == 2 and row_count(uri, 1) == 4
    assert row_count(uri, 0) == 2


def test_a_table_this_process_wrote_last_is_not_read_again_by_the_next_refresh(tmp_path):
    uri = str(tmp_path / "state")
    write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    with reusing_handles():
        assert write_epoch(uri, ROWS, epoch=_epoch(2), after=0, mode="append")
    with reusing_handles(), counting() as io:
        assert row_count(uri, latest_version(uri)) == 4  # the handle the commit moved on
        assert write_epoch(uri, ROWS, epoch=_epoch(3), after=1, mode="append")
        assert io.log_reads == 0 and io.commits == 1
    # Another writer moves the table on: the kept handle (version 2) is not the version asked for.
    write(uri, ROWS, mode="append")
    with reusing_handles(), counting() as io:
        assert row_count(uri, latest_version(uri)) == 8
        assert io.log_reads == 1
        with pytest.raises(CommitConflictError):
            write_epoch(uri, ROWS, epoch=_epoch(4), after=2, mode="append")


def test_a_handle_moved_on_by_many_commits_is_opened_again(tmp_path):
    # Each commit through a kept handle moves it on in place, and delta-rs' handles grow
    # slower with each move: past _MOVES_KEPT moves the next refresh opens the table again.
    uri = str(tmp_path / "state")
    write_epoch(uri, ROWS, epoch=_epoch(0), after=None, mode="overwrite")
    reads = []
    for n in range(1, 2 * _MOVES_KEPT + 2):
        with reusing_handles(), counting() as io:
            assert write_epoch(uri, ROWS, epoch=_epoch(n), after=n - 1, mode="append")
            assert row_count(uri, n) == 2 * (n + 1)  # read through the handle the commit moved on
        reads.append(io.log_reads)
    # The _MOVES_KEPT-th commit's handle is not kept: reading the version it made opens the table again.
    assert [n for n, count in enumerate(reads, start=1) if count] == [1, _MOVES_KEPT, 2 * _MOVES_KEPT]
    assert sum(reads) == 3


def test_refreshes_in_threads_of_one_process_count_their_own_delta_io(tmp_path):
    # Statistics per refresh, not per process: each scope sees its own commits, those of the
    # threads it starts for its commits (as an in-process epoch does) included.
    both_counting = threading.Barrier(2)

    def refresh(name: str, commits: int) -> int:
        uri = str(tmp_path / name)
        with counting() as io:
            both_counting.wait()
            for _ in range(commits):
                write(uri, ROWS, mode="append")
            with ThreadPoolExecutor(max_workers=2) as pool:
                for done in [pool.submit(contextvars.copy_context().run, write, uri, ROWS, mode="append") for _ in range(2)]:
                    done.result()
            return io.commits

    with counting() as everything, ThreadPoolExecutor(max_workers=2) as pool:
        one, other = (pool.submit(contextvars.copy_context().run, refresh, name, n) for name, n in (("a", 1), ("b", 4)))
        assert (one.result(), other.result()) == (3, 6)
    assert everything.commits == 9  # an enclosing scope counts what the scopes inside it count
    write(str(tmp_path / "a"), ROWS, mode="append")  # outside any scope: counted nowhere
    assert everything.commits == 9


def test_commits_between_versions_behind_the_latest(tmp_path):
    # delta-rs' history() on an older handle numbers the newest commits from that handle's version.
    uri = str(tmp_path / "t")
    create_table(uri, pa.table({"a": [1, 2, 3]}))
    delete_rows(uri, "a = 1")
    update_rows(uri, set_sql={"a": "a + 1"}, predicate="a = 2")
    with reusing_handles():
        assert [(v, op) for v, op, _ in operations_between(uri, 0, 1)] == [(1, "DELETE")]
        assert [(v, op) for v, op, _ in operations_between(uri, 0, 2)] == [(1, "DELETE"), (2, "UPDATE")]


def test_a_long_log_is_checkpointed(tmp_path):
    # Every refresh commits to the progress log at least twice: opening it must not replay
    # thousands of commits. delta-rs writes a checkpoint every 100 commits, for these too.
    uri = str(tmp_path / "progress")
    commit_metadata(uri, {"n": "0"}, after=None, schema=pa.schema([("a", pa.int64())]))
    for n in range(100):
        commit_metadata(uri, {"n": str(n + 1)}, after=n, schema=None)
    assert (tmp_path / "progress" / "_delta_log" / f"{99:020d}.checkpoint.parquet").exists()
    assert head(uri)[1]["n"] == "100"


def test_a_lookup_of_scattered_keys_skips_row_groups_holding_none_of_them(tmp_path):
    import pyarrow.parquet as pq

    from ivm_assets.delta import parquet_cache

    path = str(tmp_path / "sorted.parquet")
    pq.write_table(pa.table({"k": pa.array(range(400), pa.int64())}), path, row_group_size=100)
    stats = parquet_cache.footer(path, os.path.getsize(path)).stats("k")
    wanted = [5, 350]  # the first and the last group; their range would cover all four
    read = [g for g in range(len(stats)) if not stats_exclude(stats[g], wanted, False)]
    assert read == [0, 3]
    assert [g for g in range(4) if not stats_exclude(stats[g], [], True)] == []  # only NULLs, none here


def test_a_table_created_again_under_the_same_path_is_not_read_through_a_kept_handle(tmp_path):
    import shutil

    uri = str(tmp_path / "state")
    write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    with reusing_handles():
        assert row_count(uri, 0) == 2
    shutil.rmtree(uri)
    write_epoch(uri, pa.concat_tables([ROWS, ROWS, ROWS]), epoch=_epoch(1), after=None, mode="overwrite")
    with reusing_handles():
        assert row_count(uri, 0) == 6


def test_a_local_table_is_recognized_without_listing_its_log(tmp_path):
    """A folder is a table when its log holds a commit file, also once the first commits
    were cleaned up (a checkpoint pointer then names the table); not when the log is empty."""
    assert not is_delta_table(str(tmp_path / "nothing"))
    (tmp_path / "empty" / "_delta_log").mkdir(parents=True)
    assert not is_delta_table(str(tmp_path / "empty"))
    uri = str(tmp_path / "state")
    write_epoch(uri, ROWS, epoch=_epoch(1), after=None, mode="overwrite")
    for n in range(2, 25):
        write_epoch(uri, ROWS, epoch=_epoch(n), after=n - 2, mode="append")
    clean_log(uri)
    assert not (tmp_path / "state" / "_delta_log" / f"{0:020d}.json").exists()
    assert is_delta_table(uri) and latest_version(uri) == 23
    assert read_small(uri).num_rows == 2 * 24
