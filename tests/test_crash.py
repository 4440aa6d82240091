"""A refresh killed between any two commits recovers on the next refresh, exactly once.

In-process, every commit boundary of an epoch is tried in turn (IVM_CRASH_MODE=raise leaves
the same state on disk as a kill). One boundary is also tried with a real SIGKILL of a
separate process. Two attempts of one epoch at once (a holder paused past its lease and the
refresh that took over) apply it once; a table changed under an epoch by someone else stops
it with what to do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from decimal import Decimal

import pyarrow as pa
import pytest

from ivm_assets.delta.commit import Epoch
from ivm_assets.delta.handles import latest_version
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.delta.write import delete_rows, write
from ivm_assets.engine import execute
from ivm_assets.errors import RefreshError
from ivm_assets.settings import SMALL_BUILD_ROWS_ENV
from ivm_assets.state import arrangement
from ivm_assets.state.progress import EpochRecord, Progress
from ivm_assets.testing import faults
from tests.conftest import assert_oracle

ORDERS = pa.schema([("id", pa.int64()), ("cust", pa.int64()), ("amount", pa.decimal128(10, 2))])


def _project(builder):
    builder.source("orders", pa.Table.from_pylist([{"id": i, "cust": i % 3, "amount": i} for i in range(1, 7)], schema=ORDERS))
    builder.source("customers", {"cust": pa.array([0, 1, 2], pa.int64()), "region": ["eu", "us", "eu"]})
    builder.view(
        "sales",
        "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total, MAX(o.amount) AS biggest "
        "FROM orders o JOIN customers c ON o.cust = c.cust GROUP BY c.region",
    )
    project = builder.load()
    project.refresh()
    return project


def _change(builder, step: int) -> None:
    uri = builder.uri("orders")
    write(uri, pa.Table.from_pylist([{"id": 100 + step, "cust": step % 3, "amount": 5 + step}], schema=ORDERS), mode="append")
    delete_rows(uri, f"id = {1 + step % 6}")


def _crash_at(project, monkeypatch, commits: int) -> bool:
    """Refresh, dying after ``commits`` commits; True if the crash happened."""
    monkeypatch.setenv("IVM_CRASH_AFTER_COMMITS", str(commits))
    monkeypatch.setenv("IVM_CRASH_MODE", "raise")
    faults.reset_commit_count()
    try:
        project.refresh()
        return False
    except faults.SimulatedCrash:
        return True
    finally:
        monkeypatch.delenv("IVM_CRASH_AFTER_COMMITS")
        monkeypatch.delenv("IVM_CRASH_MODE")


def test_crash_at_every_commit_boundary(builder, monkeypatch):
    project = _project(builder)
    boundary, crashed = 1, True
    while crashed:
        _change(builder, boundary)
        crashed = _crash_at(project, monkeypatch, boundary)
        results = project.refresh()  # recovery: finishes the interrupted epoch, then catches up
        assert all(r.mode in ("incremental", "unchanged") for r in results), [r.summary() for r in results]
        assert_oracle(project)
        boundary += 1
    # An epoch of this view commits: the claim with its started record, the join's two
    # sides, the aggregate's groups and MAX values, the output, and the committed record
    # with the claim's release; each boundary was crossed.
    assert boundary > 7


def test_crash_after_executor_files_before_their_commit(builder, monkeypatch):
    """A full refresh writes state and output files from Spark's executors, then commits
    them: a crash in between leaves files no commit names. The next refresh repeats the
    epoch and the tables hold exactly its rows, not the orphans."""
    # This test's sources and state are small: force the executors' writes.
    monkeypatch.setenv(SMALL_BUILD_ROWS_ENV, "0")
    monkeypatch.setattr(arrangement, "DRIVER_WRITE_ROWS", -1)
    project = _project(builder)
    boundary, crashed = 1, True
    while crashed:
        _change(builder, boundary)
        monkeypatch.setenv("IVM_CRASH_AFTER_FILE_WRITES", str(boundary))
        monkeypatch.setenv("IVM_CRASH_MODE", "raise")
        faults.reset_commit_count()
        try:
            project.refresh(full=True)
            crashed = False
        except faults.SimulatedCrash:
            crashed = True
        finally:
            monkeypatch.delenv("IVM_CRASH_AFTER_FILE_WRITES")
            monkeypatch.delenv("IVM_CRASH_MODE")
        [result] = project.refresh()  # finishes the interrupted full epoch as it was planned
        assert result.mode == ("full" if crashed else "unchanged"), result.summary()
        assert_oracle(project)
        boundary += 1
    # Executor writes: the join's two sides, the aggregate's groups and MAX values, the output.
    assert boundary > 5


@pytest.mark.slow
def test_sigkill_mid_refresh_recovers(builder):
    project = _project(builder)
    _change(builder, 1)
    builder.write_config("lease_seconds: 2\n")  # the killed refresh's claim lapses soon
    script = textwrap.dedent(
        f"""
        from ivm_assets import IvmProject
        IvmProject.load({str(builder.root)!r}).refresh()
        """
    )
    env = {**os.environ, "IVM_CRASH_AFTER_COMMITS": "3", "IVM_SPARK_MASTER": "local[1]"}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    [result] = project.refresh()  # takes over once the claim lapses, and repeats the epoch
    assert result.epoch == 2 and result.mode == "incremental", result.summary()
    assert_oracle(project)


def _unaware(uri: str, epoch: Epoch, **_) -> bool:
    """``holds_epoch`` as an attempt sees it before another attempt of its epoch committed:
    no table holds the epoch yet (only the fenced commit itself can tell)."""
    return False


def two_attempts(project, monkeypatch) -> tuple[EpochRecord, list[str], list[int]]:
    """Run the epoch a crash left `started` twice, as a holder paused past its lease and the
    refresh that took over would: the first attempt commits; the second, seeing no table
    holding the epoch yet, reaches every commit, each refused by its fence. Returns the
    record, the view's tables and their versions after the first attempt (unchanged by the
    second: asserted here)."""
    where = project.location("sales")
    record = Progress(where.progress).read().started
    view = project.compile(["sales"])["sales"]
    relations = {d: project.relation_uri(d) for d in view.definition.dependencies}
    epoch = Epoch("ivm:sales", record.epoch, {})

    def attempt() -> None:
        execute._run_epoch(project.spark, view, where, relations, record, epoch, project.config.state_buckets, {})

    tables = [where.output, *(f"{where.state_root}/{name}" for name in record.payload["state_versions"])]
    attempt()
    after_first = [latest_version(uri) for uri in tables]
    with monkeypatch.context() as m:
        m.setattr(arrangement, "holds_epoch", _unaware)
        m.setattr(execute, "holds_epoch", _unaware)
        attempt()  # reaches every commit: each is refused by its fence, and skipped
    assert [latest_version(uri) for uri in tables] == after_first
    return record, tables, after_first


def test_two_attempts_of_one_epoch_apply_it_once(builder, monkeypatch):
    project = _project(builder)
    _change(builder, 1)
    assert _crash_at(project, monkeypatch, 1)  # the claim with `started` is committed, nothing else
    record, tables, after_first = two_attempts(project, monkeypatch)
    assert after_first[0] == record.payload["output_version"] + 1
    [result] = project.refresh()  # commits the epoch (a third attempt, with nothing left to write)
    assert (result.epoch, result.mode) == (2, "incremental")
    assert [latest_version(uri) for uri in tables] == after_first
    assert_oracle(project)


def test_a_table_changed_under_an_epoch_stops_it_until_a_full_refresh(builder, monkeypatch):
    project = _project(builder)
    _change(builder, 1)
    # One commit at a time, in order (state tables, then the output): the crash after the
    # claim's and the first state table's commits leaves the output to be written.
    monkeypatch.setattr(execute, "COMMIT_THREADS", 1)
    assert _crash_at(project, monkeypatch, 2)
    output = project.location("sales").output
    stray = {"region": "zz", "n": 1, "total": Decimal("1.00"), "biggest": Decimal("1.00")}
    write(output, pa.Table.from_pylist([stray], schema=arrow_schema(output)), mode="append")
    expected = (
        r"^view 'sales': a table changed under epoch 2 of this refresh: Delta table \S+/sales is at version \d+ "
        r"but this refresh was to commit right after version \d+: another process wrote it first\. "
        r"Nothing was applied twice\. Run `ivm refresh --full sales` to rebuild the view from its sources\.$"
    )
    with pytest.raises(RefreshError, match=expected):
        project.refresh()
    [result] = project.refresh(full=True)  # replaces the stuck epoch
    assert (result.epoch, result.mode) == (3, "full")
    assert_oracle(project)
