"""`ivm doctor`: each failure it reports, with its advice, and a project that passes.

The checks run against the session's Spark (a doctor in the test process attaches to it);
only the no-Java case runs `ivm doctor` as a subprocess, with an environment that has no
Java, so it never starts Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import ProjectBuilder
from tests.spark.connect_server import connect_server, free_port  # noqa: F401  (the shared session fixture)

from ivm_assets.cli import run
from ivm_assets.doctor import check_java, check_placement, check_spark, check_versions, load_project

BIN = Path(sys.executable).parent
ORDERS = {"id": [1, 2, 3], "cust": [1, 1, 2], "amount": [10, 20, 30]}


def _healthy(builder: ProjectBuilder) -> None:
    builder.source("orders", ORDERS)
    builder.view("totals", "SELECT cust, SUM(amount) AS total FROM orders GROUP BY cust")


def doctor(capsys, root: Path) -> tuple[int, dict[str, str]]:
    """Exit status and the report's lines keyed by check name (`source orders`, `java`, …)."""
    status = run(["doctor", "--project", str(root)])
    lines = capsys.readouterr().out.splitlines()
    checks = {line[5:].split(":", 1)[0]: line for line in lines[:-1]}
    return status, checks


@pytest.fixture(autouse=True)
def _local_spark(monkeypatch):
    """The doctor checks the Spark that `ivm refresh` would use: here the session's own."""
    monkeypatch.delenv("IVM_SPARK_REMOTE", raising=False)


def test_a_healthy_project_passes_every_check_in_order(builder, capsys):
    _healthy(builder)
    builder.write_config()
    status, checks = doctor(capsys, builder.root)
    assert status == 0, checks
    assert list(checks) == ["python", "java", "spark", "project", "source orders", "warehouse", "placement", "versions"]
    assert all(line.startswith("OK ") for line in checks.values()), checks
    assert "change data feed on" in checks["source orders"]
    assert "the first refresh creates it" in checks["warehouse"]
    assert "pyspark 4." in checks["versions"] and "dagster 1.13." in checks["versions"]


def test_a_source_without_change_data_feed_fails(builder, capsys):
    _healthy(builder)
    builder.source("customers", {"id": [1, 2], "name": ["ann", "bob"]}, cdf=False)
    builder.write_config()
    status, checks = doctor(capsys, builder.root)
    assert status == 1
    assert checks["source orders"].startswith("OK ")
    line = checks["source customers"]
    assert line.startswith("FAIL source customers: Delta table at ") and "change data feed off" in line
    assert "delta.enableChangeDataFeed" in line.split("→", 1)[1]


def test_a_missing_source_fails(builder, capsys):
    _healthy(builder)
    builder.sources["returns"] = "sources/returns"
    builder.write_config()
    status, checks = doctor(capsys, builder.root)
    assert status == 1
    assert checks["source returns"] == (
        f"FAIL source returns: no Delta table at {builder.uri('returns')} → check the path in ivm.yaml "
        "(relative to the project folder), or create the table first"
    )


def test_a_broken_project_file_fails_and_skips_what_needs_it(tmp_path, capsys):
    (tmp_path / "ivm.yaml").write_text("sources: [orders]\n")
    status, checks = doctor(capsys, tmp_path)
    assert status == 1
    assert checks["project"].startswith("FAIL project: invalid ivm.yaml:") and f"{tmp_path / 'ivm.yaml'}:1" in checks["project"]
    assert checks["sources"].startswith("SKIP") and checks["warehouse"].startswith("SKIP")


def test_an_unreachable_connect_server_fails_at_once_without_printing_the_url_token(builder, capsys, monkeypatch):
    _healthy(builder)
    builder.write_config()
    port = free_port()  # nothing listens on it
    monkeypatch.setenv("IVM_SPARK_REMOTE", f"sc://127.0.0.1:{port}/;token=s3cr3t-t0ken")
    started = time.monotonic()
    status, checks = doctor(capsys, builder.root)
    assert status == 1
    assert checks["spark"].startswith(f"FAIL spark: nothing answers at 127.0.0.1:{port} (")
    assert "ivm spark start" in checks["spark"]
    assert time.monotonic() - started < 20
    assert not any("s3cr3t" in line for line in checks.values())


@pytest.mark.connect
def test_a_running_connect_server_answers(connect_server, monkeypatch):
    server, env = connect_server
    result = check_spark(remote=server.url, java_ok=True)
    assert result.status == "OK" and f"at 127.0.0.1:{server.port} runs Spark 4." in result.found, result.line()
    # `local` finds the warm server through its record instead of starting a local Spark.
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = check_spark(remote="local", java_ok=True)
    assert result.status == "OK" and result.found.startswith("the warm local Spark Connect server at"), result.line()


def test_java_home_pointing_nowhere_fails_even_with_java_on_path(tmp_path):
    result = check_java({"JAVA_HOME": str(tmp_path / "jdk"), "PATH": os.environ["PATH"]})
    assert result.status == "FAIL" and "JAVA_HOME is set but $JAVA_HOME/bin/java does not exist" in result.found
    assert str(tmp_path) not in result.line()
    # Over Spark Connect the client needs no Java.
    assert check_java({"JAVA_HOME": str(tmp_path / "jdk")}, remote="sc://127.0.0.1:15002").status == "SKIP"


def test_java_found_on_path_reports_its_version():
    result = check_java({"PATH": os.environ["PATH"]})
    assert result.status == "OK" and result.found.startswith("Java ") and "on PATH" in result.found


def test_ivm_doctor_without_java_fails_and_skips_spark(builder, tmp_path):
    """As a user sees it: `ivm doctor` in a shell with no Java (JAVA_HOME set to a folder that
    is not a JDK, PATH without java) says so, does not try Spark, and exits 1."""
    _healthy(builder)
    builder.write_config()
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "IVM_SPARK_REMOTE")}
    env.update(JAVA_HOME=str(tmp_path / "no-jdk"), PATH=str(BIN))
    run = subprocess.run([str(BIN / "ivm"), "doctor", "--project", str(builder.root)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    lines = {line[5:].split(":", 1)[0]: line for line in run.stdout.splitlines()[:-1]}
    assert lines["java"].startswith("FAIL java: JAVA_HOME is set but $JAVA_HOME/bin/java does not exist")
    assert "point JAVA_HOME at a Java 17+ installation" in lines["java"]
    assert lines["spark"] == "SKIP spark: not started: Spark needs Java (see the java line)"
    assert lines["source orders"].startswith("OK ")
    assert run.stdout.splitlines()[-1] == "1 of 8 checks failed"
    assert "no-jdk" not in run.stdout + run.stderr  # no environment variable's value


def test_versions_outside_the_declared_ranges_fail(tmp_path, monkeypatch):
    """A distribution that asks for a Dagster and a package this environment does not have."""
    info = tmp_path / "needs_old-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: needs_old\nVersion: 1.0\n"
        "Requires-Dist: dagster<1.0\nRequires-Dist: no-such-package>=1\nRequires-Dist: pytest; extra == 'dev'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = check_versions("needs_old")
    assert result.status == "FAIL"
    assert "dagster 1.13." in result.found and "(needs <1.0)" in result.found
    assert "no-such-package missing (needs >=1)" in result.found
    assert "pytest" not in result.found  # an extra's requirement is optional
    assert result.advice == 'pip install "dagster<1.0" "no-such-package>=1"'


def test_local_folders_with_a_cluster_master_fail_the_placement_check(builder):
    _healthy(builder)
    builder.write_config("spark:\n  master: spark://spark-master.internal:7077\n")
    project, _ = load_project(builder.root)
    result = check_placement(project, master=project.config.spark.master)
    assert result.status == "FAIL" and "Spark runs on the cluster spark://spark-master.internal:7077" in result.found
    assert "shared_filesystem: true" in result.advice
    builder.write_config("spark:\n  master: spark://spark-master.internal:7077\n  shared_filesystem: true\n")
    project, _ = load_project(builder.root)
    assert check_placement(project, master=project.config.spark.master).status == "OK"
