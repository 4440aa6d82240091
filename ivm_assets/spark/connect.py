"""A local Spark Connect server that outlives the processes using it: a warm Spark.

Every Dagster run is a new process; with Spark in local mode each one starts its own JVM
(10–20 s on a small machine) before any work. A Connect server started once keeps that JVM
warm: a run attaches to it over gRPC in about a second. pyspark's wheel ships the server
(``spark-connect_*.jar``), so no other install is needed.

The server runs detached (its own session), listens on 127.0.0.1 only, and is recorded in
``<directory>/server.json`` (pid, port, log, who started it) so any process can find it, and
stop it by that pid. ``directory`` defaults to ``$IVM_SPARK_CONNECT_DIR`` or
``~/.ivm/spark-connect``.

A server that a refresh started on its own (``remote="local"`` with none running) must not
outlive its use: it stops after ``$IVM_SPARK_CONNECT_IDLE_S`` seconds (default 1800) with
no client connected. A watchdog process beside it counts the TCP connections established
to its port (``/proc/net/tcp``: a Connect client holds its gRPC channel open for as long as
its session lives, a finished run's is closed) and stops it by its pid once none has been
there for that long. ``ivm spark start`` runs one until ``ivm spark stop``, unless given
``--idle-timeout``.

Example:
    >>> server = start_server(port=15002)          # doctest: +SKIP
    >>> server.url                                  # doctest: +SKIP
    'sc://127.0.0.1:15002'
    >>> stop_server()                               # doctest: +SKIP
    True
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import pyspark

from ivm_assets import settings as ivm_settings
from ivm_assets.errors import IvmError
from ivm_assets.spark.cluster import is_local_master

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class ConnectServer:
    """A running local Connect server, as recorded in its ``server.json``."""

    pid: int
    port: int
    log: str
    started: float
    started_by: str = "ivm spark start"
    # Seconds without a connected client after which the watchdog stops it (None: never).
    idle_timeout_s: float | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def summary(self, folder: Path | None = None) -> str:
        text = (
            f"Spark Connect server {self.url} (pid {self.pid}, up {time.time() - self.started:.0f} s, "
            f"started by {self.started_by}, log {self.log})"
        )
        if self.idle_timeout_s is None:
            return text + "; runs until `ivm spark stop`"
        idle_since = _idle_since(folder or default_directory())
        if idle_since is None:
            return text + f"; in use: stops {self.idle_timeout_s:.0f} s after its last client leaves"
        stop_at = time.strftime("%H:%M:%S", time.localtime(idle_since + self.idle_timeout_s))
        return text + f"; no client since {time.time() - idle_since:.0f} s: stops at {stop_at} unless one connects"


def default_idle_timeout() -> float:
    """How long a server a refresh started on its own waits for a client before stopping."""
    return ivm_settings.current().connect_idle_s


def default_directory() -> Path:
    return ivm_settings.current().connect_dir


def default_port() -> int:
    return ivm_settings.current().connect_port


def server_status(directory: str | Path | None = None) -> ConnectServer | None:
    """The recorded server if its process is still the Connect server, else None.

    The pid is checked against the process's command line, so a pid reused by another
    program after the server died is never mistaken for it (nor ever signalled).
    """
    record = Path(directory or default_directory()) / "server.json"
    try:
        server = ConnectServer(**json.loads(record.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return server if _is_connect_server(server.pid) else None


def start_server(
    *,
    port: int | None = None,
    directory: str | Path | None = None,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
    started_by: str = "ivm spark start",
    idle_timeout_s: float | None = None,
) -> ConnectServer:
    """Start the local Connect server, or return the one already running in ``directory``.

    Safe to call from several processes at once (a file lock serializes them): exactly one
    server is started. ``conf`` adds Spark settings; ``master`` defaults to
    ``$IVM_SPARK_MASTER`` or ``local[*]``. ``idle_timeout_s``: stop it once no client has
    been connected for that long (a watchdog process watches it; None: run until stopped).
    """
    from ivm_assets.spark.session import DEFAULT_CONF, check_java

    folder = Path(directory or default_directory())
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        running = server_status(folder)
        if running is not None:
            return running
        check_java()
        port = port or default_port()
        if _port_in_use(port):
            raise IvmError(
                f"cannot start a Spark Connect server on 127.0.0.1:{port}: the port is taken by another program. "
                "Stop it, or choose another port (`ivm spark start --port N`, or $IVM_SPARK_CONNECT_PORT)."
            )
        settings = {
            **DEFAULT_CONF,
            **(conf or {}),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
        }
        driver_memory = settings.pop("spark.driver.memory", None)
        # `--conf spark.master=…` as well as the argument: spark-submit's --master would win over it.
        master = master or settings.pop("spark.master", None) or ivm_settings.current().master_or_default
        command = [
            str(Path(pyspark.__file__).parent / "bin" / "spark-submit"),
            "--class", SERVER_CLASS,
            "--name", "ivm_assets Spark Connect server",
            "--master", master,
            *(["--driver-memory", driver_memory] if driver_memory else []),
        ]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        log = folder / "server.log"
        env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        if is_local_master(master):
            # Clients reach it on 127.0.0.1; a cluster's executors must reach its driver, so
            # there Spark (or the user's SPARK_LOCAL_IP) picks the driver's address.
            env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        with log.open("ab") as out:
            # Its own session: Ctrl-C in the terminal that started it does not reach it, and
            # spark-submit execs java, so the pid recorded is the server's JVM.
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        server = ConnectServer(process.pid, port, str(log), time.time(), started_by, idle_timeout_s)
        (folder / "server.json").write_text(json.dumps(asdict(server)))
        _wait_until_listening(process, server, timeout_s)
        if idle_timeout_s is not None:
            with log.open("ab") as out:
                subprocess.Popen(
                    [sys.executable, "-m", "ivm_assets.spark.connect", "watch", str(folder)],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                )
        return server


def stop_server(directory: str | Path | None = None, *, timeout_s: float = 30.0) -> bool:
    """Stop the recorded server by its pid (SIGTERM, then SIGKILL after ``timeout_s``).

    Returns False when no server was running.
    """
    folder = Path(directory or default_directory())
    with _locked(folder):
        server = server_status(folder)
        (folder / "server.json").unlink(missing_ok=True)
        if server is None:
            return False
        _terminate(server.pid, timeout_s)
        return True


def watch(folder: Path, *, poll_s: float = 5.0) -> None:
    """Stop the server recorded in ``folder`` once no client has been connected to it for its
    ``idle_timeout_s``; return when it stops (by this or otherwise). Run as its own process,
    beside the server (``python -m ivm_assets.spark.connect watch FOLDER``)."""
    idle_since: float | None = None
    while True:
        server = server_status(folder)
        if server is None or server.idle_timeout_s is None:
            return
        if _connections(server.port):
            idle_since = None
            (folder / "idle_since").unlink(missing_ok=True)
        elif idle_since is None:
            idle_since = time.time()
            (folder / "idle_since").write_text(str(idle_since))
        elif time.time() - idle_since > server.idle_timeout_s:
            stop_server(folder)
            (folder / "idle_since").unlink(missing_ok=True)
            return
        time.sleep(min(poll_s, max(server.idle_timeout_s / 3, 0.5)))


def _idle_since(folder: Path) -> float | None:
    try:
        return float((folder / "idle_since").read_text())
    except (OSError, ValueError):
        return None


def _connections(port: int) -> int:
    """TCP connections established to ``port`` on this machine (IPv4 and IPv6 tables)."""
    found = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)  # the header
                for line in lines:
                    fields = line.split()
                    local, state = fields[1], fields[3]
                    if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                        found += 1
        except OSError:
            continue
    return found


def _terminate(pid: int, timeout_s: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_until_listening(process: subprocess.Popen, server: ConnectServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not _port_in_use(server.port):
        if process.poll() is not None:
            raise IvmError(
                f"the Spark Connect server exited with status {process.returncode} before listening on port "
                f"{server.port}; see its log {server.log}"
            )
        if time.monotonic() > deadline:
            _terminate(server.pid, 10)
            raise IvmError(
                f"the Spark Connect server did not listen on port {server.port} within {timeout_s:.0f} s and was "
                f"stopped; see its log {server.log}"
            )
        time.sleep(0.25)


def _port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


def _is_connect_server(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return SERVER_CLASS.encode() in cmdline.read() and _alive(pid)
    except OSError:
        return False


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_command(action: str, *, port: int | None = None, conf: list[str] = (), idle_timeout_s: float | None = None) -> int:
    """``ivm spark start|stop|status``: prints what it did; exit status 0, or 1 for ``status`` with no server."""
    if action == "start":
        settings = {}
        for item in conf:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise IvmError(f"--conf: expected KEY=VALUE (e.g. spark.driver.memory=8g), found {item!r}")
            settings[key] = value
        print(start_server(port=port, conf=settings, idle_timeout_s=idle_timeout_s).summary())
        return 0
    if action == "stop":
        print("stopped the Spark Connect server" if stop_server() else "no Spark Connect server was running")
        return 0
    server = server_status()
    print(server.summary() if server else f"no Spark Connect server running (recorded in {default_directory()})")
    return 0 if server else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "watch":
        watch(Path(sys.argv[2]))
    else:
        sys.exit("usage: python -m ivm_assets.spark.connect watch FOLDER")
