"""The in-process cache of parquet footers and decoded row groups (delta/parquet_cache.py)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ivm_assets.delta import parquet_cache
from ivm_assets.settings import STATE_CACHE_ENV


@pytest.fixture(autouse=True)
def _cold_cache():
    parquet_cache.clear()
    yield
    parquet_cache.clear()


def _footer(path: str) -> parquet_cache.Footer:
    """The footer of a local file, keyed by its size (as the Delta log would give it)."""
    return parquet_cache.footer(path, os.path.getsize(path))


SCHEMA = pa.schema({"k": pa.int64(), "v": pa.string()})


def _write(path: str, values: range, group_rows: int = 100) -> None:
    pq.write_table(pa.table({"k": pa.array(values, pa.int64()), "v": pa.array([str(v) for v in values])}), path, row_group_size=group_rows)


def test_a_warm_read_returns_the_rows_a_cold_read_decoded(tmp_path):
    path = str(tmp_path / "a.parquet")
    _write(path, range(400))
    file = _footer(path)
    cold, decoded = parquet_cache.row_groups(file, [1, 3], SCHEMA)
    assert parquet_cache.held_bytes() > 0 and decoded == 2
    warm, decoded = parquet_cache.row_groups(_footer(path), [3, 1], SCHEMA)
    assert decoded == 0
    assert [t.column("k").to_pylist()[0] for t in cold] == [100, 300]
    assert warm[0].equals(cold[1]) and warm[1].equals(cold[0])
    assert _footer(path) is file  # the footer was read once


def test_a_group_is_held_as_conformed_to_the_schema_asked_for(tmp_path):
    # Spark's files declare __w NOT NULL where the Delta schema does not: the group is
    # conformed once, and later reads with that schema take the held table as it is.
    path = str(tmp_path / "a.parquet")
    strict = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string())])
    pq.write_table(pa.table({"k": range(200), "v": [str(v) for v in range(200)]}, schema=strict), path, row_group_size=100)
    first, decoded = parquet_cache.row_groups(_footer(path), [1], SCHEMA)
    assert decoded == 1 and first[0].schema == SCHEMA
    again, decoded = parquet_cache.row_groups(_footer(path), [1], SCHEMA)
    assert decoded == 0 and again[0] is first[0]
    # Asked for with a column added since the file was written: NULLs, held that way next.
    wider = SCHEMA.append(pa.field("w", pa.int64()))
    added, _ = parquet_cache.row_groups(_footer(path), [1], wider)
    assert added[0].schema == wider and added[0].column("w").null_count == 100
    assert parquet_cache.row_groups(_footer(path), [1], wider)[0][0] is added[0]


def test_a_file_rewritten_at_the_same_path_is_read_again(tmp_path):
    # Delta never does this (new versions add files under new names); the cache still keys
    # on the size the log records, so a file of another size at the same path is read again.
    path = str(tmp_path / "a.parquet")
    _write(path, range(400))
    before = parquet_cache.row_groups(_footer(path), [0], SCHEMA)[0][0]
    _write(path, range(1000, 1600))
    after = parquet_cache.row_groups(_footer(path), [0], SCHEMA)[0][0]
    assert before.column("k")[0].as_py() == 0 and after.column("k")[0].as_py() == 1000
    assert _footer(path).stats("k")[0][:2] == (1000, 1099)


def test_the_budget_bounds_what_is_held_and_zero_turns_it_off(tmp_path, monkeypatch):
    path = str(tmp_path / "a.parquet")
    _write(path, range(2000))
    file = _footer(path)
    one_group = parquet_cache.row_groups(file, [0], SCHEMA)[0][0].nbytes
    parquet_cache.clear()
    monkeypatch.setenv(STATE_CACHE_ENV, str(3.5 * one_group / (1 << 20)))
    parquet_cache.row_groups(_footer(path), list(range(20)), SCHEMA)
    assert 0 < parquet_cache.held_bytes() <= 3.5 * one_group
    parquet_cache.clear()
    monkeypatch.setenv(STATE_CACHE_ENV, "0")
    rows, _ = parquet_cache.row_groups(_footer(path), [0, 5], SCHEMA)
    assert parquet_cache.held_bytes() == 0 and rows[1].column("k")[0].as_py() == 500


def test_statistics_of_a_missing_column_choose_every_group(tmp_path):
    path = str(tmp_path / "a.parquet")
    _write(path, range(300))
    assert _footer(path).stats("nope") == [None, None, None]


@pytest.mark.parametrize("by_bucket", [True, False], ids=["sorted_by_bucket", "buckets_interleaved"])
def test_files_a_commit_wrote_are_held_from_the_rows_written_and_read_back_the_same(tmp_path, by_bucket):
    """A state append's rows are sorted by bucket, and each file's rows are a slice of them
    (``zset.value_runs``); rows in any other order are indexed over the rows written."""
    from ivm_assets.delta.row_groups import ReadCost, read_row_groups, select_row_groups
    from ivm_assets.delta.snapshot import snapshot_files
    from ivm_assets.delta.write import write_epoch
    from ivm_assets.delta.commit import Epoch

    uri = str(tmp_path / "state")
    first = pa.table({"k": pa.array([1, 2], pa.int64()), "v": pa.array(["a", "b"]), "__bucket": pa.array([0, 1], pa.int32())})
    write_epoch(uri, first, epoch=Epoch("ivm:t", 1, {}), after=None, mode="overwrite", partition_by=["__bucket"])
    keys = list(range(10, 5010))
    rows = pa.table({
        "k": pa.array(keys, pa.int64()), "v": pa.array([f"v{k}" for k in keys]), "__bucket": pa.array([k % 2 for k in keys], pa.int32()),
    })
    rows = rows.sort_by([("__bucket", "ascending"), ("k", "ascending")]) if by_bucket else rows
    write_epoch(
        uri, rows, epoch=Epoch("ivm:t", 2, {}), after=0, mode="append", partition_by=["__bucket"], row_group_rows=1000, cache_key="k",
    )
    wanted = pa.array([11, 12, 4999, 5009], pa.int64())

    def lookup() -> tuple[list[tuple], int]:
        cost = ReadCost()
        found = read_row_groups(select_row_groups(snapshot_files(uri), key="k", values=wanted), cost=cost)
        return sorted(zip(found.column("k").to_pylist(), found.column("v").to_pylist())), cost.decoded

    warm, decoded = lookup()
    assert decoded == 0  # the new files' groups were held from the rows written
    parquet_cache.clear()
    cold, decoded = lookup()
    assert cold == warm == [(11, "v11"), (12, "v12"), (4999, "v4999"), (5009, "v5009")] and decoded > 0


def test_files_a_build_in_process_wrote_are_held_when_it_creates_and_when_it_replaces_the_table(tmp_path):
    """A state table built from rows on the driver: its first lookups after the build decode
    nothing (the second refresh after a build used to decode its files whole)."""
    from ivm_assets.delta.commit import Epoch
    from ivm_assets.delta.row_groups import ReadCost, read_row_groups, select_row_groups
    from ivm_assets.delta.snapshot import file_key, snapshot_files
    from ivm_assets.delta.write import overwrite_epoch

    uri = str(tmp_path / "state")
    wanted = pa.array([12, 3001, 4999], pa.int64())

    def rows(tag: str) -> pa.Table:
        keys = list(range(10, 5010))
        return pa.table({
            "k": pa.array(keys, pa.int64()), "v": pa.array([f"{tag}{k}" for k in keys]),
            "__bucket": pa.array([k % 3 for k in keys], pa.int32()),
        })

    def lookup() -> tuple[list[tuple], int]:
        cost = ReadCost()
        found = read_row_groups(select_row_groups(snapshot_files(uri), key="k", values=wanted), cost=cost)
        return sorted(zip(found.column("k").to_pylist(), found.column("v").to_pylist())), cost.decoded

    for number, (after, tag) in enumerate(((None, "a"), (0, "b")), start=1):
        overwrite_epoch(
            uri, rows(tag), epoch=Epoch("ivm:t", number, {}), after=after, partition_by=["__bucket"], sort_by=["k"],
            row_group_rows=1000, cache_key="k",
        )
        held, decoded = lookup()
        assert decoded == 0 and held == [(12, f"{tag}12"), (3001, f"{tag}3001"), (4999, f"{tag}4999")]
        # The files interleave in the rows written: each is indexed over them, and one asked
        # for with another schema is conformed alone (a copy of its own rows only).
        wider = pa.schema([("k", pa.int64()), ("v", pa.string()), ("extra", pa.int64())])
        snap = snapshot_files(uri)
        for path, size in zip(snap.files, snap.sizes):
            file = parquet_cache.footer(file_key(path), size)
            own = parquet_cache.held_index(file, "k", wider)
            assert own is not None and own.rows.num_rows == sum(file.rows) and own.rows.column("extra").null_count == own.rows.num_rows
        parquet_cache.clear()
        cold, decoded = lookup()
        assert cold == held and decoded > 0  # read from the files: the same rows


def test_files_written_from_several_batches_are_held_by_row_group_only_when_their_order_is_known(tmp_path):
    """delta-rs writes batches in the order they reach it (``delta.write.write_at``), so a
    file written from rows in several batches may hold them in another order than given.
    Held by row group (a key that cannot be indexed), its groups would be cut from the rows
    in the wrong order: they are not held, and lookups decode the file and find every row.
    From one batch, they are held as before."""
    from ivm_assets.delta.commit import Epoch
    from ivm_assets.delta.row_groups import ReadCost, read_row_groups, select_row_groups
    from ivm_assets.delta.snapshot import snapshot_files
    from ivm_assets.delta.write import write_epoch

    keys = [f"k{i:05d}" for i in range(5000)]
    rows = pa.table({"k": pa.array(keys), "v": pa.array(range(5000), pa.int64())})
    wanted = pa.array(["k00012", "k03001", "k04999"])
    for name, table, held in (("one batch", rows, True), ("many batches", pa.Table.from_batches(rows.to_batches(max_chunksize=512)), False)):
        parquet_cache.clear()
        uri = str(tmp_path / name.replace(" ", "_"))
        write_epoch(uri, table, epoch=Epoch("ivm:t", 1, {}), after=None, mode="overwrite", row_group_rows=500, cache_key="k")
        assert (parquet_cache.held_bytes() > 0) == held, name
        cost = ReadCost()
        found = read_row_groups(select_row_groups(snapshot_files(uri), key="k", values=wanted), cost=cost)
        assert sorted(zip(found.column("k").to_pylist(), found.column("v").to_pylist())) == [("k00012", 12), ("k03001", 3001), ("k04999", 4999)]
        assert (cost.decoded == 0) == held, name


def test_rows_that_do_not_match_the_footer_are_not_held(tmp_path):
    path = str(tmp_path / "a.parquet")
    _write(path, range(400))
    file = _footer(path)
    other = pa.table({"k": pa.array(range(1, 401), pa.int64()), "v": pa.array([str(v) for v in range(400)])})
    assert not parquet_cache.remember(file, other, "k")  # key ranges differ from the footer's
    assert not parquet_cache.remember(file, other.slice(0, 399), "k")  # row counts differ
    assert parquet_cache.held_bytes() == 0
    same = pa.table({"k": pa.array(range(400), pa.int64()), "v": pa.array([str(v) for v in range(400)])})
    assert parquet_cache.remember(file, same, "k") and parquet_cache.held_bytes() > 0


def test_the_default_budget_is_a_quarter_of_the_memory_the_process_may_use(monkeypatch):
    from ivm_assets import settings

    monkeypatch.delenv(STATE_CACHE_ENV, raising=False)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < settings.usable_memory() <= physical
    assert parquet_cache.budget_bytes() == int(settings.usable_memory() * settings.STATE_CACHE_SHARE)


def test_value_runs_finds_one_run_per_value_or_none():
    from ivm_assets.zset import value_runs

    assert value_runs(pa.chunked_array([[0, 0], [1, 3, 3]], pa.int32())) == {"0": (0, 2), "1": (2, 1), "3": (3, 2)}
    assert value_runs(pa.chunked_array([[0, 1, 0]], pa.int64())) == {}  # a value in two runs
    assert value_runs(pa.chunked_array([[0, None]], pa.int64())) == {}
    assert value_runs(pa.chunked_array([list(range(70_000))], pa.int64())) == {}  # more runs than buckets may be
