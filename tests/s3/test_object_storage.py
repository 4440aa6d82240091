"""Projects whose sources and warehouse live on an S3 server (a local moto server, see
conftest.py): the same refreshes, the same fast path, the same guarantees as on a folder."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from ivm_assets.delta import parquet_cache, storage, storage_errors
from ivm_assets.delta.handles import _MOVES_KEPT, is_delta_table, latest_version, open_table, reusing_handles
from ivm_assets.delta.maintenance import clean_log
from ivm_assets.delta.write import delete_rows, write
from ivm_assets.errors import CommitConflictError, StorageError
from ivm_assets.state.progress import Progress
from tests.conftest import assert_oracle
from tests.test_crash import _crash_at, two_attempts

pytestmark = pytest.mark.s3

ORDERS = pa.schema([("id", pa.int64()), ("cust", pa.int64()), ("amount", pa.decimal128(10, 2))])
SALES = (
    "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total, MAX(o.amount) AS biggest "
    "FROM orders o JOIN customers c ON o.cust = c.cust GROUP BY c.region"
)


def _shop(p) -> None:
    p.source("orders", pa.Table.from_pylist([{"id": i, "cust": i % 3, "amount": Decimal(i)} for i in range(1, 7)], schema=ORDERS))
    p.source("customers", {"cust": pa.array([0, 1, 2], pa.int64()), "region": ["eu", "us", "eu"]})
    p.view("sales", SALES)


def _change(p, step: int) -> None:
    uri = p.sources["orders"]
    write(uri, pa.Table.from_pylist([{"id": 100 + step, "cust": step % 3, "amount": Decimal(5 + step)}], schema=ORDERS), mode="append")
    delete_rows(uri, f"id = {1 + step % 6}")


def test_first_build_then_incremental_epochs_in_process_and_in_spark(s3_project, monkeypatch):
    _shop(s3_project)
    project = s3_project.load()
    [first] = project.refresh()
    assert first.mode == "full" and first.reason == "first build"
    assert_oracle(project)
    for step in (1, 2):
        _change(s3_project, step)
        [result] = project.refresh()
        assert (result.mode, result.engine) == ("incremental", "in process"), result.summary()
        # Sizes come from the Delta log: the state is read on the driver, not counted as terabytes.
        assert result.stats["state_reads_on_driver"] > 0 and result.stats.get("state_reads_in_spark", 0) == 0
        assert result.stats["state_bytes_scanned"] < 1 << 20
        assert_oracle(project)
    monkeypatch.setenv("IVM_SMALL_EPOCHS", "spark")
    _change(s3_project, 3)
    [result] = project.refresh()
    assert result.mode == "incremental" and result.engine.startswith("spark"), result.summary()
    assert_oracle(project)


# A no-op refresh of a view over two sources, in a process that refreshed it before (its
# handles kept). Measured 14, no listing: per source, a HEAD checking its kept commit file
# and two asking whether the next commit exists (compiling, planning); the progress log's
# kept commit file, its next one, and its latest record read (HEAD, GET); the output's
# kept commit file and its next one.
NO_OP_REQUESTS = 14


def test_a_no_op_refresh_costs_a_bounded_number_of_requests(s3_project, capsys):
    _shop(s3_project)
    project = s3_project.load()
    project.refresh()
    _change(s3_project, 1)
    project.refresh()
    server = s3_project.server
    mark = server.mark()
    [result] = project.refresh()
    assert result.mode == "unchanged"
    requests = server.requests_since(mark)
    with capsys.disabled():
        print(f"\nno-op refresh on S3: {len(requests)} requests (bound {NO_OP_REQUESTS}):")
        for method, path, status in requests:
            print(f"  {method} {path} {status}")
    assert len(requests) <= NO_OP_REQUESTS
    assert not [r for r in requests if r[0] == "GET" and "list-type" in r[1]], "no listing of a log"


@pytest.mark.slow
def test_sigkill_mid_refresh_then_a_rerun_finishes_the_epoch_once(s3_project):
    _shop(s3_project)
    project = s3_project.load()
    project.refresh()
    _change(s3_project, 1)
    s3_project.write_config({"lease_seconds": 2})  # the killed refresh's claim lapses soon
    script = f"from ivm_assets import IvmProject; IvmProject.load({str(s3_project.root)!r}).refresh()"
    env = {**os.environ, "IVM_CRASH_AFTER_COMMITS": "3", "IVM_SPARK_MASTER": "local[1]"}
    assert not [k for k in env if k.startswith("AWS_")]
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    project = s3_project.load(lease_seconds=2)
    [result] = project.refresh()  # takes over once the claim lapses, and repeats the epoch
    assert (result.epoch, result.mode) == (2, "incremental"), result.summary()
    assert_oracle(project)


def test_writers_racing_for_one_version_of_a_progress_log_one_wins(s3_project):
    """Six threads commit to one progress log from the same state, five rounds: the store's
    conditional put lets exactly one through each time, the others see the conflict."""
    progress = Progress(f"{s3_project.base}/warehouse/_ivm/v/_progress")
    state = progress.read()
    for _ in range(5):
        outcomes: list[object] = []
        start = threading.Barrier(6)

        def commit(n: int, state=state) -> None:
            start.wait()
            try:
                outcomes.append(progress.commit(state, started=None, committed=None))
            except CommitConflictError as lost:
                outcomes.append(lost)

        threads = [threading.Thread(target=commit, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        won = [o for o in outcomes if not isinstance(o, CommitConflictError)]
        assert len(won) == 1 and len(outcomes) == 6, outcomes
        state = won[0]
        assert progress.read().version == state.version


def test_two_attempts_of_one_epoch_apply_it_once_on_s3(s3_project, monkeypatch):
    _shop(s3_project)
    project = s3_project.load()
    project.refresh()
    _change(s3_project, 1)
    assert _crash_at(project, monkeypatch, 1)  # the claim with `started` is committed, nothing else
    two_attempts(project, monkeypatch)  # the second attempt's commits are refused by S3's conditional put


def test_a_source_schema_change(s3_project):
    _shop(s3_project)
    project = s3_project.load()
    project.refresh()
    uri = s3_project.sources["orders"]
    wider = pa.schema([*ORDERS, ("note", pa.string())])
    row = {"id": 50, "cust": 1, "amount": Decimal(7), "note": "new column"}
    write_deltalake(uri, pa.Table.from_pylist([row], schema=wider), mode="append", schema_mode="merge", storage_options=storage.options_for(uri))
    [result] = project.refresh()
    assert result.mode == "incremental", result.summary()  # a column the view does not read
    assert_oracle(project)
    retyped = pa.schema([("id", pa.int64()), ("cust", pa.int64()), ("amount", pa.float64())])
    write(uri, pa.Table.from_pylist([{"id": 1, "cust": 0, "amount": 1.5}], schema=retyped), mode="overwrite")
    [result] = project.refresh()
    assert result.mode == "full" and "amount" in result.reason, result.summary()
    assert_oracle(project)


def test_a_lost_state_file_rebuilds_the_view(s3_project):
    _shop(s3_project)
    project = s3_project.load()
    project.refresh()
    client = s3_project.server.client()
    state = [k for k in s3_project.server.objects(s3_project.bucket) if "/_ivm/sales/join_" in k and k.endswith(".parquet")]
    assert state
    for key in state:
        client.delete_object(Bucket=s3_project.bucket, Key=key)
    parquet_cache.clear()  # read from the store, as a process that did not build the view does
    _change(s3_project, 1)
    [result] = project.refresh()
    assert result.mode == "full" and "lost a data file" in result.reason and "s3://" in result.reason, result.summary()
    assert_oracle(project)


def test_internal_log_cleanup_on_s3(s3_project):
    uri = f"{s3_project.base}/warehouse/_ivm/v/_progress"
    progress = Progress(uri)
    state = progress.read()
    for _ in range(25):
        state = progress.commit(state, started=None)
    log = [k for k in s3_project.server.objects(s3_project.bucket) if "/_progress/_delta_log/" in k and k.endswith(".json")]
    assert len(log) == 25
    clean_log(uri)
    log = [k for k in s3_project.server.objects(s3_project.bucket) if "/_progress/_delta_log/" in k and k.endswith(".json")]
    assert len(log) < 25 and log[-1].endswith(f"{24:020d}.json"), log
    assert progress.read().version == 24


def test_wrong_credentials_name_the_table_and_the_setting(s3_project):
    _shop(s3_project)
    s3_project.write_config(secret="not-the-secret")
    from ivm_assets import IvmProject

    project = IvmProject.load(s3_project.root, spark=s3_project.spark)
    with pytest.raises(StorageError) as info:
        project.refresh()
    text = str(info.value)
    assert "refused the credentials" in text and "s3://" in text and "AWS_SECRET_ACCESS_KEY" in text, text
    assert str(s3_project.root / "ivm.yaml") in text and "Kernel error" not in text and "not-the-secret" not in text, text
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_missing_bucket_names_the_bucket(s3_project, tmp_path):
    from ivm_assets import IvmProject

    s3_project.sources = {"orders": "s3://ivm-no-such-bucket/orders"}
    s3_project.view("v", "SELECT id FROM orders")
    s3_project.write_config()
    project = IvmProject.load(s3_project.root, spark=s3_project.spark)
    with pytest.raises(StorageError) as info:
        project.refresh()
    text = str(info.value)
    assert "bucket 'ivm-no-such-bucket' does not exist" in text and "s3://ivm-no-such-bucket/orders" in text, text
    assert "AWS_ENDPOINT_URL" in text and "Generic S3 error" not in text, text


def test_the_secret_appears_in_no_artefact(s3_project, caplog, capfd):
    """A whole project runs with a recognisable secret (the server's, given as a ``${…}``
    reference); it is then looked for in everything the run left or showed."""
    import io
    import logging
    import traceback
    from contextlib import redirect_stderr, redirect_stdout

    from ivm_assets import IvmProject, cli

    secret = s3_project.server.secret
    caplog.set_level(logging.DEBUG)
    _shop(s3_project)
    project = s3_project.load()
    shown: list[str] = []
    for step in (0, 1, 2):
        if step:
            _change(s3_project, step)
        shown += [f"{r.summary()} {r.stats} {r.cost} {r.engine} {r!r}" for r in project.refresh()]
    shown += [project.explain("sales"), *(f"{s.summary()} {s!r}" for s in project.status()), repr(project.config)]
    for argv in (["status", "--project", str(s3_project.root)], ["explain", "sales", "--project", str(s3_project.root)]):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            assert cli.run(argv) == 0
        shown += [out.getvalue(), err.getvalue()]
    # Errors: a refused secret, and a project whose source bucket is missing.
    s3_project.write_config(secret="wrong-secret-for-this-test")
    for make in (
        lambda: IvmProject.load(s3_project.root, spark=s3_project.spark).refresh(),
        lambda: storage_errors.failure(OSError(f"GET https://store/x?sig={secret} failed"), f"{s3_project.base}/x").__str__(),
    ):
        try:
            value = make()
            shown.append(str(value))
        except Exception as exc:
            shown += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    shown += [r.getMessage() for r in caplog.records]
    captured = capfd.readouterr()
    shown += [captured.out, captured.err]
    objects = s3_project.server.objects(s3_project.bucket)
    assert any("/_progress/_delta_log/" in key for key in objects) and any(key.startswith("warehouse/sales/") for key in objects)
    assert [name for name, body in objects.items() if secret.encode() in body] == []
    assert [text[:200] for text in shown if secret in text] == []


def test_a_source_that_moved_is_read_from_its_new_commits_only(s3_project):
    """A process that read a source before (a sensor's last tick, the last refresh) brings its
    kept handle up to date with the new commits instead of replaying the source's log."""
    uri = s3_project.source("events", {"id": pa.array([0], pa.int64())})
    for i in range(1, 15):
        write(uri, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    with reusing_handles():
        assert latest_version(uri) == 14
    write(uri, pa.table({"id": pa.array([15], pa.int64())}), mode="append")
    server = s3_project.server
    mark = server.mark()
    with reusing_handles():
        assert latest_version(uri) == 15
    requests = server.requests_since(mark)
    old_commits = [p for _, p, _ in requests if any(p.endswith(f"{v:020d}.json") for v in range(14))]
    assert old_commits == [] and len(requests) <= 6, requests


def test_a_source_handle_brought_up_to_date_many_times_is_opened_again(s3_project):
    """A kept handle brought up to date in place grows slower with each update: past
    ``_MOVES_KEPT`` of them, the table is opened again instead."""
    uri = s3_project.source("moving", {"id": pa.array([0], pa.int64())})
    seen = []
    for i in range(1, _MOVES_KEPT + 3):
        write(uri, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
        with reusing_handles():
            assert latest_version(uri) == i
            seen.append(open_table(uri, i))
            assert seen[-1].version() == i and len(seen[-1].file_uris()) == i + 1
    # One handle for the first refresh and the updates after it, another once it had moved too often.
    assert [id(h) for h in seen] == [id(seen[0])] * _MOVES_KEPT + [id(seen[-1])] * 2
    assert seen[0] is not seen[-1]


def test_doctor_checks_an_object_store_warehouse(s3_project):
    from ivm_assets.doctor import check_warehouse, load_project

    _shop(s3_project)
    s3_project.write_config()
    project, loaded = load_project(s3_project.root)
    assert loaded.status == "OK"
    result = check_warehouse(project)
    assert (result.status, result.found) == ("OK", f"{s3_project.base}/warehouse is writable (an object written and deleted)")
    s3_project.write_config(secret="not-the-secret")
    project, _ = load_project(s3_project.root)
    result = check_warehouse(project)
    assert result.status == "FAIL" and "refused the credentials" in result.found and "AWS_SECRET_ACCESS_KEY" in result.found, result


def test_is_delta_table_on_s3_asks_for_the_first_commit_then_lists_the_log(s3_project):
    """Without delta-rs' is_deltatable, which holds the GIL while it waits on the store (the
    claim's renewals would stop): a HEAD of the first commit, else a listing of the log."""
    uri = s3_project.source("t", {"id": pa.array([1], pa.int64())})
    assert is_delta_table(uri) and not is_delta_table(f"{s3_project.base}/nothing_here")
    client, key = s3_project.server.client(), f"sources/t/_delta_log/{0:020d}.json"
    body = client.get_object(Bucket=s3_project.bucket, Key=key)["Body"].read()
    client.put_object(Bucket=s3_project.bucket, Key=f"sources/t/_delta_log/{7:020d}.json", Body=body)
    client.delete_object(Bucket=s3_project.bucket, Key=key)  # as a log cleanup after a checkpoint leaves it
    assert is_delta_table(uri)


def test_scattered_row_groups_are_decoded_from_one_request_each_at_most(s3_project):
    """A lookup decodes the row groups its keys may be in (``parquet_cache.row_groups``):
    on an object store each group's column chunks come in one ranged GET, not one each, and
    the file's size, known from the Delta log, spares a HEAD."""
    import pyarrow.parquet as pq

    from ivm_assets.delta import filesystems, parquet_cache

    uri = f"{s3_project.base}/files/state.parquet"
    rows = pa.table({name: pa.array([i * 7 + j for i in range(6400)], pa.int64()) for j, name in enumerate(["k", "a", "b", "c"])})
    fs, path = filesystems.filesystem(uri)
    with fs.open_output_stream(path) as out:
        pq.write_table(rows, out, row_group_size=100)
    size = fs.get_file_info(path).size
    parquet_cache.clear()
    file = parquet_cache.footer(uri, size)
    groups = [3, 17, 40, 63]
    server = s3_project.server
    mark = server.mark()
    tables, decoded = parquet_cache.row_groups(file, groups, rows.schema, keep=False)
    requests = server.requests_since(mark)
    assert decoded == len(groups)
    assert [t.to_pylist() for t in tables] == [rows.slice(g * 100, 100).to_pylist() for g in groups]
    assert all(method == "GET" for method, _, _ in requests) and len(requests) <= len(groups), requests
