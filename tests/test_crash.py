"""A refresh killed between any two commits recovers on the next refresh, exactly once.

In-process, every commit boundary of an epoch is tried in turn (IVM_CRASH_MODE=raise leaves
the same state on disk as a kill). One boundary is also tried with a real SIGKILL of a
separate process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from ivm_assets.delta import tables as delta
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
    delta.write(uri, pa.Table.from_pylist([{"id": 100 + step, "cust": step % 3, "amount": 5 + step}], schema=ORDERS), mode="append")
    delta.delete_rows(uri, f"id = {1 + step % 6}")


def _crash_at(project, monkeypatch, commits: int) -> bool:
    """Refresh, dying after ``commits`` commits; True if the crash happened."""
    monkeypatch.setenv("IVM_CRASH_AFTER_COMMITS", str(commits))
    monkeypatch.setenv("IVM_CRASH_MODE", "raise")
    delta.reset_commit_count()
    try:
        project.refresh()
        return False
    except delta.SimulatedCrash:
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
    # An epoch of this view commits: the claim, a started record, the join's two sides, the
    # aggregate's groups and MAX values, the output, a committed record and the claim's
    # release; each boundary was crossed.
    assert boundary > 9


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
