"""Semi and anti joins: what EXISTS, IN, NOT EXISTS and NOT IN (subquery) become.

Lowering decorrelates a subquery into the distinct keys it can match (its correlation
columns, and the compared column for IN / NOT IN); an uncorrelated EXISTS / NOT IN gets a
constant key on both sides. The output is the left input's rows that pass, unchanged.

**Semi / anti join** (EXISTS and IN / NOT EXISTS). A left row with key k passes when
m(k) = [count_R(k) > 0] (semi) or when it does not (anti); a NULL key never matches (never
passes a semi join, always passes an anti join, and is not stored). With m, m' before and
after the change:

    Δout = Σ_ΔL w·pass(m'(k))  +  Σ_{L_old(k), k ∈ keys(ΔR)} w·(pass(m'(k)) − pass(m(k)))

State: ``left``, the left rows by key; ``right``, the right rows by key (a count per key:
the right input is distinct, so every key of ΔR is one whose m flips). A change reads the
counts of its keys and the left rows of just the keys ΔR touches. NOT IN has rules of its
own (:mod:`ivm_assets.rules.not_in`), and so does a match that needs more than equal keys
(:mod:`ivm_assets.rules.residual_semi_join`).

The rule (:func:`rule`) reads, bound by :meth:`KeyedPair.epoch`, by name (each is present or not):

- ``dl``: the left change, rows with a NULL key left out; ``nulls``: those rows;
- ``dr``: the right change, NULL keys left out (these three always bound, empty or not);
- ``old_right``: the right state's current rows for the keys of ``dr`` and ``dl``;
- ``old_left``: the left state's current rows for the keys of ``dr``.
"""

from __future__ import annotations

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Case, Col, Lit, coalesce, gt, keep, mul, sub
from ivm_assets.rules.keyed_pair import KeyedPair
from ivm_assets.rules.operator import Operator
from ivm_assets.rules.patterns import before_after, key_name
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


class SemiJoinOp(KeyedPair):
    """Rows of the left input with (semi) or without (anti) a right row of equal keys."""

    def __init__(
        self, op_id: str, left: Operator, right: Operator, anti: bool, left_keys: tuple[str, ...], right_keys: tuple[str, ...]
    ) -> None:
        super().__init__(op_id, left, right, left_keys, right_keys, left.columns)
        self.anti = anti

    def rule_on(self, present: set[str]) -> rel.Rel:
        """This join's rule on changes (:func:`rule`) over ``present``."""
        return rule(self.columns, self.right.columns, self.left_keys, self.right_keys, self.anti, present)

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys))
        name, passes = ("anti join", "no match") if self.anti else ("semi join", "a match")
        return (
            f"{name} ON {on} (rows with {passes}): Δout = ΔL·pass(m') + L_old(keys of ΔR)·(pass(m') − pass(m)), "
            "m = a right row with the key exists"
        )
