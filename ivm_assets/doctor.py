"""`ivm doctor`: is this machine and this project ready to refresh views?

What ``dbt debug`` is to dbt. Each check is a small function returning a
:class:`CheckResult` (OK, FAIL or SKIP, what was found, what to do); :func:`diagnose` runs
them in order, each as soon as the ones it needs have run:

1. Python 3.11 or newer.
2. Java 17 or newer, where Spark will look for it (``$JAVA_HOME/bin/java`` when JAVA_HOME is
   set, else ``java`` on PATH).
3. Spark: a local session starts and runs a query; or, when ``$IVM_SPARK_REMOTE`` names a
   Spark Connect server, that server answers (a short timeout, in a child process so a port
   that is not a Connect server cannot hang the doctor).
4. The project: ``ivm.yaml`` and ``views/*.sql`` load (no Spark needed).
5. Each source: a Delta table, with the change data feed on.
6. The warehouse (a local folder) is writable.
7. The installed dependencies are within the ranges ivm_assets declares.

Nothing printed holds the value of an environment variable (a Connect URL may carry a token
after its host and port: only host and port are shown).

Example:
    >>> [r.status for r in diagnose("my_project")]    # doctest: +SKIP
    ['OK', 'OK', 'OK', 'OK', 'OK', 'OK', 'OK']
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ivm_assets import settings
from ivm_assets.spark.session import java_executable

if TYPE_CHECKING:
    from ivm_assets.project import IvmProject

Status = Literal["OK", "FAIL", "SKIP"]

MIN_PYTHON = (3, 11)
MIN_JAVA = 17
CONNECT_TIMEOUT_S = 30.0
# The packages whose versions the `versions` line names when all is well (every runtime
# dependency is checked; these are the ones a reader compares with their own platform).
KEY_PACKAGES = ("pyspark", "dagster", "deltalake", "duckdb", "sqlglot")
_INSTALL_JAVA = "install one (e.g. `sudo apt-get install -y openjdk-17-jre-headless`)"


@dataclass(frozen=True)
class CheckResult:
    """One line of the doctor's report: a check's name, its outcome, what it found, what to do."""

    name: str
    status: Status
    found: str
    advice: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"

    def line(self) -> str:
        """``FAIL java: found … → do …``, one line."""
        return f"{self.status:<4} {self.name}: {self.found}" + (f" → {self.advice}" if self.advice else "")


def diagnose(project_dir: str | os.PathLike) -> Iterator[CheckResult]:
    """Every check, in order, for the project in ``project_dir`` (results as they come)."""
    project, loaded = load_project(project_dir)
    declared = project.config.spark if project is not None else None
    # ivm.yaml's `spark:` first, as a refresh takes it; else the environment.
    if declared is not None and (declared.master or declared.remote):
        master, remote = declared.master, declared.remote
    else:
        from_env = settings.current()
        master, remote = from_env.spark_master, from_env.spark_remote
    yield check_python()
    java = check_java(os.environ, remote=remote)
    yield java
    yield check_spark(remote=remote, java_ok=java.status == "OK", master=master)
    yield loaded
    if project is None:
        yield CheckResult("sources", "SKIP", "the project did not load")
        yield CheckResult("warehouse", "SKIP", "the project did not load")
        yield CheckResult("placement", "SKIP", "the project did not load")
    else:
        yield from check_sources(project)
        yield check_warehouse(project)
        yield check_placement(project, master=None if remote else master or "local[*]")
    yield check_versions()


def check_placement(project: IvmProject, *, master: str | None) -> CheckResult:
    """Executors can see the project's local folders (a cluster master's cannot, unless
    ``shared_filesystem`` says so); ``master`` None: a Spark Connect server's, unknown here."""
    from ivm_assets.errors import ConfigError

    if master is None:
        return CheckResult("placement", "SKIP", "Spark runs behind a Connect server: checked at the first refresh that uses it")
    try:
        project.check_placement(master)
    except ConfigError as exc:
        found, _, fix = str(exc).partition(": executors would write and read files on their own disks. ")
        return CheckResult("placement", "FAIL", found, fix.removesuffix(" Nothing was written."))
    return CheckResult("placement", "OK", f"the executors of {master} can reach the warehouse and every source")


def check_python() -> CheckResult:
    found = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] >= MIN_PYTHON:
        return CheckResult("python", "OK", f"Python {found}")
    need = ".".join(map(str, MIN_PYTHON))
    return CheckResult("python", "FAIL", f"Python {found}; ivm_assets needs {need} or newer",
                       f"create the environment with Python {need}+ (`python3.11 -m venv .venv`) and install ivm_assets there")


def check_java(environ: Mapping[str, str], *, remote: str | None = None) -> CheckResult:
    """Java as Spark's launcher finds it: ``$JAVA_HOME/bin/java`` if JAVA_HOME is set, else PATH."""
    on_connect = remote is not None and remote != "local"
    found = java_executable(environ)
    if environ.get("JAVA_HOME"):
        where = "$JAVA_HOME/bin/java"
        if found is None:
            if on_connect:
                return CheckResult("java", "SKIP", f"JAVA_HOME is set but {where} does not exist; not needed: Spark runs at the Connect server")
            return CheckResult(
                "java", "FAIL", f"JAVA_HOME is set but {where} does not exist (Spark uses JAVA_HOME before PATH)",
                f"point JAVA_HOME at a Java {MIN_JAVA}+ installation (the folder holding bin/java), or unset it to use `java` on PATH",
            )
    elif found is None:
        if on_connect:
            return CheckResult("java", "SKIP", "no `java` on PATH; not needed: Spark runs at the Connect server")
        return CheckResult("java", "FAIL", "no `java` on PATH and JAVA_HOME is not set; Spark needs Java",
                           f"{_INSTALL_JAVA}, then run `ivm doctor` again")
    else:
        where = f"{found} on PATH"
    version = _java_version(Path(found))
    if version is None:
        return CheckResult("java", "FAIL", f"{where} did not report a version (`java -version`)",
                           f"check that it runs; {_INSTALL_JAVA}")
    major = int(version.split(".")[1] if version.startswith("1.") else re.split(r"[.+-]", version)[0])
    if major < MIN_JAVA:
        return CheckResult("java", "FAIL", f"Java {version} ({where}); Spark 4 needs Java {MIN_JAVA} or newer",
                           f"{_INSTALL_JAVA} and put it first on PATH or in JAVA_HOME")
    return CheckResult("java", "OK", f"Java {version} ({where})")


def _java_version(java: Path) -> str | None:
    try:
        run = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "([^"]+)"', run.stderr + run.stdout)
    return match.group(1) if match else None


def check_spark(*, remote: str | None, java_ok: bool, master: str | None = None) -> CheckResult:
    """A Connect server answers (``remote`` is ``sc://…``, or ``local`` with a warm server
    running), or else a Spark session on ``master`` (default ``local[*]``) starts and runs a query."""
    if remote is not None and remote != "local":
        return _check_connect(remote)
    note = ""
    if remote == "local":
        from ivm_assets.spark.connect import server_status

        server = server_status()
        if server is not None:
            return _check_connect(server.url, what="the warm local Spark Connect server")
        note = "; IVM_SPARK_REMOTE asks for the warm local server: none runs yet, the first refresh starts one (`ivm spark start`)"
    if not java_ok:
        return CheckResult("spark", "SKIP", "not started: Spark needs Java (see the java line)")
    return _check_local_spark(note, master or "local[*]")


def _check_local_spark(note: str, master: str) -> CheckResult:
    from ivm_assets.spark.session import describe, get_spark

    started = time.monotonic()
    try:
        spark = get_spark(master=master)
        spark.range(1).count()
    except Exception as exc:  # any failure to start is the finding itself
        return CheckResult("spark", "FAIL", f"Spark on {master} did not start: {_first_line(exc)}",
                           "check the java line above and Spark's message; the driver needs ~4 GiB of memory (spark.driver.memory)")
    return CheckResult("spark", "OK", f"Spark {spark.version} ({describe(spark)}) ran a query in {time.monotonic() - started:.1f} s{note}")


_PROBE = """
import os
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(os.environ["IVM_DOCTOR_REMOTE"]).getOrCreate()
spark.sql("SELECT 1").collect()
print(spark.version)
spark.stop()
"""


def _check_connect(url: str, *, what: str = "the Spark Connect server") -> CheckResult:
    """A TCP connection first (fails at once when nothing listens), then a query from a child
    process: pyspark's Connect client retries for minutes against a port that accepts
    connections but does not speak Spark Connect, and a child can be stopped at a timeout."""
    match = re.fullmatch(r"sc://(\[[^\]]+\]|[^:/;]+)(?::(\d+))?(/.*)?", url)
    if match is None:
        return CheckResult("spark", "FAIL", "IVM_SPARK_REMOTE is not a Spark Connect URL",
                           "set it to sc://HOST:PORT (or `local` for the warm local server), or unset it for a local Spark")
    host, port = match.group(1).strip("[]"), int(match.group(2) or 15002)
    at = f"{what} at {host}:{port}"
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as exc:
        return CheckResult("spark", "FAIL", f"nothing answers at {host}:{port} ({exc.strerror or exc})",
                           "start the server (`ivm spark start` for a local one), or fix IVM_SPARK_REMOTE (or unset it for a local Spark)")
    started = time.monotonic()
    try:
        run = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=CONNECT_TIMEOUT_S,
                             env={**os.environ, "IVM_DOCTOR_REMOTE": url})
    except subprocess.TimeoutExpired:
        return CheckResult("spark", "FAIL", f"{host}:{port} accepts connections but no query answered within {CONNECT_TIMEOUT_S:.0f} s",
                           "check that this port is a Spark Connect server (not another service) and that it is not overloaded")
    if run.returncode != 0:
        error = next((line for line in reversed(run.stderr.splitlines()) if line.strip()), "no message")
        return CheckResult("spark", "FAIL", f"{at} did not run a query: {error[:300]}",
                           "check the server's log (`ivm spark status` shows it for a local one)")
    return CheckResult("spark", "OK", f"{at} runs Spark {run.stdout.strip()}; a query took {time.monotonic() - started:.1f} s")


def load_project(project_dir: str | os.PathLike) -> tuple[IvmProject | None, CheckResult]:
    """The project (``ivm.yaml`` and its views) loaded without starting Spark."""
    from ivm_assets.errors import IvmError
    from ivm_assets.project import IvmProject

    try:
        project = IvmProject.load(project_dir)
    except IvmError as exc:
        return None, CheckResult("project", "FAIL", str(exc).replace("\n", " "),
                                 "fix ivm.yaml or the view named, or pass the project folder with --project DIR")
    found = f"{project.root / 'ivm.yaml'}: {_count(len(project.sources), 'source')}, {_count(len(project.views), 'view')}"
    return project, CheckResult("project", "OK", found)


def check_sources(project: IvmProject) -> Iterator[CheckResult]:
    """One line per source: a Delta table, at which version, change data feed on."""
    if not project.sources:
        yield CheckResult("sources", "FAIL", "ivm.yaml declares no sources",
                          "add `sources:` mapping table names to Delta table paths (see docs/tutorial.md)")
    for name, uri in project.sources.items():
        yield _check_source(f"source {name}", uri)


def _check_source(label: str, uri: str) -> CheckResult:
    from ivm_assets.delta.handles import is_delta_table, latest_version
    from ivm_assets.delta.log import change_feed_enabled

    try:
        if not is_delta_table(uri):
            return CheckResult(label, "FAIL", f"no Delta table at {uri}",
                               "check the path in ivm.yaml (relative to the project folder), or create the table first")
        version = latest_version(uri)
        cdf = change_feed_enabled(uri)
    except Exception as exc:  # an unreadable table (permissions, storage errors) is the finding
        return CheckResult(label, "FAIL", f"cannot read the Delta table at {uri}: {_first_line(exc)}",
                           "check the path and that this user can read it")
    if not cdf:
        return CheckResult(
            label, "FAIL", f"Delta table at {uri} (version {version}) has the change data feed off; views over it are refreshed by full recompute",
            "turn it on: Spark SQL `ALTER TABLE delta.`<path>` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)`, or delta-rs "
            "`DeltaTable(path).alter.set_table_properties({'delta.enableChangeDataFeed': 'true'})`",
        )
    return CheckResult(label, "OK", f"Delta table at {uri}, version {version}, change data feed on")


def check_warehouse(project: IvmProject) -> CheckResult:
    """Create and remove a folder in the warehouse (or, before the first refresh creates the
    warehouse, in the nearest folder above it that exists)."""
    from ivm_assets.uris import is_local

    warehouse = project.warehouse
    if not is_local(warehouse):
        return _check_remote_warehouse(warehouse)
    path = Path(warehouse.removeprefix("file://"))
    probe_in = next(p for p in (path, *path.parents) if p.exists())
    if not probe_in.is_dir():
        return CheckResult("warehouse", "FAIL", f"{probe_in} is a file, not a folder",
                           "point `warehouse:` in ivm.yaml at a folder (or a path where one can be created)")
    try:
        tempfile.TemporaryDirectory(prefix=".ivm-doctor-", dir=probe_in).cleanup()
    except OSError as exc:
        return CheckResult("warehouse", "FAIL", f"cannot create a folder in {probe_in}: {exc.strerror or exc}",
                           "give this user write access there, or point `warehouse:` in ivm.yaml elsewhere")
    if probe_in == path:
        return CheckResult("warehouse", "OK", f"{path} is writable")
    return CheckResult("warehouse", "OK", f"{path} does not exist yet; {probe_in} is writable (the first refresh creates it)")


def _check_remote_warehouse(warehouse: str) -> CheckResult:
    """Write and delete an empty object under an object store warehouse, with the project's
    storage options: the bucket exists, the credentials are accepted, writes are allowed."""
    import uuid

    from ivm_assets.delta import filesystems, storage, storage_errors
    from ivm_assets.errors import StorageError

    probe = f"{warehouse}/.ivm-doctor-{uuid.uuid4().hex[:8]}"
    try:
        fs, path = filesystems.filesystem(probe)
        with storage_errors.failures(probe):
            with fs.open_output_stream(path) as out:
                out.write(b"")
            fs.delete_file(path)
    except StorageError as exc:
        return CheckResult("warehouse", "FAIL", str(exc), "fix the setting named above (storage_options in ivm.yaml)")
    except OSError as exc:
        return CheckResult("warehouse", "FAIL", f"cannot write under {warehouse}: {storage.redact(str(exc)).splitlines()[0]}",
                           "check the warehouse URI and the storage_options in ivm.yaml")
    return CheckResult("warehouse", "OK", f"{warehouse} is writable (an object written and deleted)")


def check_versions(distribution: str = "ivm_assets") -> CheckResult:
    """Every runtime requirement of the installed ``distribution`` is installed, within its range."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    try:
        requires = metadata.requires(distribution) or []
        own = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return CheckResult("versions", "SKIP", f"{distribution} is not installed (run from a source tree): no declared ranges to compare",
                           'install it (`pip install .`) to check its dependencies')
    found, wrong = {}, []
    for text in requires:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's requirement: optional
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            wrong.append((req, "missing"))
            continue
        if not req.specifier.contains(version, prereleases=True):
            wrong.append((req, version))
        found[canonicalize_name(req.name)] = version
    if wrong:
        listed = ", ".join(f"{req.name} {version} (needs {req.specifier})" for req, version in wrong)
        fix = " ".join(f'"{req.name}{req.specifier}"' for req, _ in wrong)
        return CheckResult("versions", "FAIL", f"outside {distribution} {own}'s ranges: {listed}", f"pip install {fix}")
    named = [f"{name} {found[name]}" for name in KEY_PACKAGES if name in found]
    more = f" and {len(found) - len(named)} more" if len(found) > len(named) else ""
    return CheckResult("versions", "OK", f"{', '.join(named)}{more} within {distribution} {own}'s ranges")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"
