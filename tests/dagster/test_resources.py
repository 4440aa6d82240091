"""IvmResource: runs start Spark only when they need it. A materialization whose epoch runs
in process starts no JVM in the run worker (issue 27), shown the strict way: the run's
process has no Java at all."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from ivm_assets.delta.write import write
from tests.test_fresh_process import _without_java

pytestmark = pytest.mark.slow

RUN = """
import sys
import dagster as dg
from ivm_assets import IvmProject
from ivm_assets.dagster import IvmResource, ivm_view_assets

project = IvmProject.load(sys.argv[1])
result = dg.materialize([ivm_view_assets(project=project)], resources={"ivm": IvmResource()},
                       instance=dg.DagsterInstance.ephemeral())
for event in result.get_asset_materialization_events():
    meta = event.materialization.metadata
    print(meta["ivm/mode"].value, "|", meta["ivm/engine"].value, "|", meta["ivm/spark"].value)
"""


def test_a_run_whose_epoch_runs_in_process_starts_no_jvm(builder, tmp_path):
    orders = builder.source("orders", {"id": [1, 2], "cust": [1, 2], "amount": [10, 20]})
    builder.view("totals", "SELECT cust, SUM(amount) AS total FROM orders GROUP BY cust")
    builder.load().refresh()  # the first build needs Spark: this test session's
    write(orders, pa.table({"id": [3], "cust": [1], "amount": [5]}), mode="append")
    run = subprocess.run([sys.executable, "-c", RUN, str(builder.root)], capture_output=True, text=True,
                         env=_without_java(tmp_path), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    mode, engine, spark = (part.strip() for part in run.stdout.strip().splitlines()[-1].split("|"))
    assert (mode, engine) == ("incremental", "in process")
    assert spark.endswith("(not started: nothing ran in Spark)")
