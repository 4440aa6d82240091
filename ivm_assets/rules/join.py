"""The inner and outer joins' rule on changes, written once for both engines (derived in
:mod:`ivm_assets.operators.join`'s and :mod:`ivm_assets.operators.outer_join`'s module docs).

The epoch binds, by name: ``dl`` / ``dr``, both changes with NULL keys left out (always
bound, empty or not); for an outer join ``left_nulls`` / ``right_nulls``, their rows with a
NULL key (always bound); ``old_left`` / ``old_right``, each state's rows for the keys of the
other change (an outer join's: of both changes), when there is state. ``dl`` or ``dr`` in
``present`` says that change has rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ivm_assets.rules import rel
from ivm_assets.rules.rel import Call, Col, Lit, Null, keep, mul, renamed
from ivm_assets.zset import WEIGHT

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
