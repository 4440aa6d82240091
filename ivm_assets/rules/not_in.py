"""The rule of ``x NOT IN (subquery)``, written once for both engines (its derivation is
:mod:`ivm_assets.operators.semi_join`'s module doc, "NOT IN").

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

from ivm_assets.rules import rel
from ivm_assets.rules.patterns import before_after, key_name
from ivm_assets.rules.rel import Call, Case, Col, Lit, coalesce, keep, mul, sub
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
