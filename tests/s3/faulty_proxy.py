"""A TCP proxy that breaks connections on purpose, run as its own process by the fault tests.

Usage: ``python faulty_proxy.py UPSTREAM_PORT SEED STALL_S``. It listens on two free ports
of 127.0.0.1 and prints them (``<proxy port> <control port>``) on its first line: clients
connect to the proxy port and reach ``127.0.0.1:UPSTREAM_PORT``; the control port takes one
command per connection (``rate 0.3``: break each new connection with that probability from
now on; ``rate 1 stall response``: break every one, always that way; ``lose PUT /b/t/_delta_log/``:
forward the next request whose start matches that regular expression whole, then reset its connection before any
of the answer comes back, so the store acted on it and the client cannot know; ``refuse
GET /b/t/``: reset every connection whose next request matches, unsent, until a bare
``refuse``; ``stats``: a
JSON line of the faults made so far).

Why a process and not a thread of the test: some delta-rs calls (``DeltaTable.is_deltatable``)
keep Python's GIL while they wait on the network, so a proxy thread in the same interpreter
never gets to forward their requests, and every one of them times out.

A broken connection is cut at a byte offset of its request or of its response drawn from a
generator seeded with SEED: closed (FIN), reset (RST), or stalled (held silent for STALL_S,
then closed). Only standard library modules: it starts in ~50 ms.
"""

from __future__ import annotations

import json
import random
import re
import socket
import struct
import sys
import threading
from collections import Counter

KINDS = ("close", "reset", "stall")
DIRECTIONS = ("request", "response")


class FaultyProxy:
    def __init__(self, upstream_port: int, *, seed: int, stall_s: float) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.random = random.Random(seed)
        self.stall_s = stall_s
        self.rate = 0.0
        self.kinds, self.directions = KINDS, DIRECTIONS
        self.lose: re.Pattern[bytes] | None = None  # matches the start of a request whose answer is lost
        self.refuse: re.Pattern[bytes] | None = None  # matches the start of every request reset unsent
        self.faults: Counter[str] = Counter()  # "<kind> <direction>" → connections broken so
        self.connections = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.control = socket.create_server(("127.0.0.1", 0))

    def plan(self) -> tuple[str, str, int] | None:
        with self.lock:
            self.connections += 1
            if self.random.random() >= self.rate:
                return None
            # A signed request's headers are ~1 kB; responses to log and parquet reads are longer.
            direction = self.random.choice(self.directions)
            return self.random.choice(self.kinds), direction, self.random.randrange(0, 1500 if direction == "request" else 6000)

    def accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            threading.Thread(target=self.serve, args=(client, self.plan()), daemon=True).start()

    def serve(self, client: socket.socket, plan: tuple[str, str, int] | None) -> None:
        try:
            server = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        broken, losing = threading.Event(), threading.Event()
        for source, sink, direction in ((client, server, "request"), (server, client, "response")):
            fault = plan if plan is not None and plan[1] == direction else None
            threading.Thread(target=self.pump, args=(source, sink, fault, client, server, broken, losing), daemon=True).start()

    def pump(self, source, sink, fault, client, server, broken: threading.Event, losing: threading.Event) -> None:
        sent = 0
        try:
            while not broken.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if source is client and self._loses(data):
                    losing.set()  # before the request goes on: its answer cannot beat the flag
                if source is client and self._refuses(data):
                    self.cut("refuse", "request", client, server, broken)
                    return
                if source is server and losing.is_set():
                    self.cut("lose", "response", client, server, broken)
                    return
                if fault is not None and sent + len(data) > fault[2]:
                    sink.sendall(data[: fault[2] - sent])
                    self.cut(fault[0], fault[1], client, server, broken)
                    return
                sink.sendall(data)
                sent += len(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            broken.set()
            client.close()
            server.close()

    def _refuses(self, data: bytes) -> bool:
        with self.lock:
            return self.refuse is not None and self.refuse.match(data) is not None

    def _loses(self, data: bytes) -> bool:
        with self.lock:
            if self.lose is None or not self.lose.match(data):
                return False
            self.lose = None
            return True

    def cut(self, kind: str, direction: str, client, server, broken: threading.Event) -> None:
        with self.lock:
            self.faults[f"{kind} {direction}"] += 1
        broken.set()
        # The server's side closes at once: moto reads a request's body holding a lock that
        # every other request waits for, so a half-sent request left open would stall it all.
        server.close()
        if kind == "stall":
            threading.Event().wait(self.stall_s)
        elif kind in ("reset", "lose"):
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
        client.close()

    def commands(self) -> None:
        while True:
            conn, _ = self.control.accept()
            with conn, conn.makefile("rw") as f:
                command = f.readline().split()
                if command[:1] == ["rate"]:
                    with self.lock:
                        self.rate = float(command[1])
                        self.kinds = tuple(c for c in command[2:] if c in KINDS) or KINDS
                        self.directions = tuple(c for c in command[2:] if c in DIRECTIONS) or DIRECTIONS
                    f.write("ok\n")
                elif command[:1] == ["refuse"]:
                    with self.lock:
                        self.refuse = re.compile(" ".join(command[1:]).encode()) if command[1:] else None
                    f.write("ok\n")
                elif command[:1] == ["lose"]:
                    with self.lock:
                        self.lose = re.compile(" ".join(command[1:]).encode())
                    f.write("ok\n")
                else:
                    with self.lock:
                        f.write(json.dumps({"connections": self.connections, "faults": dict(self.faults)}) + "\n")


def main() -> None:
    upstream, seed, stall_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    proxy = FaultyProxy(upstream, seed=seed, stall_s=stall_s)
    print(proxy.listener.getsockname()[1], proxy.control.getsockname()[1], flush=True)
    threading.Thread(target=proxy.accept, daemon=True).start()
    proxy.commands()


if __name__ == "__main__":
    main()
