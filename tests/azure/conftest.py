"""Azurite, Microsoft's Azure Storage emulator (npm package ``azurite``), for the ADLS tests.

Installed once into ``~/.cache/ivm-tests/azurite-<version>`` (``$IVM_TEST_CACHE`` instead of
``~/.cache/ivm-tests``) with npm and reused by later runs; the tests are skipped, saying why,
only when npm is missing or cannot reach its registry. Its Blob service runs as its own
process on 127.0.0.1 (a free port) for the test session, with the emulator's well-known
account; it is stopped by its PID. Azurite serves the Blob API only, not ADLS Gen2's ``dfs``
API: delta-rs and pyarrow reach ``az://`` tables through the Blob API, so that is enough.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.local_servers import free_port, wait_listening

# Pinned. 3.37.0 is the first release that honours List Blobs' `startFrom`, which delta-rs
# lists a log's newer commits with: 3.35.0 ignores it, lists the log from its start, and
# delta-rs' second commit to a table fails ("Invalid table version: 1").
VERSION = "3.37.0"
ACCOUNT = "devstoreaccount1"
# The emulator's published development key (not a secret; every Azurite has it).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# npm's words when the registry cannot be reached (no network, DNS, a proxy refusing).
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network request", "ENETUNREACH")


@dataclass(frozen=True)
class Azurite:
    """The running emulator: the storage options that reach it, and a container per test."""

    endpoint: str  # the account's Blob URL: http://127.0.0.1:<port>/devstoreaccount1

    def options(self) -> dict[str, str]:
        """delta-rs' options for the emulator, as a project would give them for any account
        behind a custom endpoint (AZURE_STORAGE_USE_EMULATOR would pin the port to 10000)."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": KEY, "AZURE_STORAGE_ENDPOINT": self.endpoint,
            "allow_http": "true",
        }

    def new_container(self) -> str:
        import pyarrow.fs as pafs

        name = f"ivm-{uuid.uuid4().hex[:12]}"
        host = self.endpoint.split("//", 1)[1].split("/", 1)[0]
        fs = pafs.AzureFileSystem(ACCOUNT, account_key=KEY, blob_storage_authority=host, blob_storage_scheme="http",
                                  dfs_storage_authority=host, dfs_storage_scheme="http")
        fs.create_dir(name)  # a top-level directory is a container
        return name


def _installed() -> Path:
    cache = Path(os.environ.get("IVM_TEST_CACHE", Path.home() / ".cache" / "ivm-tests")) / f"azurite-{VERSION}"
    binary = cache / "node_modules" / ".bin" / "azurite-blob"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("Azure tests need Azurite from npm, and npm is not installed (install Node.js 18+)")
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(cache), f"azurite@{VERSION}", "--no-audit", "--no-fund", "--no-save"],
        capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0:
        output = done.stdout + done.stderr
        if any(word in output for word in _OFFLINE):
            pytest.skip(f"Azure tests need Azurite from npm, and npm cannot reach its registry: {output.strip()[-300:]}")
        raise RuntimeError(f"npm install azurite@{VERSION} failed (exit {done.returncode}): {output[-2000:]}")
    return binary



@pytest.fixture(scope="session")
def azurite(tmp_path_factory) -> Azurite:
    binary = _installed()
    port = free_port()
    workspace = tmp_path_factory.mktemp("azurite")
    log = workspace / "azurite.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(workspace),
             "--disableTelemetry", "--skipApiVersionCheck", "--silent"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        wait_listening(proc, port, log, "Azurite")
        yield Azurite(f"http://127.0.0.1:{port}/{ACCOUNT}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
