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
counts of its keys and the left rows of just the keys ΔR touches. The rule is written once,
in :mod:`ivm_assets.rules.semi_join`, and rendered by Spark here and by DuckDB for epochs
computed in process (:mod:`ivm_assets.local.epoch`).

**NOT IN** (``x NOT IN (SELECT c …)``, SQL's NULL rules). The right rows are (g, c): the
correlation keys g (a constant when uncorrelated) and the value c. A group's status is
EMPTY (no rows), NULLS (a NULL c among them) or VALUES. A left row (g, x) passes when its
group is EMPTY, or when it is VALUES and x is not NULL and no c equals x; a NULL g means an
empty group (the correlation never holds), so such a row always passes and is not stored.

    Δout = Σ_ΔL w·pass'(row) + Σ_{L_old rows of flipped groups, or of (g, c) in ΔR} w·(pass'(row) − pass(row))

State: ``values`` (right rows with a value, by (g, c)), ``groups`` (per right row g and
whether c is NULL, by g: the group's row and NULL counts), ``left`` (left rows with g and x,
by (g, x): the rows one value change touches) and ``left_groups`` (left rows with g, by g:
the rows a status change touches). A status flips only when a group gains its first row or
NULL, or loses its last: only then are the group's left rows read whole (for an
uncorrelated NOT IN, the whole left input). A change to the subquery costs one more Spark
job (finding the flipped groups), and one more when some group flips (looking up its
rows' values). The rule is written once, in :mod:`ivm_assets.rules.not_in`, and so is its
binding (:meth:`NotInOp.epoch`); how the two changes are keyed for the four tables is the
engine's (``not_in_changes``).
"""

from __future__ import annotations

from ivm_assets.operators.base import Operator
from ivm_assets.operators.binding import BoundOperator, Change, EpochBinding
from ivm_assets.operators.keys import KeyedPair
from ivm_assets.rules import semi_join as semi_join_rule
from ivm_assets.rules.not_in import NULL, NotIn
from ivm_assets.state.arrangement import StateTable


class SemiJoinOp(KeyedPair):
    """Rows of the left input with (semi) or without (anti) a right row of equal keys."""

    def __init__(
        self, op_id: str, left: Operator, right: Operator, anti: bool, left_keys: tuple[str, ...], right_keys: tuple[str, ...]
    ) -> None:
        super().__init__(op_id, left, right, left_keys, right_keys, left.columns)
        self.anti = anti

    def rule_on(self, present: set[str]):
        """This join's rule on changes (:mod:`ivm_assets.rules.semi_join`) over ``present``."""
        return semi_join_rule.rule(self.columns, self.right.columns, self.left_keys, self.right_keys, self.anti, present)

    def describe(self) -> str:
        on = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys))
        name, passes = ("anti join", "no match") if self.anti else ("semi join", "a match")
        return (
            f"{name} ON {on} (rows with {passes}): Δout = ΔL·pass(m') + L_old(keys of ΔR)·(pass(m') − pass(m)), "
            "m = a right row with the key exists"
        )


class NotInOp(BoundOperator):
    """``x NOT IN (subquery)`` with SQL's NULL rules, per correlation group (module doc)."""

    def __init__(
        self, op_id: str, left: Operator, right: Operator, left_keys: tuple[str, ...], right_keys: tuple[str, ...]
    ) -> None:
        self.id, self.left, self.right = op_id, left, right
        self.left_keys, self.right_keys = left_keys, right_keys
        self.left_groups_keys, self.right_group_keys = left_keys[:-1], right_keys[:-1]
        self.x, self.c = left_keys[-1], right_keys[-1]
        self.columns = left.columns

        def table(name: str, columns: tuple[str, ...], keys: tuple[str, ...]) -> StateTable:
            return StateTable(operator_id=op_id, name=name, columns=columns, keys=keys, layout="zset")

        self.left_state = table("left", left.columns, left_keys)
        self.left_groups = table("left_groups", left.columns, self.left_groups_keys)
        self.values = table("values", right.columns, right_keys)
        self.groups = table("groups", self.right_group_keys + (NULL,), self.right_group_keys)

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.left, self.right)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.left_state, self.left_groups, self.values, self.groups)

    def epoch(self, cx: EpochBinding) -> Change:
        rule = self.rule
        dl_pairs, dl_groups, dl_no_group, dr_pairs, dr_groups = cx.not_in_changes(self)
        inputs = {
            "dl_no_group": dl_no_group, "dl_grouped": cx.unkeyed(dl_groups), "dr_groups": cx.unkeyed(dr_groups), "dr_pairs": cx.unkeyed(dr_pairs),
        }
        present: set[str] = set()
        if cx.rows(dl_groups) or cx.rows(dr_groups):
            lookups = (
                ("old_groups", self.groups, [(dr_groups, self.right_group_keys), (dl_groups, self.left_groups_keys)]),
                ("old_values", self.values, [(dr_pairs, self.right_keys), (dl_pairs, self.left_keys)]),
            )
            for name, table, parts in lookups:
                if (found := cx.lookup_keys(table, parts)) is not None:
                    inputs[name] = found
                    present.add(name)
            inputs["status"] = cx.compute(rule.status(present), inputs)
            inputs["counts"] = cx.compute(rule.counts(present), inputs)
            present |= {"status", "counts"}
            if cx.rows(dr_groups) and not cx.full:  # a build has no stored rows to flip
                self._flips(cx, inputs, present, dr_pairs)
        out = cx.compute(rule.output(present), inputs, self.columns, like=(inputs["dl_grouped"],))
        cx.append(self.left_state, dl_pairs)
        cx.append(self.left_groups, dl_groups)
        cx.append(self.values, dr_pairs)
        cx.append(self.groups, dr_groups)
        return out

    @property
    def rule(self) -> NotIn:
        """This operator's rule on changes (:mod:`ivm_assets.rules.not_in`)."""
        return NotIn(self.columns, self.right.columns, self.left_keys, self.right_keys)

    def _flips(self, cx: EpochBinding, inputs: dict[str, Change], present: set[str], dr_pairs: Change) -> None:
        """Binds the stored left rows whose result a right change can alter: all rows of the
        groups whose status flips (in Spark a job: finding them), and the rows of the
        (group, value) pairs it touches."""
        rule = self.rule
        flipped = cx.probe(cx.compute(rule.flipped(), inputs), self.right_group_keys, self.left_groups)
        if cx.rows(flipped):
            if (rows := cx.lookup_keys(self.left_groups, [(flipped, self.right_group_keys)])) is not None:
                # Their values were not among the touched pairs: look them up too.
                pairs = cx.present(cx.probe(rows, self.left_keys, self.left_state), (self.x,))
                counts = inputs["counts"]
                if cx.rows(pairs):
                    theirs = {"dr_pairs": inputs["dr_pairs"]}
                    if (old := cx.lookup_keys(self.values, [(pairs, self.left_keys)])) is not None:
                        theirs["old_values"] = old
                    counts = cx.compute(rule.counts(set(theirs)), theirs)
                inputs |= {"flipped_rows": rows, "flipped_counts": counts}
                present.add("flipped_rows")
            inputs["flipped"] = cx.unkeyed(flipped)
            present.add("flipped")
        if cx.rows(dr_pairs) and (rows := cx.lookup_keys(self.left_state, [(dr_pairs, self.right_keys)])) is not None:
            inputs["touched_rows"] = rows
            present.add("touched_rows")

    def describe(self) -> str:
        corr = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_groups_keys, self.right_group_keys))
        return (
            f"not in: {self.x} NOT IN ({self.c}) per group {corr}: a row passes when its group is empty, or has no NULL "
            "and no equal value; Δout = ΔL·pass' + (rows of flipped groups and touched values)·(pass' − pass)"
        )
