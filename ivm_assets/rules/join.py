"""Inner and outer joins, maintained with an arrangement (state table) per side.

**Inner join.** Rule on changes (bilinearity of ⋈ over z-sets):

    Δ(A ⋈ B) = ΔA ⋈ B_old  +  A_old ⋈ ΔB  +  ΔA ⋈ ΔB,   weight(a ⋈ b) = w(a) · w(b)

State: each side's integrated input, a z-set bucketed by the join key. Only the buckets of
the keys in the other side's change are read; the change is then appended to its own side.
Rows whose key has a NULL are never stored: they can never match. Cross joins (no key) use
one bucket and read the whole other side.

**LEFT, RIGHT and FULL outer joins**: the inner join's rule, plus the NULL-padded rows
recomputed for just the join keys a change touches. An outer join's output is the inner
join (equal keys, then the residual ON conditions) plus, for each preserved side, every row
of it that matches nothing, with NULLs for the other side's columns. With X_new = X_old + ΔX
and K the join keys in ΔL or ΔR:

    Δinner         = ΔL ⋈ R_old + L_old ⋈ ΔR + ΔL ⋈ ΔR            (the inner join's rule)
    Δpadded_L(K)   = pad(L_new(K) ▷ R_new(K)) − pad(L_old(K) ▷ R_old(K))    LEFT, FULL
    Δpadded_R(K)   = pad(R_new(K) ▷ L_new(K)) − pad(R_old(K) ▷ L_old(K))    RIGHT, FULL

where X ▷ Y (anti join) keeps the rows of X that no row of Y matches on the keys and the
residual. The padded rows of a key depend only on that key's rows on both sides, so keys
outside K keep theirs; a row flips between matched and padded exactly when the other side
gains its first match or loses its last (deleted and re-added in one change, it does not
flip at all). A preserved row with a NULL key never matches: it is padded as it arrives
(Δ = ΔX) and never stored. A change reads both sides' rows for all of K (one lookup per
side, for the keys of both inputs' changes); the inner part uses the same rows. Without
equalities (ON with only non-equi conditions) there is one key, and every change reads both
sides whole.

The rule (:class:`JoinRule`) reads, by name: ``dl`` / ``dr``, both changes with NULL keys
left out (always bound, empty or not); for an outer join ``left_nulls`` / ``right_nulls``,
their rows with a NULL key (always bound); ``old_left`` / ``old_right``, each state's rows
for the keys of the other change (an outer join's: of both changes), when there is state.
``dl`` or ``dr`` in ``present`` says that change has rows. Both joins bind it by
:meth:`KeyedPair.epoch` in process; Spark computes the inner join by a step of its own
(:func:`ivm_assets.render.spark.inner_join.inner_join`), which stages a build's sides
straight from the executors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Call, Col, Lit, Null, Rel, keep, mul, renamed
from ivm_assets.rules.keyed_pair import KeyedPair
from ivm_assets.rules.operator import Operator
from ivm_assets.zset import WEIGHT

Side = Literal["left", "right", "full"]

_RIGHT_WEIGHT = "__wr"


@dataclass(frozen=True)
class JoinRule:
    """What the rule needs of the operator. ``preserved`` names the outer join's preserved
    sides; none for an inner join."""

    left_columns: tuple[str, ...]
    right_columns: tuple[str, ...]
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    residual: str | None
    preserved: tuple[str, ...] = ()  # "left", "right" or both; () for an inner join

    @property
    def columns(self) -> tuple[str, ...]:
        return self.left_columns + self.right_columns

    def _residual(self) -> rel.Expr | None:
        return rel.SparkSql(self.residual) if self.residual else None

    def inner(self, left: rel.Rel, right: rel.Rel) -> rel.Rel:
        """ΔA⋈B's kind of term: equal keys, the residual, weight w_l · w_r."""
        joined = rel.Join(left, renamed(right, {WEIGHT: _RIGHT_WEIGHT}), tuple(zip(self.left_keys, self.right_keys)),
                          "inner", self._residual())
        return keep(joined, self.columns, **{WEIGHT: mul(Col(WEIGHT), Col(_RIGHT_WEIGHT))})

    def unmatched(self, mine: rel.Rel, other: rel.Rel, mine_is_left: bool) -> rel.Rel:
        """``mine``'s rows that no present row of ``other`` matches on the keys and residual."""
        other_columns = self.right_columns if mine_is_left else self.left_columns
        present = rel.Select(other, tuple((c, Col(c)) for c in other_columns), rel.gt(Col(WEIGHT), Lit(0)))
        pairs = zip(self.left_keys, self.right_keys) if mine_is_left else zip(self.right_keys, self.left_keys)
        return rel.Join(mine, present, tuple(pairs), "anti", self._residual())

    def padded(self, rows: rel.Rel, mine_is_left: bool, sign: int = 1) -> rel.Rel:
        """``rows`` of one side with NULLs for the other side's columns, in output order."""
        mine = set(self.left_columns if mine_is_left else self.right_columns)
        weight = Col(WEIGHT) if sign > 0 else Call("-", (Lit(0), Col(WEIGHT)))
        items = tuple((c, Col(c) if c in mine else Null(c)) for c in self.columns)
        return rel.Select(rows, items + ((WEIGHT, weight),))

    def rule(self, present: set[str], *, consolidated: bool = True) -> rel.Rel:
        """Δout = Δinner + per preserved side, for the touched keys, pad(X_new ▷ Y_new) − pad(X_old ▷ Y_old).

        ``consolidated=False`` leaves the sum of the parts as it is: a full refresh's inner
        join is one part of positive weights, nothing cancels, and grouping all of it by
        every column would cost more than the join."""
        side = {
            True: (rel.Input("dl", self.left_columns + (WEIGHT,)), self._old("old_left", self.left_columns, present), self.left_columns),
            False: (rel.Input("dr", self.right_columns + (WEIGHT,)), self._old("old_right", self.right_columns, present), self.right_columns),
        }
        (dl, old_left, _), (dr, old_right, _) = side[True], side[False]
        parts: list[rel.Rel] = []
        for mine_is_left, nulls in ((True, "left_nulls"), (False, "right_nulls")):
            if ("left" if mine_is_left else "right") in self.preserved:
                parts.append(self.padded(rel.Input(nulls, side[mine_is_left][2] + (WEIGHT,)), mine_is_left))
        if "dl" in present and old_right is not None:
            parts.append(self.inner(dl, old_right))
        if "dr" in present and old_left is not None:
            parts.append(self.inner(old_left, dr))
        if "dl" in present and "dr" in present:
            parts.append(self.inner(dl, dr))
        if "dl" in present or "dr" in present:
            for mine_is_left in (s == "left" for s in self.preserved):
                (m_delta, m_old, m_cols), (o_delta, o_old, o_cols) = side[mine_is_left], side[not mine_is_left]
                m_new = m_delta if m_old is None else rel.Consolidate(rel.Union_((m_old, m_delta)), m_cols)
                o_new = o_delta if o_old is None else rel.Consolidate(rel.Union_((o_old, o_delta)), o_cols)
                parts.append(self.padded(self.unmatched(m_new, o_new, mine_is_left), mine_is_left))
                if m_old is not None:
                    o_before = o_old if o_old is not None else rel.empty(o_delta)
                    parts.append(self.padded(self.unmatched(m_old, o_before, mine_is_left), mine_is_left, sign=-1))
        if not parts:
            return rel.empty(self.inner(dl, dr))
        out = parts[0] if len(parts) == 1 else rel.Union_(tuple(parts))
        return rel.Consolidate(out, self.columns) if consolidated else out

    @staticmethod
    def _old(name: str, columns: tuple[str, ...], present: set[str]) -> rel.Rel | None:
        return rel.Input(name, columns + (WEIGHT,)) if name in present else None


class JoinOp(KeyedPair):
    """Inner equi-join with an optional residual predicate (see module doc for the rule)."""

    # An outer join's preserved sides (:class:`OuterJoinOp`).
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
        """This join's rule on changes (:class:`JoinRule`)."""
        return JoinRule(self.left.columns, self.right.columns, self.left_keys, self.right_keys, self.residual, self.preserved)

    def rule_on(self, present: set[str]) -> Rel:
        return self.rule.rule(present)

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys)) or "TRUE (cross join)"
        extra = f" WHERE {self.residual}" if self.residual else ""
        return f"inner join ON {on}{extra}: Δ(A⋈B) = ΔA⋈B_old + A_old⋈ΔB + ΔA⋈ΔB"


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
