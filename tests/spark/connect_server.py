"""One real Spark Connect server per test session, shared by every test that needs one.

Imported by the conftests of tests/spark and tests/dagster: both register the
``connect_server`` fixture, and the process-level cache below makes them share one server,
which is stopped by its pid at the end of the session (stopping twice is a no-op).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ivm_assets.spark.connect import ConnectServer, start_server, stop_server

_started: dict[str, tuple[Path, ConnectServer]] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect_env(server: ConnectServer, folder: Path) -> dict[str, str]:
    """Environment that points ``remote="local"`` (and $IVM_SPARK_REMOTE users) at ``server``."""
    return {"IVM_SPARK_CONNECT_DIR": str(folder), "IVM_SPARK_CONNECT_PORT": str(server.port)}


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory) -> tuple[ConnectServer, dict[str, str]]:
    """(the server, the environment for subprocesses that should use it)."""
    if "server" not in _started:
        folder = tmp_path_factory.getbasetemp() / "spark-connect"
        # Two cores are shared with the session's own local Spark: keep the server small.
        server = start_server(port=free_port(), directory=folder, master="local[2]", conf={"spark.driver.memory": "2g"})
        _started["server"] = (folder, server)
    folder, server = _started["server"]
    yield server, connect_env(server, folder)
    stop_server(folder)
