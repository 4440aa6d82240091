"""The package as a user installs it: a wheel built by pip, installed without the dev extra
into a fresh virtual environment that cannot see this checkout, then used from a shell.

Installing takes pip's cache (warm after scripts/setup.sh) and constraints.txt (the versions
the suite runs on). Every command runs in a temporary folder, with no PYTHONPATH, so nothing
is imported from the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from packaging.requirements import Requirement
from tests.conftest import ProjectBuilder

pytestmark = [pytest.mark.install, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
DEFINITIONS = """
import dagster as dg
from ivm_assets import IvmProject
from ivm_assets.dagster import IvmResource, build_ivm_source_sensor, ivm_source_assets, ivm_view_assets

project = IvmProject.load({project!r})
defs = dg.Definitions(
    assets=[ivm_view_assets(project=project), ivm_source_assets(project=project)],
    sensors=[build_ivm_source_sensor(project=project)],
    resources={{"ivm": IvmResource()}},
)
"""


class Venv:
    """A virtual environment's commands, run from ``cwd`` with an environment that points
    nowhere near the repository."""

    def __init__(self, root: Path, cwd: Path) -> None:
        self.bin = root / "bin"
        self.cwd = cwd
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "IVM_SPARK_REMOTE")}
        self.env["PATH"] = f"{self.bin}{os.pathsep}{os.environ['PATH']}"
        self.env["DAGSTER_HOME"] = str(cwd / "dagster_home")
        (cwd / "dagster_home").mkdir(exist_ok=True)

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        command = [str(self.bin / args[0]), *args[1:]]
        return subprocess.run(command, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds from a copy of the sources (so the build leaves nothing in the checkout)."""
    work = tmp_path_factory.mktemp("build")
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "ivm_assets", source / "ivm_assets", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(work / "dist"), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    (built,) = (work / "dist").glob("ivm_assets-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Venv:
    """A fresh venv with the wheel and its runtime dependencies only."""
    root = tmp_path_factory.mktemp("user")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    # --no-compile: pip would byte-compile every installed module (pyspark's and dagster's
    # thousands: a third of the install's time); the few these tests import compile as they load.
    install = subprocess.run(
        [str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile", str(wheel), "-c", str(REPO / "constraints.txt")],
        cwd=root, capture_output=True, text=True, timeout=900,
    )
    assert install.returncode == 0, install.stderr
    return Venv(root / "venv", root)


def test_the_wheel_holds_the_package_its_typing_marker_and_entry_points(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        metadata = archive.read(f"{info}/METADATA").decode()
    sources = {str(p.relative_to(REPO)) for p in (REPO / "ivm_assets").rglob("*.py")}
    assert sources <= names, sorted(sources - names)
    assert "ivm_assets/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/"))]
    assert "ivm = ivm_assets.cli:main" in entry_points
    assert "[dagster_dg_cli.registry_modules]" in entry_points and "ivm_assets = ivm_assets" in entry_points
    requires = [Requirement(line.split(": ", 1)[1]) for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    runtime = {r.name: r for r in requires if r.marker is None}
    assert {"duckdb", "pyspark", "dagster", "deltalake", "sqlglot"} <= set(runtime)
    assert not [r for r in runtime.values() if any(s.operator == "==" for s in r.specifier)], "ranges, not pins"


def test_the_package_imports_from_the_venv_not_the_checkout(venv):
    run = venv.run("python", "-c", "import ivm_assets, duckdb; print(ivm_assets.__file__)")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith(str(venv.bin.parent / "lib")), run.stdout
    dev = venv.run("python", "-c", "import pytest")
    assert dev.returncode == 1, "the dev extra was installed"


def test_ivm_version(venv):
    run = venv.run("ivm", "--version")
    assert run.returncode == 0, run.stderr
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert run.stdout.strip() == f"ivm_assets {version}"


@pytest.fixture(scope="module")
def shop(venv) -> ProjectBuilder:
    """A small project in the user's folder: one source, an aggregate view."""
    builder = ProjectBuilder(venv.cwd / "shop", spark=None)
    builder.source("orders", {"id": [1, 2, 3], "cust": [1, 1, 2], "amount": [10, 20, 30]})
    builder.view("totals", "SELECT cust, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY cust")
    builder.write_config()
    return builder


def test_doctor_refresh_change_refresh(venv, shop):
    doctor = venv.run("ivm", "doctor", "--project", str(shop.root))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stdout.splitlines()[-1] == "all 8 checks passed (or skipped)"

    first = venv.run("ivm", "refresh", "--project", str(shop.root))
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("totals: full (first build)"), first.stdout

    write_deltalake(shop.uri("orders"), pa.table({"id": [4], "cust": [2], "amount": [40]}), mode="append")
    second = venv.run("ivm", "refresh", "--project", str(shop.root))
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("totals: incremental;") and "orders 0→1" in second.stdout, second.stdout
    rows = DeltaTable(str(shop.root / "warehouse" / "totals")).to_pyarrow_table().sort_by("cust").to_pylist()
    assert rows == [{"cust": 1, "total": 30, "n": 2}, {"cust": 2, "total": 70, "n": 2}]


def test_dagster_validates_definitions_made_from_the_installed_package(venv, shop):
    definitions = venv.cwd / "definitions.py"
    definitions.write_text(DEFINITIONS.format(project=str(shop.root)))
    run = venv.run("dagster", "definitions", "validate", "-f", str(definitions))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Validation successful" in run.stdout + run.stderr
