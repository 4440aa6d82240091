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
conditions) there is one key, and every change reads both sides whole. The rule is written
once, in :mod:`ivm_assets.rules.join`, and rendered by Spark here and by DuckDB for
epochs computed in process.
"""

from __future__ import annotations

from typing import Literal

from ivm_assets.operators.base import Operator
from ivm_assets.operators.binding import BoundOperator
from ivm_assets.operators.join import JoinOp

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

    # Both sides are read for the keys of both changes: a touched key's padded rows depend
    # on all its rows on both sides. Rows with a NULL key are padded, never matched.
    lookups = {"old_left": ("left", ("left", "right")), "old_right": ("right", ("right", "left"))}
    null_inputs = {"left_nulls": "left", "right_nulls": "right"}
    # The shared binding in both engines (not the inner join's Spark step).
    step = BoundOperator.step

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
