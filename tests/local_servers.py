"""What the tests' own servers share: starting one on 127.0.0.1 and waiting until it listens."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc: subprocess.Popen, port: int, log: Path, name: str, *, timeout_s: float = 30) -> None:
    """Return once ``proc`` accepts connections on 127.0.0.1:``port``; raise with the end of
    its ``log`` if it exits first or does not listen within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start on port {port}: {log.read_text()[-2000:]}")
            time.sleep(0.2)
