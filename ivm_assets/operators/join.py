"""Inner join, maintained with an arrangement (state table) per side.

Rule on changes (bilinearity of ⋈ over z-sets):

    Δ(A ⋈ B) = ΔA ⋈ B_old  +  A_old ⋈ ΔB  +  ΔA ⋈ ΔB,   weight(a ⋈ b) = w(a) · w(b)

State: each side's integrated input, a z-set bucketed by the join key. Only the buckets of
the keys in the other side's change are read; the change is then appended to its own side.
Rows whose key has a NULL are never stored: they can never match.
Cross joins (no key) use one bucket and read the whole other side.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm_assets.operators.base import EpochContext, Operator, col, consolidate
from ivm_assets.operators.keys import KeyedPair, keyed_change
from ivm_assets.sql.plan import q
from ivm_assets.zset import BUCKET, WEIGHT

_WL, _WR = "__wl", "__wr"


class JoinOp(KeyedPair):
    """Inner equi-join with an optional residual predicate (see module doc for the rule)."""

    def __init__(
        self,
        op_id: str,
        left: Operator,
        right: Operator,
        left_keys: tuple[str, ...],
        right_keys: tuple[str, ...],
        residual: str | None,
    ) -> None:
        super().__init__(op_id, left, right, left_keys, right_keys, left.columns + right.columns)
        self.residual = residual

    def _keyed(self, df: DataFrame, keys: tuple[str, ...]) -> DataFrame:
        return df.filter(" AND ".join(f"{q(k)} IS NOT NULL" for k in keys)) if keys else df

    def _join(self, left: DataFrame, right: DataFrame) -> DataFrame:
        left = left.withColumnRenamed(WEIGHT, _WL)
        right = right.withColumnRenamed(WEIGHT, _WR)
        cond = [left[q(a)] == right[q(b)] for a, b in zip(self.left_keys, self.right_keys)]
        joined = left.join(right, reduce(lambda x, y: x & y, cond), "inner") if cond else left.crossJoin(right)
        out = joined.select(*[col(c) for c in self.columns], (col(_WL) * col(_WR)).alias(WEIGHT))
        return out.filter(F.expr(self.residual)) if self.residual else out

    def step(self, ctx: EpochContext) -> DataFrame:
        left_change, right_change, types = self.changes(ctx)
        # Each side's keyed change is exactly what its state table stores (NULL keys left out).
        dl = keyed_change(ctx, self.left, self._keyed(left_change, self.left_keys), self.left_keys, types, self.left_state)
        dr = keyed_change(ctx, self.right, self._keyed(right_change, self.right_keys), self.right_keys, types, self.right_state)
        left, right = dl.df.drop(BUCKET), dr.df.drop(BUCKET)
        parts: list[DataFrame] = []
        old_right = self.right_state.read(ctx, dl, self.left_keys)
        if old_right is not None:
            parts.append(self._join(F.broadcast(left) if old_right.large else left, old_right.df))
        old_left = self.left_state.read(ctx, dr, self.right_keys)
        if old_left is not None:
            parts.append(self._join(old_left.df, F.broadcast(right) if old_left.large else right))
        if dl.rows and dr.rows:
            parts.append(self._join(left, right))
        if parts:
            # Left lazy: whoever consumes a change set materializes it once (with its buckets),
            # and a second materialization here would cost one more Spark job per epoch.
            out = reduce(DataFrame.unionAll, parts)
            # A full refresh's join is one part of positive weights: nothing to cancel, and
            # grouping all of it by every column would cost more than the join.
            out = out if ctx.full else consolidate(out, self.columns)
        else:
            out = self._join(left.limit(0), right.limit(0))
        self.left_state.write(ctx, dl, types)
        self.right_state.write(ctx, dr, types)
        return out

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys)) or "TRUE (cross join)"
        extra = f" WHERE {self.residual}" if self.residual else ""
        return f"inner join ON {on}{extra}: Δ(A⋈B) = ΔA⋈B_old + A_old⋈ΔB + ΔA⋈ΔB"
