"""The in-process epoch of ``ORDER BY … LIMIT`` without partitions (the rule of
:mod:`ivm_assets.operators.top_k`, as DuckDB queries); a mixin of
:class:`~ivm_assets.local.epoch.LocalEpoch`."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.local.columns import cast_columns, q
from ivm_assets.local.expressions import VALUE_FAMILIES, Untranslatable, arrow_type
from ivm_assets.operators.top_k import TopKOp
from ivm_assets.zset import BUCKET, WEIGHT


class TopKVisits:
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
        old = cast_columns(old, schema, [*op.row_columns, WEIGHT]) if old is not None else None
        new = cast_columns(self._first(op, self._advance(op, old, change)), schema, schema.names)
        if int(pc.sum(new.column(WEIGHT)).as_py() or 0) < op.offset + op.limit:
            # Deletes drained the buffer: refill from the whole input A + ΔA.
            rows = self._current(op.rows, op.rows.read(self.ctx, None, ()))
            everything = self.consolidate(pa.concat_tables([cast_columns(rows, schema, schema.names), change]), op.row_columns) if rows is not None else change
            new = cast_columns(self._first(op, everything), schema, schema.names)
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
        return ", ".join(f"{q(c)} {'DESC' if desc else 'ASC'} NULLS {'FIRST' if first else 'LAST'}" for c, desc, first in op.order)

    def _advance(self, op: TopKOp, old: pa.Table | None, change: pa.Table) -> pa.Table:
        """B + the part of ΔA that sorts at or before B's last row (a row is there when some
        row of B sorts at or after it)."""
        cols = ", ".join(q(c) for c in op.row_columns)
        w = q(WEIGHT)
        tagged = f"SELECT {cols}, {w} AS __d, CAST(0 AS BIGINT) AS __o FROM d"
        if old is not None:
            tagged += f" UNION ALL SELECT {cols}, CAST(0 AS BIGINT), {w} FROM o"
        rows = f"SELECT {cols}, sum(__d) AS __d, sum(__o) AS __o FROM ({tagged}) GROUP BY {cols}"
        in_b = f"max(CASE WHEN __o > 0 THEN 1 ELSE 0 END) OVER (ORDER BY {self._order(op)} ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)"
        query = f"SELECT {cols}, CAST(__o + __d AS BIGINT) AS {w} FROM (SELECT *, {in_b} AS __in_b FROM ({rows})) WHERE __in_b = 1 AND __o + __d > 0"
        return self.sql(query, d=change, **({"o": old} if old is not None else {}))

    def _first(self, op: TopKOp, rows: pa.Table) -> pa.Table:
        """The first ``target`` distinct rows of ``rows`` (a z-set) in order."""
        return self.sql(f"SELECT * FROM r WHERE {q(WEIGHT)} > 0 ORDER BY {self._order(op)} LIMIT {op.target}", r=rows)

    def _shown(self, op: TopKOp, buffer: pa.Table, sign: int) -> pa.Table:
        """The copies of ``buffer``'s rows at places m+1 … m+k, with weight ``sign`` each."""
        cols = ", ".join(q(c) for c in op.row_columns)
        w = q(WEIGHT)
        before = f"sum({w}) OVER (ORDER BY {self._order(op)} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - {w}"
        first, last = f"greatest(__b, {op.offset})", f"least(__b + {w}, {op.offset + op.limit})"
        query = f"SELECT {cols}, CAST(greatest({last} - {first}, 0) * {sign} AS BIGINT) AS {w} FROM (SELECT *, {before} AS __b FROM r)"
        return self.sql(f"SELECT * FROM ({query}) WHERE {w} <> 0", r=buffer)
