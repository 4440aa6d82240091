"""The engine run unchanged against a real Spark Connect server: SQL step fixtures, and
the executors' snapshot read and full build on object storage.

A Connect session switches pyspark to Connect for its whole process, so both run in one
child pytest with ``$IVM_SPARK_REMOTE`` set (``get_spark()`` then attaches to the session's
server); the tests here read its JUnit report (one child: each costs a process, a Connect
session and an S3 server). The whole fixture set takes ~35 min over Connect on two cores, so
the suite runs a subset that covers joins and aggregates with deletes
(``IVM_CONNECT_STEPS=all`` runs every file; DISTINCT and views over views, in the subset
until 2026-11-24, passed there and run over classic Spark in every suite). Over Connect,
Python data sources register and the executors' write function ships the same way as in a
classic session. (One child run in three hung under a load of 10+ once, cause not found:
bounded by its timeout.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEPS = ROOT / "tests" / "fixtures" / "steps"
SUBSET = ["join_inner", "aggregate_min_max"]
FILES = sorted(p.stem for p in STEPS.glob("*.yaml")) if os.environ.get("IVM_CONNECT_STEPS") == "all" else SUBSET
EXECUTOR_IO = ["test_a_partitioned_snapshot_is_read_by_the_executors", "test_a_full_build_reads_and_writes_through_the_executors"]

pytestmark = [pytest.mark.connect, pytest.mark.slow]


@pytest.fixture(scope="module")
def connect_report(connect_server, tmp_path_factory) -> dict[str, list[tuple[str, str]]]:
    """Group (a step fixture's stem, or ``executor_io``) -> [(test id, outcome)] of the child
    run over Connect."""
    server, env = connect_server
    if os.environ.get("IVM_SPARK_REMOTE"):
        pytest.skip("already over Connect")
    folder = tmp_path_factory.mktemp("connect_steps")
    for stem in FILES:
        shutil.copy(STEPS / f"{stem}.yaml", folder)
    report = folder / "report.xml"
    tests = ["tests/test_sql_steps.py", *(f"tests/s3/test_executor_io.py::{name}" for name in EXECUTOR_IO)]
    try:
        child = subprocess.run(
            [sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
            # Every epoch in Spark: in process, an epoch would not touch the Connect server.
            cwd=ROOT, env={**os.environ, **env, "IVM_SPARK_REMOTE": server.url, "IVM_STEP_FIXTURES": str(folder), "IVM_SMALL_EPOCHS": "spark"},
            capture_output=True, text=True, timeout=1800,
        )
    except subprocess.TimeoutExpired as stuck:
        pytest.fail(f"the run over Connect did not end: {(stuck.stdout or b'')[-3000:]!r}")
    assert report.exists(), child.stdout[-3000:] + child.stderr[-3000:]
    outcomes: dict[str, list[tuple[str, str]]] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        name = case.get("name", "")
        if name in EXECUTOR_IO:
            group = "executor_io"
        elif "[" in name:
            group = name.split("[", 1)[1].split("::", 1)[0]
        else:
            continue
        kinds = {child.tag for child in case}
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        detail = next((c.get("message", "") for c in case if c.tag in {"failure", "error"}), "")
        outcomes.setdefault(group, []).append((name, outcome if not detail else f"{outcome}: {detail[:500]}"))
    return outcomes


@pytest.mark.parametrize("stem", FILES)
def test_step_fixture_passes_over_spark_connect(stem, connect_report):
    results = connect_report.get(stem)
    assert results, f"no results for {stem} in the child run over Connect"
    failed = [(name, outcome) for name, outcome in results if outcome.startswith("failed")]
    assert not failed, failed


@pytest.mark.s3
def test_executors_read_and_write_over_spark_connect(connect_report):
    """The snapshot read and the full build of ``tests/s3/test_executor_io.py``, both passed
    (not skipped) in a session over Connect."""
    results = connect_report.get("executor_io", [])
    assert sorted(name for name, _ in results) == sorted(EXECUTOR_IO), results
    assert all(outcome == "passed" for _, outcome in results), results
