"""LEFT, RIGHT and FULL outer joins: the inner join's rule, plus the NULL-padded rows
recomputed for just the join keys a change touches.

An outer join's output is the inner join (equal keys, then the residual ON conditions) plus,
for each preserved side, every row of it that matches nothing, with NULLs for the other
side's columns. Rule on changes, with X_new = X_old + ΔX and K the join keys in ΔL or ΔR:

    Δinner         = ΔL ⋈ R_old + L_old ⋈ ΔR + ΔL ⋈ ΔR            (the inner join's rule)
    Δpadded_L(K)   = pad(L_new(K) ▷ R_new(K)) − pad(L_old(K) ▷ R_old(K))    LEFT, FULL
    Δpadded_R(K)   = pad(R_new(K) ▷ L_new(K)) − pad(R_old(K) ▷ L_old(K))    RIGHT, FULL

where X ▷ Y (anti join) keeps the rows of X that no row of Y matches on the keys and the
residual. The padded rows of a key depend only on that key's rows on both sides, so keys
outside K keep theirs; a row flips between matched and padded exactly when the other
side gains its first match or loses its last (deleted and re-added in one change, it
does not flip at all). A preserved row with a NULL key never matches: it is padded as it
arrives (Δ = ΔX) and never stored.

State: each side's rows (z-set) bucketed by the join key, as for the inner join. A change
reads both sides' rows for all of K (one lookup per side, for the keys of both inputs'
changes); the inner part uses the same rows. Without equalities (ON with only non-equi
conditions) there is one key, and every change reads both sides whole.
"""

from __future__ import annotations

from functools import reduce
from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.operators.base import EpochContext, Operator, col, consolidate
from ivm_assets.operators.join import JoinOp
from ivm_assets.operators.keys import keyed_change, lookup, split_null_keys
from ivm_assets.sql.plan import q
from ivm_assets.zset import BUCKET, WEIGHT

Side = Literal["left", "right", "full"]


class OuterJoinOp(JoinOp):
    """LEFT / RIGHT / FULL outer equi-join with an optional residual (see module doc)."""

    def __init__(
        self,
        op_id: str,
        left: Operator,
        right: Operator,
        side: Side,
        left_keys: tuple[str, ...],
        right_keys: tuple[str, ...],
        residual: str | None,
    ) -> None:
        super().__init__(op_id, left, right, left_keys, right_keys, residual)
        self.side = side
        self.preserved = tuple(s for s in ("left", "right") if side in (s, "full"))

    def _anti(self, mine: DataFrame, other: DataFrame, mine_is_left: bool) -> DataFrame:
        """Rows of ``mine`` that no (present) row of ``other`` matches on keys and residual."""
        pairs = zip(self.left_keys, self.right_keys) if mine_is_left else zip(self.right_keys, self.left_keys)
        other = other.filter(col(WEIGHT) > 0).drop(WEIGHT)
        cond = reduce(lambda x, y: x & y, [mine[q(a)] == other[q(b)] for a, b in pairs], F.lit(True))
        if self.residual:
            cond = cond & F.expr(self.residual)
        return mine.join(other, cond, "left_anti")

    def _pad(self, rows: DataFrame, mine_is_left: bool, types: dict[str, T.DataType]) -> DataFrame:
        """``rows`` of one side with NULLs for the other side's columns, in output order."""
        mine = set(self.left.columns if mine_is_left else self.right.columns)
        return rows.select(
            *[col(c) if c in mine else F.lit(None).cast(types[c]).alias(c) for c in self.columns], col(WEIGHT)
        )

    def step(self, ctx: EpochContext) -> DataFrame:
        left_change, right_change, types = self.changes(ctx)
        column_types = {f.name: f.dataType for f in [*left_change.schema.fields, *right_change.schema.fields]}
        dl = keyed_change(ctx, self.left, left_change, self.left_keys, types)
        dr = keyed_change(ctx, self.right, right_change, self.right_keys, types)
        dl, left_nulls = split_null_keys(ctx.spark, dl, self.left_keys)
        dr, right_nulls = split_null_keys(ctx.spark, dr, self.right_keys)
        left, right = dl.df.drop(BUCKET), dr.df.drop(BUCKET)
        parts: list[DataFrame] = []
        if "left" in self.preserved:
            parts.append(self._pad(left_nulls.drop(BUCKET), True, column_types))
        if "right" in self.preserved:
            parts.append(self._pad(right_nulls.drop(BUCKET), False, column_types))
        old_left = lookup(ctx, self.left_state, [(dl, self.left_keys), (dr, self.right_keys)])
        old_right = lookup(ctx, self.right_state, [(dr, self.right_keys), (dl, self.left_keys)])
        # The inner part, as the inner join computes it.
        if old_right is not None and dl.rows:
            parts.append(self._join(left, old_right))
        if old_left is not None and dr.rows:
            parts.append(self._join(old_left, right))
        if dl.rows and dr.rows:
            parts.append(self._join(left, right))
        # The padded part of the touched keys: new − old.
        if dl.rows or dr.rows:
            sides = {True: (left, old_left, self.left.columns), False: (right, old_right, self.right.columns)}
            for mine_is_left in [s == "left" for s in self.preserved]:
                (m_delta, m_old, m_cols), (o_delta, o_old, o_cols) = sides[mine_is_left], sides[not mine_is_left]
                m_new = m_delta if m_old is None else consolidate(m_old.unionByName(m_delta), m_cols)
                o_new = o_delta if o_old is None else consolidate(o_old.unionByName(o_delta), o_cols)
                parts.append(self._pad(self._anti(m_new, o_new, mine_is_left), mine_is_left, column_types))
                if m_old is not None:
                    gone = self._anti(m_old, o_old if o_old is not None else o_delta.limit(0), mine_is_left)
                    parts.append(self._pad(gone.withColumn(WEIGHT, -col(WEIGHT)), mine_is_left, column_types))
        # Lazy: its consumer materializes it once.
        out = consolidate(reduce(DataFrame.unionAll, parts), self.columns) if parts else self._join(left.limit(0), right.limit(0))
        self.left_state.write(ctx, dl, types)
        self.right_state.write(ctx, dr, types)
        return out

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys)) or "TRUE"
        extra = f" AND {self.residual}" if self.residual else ""
        padded = " + ".join(
            "pad(L_new ▷ R_new) − pad(L_old ▷ R_old)" if s == "left" else "pad(R_new ▷ L_new) − pad(R_old ▷ L_old)"
            for s in self.preserved
        )
        return (
            f"{self.side} outer join ON {on}{extra}: Δinner = ΔL⋈R_old + L_old⋈ΔR + ΔL⋈ΔR; "
            f"per touched key Δpadded = {padded}"
        )
