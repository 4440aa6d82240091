"""The state layout is recorded, and a state that no longer fits the plan is rebuilt, never
misread.

Both wrong answers this guards against were real: raising ``state_buckets`` between refreshes
made lookups search the wrong buckets, and a join of a BIGINT key with a DECIMAL key lost a
delete after compaction re-bucketed each side by its own type.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from tests.conftest import assert_oracle

from dataclasses import replace

from ivm_assets import IvmProject
from ivm_assets.delta.commit import Epoch
from ivm_assets.delta.handles import is_delta_table, latest_version
from ivm_assets.delta.log import head
from ivm_assets.delta.read import read_small, read_snapshot
from ivm_assets.delta.row_groups import read_row_groups, select_row_groups
from ivm_assets.delta.snapshot import arrow_schema, file_count, files_by_partition, snapshot_files
from ivm_assets.delta.write import create_table, delete_rows, write, write_epoch
from ivm_assets.engine.refresh import LOG_CLEANUP_EPOCHS
from ivm_assets.rules.incrementalize import fingerprint, identity, operators
from ivm_assets.state.layout import DEFAULT_BUCKETS, FORMAT, StateLayout
from ivm_assets.state.progress import Progress
from ivm_assets.state import arrangement


def _progress(project, view: str) -> Progress:
    return Progress(project.location(view).progress)


def _root(project, view: str):
    return project.compile([view])[view].root

JOIN_AGG = """
SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total
FROM orders o JOIN customers c ON o.cust = c.id
GROUP BY c.region
"""


def _shop(builder, *, cust_type=pa.int64()) -> None:
    builder.source("orders", pa.table({
        "id": pa.array(range(1, 41), pa.int64()),
        "cust": pa.array([i % 8 for i in range(40)], cust_type),
        "amount": pa.array([10 * i for i in range(40)], pa.int64()),
    }))
    builder.source("customers", pa.table({
        "id": pa.array(range(8), pa.int64()), "region": pa.array(["n", "s", "e", "w"] * 2),
    }))


def _built(builder, *, cust_type=pa.int64(), buckets: int = 4):
    """The shop with the join + aggregate view ``v`` over ``buckets`` state buckets, built once."""
    _shop(builder, cust_type=cust_type)
    builder.view("v", JOIN_AGG)
    project = builder.load()
    if buckets != 4:
        config = builder.root / "ivm.yaml"
        config.write_text(config.read_text().replace("state_buckets: 4", f"state_buckets: {buckets}"))
        project = IvmProject.load(builder.root, spark=builder.spark)
    project.refresh()
    return project


def _layouts(project, view: str) -> dict[str, StateLayout]:
    root = project.location(view).state_root
    out = {}
    for op in operators(_root(project, view)):
        for table in op.state_tables:
            out[table.table_name] = arrangement.head_layout(table, root)[1]
    return out


def test_every_state_table_records_its_layout(builder):
    project = _built(builder)
    layouts = _layouts(project, "v")
    assert layouts and all(layout is not None for layout in layouts.values())
    for layout in layouts.values():
        assert layout.format == FORMAT and layout.buckets == 4
    join_sides = [layout for name, layout in layouts.items() if name.startswith("join_")]
    assert len(join_sides) == 2 and all(layout.hashes == ("bigint",) for layout in join_sides)
    record = _progress(project, "v").last_committed()
    assert record.payload["plan_fingerprint"] == fingerprint(_root(project, "v"), FORMAT)
    assert record.payload["plan_identity"] == identity(_root(project, "v"), FORMAT)
    assert set(record.payload["state_layouts"]) == set(layouts)


def test_without_state_buckets_a_view_keeps_its_buckets_and_a_new_one_gets_the_default(builder):
    """ivm.yaml without ``state_buckets``: a view built with 16 buckets (the default until
    2026-12-01) carries on incrementally with them, and a view added next gets the default."""
    project = _built(builder, buckets=16)
    config = builder.root / "ivm.yaml"
    config.write_text(config.read_text().replace("state_buckets: 16\n", ""))
    builder.view("w", "SELECT cust, COUNT(*) AS n FROM orders GROUP BY cust")
    project = IvmProject.load(builder.root, spark=builder.spark)
    assert project.config.state_buckets is None
    write(builder.uri("orders"), pa.table({"id": [41], "cust": [3], "amount": [5]}), mode="append")
    results = {r.view: r for r in project.refresh()}
    assert results["v"].mode == "incremental" and results["w"].mode == "full"
    assert_oracle(project)
    assert {layout.buckets for layout in _layouts(project, "v").values()} == {16}
    assert {layout.buckets for layout in _layouts(project, "w").values()} == {DEFAULT_BUCKETS}


def test_raising_state_buckets_rebuilds_with_the_reason(builder):
    _shop(builder)
    builder.view("v", JOIN_AGG)
    builder.load().refresh()
    write(builder.uri("orders"), pa.table({"id": [41], "cust": [3], "amount": [5]}), mode="append")
    delete_rows(builder.uri("orders"), "id IN (2, 17, 33)")
    config = (builder.root / "ivm.yaml").read_text().replace("state_buckets: 4", "state_buckets: 16")
    (builder.root / "ivm.yaml").write_text(config)
    project = IvmProject.load(builder.root, spark=builder.spark)
    (result,) = project.refresh()
    assert result.mode == "full" and result.reason == "state layout changed: buckets 4 → 16"
    assert_oracle(project)
    assert all(layout.buckets == 16 for layout in _layouts(project, "v").values())
    delete_rows(builder.uri("customers"), "id = 5")
    (result,) = project.refresh()
    assert result.mode == "incremental"
    assert_oracle(project)


def test_bigint_joined_with_decimal_survives_compaction(builder):
    """The join hashes both sides as DOUBLE; compaction must re-bucket with that, not with
    each side's own type, or a later delete misses its match."""
    project = _built(builder, cust_type=pa.decimal128(10, 0), buckets=1)
    compacted = 0
    # Enough small epochs to pass the compaction threshold (8 files per bucket, 1 bucket).
    for i in range(10):
        write(
            builder.uri("orders"),
            pa.table({"id": pa.array([100 + i], pa.int64()), "cust": pa.array([i % 8], pa.decimal128(10, 0)),
                      "amount": pa.array([i], pa.int64())}),
            mode="append",
        )
        (result,) = project.refresh()
        assert result.mode == "incremental"
        compacted += result.stats.get("state_tables_compacted", 0)
    assert compacted, "the test must reach a compaction"
    layouts = _layouts(project, "v")
    assert all(layout.hashes == ("double",) for name, layout in layouts.items() if name.startswith("join_"))
    delete_rows(builder.uri("orders"), "cust = 3")
    delete_rows(builder.uri("customers"), "id = 6")
    (result,) = project.refresh()
    assert result.mode == "incremental"
    assert_oracle(project)


def test_state_written_without_a_recorded_layout_is_rebuilt(builder):
    """State from before layouts were recorded (format 1) is never trusted."""
    project = _built(builder)
    root = project.location("v").state_root
    table = next(op.state_tables[0] for op in operators(_root(project, "v")) if op.state_tables)
    uri = table.uri(root)
    latest = head(uri)
    # A commit without the layout, as the previous format wrote them.
    write_epoch(uri, read_small(uri).slice(0, 0), epoch=Epoch("other", 1, {}), after=latest[0], mode="append")
    write(builder.uri("orders"), pa.table({"id": [41], "cust": [3], "amount": [5]}), mode="append")
    (result,) = project.refresh()
    assert result.mode == "full" and result.reason.startswith("state format changed: 1 → 2")
    assert_oracle(project)


def test_a_changed_plan_rebuilds_and_removes_stale_state(builder):
    project = _built(builder)
    progress = _progress(project, "v")
    state = progress.read()
    record = state.committed
    assert record.payload["plan_identity"]
    stale = project.location("v").state_root + "/join_00000000_left"
    create_table(stale, pa.table({"x": [1]}))
    # What an engine upgrade looks like to the next refresh: the recorded identity differs.
    progress.commit(state, committed=replace(record, payload={**record.payload, "plan_identity": "0" * 16}))
    write(builder.uri("orders"), pa.table({"id": [41], "cust": [3], "amount": [5]}), mode="append")
    (result,) = project.refresh()
    assert result.mode == "full" and result.reason.startswith("operator plan changed")
    assert result.stats["stale_state_tables_removed"] == 1 and not is_delta_table(stale)
    # Claim, started record, two join sides, output, committed record, release: each one commit.
    assert result.stats["delta_commits"] >= 7
    assert_oracle(project)


def test_the_plan_is_compared_by_what_it_computes_not_how_explain_words_it(builder, monkeypatch):
    """Rewording an operator's explain line rebuilds nothing; an epoch recorded before plan
    identities existed (a fingerprint only, as the previous version wrote) is carried on
    incrementally, and its next record has the identity."""
    from ivm_assets.rules.join import JoinOp

    project = _built(builder)
    progress = _progress(project, "v")
    state = progress.read()
    older = {k: v for k, v in state.committed.payload.items() if k != "plan_identity"}
    progress.commit(state, committed=replace(state.committed, payload=older))
    write(builder.uri("orders"), pa.table({"id": [41], "cust": [3], "amount": [5]}), mode="append")
    (result,) = project.refresh()
    assert result.mode == "incremental", result.reason
    assert progress.read().committed.payload["plan_identity"] == identity(_root(project, "v"), FORMAT)
    monkeypatch.setattr(JoinOp, "describe", lambda self: "the same join, worded otherwise")
    write(builder.uri("orders"), pa.table({"id": [42], "cust": [1], "amount": [7]}), mode="append")
    (result,) = project.refresh()
    assert result.mode == "incremental", result.reason
    assert_oracle(project)


def test_operator_ids_name_the_computation(spark):
    """Same SQL → same ids and fingerprint; a different subtree → a different id, so it
    never reads another computation's state."""
    from ivm_assets.sql.plan import Filter, Plan, Scan
    from ivm_assets.rules.incrementalize import incrementalize

    a = incrementalize(Plan(Filter(Scan("t", ("a",), ("x",)), "`x` > 1"), ("a",)))
    b = incrementalize(Plan(Filter(Scan("t", ("a",), ("x",)), "`x` > 1"), ("a",)))
    c = incrementalize(Plan(Filter(Scan("t", ("a",), ("x",)), "`x` > 2"), ("a",)))
    assert a.id == b.id and fingerprint(a, FORMAT) == fingerprint(b, FORMAT) and identity(a, FORMAT) == identity(b, FORMAT)
    assert a.id != c.id and fingerprint(a, FORMAT) != fingerprint(c, FORMAT) and identity(a, FORMAT) != identity(c, FORMAT)
    assert a.inputs[0].id == c.inputs[0].id  # the shared scan keeps its id
    assert json.loads(StateLayout(FORMAT, "zset", 4, ("k",), ("k", "v"), ("own",)).to_json())["buckets"] == 4


def test_state_holds_only_the_columns_the_operators_above_need(builder):
    """A filter's columns stay below the join (the filter runs first), and columns no
    operator above reads are never stored: the join keeps keys, the grouping column and the
    summed one; the aggregate keeps its groups' partial sums."""
    _shop(builder)
    builder.view("v", "SELECT c.region, SUM(o.amount) AS total FROM orders o JOIN customers c ON o.cust = c.id "
                      "WHERE o.id > 3 AND c.region <> 'x' GROUP BY c.region")
    project = builder.load()
    project.refresh()
    root = project.location("v").state_root
    stored = {}
    for op in operators(_root(project, "v")):
        for table in op.state_tables:
            names = arrow_schema(table.uri(root)).names
            stored[table.table_name.split("_")[0] + "." + table.name] = {n for n in names if not n.startswith("__")}
    assert {k: len(v) for k, v in stored.items()} == {"join.left": 2, "join.right": 2, "aggregate.groups": 3}
    left, right = stored["join.left"], stored["join.right"]
    assert not any("id" == n.split(".")[-1] for n in left), left  # o.id: only the filter reads it
    assert any(n.endswith("amount") for n in left) and any(n.endswith("cust") for n in left), left
    assert any(n.endswith("region") for n in right) and any(n.endswith("id") for n in right), right


def _logical(project, table, version: int, uri: str | None = None):
    """A state table's logical content at ``version`` (current rows, sorted), read by Spark."""
    uri = uri or table.uri(project.location("v").state_root)
    rows = arrangement.current_rows(table, read_snapshot(project.spark, uri, version=version).drop("__bucket"))
    if table.alive_column:
        rows = rows.filter(f"{table.alive_column} > 0")
    names = sorted(c for c in rows.columns if c != "__e")
    return sorted(tuple(r[c] for c in names) for r in rows.select(*names).collect())


def test_compaction_on_the_driver_keeps_each_row_in_its_bucket_and_the_content_the_same(builder, monkeypatch):
    """Small state tables are compacted on the driver (no Spark job), rows keeping their
    file's bucket; the content is the same before and after, and later epochs still find
    their keys. The Spark compaction of the same state gives the same content."""
    from ivm_assets.spark.metrics import counting_jobs
    from ivm_assets.state import compaction, layout

    project = _built(builder)
    for i in range(4):
        write(builder.uri("orders"), pa.table({
            "id": pa.array([200 + i, 300 + i], pa.int64()), "cust": pa.array([i, 7 - i], pa.int64()),
            "amount": pa.array([i, 2 * i], pa.int64())}), mode="append")
        delete_rows(builder.uri("orders"), f"id = {1 + i}")
        project.refresh()
    root = project.location("v").state_root
    tables = [t for op in operators(_root(project, "v")) for t in op.state_tables]
    before = {t.table_name: _logical(project, t, latest_version(t.uri(root))) for t in tables}
    with counting_jobs(project.spark) as jobs:
        assert all(compaction.compact(t, project.spark, root, max_files_per_bucket=0) for t in tables)
    assert jobs.value == 0
    for t in tables:
        uri = t.uri(root)
        assert file_count(uri) <= 4  # one file per bucket
        assert _logical(project, t, latest_version(uri)) == before[t.table_name]
        for bucket, files in files_by_partition(snapshot_files(uri), "__bucket").items():
            stored = read_row_groups(select_row_groups(files))
            keys = stored.select(list(t.keys))
            expected = layout.with_bucket(project.spark.createDataFrame(keys.to_pandas()), t.keys, 4, _layouts(project, "v")[t.table_name].types())
            assert {r["__bucket"] for r in expected.collect()} <= {int(bucket)}
    delete_rows(builder.uri("customers"), "id = 3")
    delete_rows(builder.uri("orders"), "cust = 5")
    (result,) = project.refresh()
    assert result.mode == "incremental"
    assert_oracle(project)
    # The same content through Spark's compaction path.
    monkeypatch.setattr(compaction, "DRIVER_COMPACT_BYTES", -1)
    after = {t.table_name: _logical(project, t, latest_version(t.uri(root))) for t in tables}
    assert all(compaction.compact(t, project.spark, root, max_files_per_bucket=0) for t in tables)
    assert {t.table_name: _logical(project, t, latest_version(t.uri(root))) for t in tables} == after


def test_a_compaction_folds_only_what_appends_left_and_every_epoch_stays_right(builder, monkeypatch):
    """Where appends hold little beside a bucket's largest file, a compaction folds only
    them (the largest file stays, untouched, one commit changing no data); the whole table
    is folded once they outgrow ``MERGE_SHARE``. Epochs alternate between the engines, each
    reading what the other compacted, and every one equals the recompute: deleted orders
    cancel inside the folded files, and a customer who loses all their orders leaves an
    aggregate row saying so, which must hide the older one in the largest file. A
    compaction killed between writing its files and committing them changes nothing."""
    from ivm_assets.state import compaction
    from ivm_assets.testing import faults
    from tests.rules.harness import epochs_alternating

    builder.source("orders", pa.table({
        "id": pa.array(range(1, 40001), pa.int64()),
        "cust": pa.array([i % 20000 for i in range(40000)], pa.int64()),
        "amount": pa.array([(i * 7919) % 100003 for i in range(40000)], pa.int64()),
    }))
    builder.source("customers", pa.table({"id": pa.array(range(20000), pa.int64()), "region": [f"r{i % 8}" for i in range(20000)]}))
    builder.view("v", JOIN_AGG)
    builder.view("w", "SELECT cust, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY cust")
    project = builder.load()
    project.refresh()
    tables = {
        view: [(t, t.uri(project.location(view).state_root)) for op in operators(_root(project, view)) for t in op.state_tables]
        for view in ("v", "w")
    }
    (orders,) = [(t, uri) for t, uri in tables["v"] if t.name == "left"]
    (groups,) = tables["w"]
    large = [orders, groups]
    built = {uri: set(snapshot_files(uri).files) for _, uri in large}
    compacted = 0
    for i in range(14):
        write(builder.uri("orders"), pa.table({
            "id": pa.array([50000 + 2 * i, 50001 + 2 * i], pa.int64()), "cust": pa.array([(7 * i) % 64, 30000 + i], pa.int64()),
            "amount": pa.array([i, 2 * i], pa.int64())}), mode="append")
        delete_rows(builder.uri("orders"), f"id = {37 * i + 11} OR id = {50000 + 2 * i - 3}")
        if i == 6:  # customer 123 loses every order, then one comes back
            delete_rows(builder.uri("orders"), "cust = 123")
        if i == 9:
            write(builder.uri("orders"), pa.table({"id": pa.array([90000], pa.int64()), "cust": pa.array([123], pa.int64()),
                                                   "amount": pa.array([5], pa.int64())}), mode="append")
        with epochs_alternating(i):
            results = project.refresh()
        assert all(r.mode == "incremental" for r in results), [r.summary() for r in results]
        compacted += sum(r.stats.get("state_tables_compacted", 0) for r in results)
        assert_oracle(project)
    assert compacted, "the test must reach a compaction"
    # Killed after its files are written and before its commit, a compaction leaves the
    # table as it was (IVM_CRASH_MODE=raise leaves what a SIGKILL would).
    table, uri = orders
    version, before = latest_version(uri), _logical(project, table, latest_version(uri), uri)
    monkeypatch.setenv("IVM_CRASH_AFTER_FILE_WRITES", "1")
    monkeypatch.setenv("IVM_CRASH_MODE", "raise")
    faults.reset_commit_count()
    with pytest.raises(faults.SimulatedCrash):
        compaction.compact(table, project.spark, uri.rsplit("/", 1)[0], max_files_per_bucket=0)
    monkeypatch.delenv("IVM_CRASH_AFTER_FILE_WRITES")
    monkeypatch.delenv("IVM_CRASH_MODE")
    assert latest_version(uri) == version and _logical(project, table, version, uri) == before
    for table, uri in large:
        assert built[uri] <= set(snapshot_files(uri).files), f"{uri}: only what appends left is folded"
        before = _logical(project, table, latest_version(uri), uri)
        assert compaction.compact(table, project.spark, uri.rsplit("/", 1)[0], max_files_per_bucket=0)
        assert built[uri] <= set(snapshot_files(uri).files) and _logical(project, table, latest_version(uri), uri) == before
    # Past the share, the whole z-set is folded: one file per bucket, none of the build's.
    # (The aggregate's files hold the latest row of each touched key, a tenth of them.)
    for i in range(3):
        delete_rows(builder.uri("orders"), f"id % 10 = {i}")
        with epochs_alternating(i):
            results = project.refresh()
        assert all(r.mode == "incremental" for r in results), [r.summary() for r in results]
    table, uri = orders
    before = _logical(project, table, latest_version(uri), uri)
    assert compaction.compact(table, project.spark, uri.rsplit("/", 1)[0], max_files_per_bucket=0)
    assert not set(snapshot_files(uri).files) & built[uri] and file_count(uri) <= 4
    assert _logical(project, table, latest_version(uri), uri) == before
    write(builder.uri("orders"), pa.table({"id": pa.array([90001], pa.int64()), "cust": pa.array([123], pa.int64()),
                                           "amount": pa.array([1], pa.int64())}), mode="append")
    assert all(r.mode == "incremental" for r in project.refresh())
    assert_oracle(project)


def _log_versions(uri: str) -> list[int]:
    log = Path(uri) / "_delta_log"
    return sorted(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())


def test_internal_logs_are_cleaned_and_the_output_keeps_its_history(builder):
    """State tables and progress logs drop the log files before their last checkpoint every
    LOG_CLEANUP_EPOCHS epochs (delta-rs lists the whole log folder on each commit, so a log
    that only grows makes every epoch slower); the output keeps Delta's retention, for its
    users' time travel and downstream change feeds. Refreshes stay right throughout."""
    project = _built(builder)
    location = project.location("v")
    for i in range(2 * LOG_CLEANUP_EPOCHS + 3):
        write(
            builder.uri("orders"),
            pa.table({"id": pa.array([100 + i], pa.int64()), "cust": pa.array([i % 8], pa.int64()), "amount": pa.array([i], pa.int64())}),
            mode="append",
        )
        (result,) = project.refresh()
        assert result.mode == "incremental", result.summary()
    internal = [location.progress, *(t.uri(location.state_root) for op in operators(_root(project, "v")) for t in op.state_tables)]
    for uri in internal:
        versions = _log_versions(uri)
        # A table with more commits than a checkpoint interval lost its first ones.
        assert len(versions) <= 3 * LOG_CLEANUP_EPOCHS and (versions[-1] < 20 or versions[0] > 0), (uri, versions)
        assert is_delta_table(uri)
    assert _log_versions(location.progress)[0] > 0  # two commits an epoch: cleaned
    assert _log_versions(location.output)[0] == 0  # every commit of the output still there
    assert_oracle(project)
    (result,) = project.refresh(full=True)  # a rebuild over cleaned logs
    assert result.mode == "full"
    assert_oracle(project)
