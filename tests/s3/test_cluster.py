"""A project on the local S3 server refreshed through a Spark standalone cluster (a master and a
worker, tests/spark/standalone.py): no local folder involved, so no `shared_filesystem` needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_oracle
from tests.s3.test_object_storage import _shop
from tests.spark.standalone import master_json, standalone  # noqa: F401  (the shared cluster fixture)

pytestmark = [pytest.mark.s3, pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]

# The refreshes run in a child process: a process has one Spark driver, and the test
# session's is local. The change between them is written there too, through the project's
# registered storage options.
_REFRESH_ON_CLUSTER = """
import json, sys
from decimal import Decimal
import pyarrow as pa
from ivm_assets import IvmProject
from ivm_assets.delta import tables as delta
from ivm_assets.spark.cluster import master_of

project = IvmProject.load(sys.argv[1])
runs = [[(r.mode, r.engine) for r in project.refresh()]]
orders = project.sources["orders"]
delta.write(orders, pa.Table.from_pylist([{"id": 50, "cust": 1, "amount": Decimal(7)}], schema=delta.arrow_schema(orders)), mode="append")
delta.delete_rows(orders, "id = 2")
runs.append([(r.mode, r.engine) for r in project.refresh()])
print(json.dumps({"master": master_of(project.spark), "runs": runs}))
"""


def test_a_project_on_s3_refreshes_through_a_standalone_cluster(s3_project, standalone):
    master, ui, _ = standalone
    _shop(s3_project)
    s3_project.write_config({"spark": {"master": master, "conf": {"spark.executor.memory": "512m", "spark.cores.max": "1"}}})
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "IVM_SMALL_EPOCHS": "spark"}  # the incremental epoch in Spark too
    env.pop("IVM_SPARK_REMOTE", None)
    out = subprocess.run([sys.executable, "-c", _REFRESH_ON_CLUSTER, str(s3_project.root)], env=env, capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["master"] == master
    assert [mode for mode, _ in found["runs"][0]] == ["full"]
    [(mode, engine)] = found["runs"][1]
    assert mode == "incremental" and engine.startswith("spark"), found
    assert any(app["name"] == "ivm_assets" for app in master_json(ui)["completedapps"])
    # The oracle, in this process's local Spark, over the snapshots the cluster's epochs recorded.
    s3_project.write_config()
    assert_oracle(s3_project.load())
