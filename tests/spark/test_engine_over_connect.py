"""The engine's SQL step fixtures, run unchanged against a real Spark Connect server.

A Connect session switches pyspark to Connect for its whole process, so the fixtures run
in a child pytest with ``$IVM_SPARK_REMOTE`` set (``get_spark()`` then attaches to the
session's server); this test reads its JUnit report. The whole fixture set takes ~35 min
over Connect on two cores, so the suite runs a subset that covers joins and aggregates with
deletes (``IVM_CONNECT_STEPS=all`` runs every file; DISTINCT and views over views, in the
subset until 2026-11-24, passed there and run over classic Spark in every suite).
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

pytestmark = [pytest.mark.connect, pytest.mark.slow]


@pytest.fixture(scope="module")
def connect_report(connect_server, tmp_path_factory) -> dict[str, list[tuple[str, str]]]:
    """file stem -> [(test id, outcome)] of the child run over Connect."""
    server, env = connect_server
    folder = tmp_path_factory.mktemp("connect_steps")
    for stem in FILES:
        shutil.copy(STEPS / f"{stem}.yaml", folder)
    report = folder / "report.xml"
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_sql_steps.py", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        # Every epoch in Spark: in process, an epoch would not touch the Connect server.
        cwd=ROOT, env={**os.environ, **env, "IVM_SPARK_REMOTE": server.url, "IVM_STEP_FIXTURES": str(folder), "IVM_SMALL_EPOCHS": "spark"},
        capture_output=True, text=True, timeout=1800,
    )
    assert report.exists(), child.stdout[-3000:] + child.stderr[-3000:]
    outcomes: dict[str, list[tuple[str, str]]] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        name = case.get("name", "")
        if "[" not in name:
            continue
        stem = name.split("[", 1)[1].split("::", 1)[0]
        kinds = {child.tag for child in case}
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        detail = next((c.get("message", "") for c in case if c.tag in {"failure", "error"}), "")
        outcomes.setdefault(stem, []).append((name, outcome if not detail else f"{outcome}: {detail[:500]}"))
    return outcomes


@pytest.mark.parametrize("stem", FILES)
def test_step_fixture_passes_over_spark_connect(stem, connect_report):
    results = connect_report.get(stem)
    assert results, f"no results for {stem} in the child run over Connect"
    failed = [(name, outcome) for name, outcome in results if outcome.startswith("failed")]
    assert not failed, failed
