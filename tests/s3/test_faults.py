"""Refreshes through a broken network: a TCP proxy between the project and the local S3
server cuts or stalls connections at random (seeded) moments, or loses the answer to a chosen
commit (the store made it; the client cannot know).

Whatever breaks, a refresh either succeeds (the clients retried) or fails with an
:class:`~ivm_assets.errors.IvmError` that says what to check; a re-run with the network
healthy converges to the recompute; no epoch is applied twice to any table; and no table
ever holds a partial commit (each commit of an epoch is one Delta version, or none).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from ivm_assets.delta import storage_errors
from ivm_assets.delta.write import delete_rows, write
from ivm_assets.errors import IvmError, StorageError
from ivm_assets.settings import SMALL_EPOCHS_ENV
from ivm_assets.state.progress import Progress
from tests.conftest import assert_oracle
from tests.s3.test_object_storage import ORDERS, SALES

pytestmark = pytest.mark.s3

# The clients give up on a silent connection after 1 s (delta-rs' default is 30 s) and retry
# a few times; a stall outlasts the timeout.
STALL_S = 1.5
STORAGE_OPTIONS = {"timeout": "1s", "connect_timeout": "1s", "max_retries": "1", "retry_timeout": "3s"}
# The share of connections broken while a refresh runs. Against this server each request has a
# connection of its own: a first build of this view opens ~190, an epoch ~120.
RATE = 0.05


class Proxy:
    """The running proxy process (see ``faulty_proxy.py``): its endpoint and its controls."""

    def __init__(self, upstream: str, *, seed: int) -> None:
        port = upstream.rsplit(":", 1)[1]
        script = Path(__file__).with_name("faulty_proxy.py")
        self.process = subprocess.Popen([sys.executable, str(script), port, str(seed), str(STALL_S)], stdout=subprocess.PIPE, text=True)
        ports = self.process.stdout.readline().split()
        if len(ports) != 2:
            self.stop()
            raise RuntimeError(f"the fault proxy did not start (exit code {self.process.returncode})")
        self.endpoint = f"http://127.0.0.1:{ports[0]}"
        self._control = ("127.0.0.1", int(ports[1]))

    def _ask(self, command: str) -> str:
        with socket.create_connection(self._control, timeout=10) as conn, conn.makefile("rw") as f:
            f.write(command + "\n")
            f.flush()
            return f.readline()

    def rate(self, rate: float, *only: str) -> None:
        """Break each new connection with probability ``rate`` (``only`` these kinds or directions)."""
        self._ask(" ".join(["rate", str(rate), *only]))

    def lose(self, request: str) -> None:
        """Lose the answer to the next request whose start matches the regular expression ``request``."""
        self._ask(f"lose {request}")

    def refuse(self, request: str = "") -> None:
        """Reset every connection whose next request matches ``request`` (none: stop)."""
        self._ask(f"refuse {request}")

    def stats(self) -> dict:
        return json.loads(self._ask("stats"))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _changes(p, step: int) -> None:
    uri = p.sources["orders"]
    rows = [{"id": 100 * step + i, "cust": (step + i) % 3, "amount": Decimal(step + i)} for i in range(3)]
    write(uri, pa.Table.from_pylist(rows, schema=ORDERS), mode="append")
    delete_rows(uri, f"id = {step}")


@pytest.fixture
def proxy(s3_server):
    proxy = Proxy(s3_server.endpoint, seed=26)
    yield proxy
    proxy.stop()


def _shop_through(proxy: Proxy, p):
    """The shop project of test_object_storage, its storage options pointing at the proxy."""
    from ivm_assets import IvmProject

    p.source("orders", pa.Table.from_pylist([{"id": i, "cust": i % 3, "amount": Decimal(i)} for i in range(1, 7)], schema=ORDERS))
    p.source("customers", {"cust": pa.array([0, 1, 2], pa.int64()), "region": ["eu", "us", "eu"]})
    p.view("sales", SALES)
    options = {**p.server.options(secret="${IVM_TEST_S3_SECRET}"), "AWS_ENDPOINT_URL": proxy.endpoint, **STORAGE_OPTIONS}
    p.write_config({"storage_options": options})
    return IvmProject.load(p.root, spark=p.spark)


def _assert_clear(error: IvmError) -> None:
    """An error a user can act on: no storage client's internals, the table and what to check."""
    text = str(error)
    assert "Kernel error" not in text and "↳" not in text and "Traceback" not in text, text
    if isinstance(error, StorageError):
        assert "s3://" in text and "_delta_log/" not in text and "Check " in text, text
        assert error.__cause__ is None and error.__suppress_context__


def _assert_tables_whole(p) -> None:
    """Every Delta table in the bucket: each commit file is whole, no epoch is committed twice
    to one table, and every data file of its latest version is there."""
    objects = p.server.objects(p.bucket)
    logs: dict[str, dict[int, bytes]] = defaultdict(dict)
    for key, body in objects.items():
        table, found, name = key.partition("/_delta_log/")
        if found and name.endswith(".json") and name[:20].isdigit():
            logs[table][int(name[:20])] = body
    assert logs
    for table, commits in logs.items():
        epochs: Counter[str] = Counter()
        for body in commits.values():
            actions = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
            info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
            if "ivm.epoch" in info:
                epochs[info["ivm.epoch"]] += 1
        assert all(n == 1 for n in epochs.values()), (table, epochs)
        if table == "warehouse/sales":
            assert epochs, "the view's output carries its epochs in its commits' info"
        files = DeltaTable(f"{p.base}/{table}", storage_options=p.server.options()).file_uris()
        assert [f for f in files if f.removeprefix(f"{p.base}/") not in objects] == [], table


def test_refreshes_through_a_faulty_network_converge_and_apply_each_epoch_once(s3_project, proxy, monkeypatch, capsys):
    """A first build, an epoch in process and one in Spark, each refreshed once with some
    connections broken (:data:`RATE`) and again with none."""
    p = s3_project
    project = _shop_through(proxy, p)
    outcomes = []
    for step in range(3):
        if step:
            _changes(p, step)
        if step == 2:
            monkeypatch.setenv("IVM_SMALL_EPOCHS", "spark")
        proxy.rate(RATE)
        started = time.monotonic()
        try:
            outcome = " ".join(r.mode for r in project.refresh())
        except IvmError as error:
            _assert_clear(error)
            outcome = f"{type(error).__name__}: {error}"
        finally:
            proxy.rate(0)
        outcomes.append(f"{time.monotonic() - started:4.1f} s {outcome}")
        project.refresh()
        assert_oracle(project)
        assert Progress(project.location("sales").progress).last_committed().epoch == step + 1
        _assert_tables_whole(p)
    with capsys.disabled():
        print(f"\nthrough the fault proxy: {proxy.stats()}", *outcomes, sep="\n  ")


def test_a_store_that_breaks_every_connection_fails_the_refresh_with_a_storage_error(s3_project, proxy):
    """Each way of breaking, on every connection of a refresh: a StorageError saying so; then
    the network heals and the next refresh carries the epoch through."""
    p = s3_project
    project = _shop_through(proxy, p)
    project.refresh()
    for step, kind in enumerate(("close", "reset", "stall"), start=1):
        _changes(p, step)
        proxy.rate(1, kind)
        with pytest.raises(StorageError) as info:
            project.refresh()
        proxy.rate(0)
        _assert_clear(info.value)
        [result] = project.refresh()
        assert (result.epoch, result.mode) == (step + 1, "incremental"), result.summary()
        assert_oracle(project)
    _assert_tables_whole(p)


def test_a_commit_whose_answer_is_lost_is_applied_once(s3_project, proxy):
    """The store makes a commit and the connection breaks before its answer arrives, so the
    refresh cannot know the commit landed: for the view's output, a state table and the
    progress log in turn. The refresh fails or carries on; either way the epoch is applied once."""
    p = s3_project
    project = _shop_through(proxy, p)
    project.refresh()
    outcomes = []
    for step, table in enumerate(("sales", "_ivm/sales/join_[^/ ]+", "_ivm/sales/_progress"), start=1):
        _changes(p, step)
        request = f"PUT /{p.bucket}/warehouse/{table}/_delta_log/0"
        proxy.lose(request)
        mark = p.server.mark()
        try:
            outcomes.append(" ".join(r.mode for r in project.refresh()))
        except IvmError as error:
            _assert_clear(error)
            outcomes.append(f"{type(error).__name__}: {error}")
        made = [(path, status) for method, path, status in p.server.requests_since(mark) if re.match(request, f"{method} {path}")]
        assert made and made[0][1] == 200, made  # the store made the commit whose answer was lost
        project.refresh()
        assert_oracle(project)
        assert Progress(project.location("sales").progress).last_committed().epoch == step + 1, outcomes
    assert proxy.stats()["faults"] == {"lose response": 3}, outcomes
    _assert_tables_whole(p)


def test_a_change_feed_read_cut_off_is_a_storage_error(s3_project, proxy):
    """Every read of a source's change files fails on the network: the refresh says the store
    could not be reached (not that the feed is unreadable and the view needs a full refresh)."""
    p = s3_project
    project = _shop_through(proxy, p)
    project.refresh()
    _changes(p, 1)
    proxy.refuse(f"GET /{p.bucket}/sources/orders/_change_data/")
    with pytest.raises(StorageError) as info:
        project.refresh()
    proxy.refuse()
    _assert_clear(info.value)
    assert f"{p.base}/sources/orders" in str(info.value) and "full refresh" not in str(info.value), info.value
    [result] = project.refresh()
    assert (result.epoch, result.mode) == (2, "incremental"), result.summary()
    assert_oracle(project)


@pytest.mark.parametrize("engine", ["spark", "auto"])
def test_a_build_whose_source_read_is_cut_off_names_what_it_read(s3_project, proxy, monkeypatch, engine):
    """A first build that cannot read a source's files. In Spark (the executors read them,
    the driver none): the error names the file the executor was reading, not the table being
    built. In process (a small build, read by delta-rs on the driver): the source table."""
    monkeypatch.setenv(SMALL_EPOCHS_ENV, engine)
    p = s3_project
    project = _shop_through(proxy, p)
    proxy.refuse(f"GET /{p.bucket}/sources/orders/part-")
    with pytest.raises(StorageError) as info:
        project.refresh()
    proxy.refuse()
    _assert_clear(info.value)
    read = f"{p.base}/sources/orders/part-" if engine == "spark" else f"the Delta table {p.base}/sources/orders"
    assert read in str(info.value) and "warehouse" not in str(info.value), info.value
    [result] = project.refresh()
    assert result.mode == "full", result.summary()
    assert_oracle(project)


# What the storage clients said in these tests' runs when a connection broke (delta-rs, then
# pyarrow's S3 client), shortened.
_BROKEN = (
    "Kernel error -> Generic S3 error\n ↳ Error getting list response body\n  ↳ HTTP error\n   ↳ request or response body error\n"
    "    ↳ operation timed out",
    "Generic S3 error: Error performing PUT http://127.0.0.1:1/b/t/_delta_log/00000000000000000006.json in 1.5s - HTTP error "
    "error sending request operation timed out",
    "When reading information for key 't/part-1.parquet' in bucket 'b': AWS Error NETWORK_CONNECTION during HeadObject "
    "operation: curlCode: 56, Failure when receiving data from the peer",
)


@pytest.mark.parametrize("text", _BROKEN)
def test_a_broken_connection_is_told_as_such_naming_the_table(text):
    error = storage_errors.failure(OSError(text), "s3://b/t/_delta_log/00000000000000000006.json")
    assert error is not None and str(error).startswith("the connection to the store broke or timed out while reaching the Delta table s3://b/t ")
    assert "`timeout`" in str(error) and "Run the refresh again" in str(error)
    refused = "Generic S3 error: error sending request\n ↳ client error (Connect)\n ↳ tcp connect error\n ↳ Connection refused (os error 111)"
    assert str(storage_errors.failure(OSError(refused), "s3://b/t")).startswith("cannot connect to the store of the Delta table s3://b/t.")
