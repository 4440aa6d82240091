"""The `ivm` console script, run for real in subprocesses (each starts its own Spark).

One project is built and refreshed twice for the whole module; the other commands and the
error exits run against it (or against a broken copy) with one subprocess each.
"""

from __future__ import annotations

from ivm_assets.delta.write import delete_rows, write
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from tests.conftest import ProjectBuilder


pytestmark = pytest.mark.slow

_SCRIPT = Path(sys.executable).parent / "ivm"
IVM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ivm_assets.cli"]
VIEWS = {
    "totals": "SELECT cust, SUM(amount) AS total, COUNT(*) AS n\nFROM orders\nGROUP BY cust",
    "named": "SELECT o.id, c.name, o.amount\nFROM orders o\nJOIN customers c ON o.cust = c.id",
}


def ivm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*IVM, *args], capture_output=True, text=True, timeout=600)


def _project(root: Path) -> ProjectBuilder:
    """Sources, views and ivm.yaml written without Spark (delta-rs only)."""
    builder = ProjectBuilder(root, spark=None)
    builder.source("orders", {"id": [1, 2, 3], "cust": [1, 1, 2], "amount": [10, 20, 30]})
    builder.source("customers", {"id": [1, 2], "name": ["ann", "bob"]})
    for name, sql in VIEWS.items():
        builder.view(name, sql)
    builder.write_config()
    return builder


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project after `ivm refresh` (first build), a source change, and `ivm refresh` again."""
    builder = _project(tmp_path_factory.mktemp("cli") / "shop")
    first = ivm("refresh", "--project", str(builder.root))
    write(builder.uri("orders"), pa.table({"id": [4], "cust": [2], "amount": [40]}), mode="append")
    delete_rows(builder.uri("orders"), "id = 1")
    second = ivm("refresh", "--project", str(builder.root))
    return builder.root, first, second


def _lines(out: str) -> dict[str, str]:
    """stdout lines keyed by the view name they start with."""
    return {line.split(":", 1)[0]: line for line in out.splitlines() if line.strip()}


def test_first_refresh_builds_every_view(project):
    _, first, _ = project
    assert first.returncode == 0, first.stderr
    lines = _lines(first.stdout)
    assert sorted(lines) == sorted(VIEWS)
    assert all("full (first build)" in line for line in lines.values())


def test_refresh_after_a_change_is_incremental(project):
    _, _, second = project
    assert second.returncode == 0, second.stderr
    lines = _lines(second.stdout)
    assert sorted(lines) == sorted(VIEWS)
    assert all(": incremental;" in line and "orders 0→2" in line for line in lines.values())


def test_status(project):
    root, *_ = project
    run = ivm("status", "--project", str(root))
    assert run.returncode == 0, run.stderr
    lines = _lines(run.stdout)
    assert sorted(lines) == sorted(VIEWS)
    assert all("epoch 2 (incremental)" in line and "up to date" in line for line in lines.values())


def test_explain(project):
    root, *_ = project
    run = ivm("explain", "totals", "--project", str(root))
    assert run.returncode == 0, run.stderr
    assert "view totals" in run.stdout and "INCREMENTAL dataflow" in run.stdout
    assert "operators:" in run.stdout and "state [" in run.stdout
    assert str(root / "warehouse" / "_ivm" / "totals") in run.stdout
    assert "last epoch: 2 (incremental), in process" in run.stdout  # where the epoch ran, and why not in process


def test_check(project):
    root, *_ = project
    run = ivm("check", "--project", str(root))
    assert run.returncode == 0, run.stderr
    assert _lines(run.stdout) == {"named": "named: OK", "totals": "totals: OK"}


def test_unknown_view_exits_1(project):
    root, *_ = project
    run = ivm("explain", "nope", "--project", str(root))
    assert run.returncode == 1 and run.stdout == ""
    assert "error: unknown view(s) nope" in run.stderr and "named, totals" in run.stderr


def test_broken_sql_exits_1(project, tmp_path):
    root = tmp_path / "shop"
    shutil.copytree(project[0], root)
    (root / "views" / "totals.sql").write_text("SELECT cust,\n  SUM(amount AS total\nFROM orders")
    run = ivm("refresh", "--project", str(root))
    assert run.returncode == 1 and run.stdout == ""
    assert "totals.sql:2:" in run.stderr and "malformed SQL" in run.stderr


def test_missing_project_file_exits_1(tmp_path):
    run = ivm("status", "--project", str(tmp_path))
    assert run.returncode == 1
    assert "ivm.yaml" in run.stderr and "found none" in run.stderr
