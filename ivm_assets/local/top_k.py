"""The in-process epoch of ``ORDER BY … LIMIT`` (of the whole input or per partition): the
rule of :mod:`ivm_assets.rules.top_k` rendered by DuckDB over the state read on the driver;
a mixin of :class:`~ivm_assets.local.epoch.LocalEpoch`."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.local.columns import cast_columns
from ivm_assets.local.sql_types import VALUE_FAMILIES, arrow_type
from ivm_assets.local.untranslatable import Untranslatable
from ivm_assets.operators.top_k import TopKOp
from ivm_assets.rules import rel
from ivm_assets.zset import BUCKET, WEIGHT


class TopKVisits:
    # --- top-k: the buffer B of the first rows, Δ within it, refilled when drained -----------
    def visit_TopKOp(self, op: TopKOp) -> pa.Table:
        rule = op.rule
        change = self.consolidate(self.change(op.input), op.row_columns)
        for name in (*(k[0] for k in op.order), *op.partition):
            # Orders and partitions as both engines order and group them (no FLOAT/DOUBLE).
            if arrow_type(change.schema.field(name).type).family not in VALUE_FAMILIES:
                raise Untranslatable(f"top-k ordered or partitioned by a column of type {change.schema.field(name).type}")
        if change.num_rows == 0:  # the buffer stays as it is, and nothing shown changes
            return self._computed(rel.empty(rule.output({"new"})), {"new": change})
        schema = pa.schema([change.schema.field(c) for c in op.row_columns] + [pa.field(WEIGHT, pa.int64())])
        names = schema.names
        hashes = self._hashes(op.top)
        batch = change.append_column(BUCKET, self._buckets(change, op.partition, hashes))
        tables = {"delta": change}
        # Without partitions the buffer is read whole; with them, its partitions ΔA touches.
        read = self._lookup(op.top, batch, op.partition) if op.partition else self._current(op.top, op.top.read(self.ctx, None, ()))
        if read is not None:
            tables["old"] = cast_columns(read, schema, names)
        new = cast_columns(self._computed(rule.advanced(set(tables)), tables), schema, names)
        new = self._refilled(op, batch, change, new, schema)
        tables["new"] = new
        out = self._computed(rule.output(set(tables)), tables)
        buffer_change = cast_columns(self._computed(rule.buffer_change(set(tables)), tables), schema, names)
        self._write(op.rows, batch)
        self._write(op.top, buffer_change.append_column(BUCKET, self._buckets(buffer_change, op.partition, hashes)))
        return out

    def _refilled(self, op: TopKOp, batch: pa.Table, change: pa.Table, new: pa.Table, schema: pa.Schema) -> pa.Table:
        """B′ with the partitions left holding fewer than m + k rows refilled from A + ΔA."""
        rule = op.rule
        tables = {"new": new, "delta": change}
        if not op.partition:
            if int(pc.sum(new.column(WEIGHT)).as_py() or 0) >= op.offset + op.limit:
                return new
            rows = self._current(op.rows, op.rows.read(self.ctx, None, ()))
            self.ctx.stats["top_k_refills"] = self.ctx.stats.get("top_k_refills", 0) + 1
        else:
            touched = self.sql("SELECT DISTINCT * FROM t", t=batch.select([*op.partition, BUCKET]))
            drained = self._computed(rule.drained(), {"new": new, "touched": touched})
            if drained.num_rows == 0:
                return new
            self.ctx.stats["top_k_refills"] = self.ctx.stats.get("top_k_refills", 0) + drained.num_rows
            tables["drained"] = drained
            rows = self._lookup(op.rows, drained, op.partition)
        if rows is not None:
            tables["rows"] = cast_columns(rows, schema, schema.names)
        return cast_columns(self._computed(rule.refilled(set(tables)), tables), schema, schema.names)
