"""A Spark standalone cluster for the tests that need one: a master and a one-core worker,
started from pyspark's own ``bin/spark-class``, each its own process on 127.0.0.1, stopped by
its pid at the end of the test session (one cluster per test process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from pyspark import find_spark_home

from tests.spark.connect_server import free_port


def master_json(ui: str) -> dict:
    """The standalone master's state (workers, applications) from its web UI's JSON."""
    with urllib.request.urlopen(f"{ui}/json/", timeout=5) as answer:
        return json.loads(answer.read())


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    """(master URL, master web UI URL, the worker's work folder): a standalone master and a
    one-core worker, started from pyspark's own scripts."""
    folder = tmp_path_factory.mktemp("standalone")
    spark_class = Path(find_spark_home._find_spark_home()) / "bin" / "spark-class"
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "512m", "PYSPARK_PYTHON": sys.executable}
    started = []
    try:
        with open(folder / "master.log", "w") as log:
            started.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            ))
        with open(folder / "worker.log", "w") as log:
            started.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                 "--webui-port", str(worker_ui), "--cores", "1", "--memory", "1g", "--work-dir", str(folder / "work")],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            ))
        deadline = time.monotonic() + 90
        while True:
            try:
                if any(w["state"] == "ALIVE" for w in master_json(f"http://127.0.0.1:{ui}")["workers"]):
                    break
            except (OSError, ValueError):  # not up yet; between binding its UI and being elected
                pass  # leader the master answered /json/ with an HTML page (a loaded CI run)
            if time.monotonic() > deadline or any(p.poll() is not None for p in started):
                logs = "\n".join((folder / f).read_text()[-1500:] for f in ("master.log", "worker.log"))
                pytest.fail(f"the standalone cluster did not come up:\n{logs}")
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", folder / "work"
    finally:
        for proc in started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # its own session: the JVM spark-class runs and nothing else
        for proc in started:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
