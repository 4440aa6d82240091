"""``x NOT IN (SELECT c …)`` with SQL's NULL rules: the anti join's sibling
(:mod:`ivm_assets.rules.semi_join`) for NOT IN's NULLs.

The right rows are (g, c): the correlation keys g (a constant when uncorrelated) and the value c. A group's status is
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
rows' values). The rule (:class:`NotIn`) is bound once, for both engines, by
:meth:`NotInOp.epoch`; how the two changes are keyed for the four tables is the engine's
(``not_in_changes``).

It runs in two steps, because which stored left rows it reads depends on what the first
step finds (the groups whose status flips):

1. :meth:`NotIn.status` and :meth:`NotIn.counts`, from the right change and the state read
   for the groups and (group, value) pairs both changes touch;
2. :meth:`NotIn.flipped` (the groups to read the left rows of), then :meth:`NotIn.output`.

Relations the epoch binds, by name: ``dr_groups`` (the right change, rows with a group,
with ``__null``: whether the value is NULL), ``old_groups`` (the groups state's current
rows for the touched groups), ``dr_pairs`` (the right change, rows with a group and a
value), ``old_values`` (the values state's current rows for the touched pairs); then
``status`` and ``counts`` (step 1's results), ``dl_no_group`` and ``dl_grouped`` (the left
change, rows without and with a group; always bound), ``flipped_rows`` with
``flipped_counts`` (the stored left rows of flipped groups, and the counts of their
values), ``touched_rows`` (the stored left rows of the pairs the right change touches) and
``flipped`` (step 2's groups).
"""

from __future__ import annotations

from dataclasses import dataclass

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Call, Case, Col, Lit, coalesce, keep, mul, sub
from ivm_assets.rules.binding import Change, EpochBinding
from ivm_assets.rules.operator import Operator
from ivm_assets.rules.patterns import before_after, key_name
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import WEIGHT

NULL = "__null"
EMPTY, NULLS, VALUES = 0, 1, 2


def status_key(key: str) -> str:
    return f"__s_{key}"


@dataclass(frozen=True)
class NotIn:
    """What the rule needs of the operator: the left columns and keys (groups, then x),
    the right columns and keys (groups, then c)."""

    columns: tuple[str, ...]
    right_columns: tuple[str, ...]
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]

    @property
    def left_groups(self) -> tuple[str, ...]:
        return self.left_keys[:-1]

    @property
    def right_groups(self) -> tuple[str, ...]:
        return self.right_keys[:-1]

    def status(self, present: set[str]) -> rel.Rel:
        """Per touched group: its status before (``__so``) and after (``__sn``) the change,
        EMPTY (no rows), NULLS (a NULL value among them) or VALUES."""
        groups = self.right_groups
        change = keep(rel.Input("dr_groups", groups + (NULL, WEIGHT)), groups + (NULL,), __o=Lit(0), __d=Col(WEIGHT))
        rows: rel.Rel = change
        if "old_groups" in present:
            old = keep(rel.Input("old_groups", groups + (NULL, WEIGHT)), groups + (NULL,), __o=Col(WEIGHT), __d=Lit(0))
            rows = rel.Union_((change, old))

        def nulls(c: str) -> rel.Expr:
            return Case(Col(NULL), Col(c), Lit(0))

        summed = rel.group_sum(rows, groups, (("__no", Col("__o")), ("__nd", Col("__d")), ("__zo", nulls("__o")), ("__zd", nulls("__d"))))

        def status(n: rel.Expr, z: rel.Expr) -> rel.Expr:
            return Case(Call("<=", (n, Lit(0))), Lit(EMPTY), Case(rel.gt(z, Lit(0)), Lit(NULLS), Lit(VALUES)))

        return rel.Select(summed, tuple((status_key(k), Col(k)) for k in groups) + (
            ("__so", status(Col("__no"), Col("__zo"))),
            ("__sn", status(rel.add(Col("__no"), Col("__nd")), rel.add(Col("__zo"), Col("__zd")))),
        ))

    def counts(self, present: set[str]) -> rel.Rel:
        """Per touched (group, value): the right rows before (``__co``) and after (``__cn``)."""
        old = rel.Input("old_values", self.right_columns + (WEIGHT,)) if "old_values" in present else None
        return before_after(rel.Input("dr_pairs", self.right_columns + (WEIGHT,)), old, self.right_keys, "__co", "__cn")

    def flipped(self) -> rel.Rel:
        """The groups whose status the change flips, named as the right input's."""
        status = rel.Input("status", tuple(status_key(k) for k in self.right_groups) + ("__so", "__sn"))
        return rel.Select(status, tuple((k, Col(status_key(k))) for k in self.right_groups), Call("<>", (Col("__so"), Col("__sn"))))

    def _passes(self, status: str, count: str) -> rel.Expr:
        s = coalesce(Col(status), Lit(EMPTY))
        free = Call("and", (Call("not", (Call("is_null", (Col(self.left_keys[-1]),)),)), Call("<=", (coalesce(Col(count), Lit(0)), Lit(0)))))
        return Case(Call("=", (s, Lit(EMPTY))), Lit(1), Case(Call("=", (s, Lit(NULLS))), Lit(0), Case(free, Lit(1), Lit(0))))

    def _weighted(self, rows: rel.Rel, counts: str, *, change: bool) -> rel.Rel:
        """``rows`` (left rows with a group) weighted by pass' (``change``: ΔL rows) or by
        pass' − pass (stored rows whose group or value a change touched)."""
        status = rel.Input("status", tuple(status_key(k) for k in self.right_groups) + ("__so", "__sn"))
        on_group = tuple((a, status_key(b)) for a, b in zip(self.left_groups, self.right_groups))
        joined = rel.Join(rows, status, on_group, "left")
        counted = rel.Input(counts, tuple(key_name(k) for k in self.right_keys) + ("__co", "__cn"))
        joined = rel.Join(joined, counted, tuple((a, key_name(b)) for a, b in zip(self.left_keys, self.right_keys)), "left")
        weight = self._passes("__sn", "__cn")
        if not change:
            weight = sub(weight, self._passes("__so", "__co"))
        return keep(joined, self.columns, **{WEIGHT: mul(Col(WEIGHT), weight)})

    def output(self, present: set[str]) -> rel.Rel:
        """Δout = ΔL·pass' + (rows of flipped groups and of touched values)·(pass' − pass);
        rows without a group pass (their group is empty)."""
        with_weight = self.columns + (WEIGHT,)
        parts: list[rel.Rel] = [rel.Input("dl_no_group", with_weight)]
        if "status" in present:
            parts.append(self._weighted(rel.Input("dl_grouped", with_weight), "counts", change=True))
            if "flipped_rows" in present:
                parts.append(self._weighted(rel.Input("flipped_rows", with_weight), "flipped_counts", change=False))
            if "touched_rows" in present:
                rows: rel.Rel = rel.Input("touched_rows", with_weight)
                if "flipped" in present:  # those groups' rows are all counted above
                    flipped = rel.Input("flipped", self.right_groups)
                    rows = rel.Join(rows, flipped, tuple(zip(self.left_groups, self.right_groups)), "anti")
                parts.append(self._weighted(rows, "counts", change=False))
        return rel.Consolidate(rel.Union_(tuple(parts)), self.columns)


class NotInOp(Operator):
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
        """This operator's rule on changes (:class:`NotIn`)."""
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
