"""The in-process epoch of ``GROUP BY`` and global aggregates (the rule of
:mod:`ivm_assets.operators.aggregate`, as DuckDB queries: per touched group −old row +new
row); a mixin of :class:`~ivm_assets.local.epoch.LocalEpoch`."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets import decimal_rules
from ivm_assets.errors import InexactAggregate
from ivm_assets.local.columns import cast_columns, empty, q
from ivm_assets.local.expressions import VALUE_FAMILIES, Untranslatable, arrow_type, decimal_divide
from ivm_assets.operators.aggregate import _COUNT, _GLOBAL, AggregateOp
from ivm_assets.operators.base import Batch
from ivm_assets.zset import BUCKET, WEIGHT


class AggregateVisits:
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
            no_groups = self._with_values(op, empty(state_types, tuple(names)), {i: None for i in op.values})
            arg_types = {i: delta_in.schema.field(a.arg).type for i, a in enumerate(op.aggs) if a.arg}
            return self.sql(self._output_query(op, "g", 1, arg_types, alive=True) + " LIMIT 0", g=no_groups)
        hashes = self._hashes(op.groups)
        touched = Batch.of_table(self.ctx.spark, change.select(list(keys)).append_column(BUCKET, self._buckets(change, keys, hashes)))
        old = self._current(op.groups, op.groups.read(self.ctx, touched if op.keys else None, keys))
        both = f"SELECT {', '.join(q(c) for c in names)} FROM c"
        if old is not None:
            old = cast_columns(old, state_types, names)
            _check_exact(op, old, self.ctx.epoch.metadata.get("ivm.view", ""))
            both += f" UNION ALL SELECT {', '.join(q(c) for c in names)} FROM o"
        sums = ", ".join(f"sum(coalesce({q(p)}, 0)) AS {q(p)}" for p in op.partials)
        key_list = ", ".join(q(k) for k in keys)
        combined = self.sql(f"SELECT {key_list}, {sums} FROM ({both}) GROUP BY {key_list}", c=change, **({"o": old} if old is not None else {}))
        new = cast_columns(combined, state_types, names)
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
        key_list = ", ".join(q(k) for k in keys)
        for i, table in op.values.items():
            agg = op.aggs[i]
            # DOUBLE too: the values are consolidated (−0.0 as 0.0, one NaN) as Spark's are, and
            # both order NaN above +Infinity.
            if arrow_type(delta_in.schema.field(agg.arg).type).family not in (*VALUE_FAMILIES, "double"):
                raise Untranslatable(f"{agg.func.upper()} over a column of type {delta_in.schema.field(agg.arg).type}")
            schema = self._state_schema(table)
            selected = f"SELECT {', '.join([*(q(k) for k in keys), f'{q(agg.arg)} AS v', q(WEIGHT)])} FROM d WHERE {q(agg.arg)} IS NOT NULL"
            dv = cast_columns(self.consolidate(self.sql(selected, d=delta_in), (*keys, "v")), schema, [*keys, "v", WEIGHT])
            self._write(table, dv.append_column(BUCKET, self._buckets(dv, keys, self._hashes(table))))
            old_rows = self._current(table, table.read(self.ctx, touched, keys))
            new_rows = self.consolidate(pa.concat_tables([cast_columns(old_rows, schema, [*keys, "v", WEIGHT]), dv]) if old_rows is not None else dv, (*keys, "v"))
            value = {"min": "min(v)", "max": "max(v)", "count_distinct": "count(v)"}[agg.func]
            query = f"SELECT {key_list}, {value} AS {q(f'm{i}')} FROM r WHERE {q(WEIGHT)} > 0 GROUP BY {key_list}"
            old_values[i] = self.sql(query, r=old_rows) if old_rows is not None else None
            new_values[i] = self.sql(query, r=new_rows)
        return old_values, new_values

    def _with_values(self, op: AggregateOp, groups: pa.Table, values: dict[int, pa.Table | None]) -> pa.Table:
        """``groups`` with a column ``m<i>`` per value aggregate (NULL where a group has none)."""
        for i, found in values.items():
            if found is None:
                groups = groups.append_column(f"m{i}", pa.nulls(groups.num_rows))
                continue
            on = " AND ".join(f"g.{q(k)} IS NOT DISTINCT FROM m.{q(k)}" for k in op.group_keys)
            groups = self.sql(f"SELECT g.*, m.{q(f'm{i}')} FROM g LEFT JOIN m ON {on}", g=groups, m=found)
        return groups

    def _partials(self, op: AggregateOp, delta_in: pa.Table, state_types: pa.Schema) -> pa.Table:
        """Per touched group: Σ weights, and per COUNT/SUM/AVG the weighted non-NULL count and
        the exact weighted sum (integers and DECIMALs only: exact in both engines)."""
        w = q(WEIGHT)
        exprs = [f"sum({w}) AS {q(_COUNT)}"]
        for i, a in enumerate(op.aggs):
            if a.func in ("count", "sum", "avg"):
                exprs.append(f"sum(CASE WHEN {q(a.arg)} IS NOT NULL THEN {w} ELSE 0 END) AS {q(f'n{i}')}")
            if a.func in ("sum", "avg"):
                arg_type = arrow_type(delta_in.schema.field(a.arg).type)
                if arg_type.family != "number":
                    raise Untranslatable(f"{a.func.upper()} over a {arg_type.family}")
                exprs.append(f"sum(CAST({q(a.arg)} AS DECIMAL(38, {arg_type.scale})) * {w}) AS {q(f's{i}')}")
        key_list = ", ".join(q(k) for k in op.group_keys)
        out = self.sql(f"SELECT {key_list}, {', '.join(exprs)} FROM d GROUP BY {key_list}", d=delta_in)
        return cast_columns(out, state_types, [*op.group_keys, *op.partials])

    def _output_query(self, op: AggregateOp, table: str, weight: int, arg_types: dict[int, pa.DataType], *, alive: bool) -> str:
        """The output rows of groups in ``table`` with weight ``weight`` (alive groups only
        when grouped: a group exists while its row count is positive)."""
        out = [q(k) for k in op.keys]
        for i, a in enumerate(op.aggs):
            n, s = q(f"n{i}"), q(f"s{i}")
            value = {
                "count_star": q(_COUNT),
                "count": n,
                "sum": f"CASE WHEN {n} > 0 THEN {s} END",
                "avg": f"CASE WHEN {n} > 0 THEN {_average(s, n, arg_types[i])} END" if a.func == "avg" else "",
                "min": q(f"m{i}"),
                "max": q(f"m{i}"),
                "count_distinct": f"CAST(coalesce({q(f'm{i}')}, 0) AS BIGINT)",
            }[a.func]
            out.append(f"{value} AS {q(a.name)}")
        where = f" WHERE {q(_COUNT)} > 0" if alive else ""
        return f"SELECT {', '.join(out)}, CAST({weight} AS BIGINT) AS {q(WEIGHT)} FROM {table}{where}"


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
