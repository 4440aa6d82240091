"""Spark as a cluster: settings, the local-folder refusal, and a real standalone master + worker
(one per test run: the demo on a folder and a project on the local S3 server both use it).

The cluster is pyspark's own standalone master and worker (``bin/spark-class``), each its own
process on 127.0.0.1, stopped by its pid. A refresh through it runs in a child process (a
process has one Spark driver, and the test session's is local).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ivm_assets import IvmProject
from ivm_assets.errors import ConfigError
from ivm_assets.spark.cluster import check_reachable, is_local_master
from tests.conftest import assert_oracle
from tests.spark.standalone import master_json, standalone  # noqa: F401  (the shared cluster fixture)

ROOT = Path(__file__).resolve().parents[2]


def test_which_masters_run_executors_on_this_host():
    assert all(is_local_master(m) for m in ["local", "local[*]", "local[2]", "local[2,3]", "local-cluster[2,1,1024]"])
    assert not any(is_local_master(m) for m in ["spark://10.0.0.5:7077", "yarn", "k8s://https://api:6443", "mesos://m:5050"])


def _project(tmp_path: Path, spark: str) -> Path:
    from deltalake import write_deltalake
    import pyarrow as pa

    write_deltalake(str(tmp_path / "data" / "t"), pa.table({"k": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"})
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "v.sql").write_text("SELECT k FROM t")
    (tmp_path / "ivm.yaml").write_text(f"sources:\n  t: data/t\n{spark}")
    return tmp_path


def test_a_local_warehouse_with_a_cluster_master_is_refused_before_anything_is_written(tmp_path):
    root = _project(tmp_path, "spark:\n  master: spark://spark-master.internal:7077\n")
    project = IvmProject.load(root)
    with pytest.raises(ConfigError) as err:
        project.refresh()
    message = str(err.value)
    assert "Spark runs on the cluster spark://spark-master.internal:7077" in message
    assert f"the warehouse ({root / 'warehouse'})" in message and f"source t ({root / 'data' / 't'})" in message
    assert "`shared_filesystem: true` under `spark:`" in message and str(root / "ivm.yaml") in message
    assert not (root / "warehouse").exists()
    assert not project.session.started  # refused from the settings alone: no JVM started for it


def test_the_cli_exits_non_zero_with_the_reason(tmp_path):
    root = _project(tmp_path, "spark:\n  master: yarn\n")
    run = subprocess.run([Path(sys.executable).with_name("ivm"), "refresh", "--project", root], capture_output=True, text=True)
    assert run.returncode != 0 and "Spark runs on the cluster yarn" in run.stderr and "Traceback" not in run.stderr
    assert not (root / "warehouse").exists()


def test_object_store_locations_and_shared_folders_pass():
    check_reachable("spark://m:7077", {"the warehouse": "s3://b/w", "source t": "gs://b/t"}, shared_filesystem=False, settings="ivm.yaml")
    check_reachable("spark://m:7077", {"the warehouse": "/mnt/shared/w"}, shared_filesystem=True, settings="ivm.yaml")


def test_master_and_remote_together_are_a_config_error(tmp_path):
    root = _project(tmp_path, "spark:\n  master: spark://m:7077\n  remote: sc://c:15002\n")
    with pytest.raises(ConfigError, match=r"ivm.yaml:5: `spark` sets both `master` .* and `remote`"):
        IvmProject.load(root)


def test_an_unknown_spark_key_names_the_allowed_ones(tmp_path):
    root = _project(tmp_path, "spark:\n  masterr: local[2]\n")
    with pytest.raises(ConfigError, match=r"unknown key `spark.masterr`; expected one of: master, remote, conf, shared_filesystem, executor_io"):
        IvmProject.load(root)


def test_ivm_yaml_spark_settings_reach_the_session_and_the_resource_goes_over_them(tmp_path):
    from ivm_assets.dagster.resources import IvmResource

    root = _project(tmp_path, "spark:\n  master: local[1]\n  conf: {spark.sql.shuffle.partitions: 3, spark.executor.memory: 2g}\n")
    project = IvmProject.load(root)
    lazy = project.session
    assert (lazy.master, lazy.remote) == ("local[1]", None)
    assert lazy._conf == {"spark.sql.shuffle.partitions": "3", "spark.executor.memory": "2g"}
    bound = IvmResource(remote="sc://c:15002", spark_conf={"spark.sql.shuffle.partitions": "5"}).lazy_session(project)
    assert (bound.remote, bound._conf["spark.sql.shuffle.partitions"], bound._conf["spark.executor.memory"]) == ("sc://c:15002", "5", "2g")


def test_hadoop_executor_io_gives_the_session_each_locations_hadoop_settings(tmp_path, spark):
    """`executor_io: hadoop` (clusters with Hadoop's connectors): the session gets the Hadoop
    settings of the object store locations' options when it starts; the setting is process-wide."""
    from ivm_assets.delta import hadoop_mapping

    (tmp_path / "views").mkdir()
    (tmp_path / "ivm.yaml").write_text(
        "warehouse: s3://lake/ivm\nsources: {}\nspark: {executor_io: hadoop}\n"
        "storage_options: {AWS_ACCESS_KEY_ID: AKIDEXAMPLE, AWS_REGION: eu-west-1}\n"
    )
    project = IvmProject.load(tmp_path)
    try:
        project.refresh()  # no views: sets the mode and what the session gets when it starts
        assert hadoop_mapping.executor_io() == "hadoop"
        session = project.session.session()
        assert session.conf.get("fs.s3a.bucket.lake.access.key") == "AKIDEXAMPLE"
        assert session.conf.get("fs.s3a.bucket.lake.endpoint.region") == "eu-west-1"
    finally:
        hadoop_mapping.set_executor_io("python")
        for key in ("fs.s3a.bucket.lake.access.key", "fs.s3a.bucket.lake.endpoint.region"):
            spark.conf.unset(key)


@pytest.mark.connect
def test_connect_sessions_take_hadoop_settings_and_refuse_server_settings(connect_server):
    _, env = connect_server
    code = (
        "from ivm_assets.spark.session import get_spark\n"
        "from ivm_assets.errors import IvmError\n"
        "try:\n"
        "    get_spark(remote='local', conf={'spark.executor.memory': '8g'})\n"
        "except IvmError as e:\n"
        "    print('refused:', e)\n"
        "s = get_spark(remote='local', conf={'spark.hadoop.fs.s3a.endpoint': 'http://127.0.0.1:9'})\n"
        "print('hadoop:', s.conf.get('fs.s3a.endpoint'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "refused: Spark settings spark.executor.memory cannot be set by a Spark Connect client" in out.stdout
    assert "hadoop: http://127.0.0.1:9" in out.stdout


# --- a standalone cluster ------------------------------------------------------------------


# Both projects refresh in one child process, one driver and one executor: each costs ~20 s
# of CPU to start on this machine, and the suite must stay under 20 minutes. The demo (a
# local folder every node shares) goes first; the S3 project's ivm.yaml names the same
# master, and its storage options reach the executors with each read and write. Its change
# between the two refreshes is written there too, through the project's registered options.
_REFRESH_ON_CLUSTER = """
import json, sys
from decimal import Decimal
import pyarrow as pa
from ivm_assets import IvmProject
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.delta.write import delete_rows, write
from ivm_assets.demo import apply_demo_changes, create_demo_project
from ivm_assets.engine.oracle import check_view
from ivm_assets.spark.cluster import master_of

root = create_demo_project(sys.argv[1], customers=200, products=40, orders=2000)
with open(root / "ivm.yaml", "a") as f:
    f.write("spark:\\n  master: " + sys.argv[2] + "\\n  shared_filesystem: true\\n"
            "  conf: {spark.executor.memory: 512m, spark.cores.max: '1', spark.driver.memory: 1g}\\n")
demo = IvmProject.load(root)
views = ["revenue_by_region_day", "region_totals", "top_customers"]  # a join + aggregate, a view over it, a recompute
demo_runs = [[r.mode for r in demo.refresh(views)]]
apply_demo_changes(root)
demo_runs.append([(r.view, r.mode, r.engine) for r in demo.refresh(views)])
oracle = {v: check_view(demo, v).ok for v in views}

s3 = IvmProject.load(sys.argv[3])
s3_runs = [[(r.mode, r.engine) for r in s3.refresh()]]
orders = s3.sources["orders"]
write(orders, pa.Table.from_pylist([{"id": 50, "cust": 1, "amount": Decimal(7)}], schema=arrow_schema(orders)), mode="append")
delete_rows(orders, "id = 2")
s3_runs.append([(r.mode, r.engine) for r in s3.refresh()])
print(json.dumps({"masters": [master_of(demo.spark), master_of(s3.spark)], "demo": demo_runs, "oracle": oracle, "s3": s3_runs}))
"""


@pytest.mark.s3
@pytest.mark.cluster
def test_the_demo_and_a_project_on_s3_refresh_through_a_standalone_cluster(s3_project, standalone, tmp_path):
    """The demo on a folder every node shares (``shared_filesystem``), then a project on S3,
    where no local folder is involved."""
    from tests.s3.test_object_storage import _shop

    master, ui, work = standalone
    _shop(s3_project)
    s3_project.write_config({"spark": {"master": master, "conf": {"spark.executor.memory": "512m", "spark.cores.max": "1"}}})
    # Incremental epochs in Spark too, and the builds' files written by the executor (these
    # sources are small enough for the driver to write them).
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "IVM_SMALL_EPOCHS": "spark", "IVM_SMALL_BUILD_ROWS": "0"}
    env.pop("IVM_SPARK_REMOTE", None)
    out = subprocess.run(
        [sys.executable, "-c", _REFRESH_ON_CLUSTER, str(tmp_path / "shop"), master, str(s3_project.root)], env=env,
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["masters"] == [master, master]
    assert set(found["demo"][0]) == {"full"}
    engines = [engine for _, _, engine in found["demo"][1]]
    # The demo's one view without an incremental rule (PERCENT_RANK) is recomputed.
    assert {view for view, mode, _ in found["demo"][1] if mode != "incremental"} == {"top_customers"}, found["demo"]
    assert "in process" not in engines and any((e or "").startswith("spark") for e in engines), engines
    assert all(found["oracle"].values()), found["oracle"]
    assert [mode for mode, _ in found["s3"][0]] == ["full"]
    [(mode, engine)] = found["s3"][1]
    assert mode == "incremental" and engine.startswith("spark"), found
    # The work ran in the worker's executor, not in the driver: the app ran there, and its
    # executor's folder is in the worker's work folder.
    apps = master_json(ui)["completedapps"]
    assert any(app["name"] == "ivm_assets" for app in apps), apps
    assert any(p.name.startswith("app-") for p in work.iterdir())
    # The S3 project's oracle, in this process's local Spark, over the snapshots the
    # cluster's epochs recorded.
    s3_project.write_config()
    assert_oracle(s3_project.load())
