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
each touched key costs its rows on both sides, not a count. The rule is written once, in
:mod:`ivm_assets.rules.residual_semi_join`, and rendered by Spark here and by DuckDB for
epochs computed in process.
"""

from __future__ import annotations

from ivm_assets.operators.base import Operator
from ivm_assets.operators.keys import KeyedPair
from ivm_assets.rules import residual_semi_join as residual_rule


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

    def rule_on(self, present: set[str]):
        """This join's rule on changes (:mod:`ivm_assets.rules.residual_semi_join`) over ``present``."""
        return residual_rule.rule(self.columns, self.right.columns, self.left_keys, self.right_keys, self.anti, self.residual, present)

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys))
        name, passes = ("anti join", "no match") if self.anti else ("semi join", "a match")
        return (
            f"{name} ON {on} AND {self.residual} (rows with {passes}): Δout = pass(ΔL, R_new) "
            "+ pass(L_old(keys of ΔR), R_new) − pass(L_old(keys of ΔR), R_old)"
        )
