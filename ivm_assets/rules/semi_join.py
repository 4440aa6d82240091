"""The semi / anti join's rule on changes, written once for both engines (its derivation is
:mod:`ivm_assets.operators.semi_join`'s module doc).

The epoch binds, by name, the relations the rule reads (each is present or not):

- ``dl``: the left change, rows with a NULL key left out; ``nulls``: those rows;
- ``dr``: the right change, NULL keys left out (these three always bound, empty or not);
- ``old_right``: the right state's current rows for the keys of ``dr`` and ``dl``;
- ``old_left``: the left state's current rows for the keys of ``dr``.
"""

from __future__ import annotations

from ivm_assets.rules import rel
from ivm_assets.rules.patterns import before_after, key_name
from ivm_assets.rules.rel import Case, Col, Lit, coalesce, gt, keep, mul, sub
from ivm_assets.zset import WEIGHT

_BEFORE, _AFTER = "__o", "__n"


def passes(count: rel.Expr, anti: bool) -> rel.Expr:
    """1 when a left row whose key has ``count`` right rows passes, else 0."""
    matched = gt(coalesce(count, Lit(0)), Lit(0))
    return Case(matched, Lit(0), Lit(1)) if anti else Case(matched, Lit(1), Lit(0))


def rule(
    columns: tuple[str, ...], right_columns: tuple[str, ...], left_keys: tuple[str, ...], right_keys: tuple[str, ...],
    anti: bool, present: set[str],
) -> rel.Rel:
    """The output change, from the relations named in ``present`` (``dl`` or ``dr`` there:
    that change has rows):

        Δout = ΔL·pass(m') + L_old(keys of ΔR)·(pass(m') − pass(m))   (+ ΔL's NULL keys, anti)
    """
    with_weight = columns + (WEIGHT,)
    dl = rel.Input("dl", with_weight)
    parts: list[rel.Rel] = []
    if anti:
        parts.append(rel.Input("nulls", with_weight))
    if "dl" in present or "dr" in present:
        old = rel.Input("old_right", right_columns + (WEIGHT,)) if "old_right" in present else None
        counts = before_after(rel.Input("dr", right_columns + (WEIGHT,)), old, right_keys, _BEFORE, _AFTER)
        on = tuple((a, key_name(b)) for a, b in zip(left_keys, right_keys))
        if "dl" in present:
            joined = rel.Join(dl, counts, on, "left")
            parts.append(keep(joined, columns, **{WEIGHT: mul(Col(WEIGHT), passes(Col(_AFTER), anti))}))
        if "old_left" in present:
            joined = rel.Join(rel.Input("old_left", with_weight), counts, on, "inner")
            flip = sub(passes(Col(_AFTER), anti), passes(Col(_BEFORE), anti))
            parts.append(keep(joined, columns, **{WEIGHT: mul(Col(WEIGHT), flip)}))
    if not parts:
        return rel.empty(dl)
    return rel.Consolidate(parts[0] if len(parts) == 1 else rel.Union_(tuple(parts)), columns)
