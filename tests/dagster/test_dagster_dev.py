"""End to end: `dagster dev` serves the demo; a view is materialized through GraphQL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ivm_assets.delta import tables as delta

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
STATUS = "query Status($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    assert "errors" not in body, body
    return body["data"]


def _default_signals() -> None:
    # dagster dev started from a background process inherits ignored SIGINT/SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.slow
def test_dagster_dev_materializes_a_view_through_graphql(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    # Declarative automation would start runs of its own; this test launches exactly one.
    (home / "dagster.yaml").write_text("auto_materialize:\n  enabled: false\n  use_sensors: false\ntelemetry:\n  enabled: false\n")
    demo = tmp_path / "demo"
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "IVM_DEMO_DIR": str(demo), "IVM_DEMO_ORDERS": "60"}
    log = (tmp_path / "dagster_dev.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_default_signals, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "dagster_dev.log").read_text()[-3000:]
            try:
                located = _graphql(port, "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }")
                if located["repositoriesOrError"].get("nodes"):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "dagster dev did not answer GraphQL within 120 s"
            time.sleep(1)
        [repo] = located["repositoriesOrError"]["nodes"]
        params = {
            "selector": {
                "repositoryLocationName": repo["location"]["name"],
                "repositoryName": repo["name"],
                "jobName": "__ASSET_JOB",
                "assetSelection": [{"path": ["order_status_funnel"]}],
                "assetCheckSelection": [],
            },
            "mode": "default",
            "runConfigData": {},
        }
        launched = _graphql(port, LAUNCH, {"params": params})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        deadline = time.monotonic() + 240
        status = None
        while status not in {"SUCCESS", "FAILURE", "CANCELED"}:
            assert time.monotonic() < deadline, f"run {run_id} still {status} after 240 s"
            time.sleep(2)
            status = _graphql(port, STATUS, {"id": run_id})["runOrError"]["status"]
        assert status == "SUCCESS", (tmp_path / "dagster_dev.log").read_text()[-3000:]
        output = str(demo / "warehouse" / "order_status_funnel")
        assert delta.latest_version(output) == 0
        assert not delta.is_delta_table(str(demo / "warehouse" / "revenue_by_region_day"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
