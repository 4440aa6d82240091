"""Spark's executors read and write the files of tables on S3 (a local moto server, see
conftest.py); the driver only plans and commits. The snapshot read and the full build run
over Spark Connect too (``tests/spark/test_engine_over_connect.py``)."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa
import pytest

from ivm_assets.delta import filesystems, read as delta_read, row_groups, storage, write as delta_write
from ivm_assets.delta.commit import COMPACTION, Epoch
from ivm_assets.delta.handles import is_delta_table
from ivm_assets.delta.log import head
from ivm_assets.delta.maintenance import replace_files, rewrite_rows
from ivm_assets.delta.read import data_files, read_snapshot
from ivm_assets.delta.row_groups import read_row_groups
from ivm_assets.delta.snapshot import file_count, normalize_schema_of, row_count, snapshot_files
from ivm_assets.delta.staging import commit_staged, read_staged, stage_files
from ivm_assets.delta.write import create_table, delete_rows, write
from ivm_assets.settings import SMALL_BUILD_ROWS_ENV
from ivm_assets.spark.arrow import to_arrow, to_spark
from ivm_assets.state import arrangement, compaction


pytestmark = pytest.mark.s3


def _rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"n{i % 97}" if i % 11 else None for i in ids], pa.string()),
        "amount": pa.array([Decimal(i) / 100 for i in ids], pa.decimal128(12, 2)),
        "at": pa.array([datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=i) for i in ids],
                       pa.timestamp("us", tz="UTC")),
        "part": pa.array([i % 3 for i in ids], pa.int64()),
    })


def _sorted(rows: list) -> list:
    return sorted(tuple(r) for r in rows)


def test_a_partitioned_snapshot_is_read_by_the_executors(s3_project, monkeypatch):
    uri = f"{s3_project.base}/t"
    create_table(uri, _rows(5000), partition_by=["part"])
    write(uri, _rows(100, 5000).drop_columns(["name"]).append_column("name", pa.nulls(100, pa.string())), mode="append")
    collected = []
    monkeypatch.setattr(delta_read, "to_spark", lambda *a: collected.append(a) or pytest.fail("rows went through the driver"))
    df = read_snapshot(s3_project.spark, uri)
    assert df.columns == ["id", "name", "amount", "at", "part"]
    expected = _rows(5000).to_pylist() + _rows(100, 5000).to_pylist()
    for row in expected:
        # pyspark hands a TIMESTAMP back as this process's local wall time (TZ), not the session zone's.
        row["at"] = row["at"].astimezone().replace(tzinfo=None)
    for row in expected[5000:]:
        row["name"] = None
    got = [r.asDict() for r in df.collect()]
    key = lambda r: r["id"]  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)


def test_files_staged_on_s3_are_read_back_and_committed(s3_project):
    spark = s3_project.spark
    uri = f"{s3_project.base}/state"
    rows = spark.createDataFrame(_rows(20000).to_pandas()).withColumnRenamed("part", "__bucket")
    files = stage_files(uri, rows, partition_by=["__bucket"], sort_by=["id"], row_group_rows=4096)
    assert files.rows == 20000 and {a.partition_values["__bucket"] for a in files.actions} == {"0", "1", "2"}
    assert all(a.path.startswith("__bucket=") and a.path.split("/")[1].startswith("part-") for a in files.actions)
    staged = read_staged(spark, uri, files)
    assert staged.columns == rows.columns
    assert _sorted(staged.collect()) == _sorted(rows.collect())
    assert not is_delta_table(uri)
    commit_staged(uri, files, epoch=Epoch("ivm:t", 1, {}), after=None)
    assert row_count(uri, 0) == 20000
    assert _sorted(read_snapshot(spark, uri).select(*rows.columns).collect()) == _sorted(rows.collect())
    import pyarrow.parquet as pq

    fs, path = filesystems.filesystem(f"{uri}/{files.actions[0].path}")
    meta = pq.ParquetFile(fs.open_input_file(path)).metadata
    assert meta.row_group(0).num_rows <= 4096 and meta.row_group(0).column(0).compression == "SNAPPY"


def test_a_compaction_on_s3_is_written_by_the_executors(s3_project, monkeypatch):
    spark = s3_project.spark
    uri = f"{s3_project.base}/compacted"
    for i in range(4):
        rows = _rows(1000, i * 1000).rename_columns(["id", "name", "amount", "at", "__bucket"])
        if i == 0:
            create_table(uri, rows, partition_by=["__bucket"])
        else:
            write(uri, rows, mode="append")
    before = read_snapshot(spark, uri, version=3)
    expected = _sorted(before.collect())
    monkeypatch.setattr(delta_write, "to_arrow", lambda *a: pytest.fail("rows went through the driver"))
    assert rewrite_rows(
        uri, before, after=3, partition_by=["__bucket"], sort_by=["id"], row_group_rows=4096, metadata={"why": "test"}
    )
    assert file_count(uri, 4) == 3  # one file per bucket: the rows are repartitioned by it
    assert head(uri)[1].get(COMPACTION) == "true"
    assert _sorted(read_snapshot(spark, uri, version=4).collect()) == expected
    assert row_count(uri, 4) == 4000


def test_files_replaced_on_s3_leave_the_other_files_and_the_content_as_they_were(s3_project):
    """A compaction that folds only what appends left (``replace_files``): new files written
    on the store by the driver, one commit adding them and removing the replaced ones,
    changing no data; the first commit's files stay."""
    spark = s3_project.spark
    uri = f"{s3_project.base}/replaced"
    create_table(uri, _rows(3000), partition_by=["part"])
    first = set(snapshot_files(uri, version=0).files)
    for i in range(3):
        write(uri, _rows(20, 3000 + 20 * i), mode="append")
    expected = _sorted(read_snapshot(spark, uri, version=3).collect())
    appended = [f for f in snapshot_files(uri, version=3).files if f not in first]
    rows = pa.concat_tables([_rows(20, 3000 + 20 * i) for i in range(3)])
    rows = rows.sort_by([("part", "ascending"), ("id", "ascending")])
    assert replace_files(uri, appended, rows, after=3, partition="part", row_group_rows=4096, metadata={"why": "test"}, cache_key="id")
    assert head(uri)[1].get(COMPACTION) == "true"
    files = set(snapshot_files(uri, version=4).files)
    assert first <= files and len(files) == len(first) + 3 and not files & set(appended)
    assert _sorted(read_snapshot(spark, uri, version=4).collect()) == expected
    assert row_count(uri, 4) == 3060
    assert not replace_files(uri, appended, rows, after=3, partition="part", row_group_rows=4096)  # the table moved on


# --- a full build through the executors ------------------------------------------------------
ORDERS = pa.schema([("id", pa.int64()), ("cust", pa.int64()), ("amount", pa.decimal128(10, 2))])
SALES = (
    "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total, MAX(o.amount) AS biggest "
    "FROM orders o JOIN customers c ON o.cust = c.cust GROUP BY c.region"
)
# More orders than a state table writes from the driver (arrangement.DRIVER_WRITE_ROWS).
N_ORDERS = 60_000
_EXECUTOR_FILE = re.compile(r"/part-[0-9a-f]{32}\.parquet$")


def _shop(p) -> None:
    ids = pa.array(range(N_ORDERS), pa.int64())
    p.source("orders", pa.table({"id": ids, "cust": pa.compute.remainder(ids, 1000), "amount": pa.array(
        [Decimal(i % 500) / 4 for i in range(N_ORDERS)], pa.decimal128(10, 2))}, schema=ORDERS))
    p.source("customers", {"cust": pa.array(range(1000), pa.int64()), "region": [f"r{i % 7}" for i in range(1000)]})
    p.view("sales", SALES)


def _change(p, step: int) -> None:
    uri = p.sources["orders"]
    write(uri, pa.Table.from_pylist([{"id": N_ORDERS + step, "cust": step, "amount": Decimal(5 + step)}], schema=ORDERS), mode="append")
    delete_rows(uri, f"id = {step * 7}")


class _Driver:
    """Counts the rows that pass through the driver between Arrow and Spark (``to_arrow``,
    ``to_spark``) and the driver-side reads of table files, calling through to them."""

    def __init__(self, monkeypatch) -> None:
        self.rows = 0
        self.reads = 0
        # Where the Delta modules and the state tables call them.
        monkeypatch.setattr(delta_write, "to_arrow", self._counting(to_arrow))
        monkeypatch.setattr(delta_read, "to_spark", self._counting(to_spark))

        def counted(*args, **kwargs):
            self.reads += 1
            return read_row_groups(*args, **kwargs)

        monkeypatch.setattr(row_groups, "read_row_groups", counted)
        monkeypatch.setattr(arrangement, "read_row_groups", counted)
        monkeypatch.setattr(compaction, "read_row_groups", counted)

    def _counting(self, real):
        def call(*args):
            result = real(*args)
            table = result if isinstance(result, pa.Table) else args[-1]
            self.rows += table.num_rows
            return result

        return call


def test_a_full_build_reads_and_writes_through_the_executors(s3_project, monkeypatch):
    from tests.conftest import assert_oracle, small_epochs

    _shop(s3_project)
    # 61,000 source rows: a build in process otherwise (up to LOCAL_CHANGE_ROWS).
    monkeypatch.setenv(SMALL_BUILD_ROWS_ENV, "0")
    project = s3_project.load()
    driver = _Driver(monkeypatch)
    [first] = project.refresh()
    assert first.mode == "full", first.summary()
    # Only few-row state tables crossed the driver (written from Arrow by design: the 1,000
    # customers' side and the 7 groups); no source was read there, and the 60,000 orders and
    # their join state never crossed it.
    assert driver.rows <= 1000 + 7 and driver.reads == 0, (driver.rows, driver.reads)
    objects = s3_project.server.objects(s3_project.bucket)
    written = [k for k in objects if k.startswith("warehouse/") and _EXECUTOR_FILE.search(k)]
    assert any(k.startswith("warehouse/sales/") for k in written), sorted(objects)
    assert any("/_ivm/sales/join_" in k for k in written), sorted(objects)
    monkeypatch.undo()
    assert_oracle(project)
    for step in (1, 2):
        _change(s3_project, step)
        with small_epochs("auto"):  # also where the run over Connect sends every other epoch to Spark
            [result] = project.refresh()
        assert (result.mode, result.engine) == ("incremental", "in process"), result.summary()
        assert_oracle(project)


def test_the_secret_appears_in_no_plan_log_or_error_of_a_full_build(s3_project, caplog, capfd):
    """A full build through the executors, then the plans of an executor read and write
    (``explain``), the logs (the JVM's included), the errors of a refused read on the
    executors: the secret in none of them."""
    import logging
    import traceback

    from ivm_assets.delta import executor_io
    from ivm_assets.spark.arrow import spark_schema

    secret = s3_project.server.secret
    caplog.set_level(logging.DEBUG)
    _shop(s3_project)
    project = s3_project.load()
    shown = [f"{r.summary()} {r.stats} {r!r}" for r in project.refresh()]
    spark = s3_project.spark
    read = read_snapshot(spark, s3_project.sources["orders"])
    plan = executor_io.write_plan(read, root=f"{s3_project.base}/x", partitions=[], row_group_rows=None, row_group_bytes=1 << 20)
    for df in (read, plan):
        df.explain(mode="extended")
        df.explain(mode="formatted")
    shown.append(repr(executor_io._Store("s3://x", storage.registration(s3_project.base))))
    # The store refuses a read on the executors: its error, as the driver sees it.
    wrong = "wrong-secret-for-the-executors"
    orders = s3_project.sources["orders"]
    snap = snapshot_files(orders)
    schema = normalize_schema_of(snap.table)
    storage.register(orders, s3_project.server.options(secret=wrong), origin="the test")
    with pytest.raises(Exception) as refused:
        executor_io.read_files(
            spark, data_files(snap), root=orders, schema=schema, spark_schema=spark_schema(schema), partitions=[]
        ).count()
    shown += [str(refused.value), repr(refused.value), "".join(traceback.format_exception(refused.value))]
    assert "executor I/O of s3://" in shown[-1] and "AWS Error" in shown[-1], shown[-1][-3000:]
    assert wrong not in shown[-1]
    storage.register(orders, s3_project.server.options(), origin="the test")
    shown += [r.getMessage() for r in caplog.records]
    captured = capfd.readouterr()
    shown += [captured.out, captured.err]
    assert "BatchScan ivm_files_" in captured.out and "ivm_write_files" in captured.out, captured.out[-3000:]
    assert [text[:200] for text in shown if secret in text] == []


@pytest.mark.slow
def test_sigkill_mid_full_build_leaves_only_unreferenced_files_and_a_rerun_builds_once(s3_project):
    """The refresh is killed right after the executors put a state table's files in place,
    before the driver commits them; the re-run builds the view from scratch."""
    from ivm_assets.state.progress import Progress
    from tests.conftest import assert_oracle

    _shop(s3_project)
    s3_project.write_config({"lease_seconds": 2})  # the killed refresh's claim lapses soon
    script = f"from ivm_assets import IvmProject; IvmProject.load({str(s3_project.root)!r}).refresh()"
    env = {**os.environ, "IVM_CRASH_AFTER_FILE_WRITES": "1", "IVM_SPARK_MASTER": "local[1]", SMALL_BUILD_ROWS_ENV: "0"}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=600)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    left = [k for k in s3_project.server.objects(s3_project.bucket) if k.startswith("warehouse/") and _EXECUTOR_FILE.search(k)]
    assert left, "the executors wrote files before the kill"
    project = s3_project.load(lease_seconds=2)
    [result] = project.refresh()
    assert (result.epoch, result.mode) == (1, "full"), result.summary()
    assert_oracle(project)
    where = project.location("sales")
    referenced = set()
    for name in Progress(where.progress).last_committed().payload["state_versions"]:
        uri = f"{where.state_root}/{name}"
        referenced |= {f.split(f"{s3_project.base}/", 1)[1] for f in snapshot_files(uri).files}
    assert not referenced & set(left), "a killed write's files are never part of a table"


@pytest.mark.slow
def test_a_retried_write_task_leaves_its_first_attempts_files_out_of_the_commit(s3_project):
    """Each write task's first attempt fails after writing its files (Spark retries it: the
    child's master allows two attempts); the commit holds the files of one attempt per task."""
    from ivm_assets.state.progress import Progress
    from ivm_assets.testing.faults import FAIL_FIRST_WRITE_ATTEMPT
    from tests.conftest import assert_oracle

    _shop(s3_project)
    s3_project.write_config()
    script = f"from ivm_assets import IvmProject; print(IvmProject.load({str(s3_project.root)!r}).refresh()[0].summary())"
    env = {**os.environ, FAIL_FIRST_WRITE_ATTEMPT: "1", "IVM_SPARK_MASTER": "local[2,2]", SMALL_BUILD_ROWS_ENV: "0"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "full" in done.stdout, done.stderr[-3000:]
    assert "simulated failure of a write task" in done.stderr, "no attempt failed"
    project = s3_project.load()
    assert_oracle(project)
    where = project.location("sales")
    written = {k for k in s3_project.server.objects(s3_project.bucket) if k.startswith("warehouse/") and _EXECUTOR_FILE.search(k)}
    referenced = set()
    for uri in [where.output, *(f"{where.state_root}/{n}" for n in Progress(where.progress).last_committed().payload["state_versions"])]:
        referenced |= {f.split(f"{s3_project.base}/", 1)[1] for f in snapshot_files(uri).files if _EXECUTOR_FILE.search(f)}
    assert referenced and referenced < written, "the failed attempts' files exist and are not committed"
