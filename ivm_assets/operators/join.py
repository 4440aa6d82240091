"""Inner join, maintained with an arrangement (state table) per side.

Rule on changes (bilinearity of ⋈ over z-sets):

    Δ(A ⋈ B) = ΔA ⋈ B_old  +  A_old ⋈ ΔB  +  ΔA ⋈ ΔB,   weight(a ⋈ b) = w(a) · w(b)

State: each side's integrated input, a z-set bucketed by the join key. Only the buckets of
the keys in the other side's change are read; the change is then appended to its own side.
Rows whose key has a NULL are never stored: they can never match.
Cross joins (no key) use one bucket and read the whole other side.

The rule is written once, in :mod:`ivm_assets.rules.join` (with the outer joins' padding);
its binding is :class:`~ivm_assets.operators.keys.KeyedPair`'s in process, and Spark's own
here (see :meth:`JoinOp.step`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm_assets.epoch_context import EpochContext
from ivm_assets.operators.base import Operator
from ivm_assets.operators.keys import KeyedPair
from ivm_assets.operators.spark_binding import keyed_change
from ivm_assets.rules import render_spark
from ivm_assets.rules.join import JoinRule
from ivm_assets.rules.rel import Rel
from ivm_assets.sql.plan import q
from ivm_assets.zset import BUCKET


class JoinOp(KeyedPair):
    """Inner equi-join with an optional residual predicate (see module doc for the rule)."""

    # An outer join's preserved sides (:class:`~ivm_assets.operators.outer_join.OuterJoinOp`).
    preserved: tuple[str, ...] = ()
    # Each side's state is read for the keys of the other side's change; rows with a NULL
    # key are never stored (they match nothing).
    lookups = {"old_right": ("right", ("left",)), "old_left": ("left", ("right",))}
    null_inputs: dict[str, str] = {}

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

    @property
    def rule(self) -> JoinRule:
        """This join's rule on changes (:mod:`ivm_assets.rules.join`)."""
        return JoinRule(self.left.columns, self.right.columns, self.left_keys, self.right_keys, self.residual, self.preserved)

    def rule_on(self, present: set[str]) -> Rel:
        return self.rule.rule(present)

    def _keyed(self, df: DataFrame, keys: tuple[str, ...]) -> DataFrame:
        return df.filter(" AND ".join(f"{q(k)} IS NOT NULL" for k in keys)) if keys else df

    def step(self, ctx: EpochContext) -> DataFrame:
        """The inner join's epoch in Spark, bound here rather than by the shared binding
        (:meth:`KeyedPair.epoch`, which the in-process engine runs): in a build each side
        is staged straight into its state table by the executors (:meth:`StateTable.stage`),
        the state read is joined as it is read (a join needs no consolidated state: it is
        bilinear), and a large read gets the change broadcast to it."""
        left_change, right_change, types = self.changes(ctx)
        # Each side's keyed change is exactly what its state table stores (NULL keys left out).
        dl = keyed_change(ctx, self.left, self._keyed(left_change, self.left_keys), self.left_keys, types, self.left_state)
        dr = keyed_change(ctx, self.right, self._keyed(right_change, self.right_keys), self.right_keys, types, self.right_state)
        inputs = {"dl": dl.df.drop(BUCKET), "dr": dr.df.drop(BUCKET)}
        present = {name for name, batch in (("dl", dl), ("dr", dr)) if batch.rows}
        # Each state is read for the keys of the other side's change; a large read is joined
        # by broadcasting the change to it rather than shuffling both.
        for name, table, touched, keys, probe in (
            ("old_right", self.right_state, dl, self.left_keys, "dl"), ("old_left", self.left_state, dr, self.right_keys, "dr"),
        ):
            read = table.read(ctx, touched, keys) if touched.rows else None
            if read is not None:
                inputs[name] = read.df
                present.add(name)
                if read.large:
                    inputs[probe] = F.broadcast(inputs[probe])
        # Left lazy: whoever consumes a change set materializes it once (with its buckets),
        # and a second materialization here would cost one more Spark job per epoch.
        out = render_spark.render(self.rule.rule(present, consolidated=not ctx.full), inputs)
        self.left_state.write(ctx, dl, types)
        self.right_state.write(ctx, dr, types)
        return out

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys)) or "TRUE (cross join)"
        extra = f" WHERE {self.residual}" if self.residual else ""
        return f"inner join ON {on}{extra}: Δ(A⋈B) = ΔA⋈B_old + A_old⋈ΔB + ΔA⋈ΔB"
