"""Semi and anti joins whose match needs more than equal keys: EXISTS / NOT EXISTS (and IN)
correlated by equalities plus other conditions, e.g. TPC-H Q21's
``EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey)``.

A left row passes when some right row has its keys and satisfies the residual with it
(semi), or when none does (anti). Whether a row passes depends only on the right rows of
its key, so with K_R the keys of ΔR and X_new = X_old + ΔX:

    Δout = pass(ΔL, R_new(keys of ΔL))
         + pass(L_old(K_R), R_new(K_R)) − pass(L_old(K_R), R_old(K_R))

(``out`` is linear in L for fixed R; the last two terms differ only on the keys the right
change touches.) A row flips when a right row that satisfies the residual with it is its
first or its last. A left row with a NULL key matches nothing (passes the anti join
only) and is not stored; a right row with a NULL key is dropped.

State: ``left``, the left rows by key, and ``right``, the right rows (keys and the columns
the residual reads) by key, both z-sets. A change reads the right rows of the keys of both
changes and the left rows of the keys of the right change: unlike the plain semi join,
each touched key costs its rows on both sides, not a count.

The rule (:func:`rule`) reads, bound by :meth:`KeyedPair.epoch`: ``dl`` / ``dr``, both changes with NULL keys left out, ``nulls``, the left
change's rows with a NULL key (always bound); ``old_right``, the right state's current rows
for the keys of both changes, and ``old_left``, the left state's for the keys of ``dr``
(when there is state). ``dl`` or ``dr`` in ``present`` says that change has rows.
"""

from __future__ import annotations

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Call, Col, Lit
from ivm_assets.rules.keyed_pair import KeyedPair
from ivm_assets.rules.operator import Operator
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


class ResidualSemiJoinOp(KeyedPair):
    """Rows of the left input with (semi) or without (anti) a right row of equal keys that
    satisfies ``residual`` (see module doc for the rule)."""

    def __init__(
        self,
        op_id: str,
        left: Operator,
        right: Operator,
        anti: bool,
        left_keys: tuple[str, ...],
        right_keys: tuple[str, ...],
        residual: str,
    ) -> None:
        super().__init__(op_id, left, right, left_keys, right_keys, left.columns)
        self.anti, self.residual = anti, residual

    def rule_on(self, present: set[str]) -> rel.Rel:
        """This join's rule on changes (:func:`rule`) over ``present``."""
        return rule(self.columns, self.right.columns, self.left_keys, self.right_keys, self.anti, self.residual, present)

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys))
        name, passes = ("anti join", "no match") if self.anti else ("semi join", "a match")
        return (
            f"{name} ON {on} AND {self.residual} (rows with {passes}): Δout = pass(ΔL, R_new) "
            "+ pass(L_old(keys of ΔR), R_new) − pass(L_old(keys of ΔR), R_old)"
        )
