"""Refreshes of one project in several processes at once: every epoch is applied once.

Real processes, real Spark, real Delta: three long-lived workers (``tests/refresh_worker.py``,
each with its own Spark session) run the real `ivm` CLI entry on the same signal. Between
rounds the sources change at random; after each round every view equals a recompute, its
output holds nothing past its last committed epoch, and no source change is left behind.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from ivm_assets import IvmProject
from ivm_assets.delta.handles import latest_version
from ivm_assets.delta.write import delete_rows, write
from ivm_assets.state.progress import Progress
from tests.conftest import ProjectBuilder, assert_oracle
from tests.test_workload import CUSTOMERS, LINES, ORDERS, VIEWS, _epoch_changes, _lines, _order

pytestmark = pytest.mark.slow

# The first build and one incremental round, raced by all three; IVM_CONCURRENCY_ROUNDS=6 searches deeper.
ROUNDS = int(os.environ.get("IVM_CONCURRENCY_ROUNDS", "2"))
REPO = Path(__file__).resolve().parents[1]
BUSY = re.compile(r"^error: view \w+ is being refreshed by \S+ since [\d-]+ [\d:]+ UTC; try again later or raise --wait$")
SUMMARY = re.compile(r"^(\w+): (\w+)")


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    def modes(self) -> dict[str, str]:
        """view -> mode ("incremental", "full", "unchanged") from the summary lines."""
        return {m[1]: m[2] for m in map(SUMMARY.match, self.stdout.splitlines()) if m}

    def ok_or_busy(self) -> bool:
        return self.code == 0 or (self.code == 1 and bool(BUSY.match(self.stderr.strip())))


class Worker:
    """One `python -m tests.refresh_worker` process: commands in on stdin, results out."""

    def __init__(self) -> None:
        env = {**os.environ, "IVM_SPARK_MASTER": "local[1]"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.refresh_worker"], cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _expect(self, prefix: str, timeout: float = 600) -> str:
        while True:
            line = self._lines.get(timeout=timeout)
            if line is None:
                raise AssertionError(f"worker {self.proc.pid} exited with {self.proc.wait()} before answering")
            if line.startswith(prefix):
                return line[len(prefix):]

    def ready(self) -> None:
        self._expect("READY")

    def send(self, *args: str) -> None:
        self.proc.stdin.write(json.dumps(list(args)) + "\n")
        self.proc.stdin.flush()

    def result(self) -> Result:
        answer = Result(**json.loads(self._expect("RESULT ")))
        assert answer.code != -1, f"worker {self.proc.pid}: the CLI let an exception through:\n{answer.stderr}"
        return answer

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def workers():
    started = [Worker() for _ in range(3)]
    try:
        for worker in started:
            worker.ready()
        yield started
    finally:
        for worker in started:
            worker.stop()


def _together(workers: list[Worker], *args: str) -> list[Result]:
    for worker in workers:
        worker.send(*args)
    return [worker.result() for worker in workers]


def _assert_up_to_date(project: IvmProject, views: list[str] | None = None) -> None:
    """Each view equals a recompute, nothing landed in its output after its last committed
    epoch, every source change was consumed, and no claim is left."""
    views = views or project.order
    assert_oracle(project, views)
    for status in project.status():
        if status.view in views:
            assert not status.pending and not status.interrupted and status.refreshing_by is None, status.summary()
    for view in views:
        where = project.location(view)
        committed = Progress(where.progress).last_committed()
        assert latest_version(where.output) == committed.payload["output_version_after"], view


def test_three_processes_refreshing_at_once_apply_every_epoch_once(builder, workers):
    rng = random.Random(20261122)
    initial = [_order(rng, i) for i in range(1, 13)]
    builder.source("orders", pa.Table.from_pylist(initial, schema=ORDERS))
    builder.source("lines", pa.Table.from_pylist([l for o in initial for l in _lines(rng, o["id"])], schema=LINES))
    builder.source("customers", pa.Table.from_pylist([{"cust": c, "region": rng.choice(["eu", "us"])} for c in range(1, 7)], schema=CUSTOMERS))
    for name, sql in VIEWS.items():
        builder.view(name, sql)
    project = builder.load()
    changes = {"next": 13, "live": [o["id"] for o in initial]}
    for round_ in range(ROUNDS):
        if round_:  # round 0 is the first build, raced by all three
            _epoch_changes(rng, builder, changes)
        results = _together(workers, "refresh", "--project", str(builder.root), "--wait", "600")
        assert all(r.ok_or_busy() for r in results), results
        # The one process that got a view's claim with work to do did it; the others then
        # found the view up to date.
        ran = Counter(view for r in results for view, mode in r.modes().items() if mode != "unchanged")
        assert all(n <= 1 for n in ran.values()), (round_, results)
        if round_ == 0:
            assert set(ran) == set(VIEWS), results
        _assert_up_to_date(project)


def _sales_project(root: Path, spark, **settings) -> ProjectBuilder:
    builder = ProjectBuilder(root, spark)
    builder.source("orders", {"id": pa.array([1, 2, 3, 4], pa.int64()), "cust": pa.array([0, 1, 2, 0], pa.int64()), "amount": pa.array([5, 6, 7, 8], pa.int64())})
    builder.source("customers", {"cust": pa.array([0, 1, 2], pa.int64()), "region": ["eu", "us", "eu"]})
    builder.view("sales", "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total FROM orders o JOIN customers c ON o.cust = c.cust GROUP BY c.region")
    builder.view("regions", "SELECT DISTINCT region FROM customers")
    builder.write_config("".join(f"{k}: {v}\n" for k, v in settings.items()))
    return builder


def _change_sources(builder: ProjectBuilder, step: int) -> None:
    write(builder.uri("orders"), pa.table({"id": pa.array([100 + step], pa.int64()), "cust": pa.array([step % 3], pa.int64()), "amount": pa.array([step], pa.int64())}), mode="append")
    delete_rows(builder.uri("orders"), f"id = {1 + step % 4}")
    write(builder.uri("customers"), pa.table({"cust": pa.array([10 + step], pa.int64()), "region": [f"r{step}"]}), mode="append")


def test_a_waiter_takes_over_from_a_holder_killed_mid_epoch(tmp_path, spark, workers):
    builder = _sales_project(tmp_path / "shop", spark, lease_seconds=3)
    project = IvmProject.load(builder.root, spark=spark)
    project.refresh(["sales"])
    _change_sources(builder, 1)
    progress = Progress(project.location("sales").progress)
    # Killed (SIGKILL) right after its 4th commit: the claim, `started`, and state tables.
    env = {**os.environ, "IVM_SPARK_MASTER": "local[1]", "IVM_CRASH_AFTER_COMMITS": "4"}
    holder = subprocess.Popen(
        [sys.executable, "-m", "ivm_assets.cli", "refresh", "sales", "--project", str(builder.root)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        while holder.poll() is None and not _claimed_by(progress, holder.pid):
            time.sleep(0.1)
        workers[0].send("refresh", "sales", "--project", str(builder.root), "--wait", "300")
        _, err = holder.communicate(timeout=300)
        assert holder.returncode == -9, err[-2000:]
        waiter = workers[0].result()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert waiter.code == 0 and waiter.modes() == {"sales": "incremental"}, waiter
    # The interrupted epoch 2 was repeated, once: not skipped, not applied as a new epoch.
    assert progress.last_committed().epoch == 2
    _assert_up_to_date(project, ["sales"])


def _claimed_by(progress: Progress, pid: int) -> bool:
    claim = progress.read().claim
    return claim is not None and f"/{pid}/" in claim.owner


def test_two_views_refresh_at_once_in_two_processes(tmp_path, spark, workers):
    builder = _sales_project(tmp_path / "shop", spark)
    project = IvmProject.load(builder.root, spark=spark)
    project.refresh()
    _change_sources(builder, 2)
    workers[0].send("refresh", "sales", "--project", str(builder.root), "--wait", "0")
    workers[1].send("refresh", "regions", "--project", str(builder.root), "--wait", "0")
    sales, regions = workers[0].result(), workers[1].result()
    assert sales.code == 0 and sales.modes() == {"sales": "incremental"}, sales
    assert regions.code == 0 and regions.modes() == {"regions": "incremental"}, regions
    _assert_up_to_date(project)


HOLD = textwrap.dedent(
    """
    import sys
    from ivm_assets.state.claim import ClaimSettings, hold
    from ivm_assets.state.progress import Progress

    with hold(Progress(sys.argv[1]), "sales", ClaimSettings(wait_s=0, lease_s=60, run="holder")):
        print("HELD", flush=True)
        sys.stdin.read()
    """
)


def test_a_refresh_that_waits_too_long_names_the_holder_and_exits_1(tmp_path, spark, workers):
    builder = _sales_project(tmp_path / "shop", spark)
    project = IvmProject.load(builder.root, spark=spark)
    project.refresh()
    _change_sources(builder, 3)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, project.location("sales").progress], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "HELD\n"
        busy = _together(workers[:1], "refresh", "sales", "--project", str(builder.root), "--wait", "1")[0]
        status = _together(workers[:1], "status", "--project", str(builder.root))[0]
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    owner = f"{socket.gethostname()}/{holder.pid}/holder"
    assert busy.code == 1 and busy.stdout == "", busy
    assert BUSY.match(busy.stderr.strip()) and f"view sales is being refreshed by {owner} since " in busy.stderr, busy
    assert status.code == 0 and "sales: epoch 1 (full, first build)" in status.stdout, status
    assert f"being refreshed by {owner} since" in status.stdout, status
    again = _together(workers[:1], "refresh", "sales", "--project", str(builder.root), "--wait", "0")[0]
    assert again.code == 0 and again.modes() == {"sales": "incremental"}, again
    _assert_up_to_date(project, ["sales"])
