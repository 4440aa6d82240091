"""The rule of a semi / anti join with a residual condition, written once for both engines
(its derivation is :mod:`ivm_assets.operators.residual_semi_join`'s module doc).

The epoch binds: ``dl`` / ``dr``, both changes with NULL keys left out, ``nulls``, the left
change's rows with a NULL key (always bound); ``old_right``, the right state's current rows
for the keys of both changes, and ``old_left``, the left state's for the keys of ``dr``
(when there is state). ``dl`` or ``dr`` in ``present`` says that change has rows.
"""

from __future__ import annotations

from ivm_assets.rules import rel
from ivm_assets.rules.rel import Call, Col, Lit
from ivm_assets.zset import WEIGHT


def rule(
    columns: tuple[str, ...], right_columns: tuple[str, ...], left_keys: tuple[str, ...], right_keys: tuple[str, ...],
    anti: bool, residual: str, present: set[str],
) -> rel.Rel:
    """Δout = pass(ΔL, R_new) + pass(L_old(K_R), R_new) − pass(L_old(K_R), R_old)."""
    with_weight = columns + (WEIGHT,)
    dl = rel.Input("dl", with_weight)
    on = tuple(zip(left_keys, right_keys))

    def passing(left: rel.Rel, right: rel.Rel | None) -> rel.Rel:
        if right is None:
            return left if anti else rel.empty(left)
        there = rel.Select(right, tuple((c, Col(c)) for c in right_columns), rel.gt(Col(WEIGHT), Lit(0)))
        return rel.Join(left, there, on, "anti" if anti else "semi", rel.SparkSql(residual))

    parts: list[rel.Rel] = [rel.Input("nulls", with_weight)] if anti else []
    if "dl" in present or "dr" in present:
        dr = rel.Input("dr", right_columns + (WEIGHT,))
        old_right = rel.Input("old_right", right_columns + (WEIGHT,)) if "old_right" in present else None
        new_right = dr if old_right is None else rel.Consolidate(rel.Union_((old_right, dr)), right_columns)
        if "dl" in present:
            parts.append(passing(dl, new_right))
        if "old_left" in present:
            old_left = rel.Input("old_left", with_weight)
            parts.append(passing(old_left, new_right))
            gone = passing(old_left, old_right)
            parts.append(rel.Select(gone, _all(columns) + ((WEIGHT, Call("-", (Lit(0), Col(WEIGHT)))),)))
    if not parts:
        return rel.empty(dl)
    return rel.Consolidate(rel.Union_(tuple(parts)), columns)


def _all(columns: tuple[str, ...]) -> tuple[tuple[str, rel.Expr], ...]:
    return tuple((c, Col(c)) for c in columns)
