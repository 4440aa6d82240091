"""Small incremental epochs computed in process: DuckDB over Arrow, no Spark job.

A small epoch's inputs are on the driver already: the sources' change sets come from
delta-rs as Arrow, and the state rows the change touches are read there by pyarrow
(:meth:`~ivm_assets.state.arrangement.StateTable.read`). Spark would turn them into local
relations, re-analyze a plan built over py4j and run a job or more for a few thousand rows:
~0.5–3 s a refresh whatever the change. Here the same rules on changes (each operator's
docstring) run as DuckDB queries over those Arrow tables, and the state appends and the
output change go to delta-rs as they do from Spark. Same state tables, same buckets
(:mod:`~ivm_assets.local.spark_hash`), same commits: an epoch may run here or in Spark, and
the next one again either way.

An epoch runs here only if every operator of the view has a rule below and every expression
translates (:mod:`~ivm_assets.local.expressions`); and only while the state it touches is
read on the driver. Anything else raises :class:`Untranslatable` before the first commit,
and the refresh runs the epoch in Spark instead, recording why. A DuckDB error (an overflow)
does the same: Spark then fails, or computes what Spark computes.
"""

from __future__ import annotations

import threading

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets import decimal_rules
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.errors import InexactAggregate
from ivm_assets.local.expressions import (
    VALUE_FAMILIES, SqlType, Untranslatable, arrow_type, common_type, decimal_divide, register, translate,
)
from ivm_assets.local.spark_hash import as_double, buckets as spark_buckets
from ivm_assets.operators.aggregate import _COUNT, _GLOBAL, AggregateOp
from ivm_assets.operators.base import Batch, EpochContext, Operator
from ivm_assets.operators.distinct import DistinctOp
from ivm_assets.operators.join import JoinOp
from ivm_assets.operators.linear import FilterOp, ProjectOp, ScanOp, UnionAllOp
from ivm_assets.operators.top_k import TopKOp
from ivm_assets.spark.arrow import normalize_table
from ivm_assets.sql.incrementalize import operators
from ivm_assets.state import consolidate
from ivm_assets.state.arrangement import UNHASHED, StateLayout, StateTable
from ivm_assets.zset import BUCKET, WEIGHT

__all__ = ["LOCAL_CHANGE_ROWS", "LocalEpoch", "Untranslatable", "missing_rule"]

# An epoch whose sources changed by more rows than this runs in Spark, which spreads it over
# the executors; below it, the driver holds every change and state row the epoch touches.
LOCAL_CHANGE_ROWS = 200_000

_local = threading.local()


def _connection() -> duckdb.DuckDBPyConnection:
    """This thread's DuckDB connection (opening one costs ~50 ms; a refresh runs in one thread)."""
    if not hasattr(_local, "con"):
        _local.con = duckdb.connect(config={"threads": 1})
        register(_local.con)
    return _local.con


def _in_zone(con: duckdb.DuckDBPyConnection, zone: str) -> duckdb.DuckDBPyConnection:
    """``con`` set to Spark's session time zone: DuckDB's defaults to the host's, and a
    TIMESTAMP compared or cast beside a TIMESTAMP WITH TIME ZONE is read in it."""
    if getattr(_local, "zone", None) != zone:
        con.execute("SET TimeZone = '" + zone.replace("'", "''") + "'").fetchall()
        _local.zone = zone
    return con


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _types(table: pa.Table) -> dict[str, SqlType]:
    """Column types for expression translation (weights and buckets are not columns)."""
    return {f.name: arrow_type(f.type) for f in table.schema if f.name not in (WEIGHT, BUCKET)}


def _untranslatable(exc: duckdb.Error) -> Untranslatable:
    """A DuckDB error (an overflow) as the reason the epoch runs in Spark instead."""
    return Untranslatable(f"DuckDB could not compute it ({str(exc).splitlines()[0]})")


def missing_rule(root: Operator) -> str | None:
    """What the first operator of ``root``'s dataflow without an in-process rule does (its
    epochs then all run in Spark), or None when every operator has one."""
    for op in operators(root):
        if not hasattr(LocalEpoch, f"visit_{type(op).__name__}"):
            return op.describe().split(":")[0]
    return None


class LocalEpoch:
    """One view's incremental epoch computed in process (see the module doc)."""

    def __init__(self, ctx: EpochContext, changes: dict[str, pa.Table]) -> None:
        self.ctx, self.changes = ctx, changes
        self.con = _in_zone(_connection(), ctx.time_zone)
        self._done: dict[str, pa.Table] = {}

    def run(self, root: Operator, schema: pa.Schema) -> pa.Table:
        """The view's output change: ``root``'s change renamed and typed as ``schema`` says,
        consolidated. Queues the state commits in ``ctx.writes`` as Spark's epoch does."""
        change = self.change(root)
        named = change.select([*root.columns, WEIGHT]).rename_columns([*schema.names, WEIGHT])
        # DECIMALs narrowed by DuckDB, which rounds half away from zero as Spark's cast does
        # (an AVG's quotient to the view's type); Arrow's cast refuses to round.
        columns = [
            f"CAST({_q(f.name)} AS DECIMAL({f.type.precision}, {f.type.scale})) AS {_q(f.name)}"
            if pa.types.is_decimal(f.type) and pa.types.is_decimal(named.schema.field(f.name).type) else _q(f.name)
            for f in schema
        ]
        named = self.sql(f"SELECT {', '.join(columns)}, {_q(WEIGHT)} FROM t", t=named)
        try:
            typed = named.cast(pa.schema([*schema, pa.field(WEIGHT, pa.int64())]))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise Untranslatable(f"the output change does not fit the view's types ({exc})") from exc
        return self.consolidate(typed, tuple(schema.names))

    def change(self, op: Operator) -> pa.Table:
        """``op``'s change set this epoch (computed once per operator)."""
        if op.id not in self._done:
            visit = getattr(self, f"visit_{type(op).__name__}", None)
            if visit is None:
                raise Untranslatable(f"no in-process rule for {missing_rule(op)}")
            self._done[op.id] = normalize_table(visit(op))
        return self._done[op.id]

    def sql(self, query: str, **tables: pa.Table) -> pa.Table:
        for name, table in tables.items():
            self.con.register(name, table)
        try:
            return self.con.sql(query).to_arrow_table()
        except duckdb.Error as exc:
            raise _untranslatable(exc) from exc
        finally:
            for name in tables:
                self.con.unregister(name)

    def consolidate(self, table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
        """``table`` consolidated on ``columns``, as :mod:`ivm_assets.state.consolidate` has it."""
        try:
            return consolidate.in_duckdb(self.con, table, columns)
        except duckdb.Error as exc:
            raise _untranslatable(exc) from exc

    # --- linear operators: Δout = op(Δin) -------------------------------------------------
    def visit_ScanOp(self, op: ScanOp) -> pa.Table:
        table = self.changes[op.relation].select([*op.source_columns, WEIGHT])
        return table.rename_columns([*op.columns, WEIGHT])

    def visit_FilterOp(self, op: FilterOp) -> pa.Table:
        table = self.change(op.input)
        predicate, t = translate(op.predicate, _types(table))
        if t.family not in ("boolean", "null"):
            raise Untranslatable(f"a filter of type {t.family}")
        return self.sql(f"SELECT * FROM t WHERE {predicate}", t=table)

    def visit_ProjectOp(self, op: ProjectOp) -> pa.Table:
        table = self.change(op.input)
        types = _types(table)
        exprs = []
        for name, sql in op.exprs:
            value, t = translate(sql, types)
            if t.family == "number" and not t.integer and not value.startswith('"'):
                # Typed as Spark types it: a later division rounds to a scale derived from it.
                value = f"CAST({value} AS DECIMAL({t.precision}, {t.scale}))"
            exprs.append(f"{value} AS {_q(name)}")
        return self.sql(f"SELECT {', '.join(exprs)}, {_q(WEIGHT)} FROM t", t=table)

    def visit_UnionAllOp(self, op: UnionAllOp) -> pa.Table:
        parts = [self.change(i).rename_columns([*op.columns, WEIGHT]) for i in op.inputs]
        if len({p.schema for p in parts}) > 1:
            raise Untranslatable("UNION ALL of inputs typed differently (Spark widens them)")
        return pa.concat_tables(parts)

    # --- inner join: ΔA⋈B_old + A_old⋈ΔB + ΔA⋈ΔB ------------------------------------------
    def visit_JoinOp(self, op: JoinOp) -> pa.Table:
        sides = []
        for child, keys, table in ((op.left, op.left_keys, op.left_state), (op.right, op.right_keys, op.right_state)):
            change = self.consolidate(self.change(child), child.columns)
            present = " AND ".join(f"{_q(k)} IS NOT NULL" for k in keys)
            if present:  # a NULL key matches nothing: never stored, never looked up
                change = self.sql(f"SELECT * FROM t WHERE {present}", t=change)
            hashes = self._hashes(table)
            sides.append(change.append_column(BUCKET, self._buckets(change, keys, hashes)))
        dl, dr = sides
        for a, b in zip(op.left_keys, op.right_keys):
            common_type([arrow_type(dl.schema.field(a).type), arrow_type(dr.schema.field(b).type)], f"the join key {a} = {b}")
        parts: list[tuple[str, pa.Table, pa.Table]] = []
        if dl.num_rows and (old_right := self._lookup(op.right_state, dl, op.left_keys)) is not None:
            parts.append(("l", dl, old_right))
        if dr.num_rows and (old_left := self._lookup(op.left_state, dr, op.right_keys)) is not None:
            parts.append(("r", old_left, dr))
        if dl.num_rows and dr.num_rows:
            parts.append(("b", dl, dr))
        on = " AND ".join(f"l.{_q(a)} = r.{_q(b)}" for a, b in zip(op.left_keys, op.right_keys)) or "TRUE"
        select = ", ".join([*(f"l.{_q(c)}" for c in op.left.columns), *(f"r.{_q(c)}" for c in op.right.columns)])
        joined = [
            self.sql(f"SELECT {select}, l.{_q(WEIGHT)} * r.{_q(WEIGHT)} AS {_q(WEIGHT)} FROM l JOIN r ON {on}", l=left, r=right)
            for _, left, right in parts
        ]
        out = pa.concat_tables(joined) if joined else None
        if out is not None and op.residual:
            residual, _ = translate(op.residual, _types(out))
            out = self.sql(f"SELECT * FROM t WHERE {residual}", t=out)
        for table, change in ((op.left_state, dl), (op.right_state, dr)):
            self._write(table, change)
        if out is None:
            return pa.schema([*(dl.schema.field(c) for c in op.left.columns), *(dr.schema.field(c) for c in op.right.columns), pa.field(WEIGHT, pa.int64())]).empty_table()
        return self.consolidate(out, op.columns)

    def _lookup(self, table: StateTable, touched: pa.Table, keys: tuple[str, ...]) -> pa.Table | None:
        """The current rows of ``table`` whose keys equal a key of ``touched`` (None: no state)."""
        read = table.read(self.ctx, Batch.of_table(self.ctx.spark, touched), keys)
        return self._current(table, read)

    # --- distinct: a row enters when its count rises above 0, leaves when it falls to 0 ----
    def visit_DistinctOp(self, op: DistinctOp) -> pa.Table:
        change = self.consolidate(self.change(op.input), op.columns)
        if change.num_rows == 0:
            return change
        batch = change.append_column(BUCKET, self._buckets(change, op.columns, self._hashes(op.counts)))
        old = self._lookup(op.counts, batch, op.columns)
        self._write(op.counts, batch)
        cols = ", ".join(f"d.{_q(c)}" for c in op.columns)
        w = _q(WEIGHT)
        if old is None:
            return self.sql(f"SELECT {cols}, CAST(1 AS BIGINT) AS {w} FROM d WHERE d.{w} > 0", d=change)
        on = " AND ".join(f"d.{_q(c)} IS NOT DISTINCT FROM o.{_q(c)}" for c in op.columns)
        before, after = f"coalesce(o.{w}, 0)", f"coalesce(o.{w}, 0) + d.{w}"
        flip = f"CASE WHEN {before} <= 0 AND {after} > 0 THEN 1 WHEN {before} > 0 AND {after} <= 0 THEN -1 ELSE 0 END"
        return self.sql(f"SELECT * FROM (SELECT {cols}, CAST({flip} AS BIGINT) AS {w} FROM d LEFT JOIN o ON {on}) WHERE {w} <> 0", d=change, o=old)

    # --- top-k: the buffer B of the first rows, Δ within it, refilled when drained -----------
    def visit_TopKOp(self, op: TopKOp) -> pa.Table:
        if op.partition or op.position:
            raise Untranslatable("top-k per partition")
        change = self.consolidate(self.change(op.input), op.row_columns)
        for name, _, _ in op.order:
            if arrow_type(change.schema.field(name).type).family not in VALUE_FAMILIES:
                raise Untranslatable(f"top-k ordered by a column of type {change.schema.field(name).type}")
        if change.num_rows == 0:
            return change
        batch = change.append_column(BUCKET, pa.array([0] * change.num_rows, pa.int32()))  # no partition: one bucket
        schema = pa.schema([change.schema.field(c) for c in op.row_columns] + [pa.field(WEIGHT, pa.int64())])
        old = self._current(op.top, op.top.read(self.ctx, None, ()))
        old = _cast(old, schema, [*op.row_columns, WEIGHT]) if old is not None else None
        new = _cast(self._first(op, self._advance(op, old, change)), schema, schema.names)
        if int(pc.sum(new.column(WEIGHT)).as_py() or 0) < op.offset + op.limit:
            # Deletes drained the buffer: refill from the whole input A + ΔA.
            rows = self._current(op.rows, op.rows.read(self.ctx, None, ()))
            everything = self.consolidate(pa.concat_tables([_cast(rows, schema, schema.names), change]), op.row_columns) if rows is not None else change
            new = _cast(self._first(op, everything), schema, schema.names)
            self.ctx.stats["top_k_refills"] = self.ctx.stats.get("top_k_refills", 0) + 1
        shown = [self._shown(op, new, 1)] + ([self._shown(op, old, -1)] if old is not None else [])
        out = self.consolidate(pa.concat_tables(shown), op.columns)
        gone = old.set_column(len(op.row_columns), WEIGHT, pc.negate(old.column(WEIGHT))) if old is not None else None
        buffer_change = self.consolidate(pa.concat_tables([new, gone]), op.row_columns) if gone is not None else new
        self._write(op.rows, batch)
        buffer_change = buffer_change.append_column(BUCKET, pa.array([0] * buffer_change.num_rows, pa.int32()))
        self._write(op.top, buffer_change)
        return out

    @staticmethod
    def _order(op: TopKOp) -> str:
        return ", ".join(f"{_q(c)} {'DESC' if desc else 'ASC'} NULLS {'FIRST' if first else 'LAST'}" for c, desc, first in op.order)

    def _advance(self, op: TopKOp, old: pa.Table | None, change: pa.Table) -> pa.Table:
        """B + the part of ΔA that sorts at or before B's last row (a row is there when some
        row of B sorts at or after it)."""
        cols = ", ".join(_q(c) for c in op.row_columns)
        w = _q(WEIGHT)
        tagged = f"SELECT {cols}, {w} AS __d, CAST(0 AS BIGINT) AS __o FROM d"
        if old is not None:
            tagged += f" UNION ALL SELECT {cols}, CAST(0 AS BIGINT), {w} FROM o"
        rows = f"SELECT {cols}, sum(__d) AS __d, sum(__o) AS __o FROM ({tagged}) GROUP BY {cols}"
        in_b = f"max(CASE WHEN __o > 0 THEN 1 ELSE 0 END) OVER (ORDER BY {self._order(op)} ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)"
        query = f"SELECT {cols}, CAST(__o + __d AS BIGINT) AS {w} FROM (SELECT *, {in_b} AS __in_b FROM ({rows})) WHERE __in_b = 1 AND __o + __d > 0"
        return self.sql(query, d=change, **({"o": old} if old is not None else {}))

    def _first(self, op: TopKOp, rows: pa.Table) -> pa.Table:
        """The first ``target`` distinct rows of ``rows`` (a z-set) in order."""
        return self.sql(f"SELECT * FROM r WHERE {_q(WEIGHT)} > 0 ORDER BY {self._order(op)} LIMIT {op.target}", r=rows)

    def _shown(self, op: TopKOp, buffer: pa.Table, sign: int) -> pa.Table:
        """The copies of ``buffer``'s rows at places m+1 … m+k, with weight ``sign`` each."""
        cols = ", ".join(_q(c) for c in op.row_columns)
        w = _q(WEIGHT)
        before = f"sum({w}) OVER (ORDER BY {self._order(op)} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - {w}"
        first, last = f"greatest(__b, {op.offset})", f"least(__b + {w}, {op.offset + op.limit})"
        query = f"SELECT {cols}, CAST(greatest({last} - {first}, 0) * {sign} AS BIGINT) AS {w} FROM (SELECT *, {before} AS __b FROM r)"
        return self.sql(f"SELECT * FROM ({query}) WHERE {w} <> 0", r=buffer)

    # --- aggregate: per touched group −old row +new row ----------------------------------
    def visit_AggregateOp(self, op: AggregateOp) -> pa.Table:
        delta_in = self.consolidate(self.change(op.input), op.input.columns)
        if not op.keys:
            delta_in = delta_in.append_column(_GLOBAL, pa.array([0] * delta_in.num_rows, pa.int32()))
        keys = op.group_keys
        state_types = self._state_schema(op.groups)
        change = self._partials(op, delta_in, state_types)
        names = [*keys, *op.partials]
        if change.num_rows == 0:
            empty = self._with_values(op, _empty(state_types, tuple(names)), {i: None for i in op.values})
            arg_types = {i: delta_in.schema.field(a.arg).type for i, a in enumerate(op.aggs) if a.arg}
            return self.sql(self._output_query(op, "g", 1, arg_types, alive=True) + " LIMIT 0", g=empty)
        hashes = self._hashes(op.groups)
        touched = Batch.of_table(self.ctx.spark, change.select(list(keys)).append_column(BUCKET, self._buckets(change, keys, hashes)))
        old = self._current(op.groups, op.groups.read(self.ctx, touched if op.keys else None, keys))
        both = f"SELECT {', '.join(_q(c) for c in names)} FROM c"
        if old is not None:
            old = _cast(old, state_types, names)
            _check_exact(op, old, self.ctx.epoch.metadata.get("ivm.view", ""))
            both += f" UNION ALL SELECT {', '.join(_q(c) for c in names)} FROM o"
        sums = ", ".join(f"sum(coalesce({_q(p)}, 0)) AS {_q(p)}" for p in op.partials)
        key_list = ", ".join(_q(k) for k in keys)
        combined = self.sql(f"SELECT {key_list}, {sums} FROM ({both}) GROUP BY {key_list}", c=change, **({"o": old} if old is not None else {}))
        new = _cast(combined, state_types, names)
        stored = new.append_column(BUCKET, self._buckets(new, keys, hashes))
        self._write(op.groups, stored)
        old_values, new_values = self._values(op, delta_in, touched if op.keys else None)
        arg_types = {i: delta_in.schema.field(a.arg).type for i, a in enumerate(op.aggs) if a.arg}
        parts = [self._output_query(op, "n", 1, arg_types, alive=bool(op.keys))]
        tables = {"n": self._with_values(op, new, new_values)}
        if old is not None:
            parts.append(self._output_query(op, "o", -1, arg_types, alive=bool(op.keys)))
            tables["o"] = self._with_values(op, old, old_values)
        return self.consolidate(self.sql(" UNION ALL ".join(parts), **tables), op.columns)

    def _values(self, op: AggregateOp, delta_in: pa.Table, touched: Batch | None) -> tuple[dict, dict]:
        """Per MIN/MAX/COUNT(DISTINCT) aggregate i: its value per touched group before and
        after the change, from its value table (the multiset of non-NULL argument values per
        group, a z-set), to which the change's values are appended."""
        old_values: dict[int, pa.Table | None] = {}
        new_values: dict[int, pa.Table | None] = {}
        keys = op.group_keys
        key_list = ", ".join(_q(k) for k in keys)
        for i, table in op.values.items():
            agg = op.aggs[i]
            if arrow_type(delta_in.schema.field(agg.arg).type).family not in VALUE_FAMILIES:
                raise Untranslatable(f"{agg.func.upper()} over a column of type {delta_in.schema.field(agg.arg).type}")
            schema = self._state_schema(table)
            dv = self.sql(
                f"SELECT {key_list}, {_q(agg.arg)} AS v, CAST(sum({_q(WEIGHT)}) AS BIGINT) AS {_q(WEIGHT)} FROM d "
                f"WHERE {_q(agg.arg)} IS NOT NULL GROUP BY {key_list}, v HAVING sum({_q(WEIGHT)}) <> 0",
                d=delta_in,
            )
            dv = _cast(dv, schema, [*keys, "v", WEIGHT])
            self._write(table, dv.append_column(BUCKET, self._buckets(dv, keys, self._hashes(table))))
            old_rows = self._current(table, table.read(self.ctx, touched, keys))
            new_rows = self.consolidate(pa.concat_tables([_cast(old_rows, schema, [*keys, "v", WEIGHT]), dv]) if old_rows is not None else dv, (*keys, "v"))
            value = {"min": "min(v)", "max": "max(v)", "count_distinct": "count(v)"}[agg.func]
            query = f"SELECT {key_list}, {value} AS {_q(f'm{i}')} FROM r WHERE {_q(WEIGHT)} > 0 GROUP BY {key_list}"
            old_values[i] = self.sql(query, r=old_rows) if old_rows is not None else None
            new_values[i] = self.sql(query, r=new_rows)
        return old_values, new_values

    def _with_values(self, op: AggregateOp, groups: pa.Table, values: dict[int, pa.Table | None]) -> pa.Table:
        """``groups`` with a column ``m<i>`` per value aggregate (NULL where a group has none)."""
        for i, found in values.items():
            if found is None:
                groups = groups.append_column(f"m{i}", pa.nulls(groups.num_rows))
                continue
            on = " AND ".join(f"g.{_q(k)} IS NOT DISTINCT FROM m.{_q(k)}" for k in op.group_keys)
            groups = self.sql(f"SELECT g.*, m.{_q(f'm{i}')} FROM g LEFT JOIN m ON {on}", g=groups, m=found)
        return groups

    def _partials(self, op: AggregateOp, delta_in: pa.Table, state_types: pa.Schema) -> pa.Table:
        """Per touched group: Σ weights, and per COUNT/SUM/AVG the weighted non-NULL count and
        the exact weighted sum (integers and DECIMALs only: exact in both engines)."""
        w = _q(WEIGHT)
        exprs = [f"sum({w}) AS {_q(_COUNT)}"]
        for i, a in enumerate(op.aggs):
            if a.func in ("count", "sum", "avg"):
                exprs.append(f"sum(CASE WHEN {_q(a.arg)} IS NOT NULL THEN {w} ELSE 0 END) AS {_q(f'n{i}')}")
            if a.func in ("sum", "avg"):
                arg_type = arrow_type(delta_in.schema.field(a.arg).type)
                if arg_type.family != "number":
                    raise Untranslatable(f"{a.func.upper()} over a {arg_type.family}")
                exprs.append(f"sum(CAST({_q(a.arg)} AS DECIMAL(38, {arg_type.scale})) * {w}) AS {_q(f's{i}')}")
        key_list = ", ".join(_q(k) for k in op.group_keys)
        out = self.sql(f"SELECT {key_list}, {', '.join(exprs)} FROM d GROUP BY {key_list}", d=delta_in)
        return _cast(out, state_types, [*op.group_keys, *op.partials])

    def _output_query(self, op: AggregateOp, table: str, weight: int, arg_types: dict[int, pa.DataType], *, alive: bool) -> str:
        """The output rows of groups in ``table`` with weight ``weight`` (alive groups only
        when grouped: a group exists while its row count is positive)."""
        out = [_q(k) for k in op.keys]
        for i, a in enumerate(op.aggs):
            n, s = _q(f"n{i}"), _q(f"s{i}")
            value = {
                "count_star": _q(_COUNT),
                "count": n,
                "sum": f"CASE WHEN {n} > 0 THEN {s} END",
                "avg": f"CASE WHEN {n} > 0 THEN {_average(s, n, arg_types[i])} END" if a.func == "avg" else "",
                "min": _q(f"m{i}"),
                "max": _q(f"m{i}"),
                "count_distinct": f"CAST(coalesce({_q(f'm{i}')}, 0) AS BIGINT)",
            }[a.func]
            out.append(f"{value} AS {_q(a.name)}")
        where = f" WHERE {_q(_COUNT)} > 0" if alive else ""
        return f"SELECT {', '.join(out)}, CAST({weight} AS BIGINT) AS {_q(WEIGHT)} FROM {table}{where}"

    # --- state ---------------------------------------------------------------------------
    def _layout(self, table: StateTable) -> str:
        recorded = self.ctx.state_layouts.get(table.table_name)
        if not recorded or self.ctx.state_versions.get(table.table_name) is None:
            raise Untranslatable(f"state table {table.table_name} has no recorded layout yet")
        return recorded

    def _hashes(self, table: StateTable) -> tuple[str, ...]:
        """How each key enters the bucket hash, as the table recorded it."""
        return StateLayout.from_json(self._layout(table)).hashes

    def _buckets(self, table: pa.Table, keys: tuple[str, ...], hashes: tuple[str, ...]) -> pa.Array:
        """``pmod(hash(keys), buckets)`` per row, as :func:`~ivm_assets.state.arrangement.with_bucket`."""
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

    def _state_schema(self, table: StateTable) -> pa.Schema:
        version = self.ctx.state_versions.get(table.table_name)
        if version is None:
            raise Untranslatable(f"state table {table.table_name} does not exist yet")
        return arrow_schema(table.uri(self.ctx), version)

    def _current(self, table: StateTable, read) -> pa.Table | None:
        """The state's current rows for the touched keys, as Arrow (None: no state rows)."""
        if read is None:
            return None
        current = table.current_on_driver(read)
        if current is None:
            where = "has keys compared in Spark only" if read.local else "is read in Spark (too large for the driver)"
            raise Untranslatable(f"state table {table.table_name} {where}")
        return current

    def _write(self, table: StateTable, rows: pa.Table) -> None:
        """Queue the append of ``rows`` (with ``__bucket``) to ``table``, hashed as recorded."""
        table.write(self.ctx, Batch.of_table(self.ctx.spark, rows), StateLayout.from_json(self._layout(table)).types())


def _average(s: str, n: str, arg_type: pa.DataType) -> str:
    """AVG from the sum and count as the Spark plan computes it (``aggregate._average``): over
    DECIMAL the exact quotient rounded once into AVG's type; otherwise in double precision
    (the sum of integers is exact, as DECIMAL(38, 0))."""
    if pa.types.is_decimal(arg_type):
        return decimal_divide(s, n, *decimal_rules.average_type(arg_type.precision, arg_type.scale))
    return f"CAST({s} AS DOUBLE) / CAST({n} AS DOUBLE)"


def _check_exact(op: AggregateOp, old: pa.Table, view: str) -> None:
    """Stop the epoch when a touched group's stored sum is not an exact running total (NULL
    over values: a DECIMAL sum past 38 digits), as the Spark plan does (``_inexact``)."""
    for i, a in enumerate(op.aggs):
        if a.func in ("sum", "avg"):
            unknown = pc.and_(pc.greater(old.column(f"n{i}"), 0), pc.is_null(old.column(f"s{i}")))
            if pc.any(unknown).as_py():
                raise InexactAggregate(view, a.text or a.func, "decimal")


def _cast(table: pa.Table, schema: pa.Schema, names: list[str]) -> pa.Table:
    """``table``'s ``names`` typed as the state table's columns of those names (a value that
    does not fit is Spark's overflow: the epoch goes to Spark, which reports it)."""
    try:
        return table.select(names).cast(pa.schema([schema.field(n) for n in names]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise Untranslatable(f"a value does not fit its state column ({exc})") from exc


def _empty(schema: pa.Schema, names: tuple[str, ...]) -> pa.Table:
    return pa.schema([schema.field(n) for n in names]).empty_table()

