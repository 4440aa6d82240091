"""The warm local Spark Connect server: start once, find it, reuse it, stop it by its pid."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ivm_assets.errors import IvmError
from ivm_assets.spark.connect import SERVER_CLASS, server_status, start_server, stop_server

BIN = Path(sys.executable).parent

pytestmark = pytest.mark.connect


def test_the_session_server_is_recorded_and_reused(connect_server):
    server, env = connect_server
    folder = env["IVM_SPARK_CONNECT_DIR"]
    assert server_status(folder) == server
    assert server.url == f"sc://127.0.0.1:{server.port}"
    # A second start (another run, another process) attaches to the same server.
    assert start_server(directory=folder) == server
    status = subprocess.run([BIN / "ivm", "spark", "status"], env={**os.environ, **env}, capture_output=True, text=True)
    assert status.returncode == 0 and f"{server.url} (pid {server.pid}" in status.stdout


def test_a_client_session_attaches_to_it_and_runs_sql(connect_server, tmp_path):
    server, env = connect_server
    # A Connect session switches pyspark to Connect for the whole process: use a fresh one.
    # Its reads reach the server with their options: Parquet's filters stay off for a table
    # with DOUBLE columns, so −0.0 passes x = 0 and NaN passes x > 0 there too (read.float_safe).
    table = str(tmp_path / "t")
    code = (
        "import pyarrow as pa\n"
        "from ivm_assets.delta.read import read_snapshot\n"
        "from ivm_assets.delta.write import create_table, write\n"
        "from ivm_assets.spark.session import get_spark, describe\n"
        f"create_table({table!r}, pa.table({{'x': [1.0]}}))\n"
        f"write({table!r}, pa.table({{'x': [float('nan'), -0.0]}}), mode='append')\n"
        "s = get_spark(remote='local')\n"
        f"t = read_snapshot(s, {table!r})\n"
        "print(describe(s), s.conf.get('spark.sql.session.timeZone'), s.range(5).count(),\n"
        "      t.filter('x = 0').count(), t.filter('x > 0').count())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["connect", server.url, "UTC", "5", "1", "2"]


def _wait_for_exec(pid: int, marker: str) -> None:
    """Until the child has exec'd: right after fork its command line is still the parent's."""
    deadline = time.monotonic() + 10
    while marker not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
        assert time.monotonic() < deadline, f"process {pid} never showed {marker!r} in its command line"
        time.sleep(0.02)


def test_stop_signals_the_recorded_pid_only_if_it_is_a_connect_server(tmp_path):
    # A stand-in whose command line names the server class, so nothing costly is started.
    fake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", SERVER_CLASS])
    try:
        _wait_for_exec(fake.pid, SERVER_CLASS)
        (tmp_path / "server.json").write_text(json.dumps({"pid": fake.pid, "port": 1, "log": "x", "started": time.time()}))
        assert server_status(tmp_path).pid == fake.pid
        assert stop_server(tmp_path) is True
        assert fake.wait(timeout=10) is not None
        assert server_status(tmp_path) is None and not (tmp_path / "server.json").exists()
        assert stop_server(tmp_path) is False
    finally:
        fake.kill()
    # A record whose pid now belongs to another program is ignored, never signalled.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (tmp_path / "server.json").write_text(json.dumps({"pid": other.pid, "port": 1, "log": "x", "started": time.time()}))
        assert server_status(tmp_path) is None
        assert stop_server(tmp_path) is False and other.poll() is None
    finally:
        other.kill()


def test_a_taken_port_is_an_error_that_says_what_to_do(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(IvmError, match=rf"127.0.0.1:{port}: the port is taken.*ivm spark start --port N"):
            start_server(port=port, directory=tmp_path)
    assert server_status(tmp_path) is None


def test_cli_status_without_a_server_exits_1(tmp_path):
    out = subprocess.run([BIN / "ivm", "spark", "status"], env={**os.environ, "IVM_SPARK_CONNECT_DIR": str(tmp_path)},
                         capture_output=True, text=True)
    assert out.returncode == 1 and "no Spark Connect server running" in out.stdout


def test_a_server_a_refresh_started_stops_when_no_client_is_left(tmp_path):
    """Seen from outside: after `dagster dev` stopped, the server its runs started kept its
    1.2 GiB JVM with no owner. One started on a refresh's behalf now stops once no client has
    been connected for its idle timeout; while a client holds a session it stays."""
    from tests.spark.connect_server import free_port

    folder, port, connected = tmp_path / "connect", free_port(), tmp_path / "connected"
    # The client imports pyspark before the server starts, then connects as soon as it is
    # up: a client slower than the idle timeout to connect (a loaded machine) would find the
    # server already stopped. It waits for the port to listen before its first gRPC call: a
    # call made earlier enters the client's retry backoff (up to a minute between tries),
    # long past the idle timeout (CI saw this once).
    client = subprocess.Popen([
        sys.executable, "-c",
        "import pathlib, socket, time\nfrom pyspark.sql import SparkSession\n"
        "for _ in range(1200):\n"
        "    try:\n"
        f"        socket.create_connection(('127.0.0.1', {port}), timeout=1).close()\n"
        "        break\n"
        "    except OSError:\n"
        "        time.sleep(0.1)\n"
        "for _ in range(240):\n"
        "    try:\n"
        f"        SparkSession.builder.remote('sc://127.0.0.1:{port}').getOrCreate().range(3).count()\n"
        "        break\n"
        "    except Exception:\n"
        "        time.sleep(0.5)\n"
        "else:\n"
        "    raise SystemExit('never connected')\n"
        f"pathlib.Path({str(connected)!r}).touch()\ntime.sleep(10)\n",
    ], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server = start_server(port=port, directory=folder, master="local[1]", conf={"spark.driver.memory": "1g"},
                              started_by="a refresh (test)", idle_timeout_s=5)
        assert "started by a refresh (test)" in server.summary(folder)
        deadline = time.monotonic() + 120
        while not connected.exists():
            assert time.monotonic() < deadline and client.poll() is None, "the client did not connect"
            time.sleep(0.2)
        time.sleep(7)  # past the idle timeout, with the client connected
        assert server_status(folder) is not None
        assert client.wait(timeout=60) == 0
    finally:
        if client.poll() is None:
            client.kill()
    deadline = time.monotonic() + 60
    while server_status(folder) is not None:
        assert time.monotonic() < deadline, "the server outlived its idle timeout"
        time.sleep(1)
