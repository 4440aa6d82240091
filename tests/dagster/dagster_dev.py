"""A real `dg dev` on the repository's workspace.yaml (the demo), driven through GraphQL.

One server per test session (it takes ~30 s to come up); its runs attach to the session's
Spark Connect server. It is stopped by its process group id: `dg dev` started from a
background process ignores SIGTERM unless its signal handlers are reset before exec.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.spark.connect_server import free_port

ROOT = Path(__file__).resolve().parents[2]

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
RUN = "query Run($id: ID!) { runOrError(runId: $id) { ... on Run { status startTime endTime } } }"
LATEST = """
query Latest($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    ... on Asset {
      assetMaterializations(limit: 1) {
        runId
        metadataEntries {
          label
          __typename
          ... on TextMetadataEntry { text }
          ... on MarkdownMetadataEntry { mdStr }
          ... on IntMetadataEntry { intValue }
          ... on TableSchemaMetadataEntry { schema { columns { name type } } }
          ... on TableColumnLineageMetadataEntry { lineage { columnName columnDeps { assetKey { path } columnName } } }
        }
      }
      definition {
        internalFreshnessPolicy { __typename ... on TimeWindowFreshnessPolicy { failWindowSeconds warnWindowSeconds } }
        freshnessStatusInfo { freshnessStatus }
      }
    }
  }
}
"""
DONE = {"SUCCESS", "FAILURE", "CANCELED"}


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@dataclass
class DagsterDev:
    port: int
    process: subprocess.Popen
    log: Path
    demo: Path
    location: str = ""
    repository: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"{self.url}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        assert "errors" not in body, body
        return body["data"]

    def wait_ready(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        query = "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }"
        while True:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                nodes = self.graphql(query)["repositoriesOrError"].get("nodes")
                if nodes:
                    self.repository, self.location = nodes[0]["name"], nodes[0]["location"]["name"]
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, f"dg dev did not answer GraphQL within {timeout_s} s"
            time.sleep(1)

    def launch(self, views: list[str], *, checks: list[str] = (), tags: dict[str, str] | None = None) -> str:
        params = {
            "selector": {
                "repositoryLocationName": self.location,
                "repositoryName": self.repository,
                "jobName": "__ASSET_JOB",
                "assetSelection": [{"path": [v]} for v in views],
                "assetCheckSelection": [{"assetKey": {"path": [v]}, "name": "ivm_consistency"} for v in checks],
            },
            "mode": "default",
            "runConfigData": {},
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
        }
        launched = self.graphql(LAUNCH, {"params": params})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        return launched["run"]["runId"]

    def run(self, run_id: str) -> dict:
        return self.graphql(RUN, {"id": run_id})["runOrError"]

    def wait_run(self, run_id: str, timeout_s: float = 300) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            run = self.run(run_id)
            if run["status"] in DONE:
                return run
            assert time.monotonic() < deadline, f"run {run_id} still {run['status']} after {timeout_s} s"
            time.sleep(1)

    def latest(self, view: str) -> dict:
        return self.graphql(LATEST, {"key": {"path": [view]}})["assetOrError"]

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def start_dagster_dev(tmp: Path, env: dict[str, str], *, automation: bool = False, demo: Path | None = None) -> DagsterDev:
    """`dg dev` on workspace.yaml with the repository's dagster.yaml (pools, freshness).

    Without ``automation`` no automation sensor runs, so the tests' own runs are the only ones.
    """
    home = tmp / "dagster_home"
    home.mkdir()
    config = (ROOT / "dagster.yaml").read_text()
    if not automation:
        config += "\nauto_materialize:\n  enabled: false\n  use_sensors: false\n"
    (home / "dagster.yaml").write_text(config)
    demo = demo or tmp / "demo"
    port = free_port()
    log = tmp / "dg_dev.log"
    full_env = {
        **os.environ, "IVM_DEMO_ORDERS": "60", "FRESHNESS_DAEMON_INTERVAL_SECONDS": "5",
        **env, "DAGSTER_HOME": str(home), "IVM_DEMO_DIR": str(demo),
    }
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "dg"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_default_signals, start_new_session=True,
        )
    server = DagsterDev(port=port, process=process, log=log, demo=demo)
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server


def metadata(entries: list[dict]) -> dict[str, dict]:
    return {e["label"]: e for e in entries}
