"""Source schema changes: only the columns a view reads decide whether its state survives.

A column added to a source, or a column no view reads retyped or dropped, keeps refreshes
incremental (and each view equal to its recompute); a column a view reads retyped or gone
rebuilds the view with a reason naming the column, or under ``refresh: incremental`` fails
with an error that names it and leaves the output as it was.

delta-rs adds columns (``schema_mode="merge"``, ``alter.add_columns``) and retypes or drops
them only by overwriting the table. Retyping or dropping a column without rewriting data
(Delta/Spark's ``ALTER TABLE … ALTER COLUMN … TYPE`` with type widening, ``DROP COLUMN``)
is a commit of a new ``metaData`` action; :func:`_alter_columns` writes that commit.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, Field, Schema, write_deltalake
from tests.conftest import assert_oracle, output_rows

from ivm_assets.delta.handles import latest_version
from ivm_assets.delta.write import delete_rows, update_rows, write
from ivm_assets.engine import changes as cdc
from ivm_assets.errors import RefreshError
from ivm_assets.state.progress import Progress

ORDERS = pa.schema([("id", pa.int64()), ("cust", pa.int64()), ("amount", pa.int64()), ("note", pa.string()), ("flag", pa.int32())])
# amount retyped BIGINT → DOUBLE.
ORDERS_DOUBLE = ORDERS.set(ORDERS.get_field_index("amount"), pa.field("amount", pa.float64()))
TOTALS = "SELECT cust, SUM(amount) AS total\nFROM orders\nGROUP BY cust"
BIG = "SELECT id, amount\nFROM orders\nWHERE amount > 15"


def _orders(rows: list[tuple], schema: pa.Schema = ORDERS) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def _shop(builder, **settings):
    """Orders (``note`` and ``flag`` read by no view) and two incremental views, built once."""
    builder.source("orders", _orders([(1, 1, 10, "a", 0), (2, 1, 20, "b", 1), (3, 2, 30, "c", 0)]))
    builder.view("totals", TOTALS, **settings)
    builder.view("big", BIG, **settings)
    project = builder.load()
    assert {r.mode for r in project.refresh()} == {"full"}
    return project


def _alter_columns(uri: str, schema: pa.Schema, operation: str) -> None:
    """Commit ``schema`` as the table's schema without touching its files, as Delta/Spark's
    ALTER TABLE does (``operation``: "CHANGE COLUMN", "DROP COLUMNS")."""
    log = Path(uri) / "_delta_log"
    commits = sorted(log.glob("*.json"))
    metadata = None
    for commit in commits:  # the newest metaData action (tests write no checkpoints)
        for line in commit.read_text().splitlines():
            metadata = json.loads(line).get("metaData", metadata)
    metadata = {**metadata, "schemaString": Schema.from_arrow(schema).to_json()}
    info = {"timestamp": int(time.time() * 1000), "operation": operation, "operationParameters": {}}
    version = int(commits[-1].stem) + 1
    (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n" + json.dumps({"metaData": metadata}) + "\n")


def _recorded_schema(project, view: str) -> dict:
    return Progress(project.location(view).progress).read().committed.payload["sources"]["orders"]["schema"]


def test_epoch_records_only_the_columns_the_view_reads(builder):
    project = _shop(builder)
    assert _recorded_schema(project, "totals") == {"cust": "bigint", "amount": "bigint"}
    assert _recorded_schema(project, "big") == {"id": "bigint", "amount": "bigint"}


def test_added_column_keeps_refresh_incremental(builder):
    project = _shop(builder)
    uri = builder.uri("orders")
    with_region = ORDERS.append(pa.field("region", pa.string()))
    write_deltalake(uri, _orders([(4, 2, 40, "d", 1, "eu")], with_region), mode="append", schema_mode="merge")
    update_rows(uri, set_sql={"amount": "amount + 5"}, predicate="id = 1")  # pre/post images carry `region`
    DeltaTable(uri).alter.add_columns([Field("score", "double", nullable=True)])
    delete_rows(uri, "id = 2")
    results = project.refresh()
    assert [(r.mode, r.reason) for r in results] == [("incremental", None)] * 2
    assert output_rows(project, "totals") == [(1, 15), (2, 70)]
    assert_oracle(project)
    # The new record still holds just the columns read: a later epoch compares those.
    assert _recorded_schema(project, "totals") == {"cust": "bigint", "amount": "bigint"}


@pytest.mark.parametrize("change", ["retype", "drop"])
def test_unread_column_retyped_or_dropped_keeps_refresh_incremental(builder, change):
    project = _shop(builder)
    uri = builder.uri("orders")
    if change == "retype":
        schema = ORDERS.set(ORDERS.get_field_index("flag"), pa.field("flag", pa.int64()))  # type widening
        _alter_columns(uri, schema, "CHANGE COLUMN")
    else:
        schema = ORDERS.remove(ORDERS.get_field_index("note"))
        _alter_columns(uri, schema, "DROP COLUMNS")
    write_deltalake(uri, _orders([(4, 2, 40, *([7] if change == "drop" else ["d", 7]))], schema), mode="append")
    results = project.refresh()
    assert [(r.mode, r.reason) for r in results] == [("incremental", None)] * 2
    assert output_rows(project, "totals") == [(1, 30), (2, 70)]
    assert_oracle(project)


def _retype_amount(builder) -> None:
    """amount BIGINT → DOUBLE the way delta-rs does it: an overwrite with the new schema
    (one row changes on the way)."""
    rows = [(1, 1, 10.0, "a", 0), (2, 1, 20.0, "b", 1), (3, 2, 30.5, "c", 0)]
    write(builder.uri("orders"), _orders(rows, ORDERS_DOUBLE), mode="overwrite")


def test_read_column_retyped_rebuilds_with_the_column_named(builder):
    project = _shop(builder)
    _retype_amount(builder)
    results = project.refresh()
    reason = "column amount of source orders changed type: bigint → double"
    assert [(r.mode, r.reason) for r in results] == [("full", reason)] * 2
    assert output_rows(project, "totals") == [(1, 30.0), (2, 30.5)]
    assert_oracle(project)
    assert _recorded_schema(project, "totals") == {"cust": "bigint", "amount": "double"}
    write(builder.uri("orders"), _orders([(4, 2, 1.5, "d", 0)], ORDERS_DOUBLE), mode="append")
    assert {r.mode for r in project.refresh()} == {"incremental"}  # the new type is the recorded one now
    assert_oracle(project)


def test_read_column_retyped_under_refresh_incremental_fails_naming_it(builder):
    project = _shop(builder, refresh="incremental")
    before = {v: (latest_version(project.location(v).output), output_rows(project, v)) for v in ("totals", "big")}
    _retype_amount(builder)
    with pytest.raises(RefreshError) as info:
        project.refresh()
    text = str(info.value)
    assert "column amount of source orders changed type: bigint → double" in text
    assert "refresh: incremental" in text and "ivm refresh --full" in text
    after = {v: (latest_version(project.location(v).output), output_rows(project, v)) for v in ("totals", "big")}
    assert after == before
    assert {r.mode for r in project.refresh(full=True)} == {"full"}  # the advice works
    assert_oracle(project)


def test_read_column_dropped_under_refresh_incremental_fails_naming_it(builder):
    """``SELECT *`` reads every column: dropping one (or renaming it: a drop and an add)
    changes what the view reads."""
    builder.source("orders", _orders([(1, 1, 10, "a", 0), (2, 1, 20, "b", 1)]))
    builder.view("everything", "SELECT * FROM orders", refresh="incremental")
    project = builder.load()
    project.refresh()
    uri = builder.uri("orders")
    _alter_columns(uri, ORDERS.remove(ORDERS.get_field_index("note")), "DROP COLUMNS")
    with pytest.raises(RefreshError) as info:
        builder.load().refresh()
    version = latest_version(uri)
    assert f"column note of source orders is gone at version {version} (dropped or renamed)" in str(info.value)


def test_change_feed_is_read_with_the_columns_asked_for(builder, spark):
    uri = builder.source("orders", _orders([(1, 1, 10, "a", 0)]))
    write_deltalake(uri, _orders([(2, 1, 20, "b", 1)]), mode="append")
    changes = cdc.read_range("orders", uri, 0, 1, columns=("amount", "id"))
    assert changes.num_rows == 1 and sorted(changes.column_names) == ["__w", "amount", "id"]
    empty = cdc.read_range("orders", uri, 1, 1, columns=("amount",))
    assert empty.num_rows == 0 and sorted(empty.column_names) == ["__w", "amount"]
    assert sorted(cdc.read_full(spark, uri, 1, columns=("cust",)).columns) == ["__w", "cust"]


def test_record_with_the_whole_schema_is_compared_as_before(builder):
    """Epochs recorded before column signatures hold the whole schema's text: any change
    of it refuses the range, as it used to."""
    uri = builder.source("orders", _orders([(1, 1, 10, "a", 0)]))
    old = cdc.schema_signature(uri, 0)
    now = cdc.column_signature(uri, 0, ("amount",))
    assert cdc.unusable_range("orders", uri, 0, 0, recorded_schema=old, schema_now=now, columns=("amount",)) is None
    DeltaTable(uri).alter.add_columns([Field("score", "double", nullable=True)])
    now = cdc.column_signature(uri, 1, ("amount",))
    assert cdc.unusable_range("orders", uri, 0, 1, recorded_schema=old, schema_now=now, columns=("amount",)) == (
        "schema of source orders changed between versions 0 and 1"
    )
    recorded = cdc.column_signature(uri, 0, ("amount",))
    assert cdc.unusable_range("orders", uri, 0, 1, recorded_schema=recorded, schema_now=now, columns=("amount",)) is None
