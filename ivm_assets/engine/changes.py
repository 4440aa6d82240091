"""Change capture: can a source's change data feed be used for (from, to], and reading it.

A range is refused (and the view falls back to full recompute, or fails under
``refresh: incremental``) when the table went backwards, a column the view reads changed, a
commit in the range restored or overwrote it, or its change data feed is off.

Only the columns the view reads matter: a source gaining a column, or a column no scan of
the view reads being retyped or dropped, keeps the refresh incremental, and the change sets
are read with just the columns the view reads. The change data feed gives every row in the
schema of the range's last version (a column added in the range is NULL in rows written
before it).

A small range is read on the driver by delta-rs (:func:`read_range`); a large one is read by
Spark's executors from the data files the Delta log names (:func:`large_range`,
:func:`read_large`), so that its rows never pass through the driver's memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake.exceptions import DeltaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets.delta import change_files, change_reads
from ivm_assets.delta.log import change_feed_enabled, change_rows_between, operations_between
from ivm_assets.delta.read import read_snapshot
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.errors import RebuildNeeded
from ivm_assets.render.duckdb.epoch import LOCAL_CHANGE_ROWS
from ivm_assets.rules.operator import Operator
from ivm_assets.rules.linear import ScanOp
from ivm_assets.spark.arrow import empty_table, normalize_schema, normalize_table, spark_schema
from ivm_assets.state import driver_rows
from ivm_assets.rules.incrementalize import operators
from ivm_assets.sql.plan import q
from ivm_assets.zset import WEIGHT

_REWRITES = {"RESTORE": "restored", "CREATE OR REPLACE TABLE": "replaced", "CREATE OR REPLACE TABLE AS SELECT": "replaced"}
# Commits that change a table's columns without writing rows (delta-rs' and Delta/Spark's
# names): the columns read are checked at each of them, so that a column dropped and added
# again within one range is not mistaken for an unchanged one.
_COLUMN_OPERATIONS = {"ADD COLUMN", "ADD COLUMNS", "DROP COLUMNS", "RENAME COLUMN", "CHANGE COLUMN", "REPLACE COLUMNS"}
# A range with more change rows than this (counted from its commits' metrics, before any row
# is read) is read by Spark's executors: its epoch cannot run in process anyway, and a read
# on the driver would only carry every row through the driver's memory on its way to Spark.
EXECUTOR_CHANGE_ROWS = LOCAL_CHANGE_ROWS
# ... or whose files hold more parquet than this: the metrics undercount some commits (an
# overwrite with a predicate counts the rows it adds, not those of the files it removes).
# 200,000 rows of a few narrow columns are ~2-8 MiB of parquet.
EXECUTOR_CHANGE_BYTES = 16 << 20


def used_columns(root: Operator | None, relation: str) -> tuple[str, ...] | None:
    """The columns of ``relation`` that the scans of the dataflow ``root`` read, in the
    table's order of first use; None (every column) for a view recomputed in full.

    >>> from ivm_assets.rules.linear import UnionAllOp
    >>> scans = (ScanOp("s1", "orders", ("id", "amount"), ("id", "amount")), ScanOp("s2", "orders", ("cust",), ("c",)))
    >>> used_columns(UnionAllOp("u", scans, ("id", "amount")), "orders")
    ('id', 'amount', 'cust')
    """
    if root is None:
        return None
    found: dict[str, None] = {}
    for op in operators(root):
        if isinstance(op, ScanOp) and op.relation == relation:
            found.update(dict.fromkeys(op.source_columns))
    return tuple(found)


def column_signature(uri: str, version: int, columns: tuple[str, ...] | None) -> dict[str, str]:
    """Name → Spark SQL type of ``columns`` (all when None) in the table at ``version``;
    a column the table does not have is left out."""
    fields = spark_schema(arrow_schema(uri, version)).fields
    return {f.name: f.dataType.simpleString() for f in fields if columns is None or f.name in columns}


def schema_signature(uri: str, version: int) -> str:
    """The whole schema's text form: what epoch records held before column signatures."""
    return str(arrow_schema(uri, version))


def column_change(name: str, recorded: dict[str, str], now: dict[str, str], version: int) -> str | None:
    """Which column the view reads changed between a recorded signature and ``now`` (the
    signature at ``version``), or None.

    >>> column_change("orders", {"id": "bigint", "amount": "bigint"}, {"id": "bigint", "amount": "double"}, 7)
    'column amount of source orders changed type: bigint → double'
    >>> column_change("orders", {"id": "bigint", "amount": "bigint"}, {"id": "bigint"}, 7)
    'column amount of source orders is gone at version 7 (dropped or renamed)'
    """
    for column, type_ in recorded.items():
        if column not in now:
            return f"column {column} of source {name} is gone at version {version} (dropped or renamed)"
        if now[column] != type_:
            return f"column {column} of source {name} changed type: {type_} → {now[column]}"
    unrecorded = sorted(now.keys() - recorded.keys())
    if unrecorded:
        return f"column {unrecorded[0]} of source {name} is read now but was not recorded for the last epoch"
    return None


def unusable_range(
    name: str, uri: str, after: int, upto: int, *, recorded_schema: dict[str, str] | str | None, schema_now: dict[str, str],
    columns: tuple[str, ...] | None,
) -> str | None:
    """Why the change feed of ``name`` for (after, upto] cannot be used, or None if it can.

    ``schema_now`` is :func:`column_signature` of ``columns`` at ``upto`` (the caller has it
    already). A ``recorded_schema`` in the old form (the whole schema's text) must equal the
    whole schema now.
    """
    if upto < after:
        return f"source {name} went back from version {after} to {upto} (re-created or restored)"
    if isinstance(recorded_schema, str):
        if schema_signature(uri, upto) != recorded_schema:
            return f"schema of source {name} changed between versions {after} and {upto}"
    elif recorded_schema is not None and (why := column_change(name, recorded_schema, schema_now, upto)):
        return why
    for version, operation, params in operations_between(uri, after, upto):
        if operation in _REWRITES:
            return f"source {name} was {_REWRITES[operation]} at version {version}"
        if operation.startswith("WRITE") or operation.startswith("CREATE"):
            # With a predicate (a replaceWhere; ivm replacing a small view output's every
            # row, delta.write.write_output_rows), the feed holds the rows it changed.
            if str(params.get("mode", "")).lower() == "overwrite" and not params.get("predicate"):
                return f"source {name} was overwritten at version {version}"
        if operation in _COLUMN_OPERATIONS and isinstance(recorded_schema, dict):
            if why := column_change(name, recorded_schema, column_signature(uri, version, columns), version):
                return why
    if not change_feed_enabled(uri, upto):
        return f"source {name} has no change data feed at version {upto} (set delta.enableChangeDataFeed=true)"
    return None


def read_range(name: str, uri: str, after: int, upto: int, *, columns: tuple[str, ...] | None = None) -> pa.Table:
    """The change set of (after, upto] with ``columns`` (all when None), as Arrow (read by
    delta-rs, small by nature; :func:`~ivm_assets.spark.arrow.to_spark` makes it a frame).

    A change that deletes rows and inserts identical ones comes out without them: a no-op
    UPDATE (delta-rs rewrites the row's file, and the feed reports every row of it as deleted
    and inserted again), or an update of columns the view does not read. Consolidated here,
    such a change costs one hash of its rows instead of flowing through every operator (and
    keeps a small epoch in process).

    Raises RebuildNeeded when the feed cannot be read (the view is rebuilt under
    ``refresh: auto``).
    """
    if after == upto:
        schema = arrow_schema(uri, upto)
        kept = [f for f in schema if columns is None or f.name in columns]
        return empty_table(normalize_schema(pa.schema([*kept, pa.field(WEIGHT, pa.int64())])))
    try:
        table = change_reads.read_range(uri, after=after, upto=upto, columns=list(columns) if columns is not None else None)
    except (DeltaError, OSError, ValueError) as exc:
        # Its files were vacuumed, or the feed is otherwise unreadable (a failure to reach the
        # store is a StorageError, raised as it is): as for a large range read by the
        # executors, the view is rebuilt under `refresh: auto`, and this is the error otherwise.
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RebuildNeeded(
            f"the change data feed of source {name} for versions {after + 1}..{upto} cannot be read ({first}); "
            "run a full refresh to rebuild from the current snapshot",
            reason=f"the change data feed of source {name} for versions {after + 1}..{upto} cannot be read ({first})",
        ) from exc
    table = normalize_table(table)
    weights = table.column(WEIGHT)
    if table.num_rows and pc.min(weights).as_py() < 0 < pc.max(weights).as_py():
        data = tuple(c for c in table.column_names if c != WEIGHT)
        netted = driver_rows.cancelled(table, data, WEIGHT)
        table = netted if netted is not None else table
    return table


@dataclass(frozen=True)
class LargeRange:
    """A range read by the executors: its change rows as the Delta log counts them (the
    commits' metrics or the added files' statistics, whichever is more; before the netting
    that :func:`read_range` does) and the files that hold them."""

    rows: int
    files: change_files.ChangeFiles


def large_range(name: str, uri: str, after: int, upto: int) -> LargeRange | None:
    """The files of (after, upto] when the range has more than :data:`EXECUTOR_CHANGE_ROWS`
    change rows or :data:`EXECUTOR_CHANGE_BYTES` of files, and a parquet reader can read
    them as they are; None when :func:`read_range` is to read it (small, deletion vectors,
    column mapping).

    Raises RebuildNeeded (with :func:`read_range`'s text) when a file a commit of the range
    removed is gone from the store (vacuumed): its deleted rows cannot be read.
    """
    if upto <= after:
        return None
    found = change_files.change_files(uri, after=after, upto=upto)
    if found is None:
        return None
    rows = max(change_rows_between(uri, after, upto) or 0, found.rows)
    if rows <= EXECUTOR_CHANGE_ROWS and found.bytes <= EXECUTOR_CHANGE_BYTES:
        return None
    if rows == 0:
        # Files the log counts no rows of (no metrics, only change data files): the engine
        # takes a source with 0 change rows for unchanged, so only a read can count them.
        return None
    if missing := change_files.missing_files(found):
        raise RebuildNeeded(
            f"the change data feed of source {name} for versions {after + 1}..{upto} cannot be read (No such file or "
            f"directory: {missing[0]}, removed in the range, vacuumed since); "
            "run a full refresh to rebuild from the current snapshot",
            reason=f"a file source {name} removed in versions {after + 1}..{upto} was vacuumed: its change data feed cannot be read",
        )
    return LargeRange(rows, found)


def read_large(spark: SparkSession, found: LargeRange, *, columns: tuple[str, ...] | None = None) -> DataFrame:
    """The change set of a :func:`large_range` with ``columns`` (all when None), read by
    Spark's executors. Not netted as :func:`read_range` nets: the operators consolidate
    their inputs (``operators.base.input_change``) and the output change, so a no-op UPDATE
    costs its rows' trip through the linear operators, not a wrong answer."""
    return change_files.read_on_executors(spark, found.files, columns)


def read_full(spark: SparkSession, uri: str, version: int, *, columns: tuple[str, ...] | None = None) -> DataFrame:
    """The snapshot at ``version`` with ``columns`` (all when None) as a change set of
    insertions (weight +1)."""
    snapshot = read_snapshot(spark, uri, version=version)
    if columns is not None:
        snapshot = snapshot.select(*[F.col(q(c)) for c in columns])
    return snapshot.withColumn(WEIGHT, F.lit(1).cast("bigint"))
