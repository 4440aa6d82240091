"""A small refresh in a fresh process starts no JVM (issue 27): a view compiles from what its
last epoch recorded of Spark's analysis, and an epoch that runs in process never touches
the Spark session. Proved the strict way: the fresh process has no Java at all (JAVA_HOME
pointing nowhere, no `java` on PATH), so starting Spark would fail.
"""

from __future__ import annotations

from ivm_assets.delta.write import write
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import assert_oracle, output_rows

pytestmark = pytest.mark.slow

_SCRIPT = Path(sys.executable).parent / "ivm"


def _without_java(tmp_path: Path) -> dict[str, str]:
    """The environment minus Java: JAVA_HOME at an empty folder, PATH with only Python's bin."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "IVM_SPARK_REMOTE", "IVM_SMALL_EPOCHS")}
    env["JAVA_HOME"] = str(tmp_path / "no-java")
    env["PATH"] = str(Path(sys.executable).parent)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return env


def _refresh(root: Path, env: dict, *views: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(_SCRIPT), "refresh", *views, "--project", str(root)], capture_output=True, text=True,
                          env=env, timeout=300)


def test_a_small_refresh_in_a_fresh_process_needs_no_java(builder, tmp_path):
    orders = builder.source("orders", {"id": [1, 2, 3], "cust": [1, 1, 2], "amount": [10, 20, 30]})
    builder.source("customers", {"id": [1, 2], "name": ["ann", "bob"]})
    builder.view("totals", "SELECT c.name, SUM(o.amount) AS total FROM orders o JOIN customers c ON o.cust = c.id GROUP BY c.name")
    project = builder.load()
    project.refresh()  # the first build analyzes with Spark (this test session's) and records it
    env = _without_java(tmp_path)
    write(orders, pa.table({"id": [4], "cust": [2], "amount": [40]}), mode="append")
    done = _refresh(builder.root, env, "totals")
    assert done.returncode == 0, done.stderr
    assert "totals: incremental" in done.stdout
    assert output_rows(project, "totals") == [("ann", 30), ("bob", 70)]
    assert_oracle(project)
    # Changed SQL must be analyzed again: without Java that fails, saying what is missing.
    builder.view("totals", "SELECT c.name, SUM(o.amount) AS total, COUNT(*) AS n FROM orders o JOIN customers c "
                           "ON o.cust = c.id GROUP BY c.name")
    failed = _refresh(builder.root, env, "totals")
    assert failed.returncode == 1 and "Java" in failed.stderr and "Traceback" not in failed.stderr


def test_import_and_help_load_neither_spark_nor_dagster():
    """`import ivm_assets` and `ivm --help` are what scripts and shells pay at every call."""
    probe = "import sys, ivm_assets; print(sorted(m for m in ('pyspark', 'dagster', 'deltalake') if m in sys.modules))"
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert imported.stdout.strip() == "[]", imported.stderr
    helped = subprocess.run([str(_SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "refresh" in helped.stdout
