"""Small incremental epochs computed in process: DuckDB over Arrow, no Spark job.

A small epoch's inputs are on the driver already: the sources' change sets come from
delta-rs as Arrow, and the state rows the change touches are read there by pyarrow
(:func:`~ivm_assets.state.arrangement.read`). Spark would turn them into local
relations, re-analyze a plan built over py4j and run a job or more for a few thousand rows:
~0.5–3 s a refresh whatever the change. Here the same rules on changes (written once, in
:mod:`ivm_assets.rules`) run as DuckDB queries over those Arrow tables, and the state appends and the
output change go to delta-rs as they do from Spark. Same state tables, same buckets
(:mod:`~ivm_assets.render.duckdb.spark_hash`), same commits: an epoch may run here or in Spark, and
the next one again either way.

Every operator binds its rule once for both engines (:mod:`ivm_assets.rules.binding`;
this engine's side is :mod:`~ivm_assets.render.duckdb.binding`). This module runs them, from the
view's root down, each operator's change computed once, and holds the state helpers.

An epoch runs here only if every expression translates
(:mod:`~ivm_assets.render.duckdb.expressions`) and every key, order and sum is of a type both
engines treat alike; and only while the state it touches is
read on the driver. Anything else raises :class:`Untranslatable` before the first commit,
and the refresh runs the epoch in Spark instead, recording why. A DuckDB error (an overflow)
does the same: Spark then fails, or computes what Spark computes.
"""

from __future__ import annotations

import os
import threading

import duckdb
import pyarrow as pa

from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.delta.write import in_order
from ivm_assets.duckdb_names import arrow_query, q, string_literal
from ivm_assets.epoch_context import EpochContext
from ivm_assets.errors import InexactAggregate, UnrepeatableRows
from ivm_assets.render.duckdb.binding import DriverBinding
from ivm_assets.render.duckdb.expressions import register_functions
from ivm_assets.render.duckdb.spark_hash import as_double, buckets as spark_buckets
from ivm_assets.errors import Untranslatable
from ivm_assets.rules.operator import Operator
from ivm_assets.rules.incrementalize import operators
from ivm_assets.spark.arrow import normalize_table, spark_type
from ivm_assets.spark.batches import Batch
from ivm_assets.state import consolidate
from ivm_assets.state.spec import StateTable
from ivm_assets.state.layout import UNHASHED, StateLayout, hash_names, hash_type
from ivm_assets.zset import WEIGHT
from ivm_assets.state import arrangement

# Up to this many rows a change set is consolidated by pyarrow instead of a DuckDB statement,
# which costs 2–3.5 ms whatever its size: pyarrow takes 0.5–1.5 ms up to 1,500 rows (four
# columns, TPC-H types) and is level with DuckDB at ~6,500. Both give the same rows and
# types (tests/state/test_consolidate.py).
ARROW_CONSOLIDATE_ROWS = 4096

__all__ = ["LOCAL_CHANGE_ROWS", "LocalEpoch", "Untranslatable"]

# An epoch whose sources changed by more rows than this, or one of whose operators computes
# a larger change, runs in Spark, which spreads it over the executors; below it, the driver
# holds every change and state row the epoch touches.
LOCAL_CHANGE_ROWS = 200_000

_local = threading.local()

# Results of statements over inputs without rows (see LocalEpoch.sql), oldest first.
_OVER_NOTHING: dict[tuple, pa.Table] = {}
_OVER_NOTHING_MAX = 1024
_over_nothing_lock = threading.Lock()


def _connection() -> duckdb.DuckDBPyConnection:
    """This thread's DuckDB connection (opening one costs ~50 ms; a refresh runs in one thread)."""
    if not hasattr(_local, "con"):
        # Replacement scans on (DuckDB's default): arrow_query finds its tables through them.
        _local.con = duckdb.connect(config={"threads": 1, "python_enable_replacements": True})
        register_functions(_local.con)
    return _local.con


def _in_zone(con: duckdb.DuckDBPyConnection, zone: str) -> duckdb.DuckDBPyConnection:
    """``con`` set to Spark's session time zone: DuckDB's defaults to the host's, and a
    TIMESTAMP compared or cast beside a TIMESTAMP WITH TIME ZONE is read in it."""
    if getattr(_local, "zone", None) != zone:
        con.execute("SET TimeZone = " + string_literal(zone)).fetchall()
        _local.zone = zone
    return con


def _untranslatable(exc: duckdb.Error) -> Untranslatable:
    """A DuckDB error (an overflow) as the reason the epoch runs in Spark instead."""
    return Untranslatable(f"DuckDB could not compute it ({str(exc).splitlines()[0]})")


class LocalEpoch(DriverBinding):
    """One view's incremental epoch computed in process (see the module doc)."""

    def __init__(self, ctx: EpochContext, changes: dict[str, pa.Table]) -> None:
        self.ctx, self.changes = ctx, changes
        self.con = _in_zone(_connection(), ctx.time_zone)
        # A build's operators may compute as many rows as its sources hold (every source
        # row is its change); an incremental epoch's, up to its bound.
        self.max_rows = max(LOCAL_CHANGE_ROWS, sum(t.num_rows for t in changes.values())) if ctx.full else LOCAL_CHANGE_ROWS
        self._done: dict[str, pa.Table] = {}

    def run(self, root: Operator, schema: pa.Schema) -> pa.Table:
        """The view's output change: ``root``'s change renamed and typed as ``schema`` says,
        consolidated. Queues the state commits in ``ctx.writes`` as Spark's epoch does."""
        if not self.ctx.full:
            return self._run(root, schema)
        # A build's statements scan whole sources, which DuckDB splits over the cores (TPC-H
        # Q3 at SF 1: 1.9-2.2 s on two threads, 2.3-2.6 s on one); an incremental epoch's
        # statements are small, and one thread each plans and runs them with less overhead.
        self.con.execute(f"SET threads = {os.cpu_count() or 1}")
        try:
            return self._run(root, schema)
        finally:
            self.con.execute("SET threads = 1")

    def _run(self, root: Operator, schema: pa.Schema) -> pa.Table:
        change = self.change(root)
        if self.ctx.full:
            self._check_every_table_written(root)
        named = change.select([*root.columns, WEIGHT]).rename_columns([*schema.names, WEIGHT])
        # DECIMALs narrowed by DuckDB, which rounds half away from zero as Spark's cast does
        # (an AVG's quotient to the view's type); Arrow's cast refuses to round.
        narrowed = {
            f.name for f in schema
            if pa.types.is_decimal(f.type) and pa.types.is_decimal(t := named.schema.field(f.name).type) and t != f.type
        }
        if narrowed:
            columns = [
                f"CAST({q(f.name)} AS DECIMAL({f.type.precision}, {f.type.scale})) AS {q(f.name)}" if f.name in narrowed else q(f.name)
                for f in schema
            ]
            named = self.sql(f"SELECT {', '.join(columns)}, {q(WEIGHT)} FROM t", t=named)
        try:
            typed = named.cast(pa.schema([*schema, pa.field(WEIGHT, pa.int64())]))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise Untranslatable(f"the output change does not fit the view's types ({exc})") from exc
        return self.consolidate(typed, tuple(schema.names))

    def _check_every_table_written(self, root: Operator) -> None:
        """A full epoch replaces every state table; a rule that wrote nothing to one (no row
        reached it, and its visit returned early) would leave the last build's rows there
        for the next epoch to read. Spark's build writes them empty."""
        written = {append.table.table_name for append in self.ctx.writes}
        missing = sorted({t.table_name for op in operators(root) for t in op.state_tables} - written)
        if missing:
            raise Untranslatable(f"no row of this build reaches state table {', '.join(missing)} (Spark writes it empty)")

    def change(self, op: Operator) -> pa.Table:
        """``op``'s change set this epoch (computed once per operator)."""
        if op.id not in self._done:
            try:
                self._done[op.id] = self.bounded(op, normalize_table(op.epoch(self)))
            except Untranslatable as why:
                # The innermost operator names it: an input's refusal is raised by the input.
                why.operator = why.operator or op.id
                raise
        return self._done[op.id]

    def bounded(self, op: Operator, change: pa.Table) -> pa.Table:
        """``op``'s ``change``, unless it holds more rows than an epoch computes in process:
        a join that multiplies its rows (in a build, a self-join of many rows) goes to
        Spark, which spreads such a change over its executors."""
        if change.num_rows > self.max_rows:
            raise Untranslatable(f"operator {op.id} ({type(op).__name__}) computed {change.num_rows} rows (in process up to {self.max_rows})")
        return change

    def sql(self, query: str, **tables: pa.Table) -> pa.Table:
        # Over inputs without rows, a statement's result is its text's, its inputs' types'
        # and the session zone's alone: remembered, it costs no statement the next time (an
        # unchanged dimension's scan, 1-2 ms each, several per TPC-H epoch).
        key = (query, self.ctx.time_zone, tuple((n, t.schema) for n, t in tables.items())) if not any(t.num_rows for t in tables.values()) else None
        if key is not None and (known := _OVER_NOTHING.get(key)) is not None:
            return known
        try:
            out = arrow_query(self.con, query, tables)
        except duckdb.Error as exc:
            if InexactAggregate.MARKER in str(exc) or UnrepeatableRows.MARKER in str(exc):
                raise  # a rule's own failure (rules.aggregate, rules.window): the refresh recomputes the view
            raise _untranslatable(exc) from exc
        if key is not None:
            with _over_nothing_lock:
                _OVER_NOTHING[key] = out
                if len(_OVER_NOTHING) > _OVER_NOTHING_MAX:
                    del _OVER_NOTHING[next(iter(_OVER_NOTHING))]
        return out

    def consolidate(self, table: pa.Table, columns: tuple[str, ...], order_by: tuple[str, ...] = ()) -> pa.Table:
        """``table`` consolidated on ``columns``, as :mod:`ivm_assets.state.consolidate` has it:
        by pyarrow when it is small and its types are compared there, else by DuckDB, which
        also puts the rows in the order of ``order_by``: a build's join side, stored sorted by
        key, is sorted here on every core, and the writer finds it in order."""
        if table.num_rows <= ARROW_CONSOLIDATE_ROWS and (done := consolidate.in_arrow(table, columns)) is not None:
            return done
        try:
            return consolidate.in_duckdb(self.con, table, columns, order_by)
        except duckdb.Error as exc:
            raise _untranslatable(exc) from exc

    def in_key_order(self, table: pa.Table, keys: tuple[str, ...]) -> pa.Table:
        """``table``'s rows ascending on ``keys`` (none of them NULL), sorted by DuckDB on
        every core unless they already are (a source written in key order)."""
        if not keys or in_order(table, list(keys)):
            return table
        ordered = self.sql(f"SELECT * FROM t ORDER BY {', '.join(q(k) for k in keys)}", t=table)
        return ordered.cast(table.schema)

    def _lookup(self, table: StateTable, touched: pa.Table, keys: tuple[str, ...]) -> pa.Table | None:
        """The current rows of ``table`` whose keys equal a key of ``touched`` (None: no state)."""
        read = arrangement.read(table, self.ctx, Batch.of_table(self.ctx.spark, touched), keys)
        return self._current(table, read)

    # --- state ---------------------------------------------------------------------------
    def _layout(self, table: StateTable) -> str:
        recorded = self.ctx.state_layouts.get(table.table_name)
        if not recorded or self.ctx.state_versions.get(table.table_name) is None:
            raise Untranslatable(f"state table {table.table_name} has no recorded layout yet")
        return recorded

    def _hashes(self, table: StateTable) -> tuple[str, ...] | None:
        """How each key enters the bucket hash, as the table recorded it; None in a full
        epoch (a small build), which lays every table out anew: each key is then hashed as
        its own type says (:func:`own_hashes`), as Spark's build does."""
        if self.ctx.full:
            return None
        return StateLayout.from_json(self._layout(table)).hashes

    def _buckets(self, table: pa.Table, keys: tuple[str, ...], hashes: tuple[str, ...] | None) -> pa.Array:
        """``pmod(hash(keys), buckets)`` per row, as :func:`~ivm_assets.state.layout.with_bucket`."""
        hashes = own_hashes(table, keys) if hashes is None else hashes
        columns = []
        for key, how in zip(keys, hashes):
            if how == "bigint":
                columns.append(table.column(key).cast(pa.int64()))
            elif how == "double":
                doubles = as_double(table.column(key))
                if doubles is None:
                    raise Untranslatable(f"the key {key} of type {table.schema.field(key).type} hashed as DOUBLE")
                columns.append(doubles)
            elif how != UNHASHED:
                columns.append(table.column(key))
        if not columns:
            return pa.array([0] * table.num_rows, pa.int32())
        found = spark_buckets(columns, self.ctx.buckets)
        if found is None:
            raise Untranslatable(f"a key of type {', '.join(str(c.type) for c in columns)} (hash not mirrored)")
        return found

    def _state_schema(self, table: StateTable) -> pa.Schema | None:
        """The stored types of ``table``'s columns; None in a full epoch, whose rows make
        the table anew, typed as computed."""
        if self.ctx.full:
            return None
        version = self.ctx.state_versions.get(table.table_name)
        if version is None:
            raise Untranslatable(f"state table {table.table_name} does not exist yet")
        return arrow_schema(table.uri(self.ctx), version)

    def _current(self, table: StateTable, read) -> pa.Table | None:
        """The state's current rows for the touched keys, as Arrow (None: no state rows)."""
        if read is None:
            return None
        current = arrangement.current_on_driver(table, read)
        if current is None:
            where = "has keys compared in Spark only" if read.local else "is read in Spark (too large for the driver)"
            raise Untranslatable(f"state table {table.table_name} {where}")
        return current

    def _write(self, table: StateTable, rows: pa.Table) -> None:
        """Queue the append of ``rows`` (with ``__bucket``) to ``table``, hashed as recorded
        (as its own types say in a full epoch, which replaces the table)."""
        hashes = own_hashes(rows, table.keys) if self.ctx.full else StateLayout.from_json(self._layout(table)).hashes
        arrangement.write(table, self.ctx, Batch.of_table(self.ctx.spark, rows), StateLayout.types_of(hashes))


def own_hashes(table: pa.Table, keys: tuple[str, ...]) -> tuple[str, ...]:
    """How each key is hashed in a state table a full epoch lays out: as
    :func:`~ivm_assets.state.layout.hash_type` says for its own (Spark) type. A join's keys
    are hashed as their pair's types say; the two agree wherever ``check_key_types`` lets a
    full epoch run in process."""
    return hash_names([hash_type(spark_type(table.schema.field(k).type)) for k in keys])
