"""The in-process epoch of ``GROUP BY`` and global aggregates: the rule of
:mod:`ivm_assets.rules.aggregate` rendered by DuckDB over the state read on the driver; a
mixin of :class:`~ivm_assets.local.epoch.LocalEpoch`."""

from __future__ import annotations

import pyarrow as pa

from ivm_assets.local.columns import cast_columns
from ivm_assets.local.sql_types import VALUE_FAMILIES, arrow_type
from ivm_assets.local.untranslatable import Untranslatable
from ivm_assets.operators.aggregate import AggregateOp
from ivm_assets.rules import rel
from ivm_assets.rules.aggregate import GLOBAL
from ivm_assets.spark.arrow import spark_type_name
from ivm_assets.spark.batches import Batch
from ivm_assets.zset import BUCKET, WEIGHT


class AggregateVisits:
    # --- aggregate: per touched group −old row +new row ----------------------------------
    def visit_AggregateOp(self, op: AggregateOp) -> pa.Table:
        # The input is consolidated as the rule wants it. Only MIN / MAX / COUNT(DISTINCT)
        # read it beside the partials: without them the consolidation is bound into the
        # partials' query (a statement less; its rows and types are the input's).
        raw = self.change(op.input)
        delta = raw if not op.values else self.consolidate(raw, op.input.columns)
        if not op.keys and op.values:
            delta = delta.append_column(GLOBAL, pa.array([0] * delta.num_rows, pa.int32()))
        rule = op.rule(tuple(spark_type_name(delta.schema.field(a.arg).type) if a.arg else None for a in op.aggs), self.ctx.ansi)
        for i, a in enumerate(op.aggs):
            family = arrow_type(delta.schema.field(a.arg).type).family if a.arg else None
            # DOUBLE too: both engines add doubles one after another, uncompensated, and a
            # running sum differs from a recompute by rounding in either engine (docs/sql-support.md,
            # Exactness). FLOAT too: both add its values converted to DOUBLE. Not a string
            # (Spark sums it cast to DOUBLE, from text DuckDB reads otherwise).
            if a.func in ("sum", "avg") and family not in ("number", "double", "float"):
                raise Untranslatable(f"{a.func.upper()} over a {family}")
            # DOUBLE and FLOAT too: the values are consolidated (−0.0 as 0.0, one NaN) as
            # Spark's are, and both order NaN above +Infinity.
            if i in op.values and family not in (*VALUE_FAMILIES, "double", "float"):
                raise Untranslatable(f"{a.func.upper()} over a column of type {delta.schema.field(a.arg).type}")
        keys, names = op.group_keys, [*op.group_keys, *op.partials]
        state_types = self._state_schema(op.groups)
        delta_rel = rel.Input("delta", tuple(delta.column_names))
        if op.values:
            partials = self._computed(rule.partials(delta_rel), {"delta": delta})
        else:
            consolidated = rel.Consolidate(rel.Input("raw", tuple(raw.column_names)), op.input.columns)
            partials = self._computed(rel.bound(rule.partials(delta_rel), "delta", consolidated), {"raw": raw})
        # Keys and partials typed as stored (a key DuckDB widened would not match the state's
        # on the driver); the flags after them as computed.
        flags = [n for n in partials.column_names if n not in names]
        change = cast_columns(partials, state_types, names)
        for name in flags:
            change = change.append_column(partials.schema.field(name), partials.column(name))
        if change.num_rows == 0:
            return self._computed(rel.empty(rule.output({"new"})), {"new": change})
        hashes = self._hashes(op.groups)
        touched = Batch.of_table(self.ctx.spark, change.select(list(keys)).append_column(BUCKET, self._buckets(change, keys, hashes)))
        tables = {"change": change}
        old = self._current(op.groups, op.groups.read(self.ctx, touched if op.keys else None, keys))
        if old is not None:
            tables["old"] = cast_columns(old, state_types, names)
        view = self.ctx.epoch.metadata.get("ivm.view", "")
        combined = rule.combined(rel.Input("change", tuple(change.column_names)), rel.Input("old", tuple(names)) if old is not None else None,
                                 checked=True, view=view)
        new = cast_columns(self._computed(combined, tables), state_types, names)
        self._write(op.groups, new.append_column(BUCKET, self._buckets(new, keys, hashes)))
        tables = {"new": new} | ({"old": tables["old"]} if old is not None else {})
        for i, table in op.values.items():
            schema = self._state_schema(table)
            columns = [*keys, "v", WEIGHT]
            dv = cast_columns(self._computed(rule.values(delta_rel, i), {"delta": delta}), schema, columns)
            self._write(table, dv.append_column(BUCKET, self._buckets(dv, keys, self._hashes(table))))
            tables[f"dv{i}"] = dv
            if (rows := self._current(table, table.read(self.ctx, touched if op.keys else None, keys))) is not None:
                tables[f"old_values{i}"] = cast_columns(rows, schema, columns)
        return self._computed(rule.output(set(tables)), tables)

