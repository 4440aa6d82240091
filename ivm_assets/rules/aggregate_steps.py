"""GROUP BY's rule on changes, written once for both engines (its derivation and its state
are :mod:`ivm_assets.rules.aggregate`'s module doc): per touched group, retract the old
output row and insert the new one.

Three steps, because the engines read and store state between them:

1. :meth:`AggregateRule.partials`: the change's partial aggregates per group (``delta``).
2. :meth:`AggregateRule.combined`: old partials + the change's (``change``, ``old``), the
   new group state, checked for sums that cannot be carried on exactly; a DOUBLE sum that
   keeps its values (:attr:`AggregateRule.recounted`) is recounted from them where a value
   leaves the group and its error bound wants it (``old_values<i>``, ``dv<i>``; the same
   step with ``recounting`` names those groups, whose values the epoch then reads).
3. :meth:`AggregateRule.output`: the output change, from the old and new group rows
   (``old``, ``new``) and, per MIN / MAX / COUNT(DISTINCT) ``i``, its value table's rows for
   the touched groups (``old_values<i>``) and its change (``dv<i>``, :meth:`AggregateRule.values`).

Why a DOUBLE sum is recounted: a running sum keeps the rounding of every value it ever
held. 1e30 + 0.1 is 1e30 in DOUBLE; once the 1e30 row leaves, old + change is 0.0, where
Spark's sum over the one remaining row is 0.1. Adding rows only ever rounds as a sum of
the rows present would (in some order, as Spark's own order is); a value leaving is what
leaves the rounding of a value no longer there. So the group's sum is then summed again
from the values it holds now, and stored as the running sum's new start.

Summing again reads all the group's values, about a recompute of it, so it is done only
where a bound on the running sum's error says it can matter (:mod:`ivm_assets.rules.recount`).

Types are Spark's throughout (a sum's type follows :mod:`ivm_assets.ir.decimal_rules`), cast
explicitly where an engine's own differs (DuckDB sums integers as HUGEINT).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from ivm_assets.ir import decimal_rules
from ivm_assets.errors import InexactAggregate
from ivm_assets.ir import rel
from ivm_assets.rules import recount
from ivm_assets.ir.rel import Call, Case, Cast, Col, Lit, and_, gt, keep, lt, present
from ivm_assets.sql.plan import AggCall
from ivm_assets.zset import WEIGHT

GLOBAL = "__g"
COUNT = "__cnt"
TOUCHED = "__t"
_SIGN = "__s"
VALUE_AGGS = ("min", "max", "count_distinct")
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_FLOATING = ("float", "double")
_VALUE_FUNCTIONS = {"min": "min", "max": "max", "count_distinct": "count"}


def partial_names(aggs: tuple[AggCall, ...]) -> tuple[str, ...]:
    """The group state's columns after the keys: the row count, per COUNT/SUM/AVG ``n<i>``
    (its non-NULL values) and per SUM/AVG ``s<i>`` (their running sum); per SUM/AVG that
    keeps its values (not typed exact), ``c<i>``, the values summed into the running sum
    since it was last counted from them, and ``e<i>``, the bound on the error that adding
    them since put into it (:mod:`ivm_assets.rules.recount`)."""
    names = [COUNT]
    for i, a in enumerate(aggs):
        if a.func in ("count", "sum", "avg"):
            names.append(f"n{i}")
        if a.func in ("sum", "avg"):
            names.append(f"s{i}")
            if not a.exact:
                names += [f"c{i}", f"e{i}"]
    return tuple(names)


@dataclass(frozen=True)
class AggregateRule:
    """What the rule needs of the operator: its GROUP BY keys (none: a global aggregate,
    grouped by the constant ``__g``), its aggregates, each argument's Spark type (simple
    name; None for COUNT(*)) and whether ANSI mode is on."""

    keys: tuple[str, ...]
    aggs: tuple[AggCall, ...]
    arg_types: tuple[str | None, ...]
    ansi: bool
    # The SUM/AVG whose values the operator keeps (a value table, as for MIN/MAX): those
    # recounted where a value leaves. Of DOUBLE sums, only these are maintained past a
    # deletion; another fails the epoch (:meth:`_checked`) and the view is recomputed.
    valued: tuple[int, ...] = ()

    @property
    def group_keys(self) -> tuple[str, ...]:
        return self.keys or (GLOBAL,)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.keys + tuple(a.name for a in self.aggs)

    @property
    def sums(self) -> tuple[int, ...]:
        """The aggregates that keep a running sum (SUM, AVG)."""
        return tuple(i for i, a in enumerate(self.aggs) if a.func in ("sum", "avg"))

    @property
    def partial_types(self) -> dict[str, str]:
        """The group state's columns after the keys (:func:`partial_names`) with their types:
        counts are BIGINT, each running sum ``s<i>`` of :meth:`sum_type`."""
        kinds = {"s": self.sum_type, "e": lambda _: "double"}
        return {p: kinds[p[0]](int(p[1:])) if p[0] in kinds else "bigint" for p in partial_names(self.aggs)}

    def sum_type(self, i: int) -> str:
        """The type of aggregate ``i``'s running sum: SUM's own (BIGINT over integers,
        DECIMAL(p + 10, s), DOUBLE); for AVG over integers exact, DECIMAL(38, 0) (Spark's
        AVG sums in DOUBLE, a BIGINT sum would wrap)."""
        arg = self.arg_types[i] or ""
        if arg in _INTEGRAL:
            return "decimal(38,0)" if self.aggs[i].func == "avg" else "bigint"
        if arg in (*_FLOATING, "string"):  # a string is summed as Spark casts it, to DOUBLE
            return "double"
        found = decimal_rules.parse_type(arg)
        if found is None:
            return arg  # an interval: summed in its own type
        return "decimal({},{})".format(*decimal_rules.sum_type(*found))

    def floating(self, i: int) -> bool:
        return self.sum_type(i) == "double"

    @property
    def recounted(self) -> tuple[int, ...]:
        """The DOUBLE sums recounted from their values where a value leaves a group (the
        module doc says why); a valued sum of an exact type needs no recount."""
        return tuple(i for i in self.valued if self.floating(i))

    # --- step 1: the change's partials --------------------------------------------------------
    def partials(self, delta: rel.Rel, *, build: bool = False) -> rel.Rel:
        """Per group of ``delta`` (a change set): Σ weights, and per COUNT/SUM/AVG the non-NULL
        count and sum; per SUM/AVG also (not stored) ``__v<i>``, the rows with a value, and for
        a DOUBLE sum ``__d<i>``, 1 when one of them leaves. Summed over rows repeated by their
        weight (:class:`~ivm_assets.ir.rel.Repeat`), so each sum is of the argument's own type.

        In a ``build`` of a global aggregate (``delta`` is the whole input) the one group has
        a row over no rows too, of NULL sums, which :meth:`combined` counts as 0: reduced
        without keys, its key an expression of the count that is always 0 (not a literal,
        for the reason below)."""
        signed = rel.Repeat(delta, _SIGN)
        sign = Col(_SIGN)
        # A global aggregate is grouped by an expression that is always 0 but not a literal:
        # Spark would turn an aggregate grouped by a constant into a scalar subquery, a job.
        group = tuple((k, Col(k)) for k in self.keys) or ((GLOBAL, Cast(rel.mul(sign, Lit(0)), "int")),)
        args = tuple(dict.fromkeys(a.arg for a in self.aggs if a.arg and a.arg not in self.group_keys))
        rows = rel.Select(signed, group + tuple((a, Col(a)) for a in args) + ((_SIGN, sign),))
        calls: list[tuple[str, str, rel.Expr]] = [(COUNT, "sum", sign)]
        for i, a in enumerate(self.aggs):
            if a.func in ("count", "sum", "avg"):
                calls.append((f"n{i}", "sum", Case(present(Col(a.arg)), sign, Lit(0))))
            if a.func in ("sum", "avg"):
                value: rel.Expr = Col(a.arg)
                if self.sum_type(i) in ("decimal(38,0)", "double"):  # AVG's exact sum; a string's DOUBLE
                    value = Cast(value, self.sum_type(i))
                calls += [
                    (f"s{i}", "sum", Case(gt(sign, Lit(0)), value, Call("neg", (value,)))),
                    (f"__v{i}", "sum", Case(present(Col(a.arg)), Lit(1), Lit(0))),
                ]
                if self.floating(i):
                    calls.append((f"__d{i}", "max", Case(and_(present(Col(a.arg)), lt(sign, Lit(0))), Lit(1), Lit(0))))
                if not a.exact:  # the change's count, and in ``e<i>`` its magnitudes (:mod:`~ivm_assets.rules.recount`)
                    magnitude = recount.magnitude(value) if self.floating(i) else Cast(Lit(0), "double")
                    calls += [(f"c{i}", "sum", Case(present(Col(a.arg)), Lit(1), Lit(0))),
                              (f"e{i}", "sum", Case(present(Col(a.arg)), magnitude, Cast(Lit(0), "double")))]
        if build and not self.keys:
            summed = rel.Reduce(rows, (), tuple(calls))
            zero = Cast(rel.mul(rel.coalesce(Col(COUNT), Lit(0)), Lit(0)), "int")
            reduced = rel.Select(summed, ((GLOBAL, zero),) + tuple((name, Col(name)) for name, _, _ in calls))
        else:
            reduced = rel.Reduce(rows, self.group_keys, tuple(calls))
        flags = tuple((f"__{c}{i}", Cast(Col(f"__{c}{i}"), "bigint")) for i in self.sums for c in self.partial_flags(i))
        typed = tuple((p, Cast(Col(p), t)) for p, t in self.partial_types.items())
        return rel.Select(reduced, tuple((k, Col(k)) for k in self.group_keys) + typed + flags)

    # --- step 2: the new group state ---------------------------------------------------------
    def combined(
        self, change: rel.Rel, old: rel.Rel | None, *, checked: bool, view: str = "", bound: frozenset[str] = frozenset(), recounting: bool = False,
    ) -> rel.Rel:
        """New partials = old + the change's per group (``change``: :meth:`partials`; ``old``:
        the touched groups' stored rows), and ``__t``: 1 where the change touched the group.
        Summed over the union of both, not joined: a join of a global aggregate's one-row
        sides has no equality left and would cost Spark a broadcast job. A sum that is NULL
        over values on either side (a DECIMAL sum past 38 digits) stays NULL, Spark's
        answer. ``checked`` (incremental epochs): a touched group whose sums cannot be
        carried on exactly fails the epoch with :class:`~ivm_assets.errors.InexactAggregate`'s
        marker, and the view is recomputed. ``bound``: the value relations given (as for
        :meth:`output`), from which each :attr:`recounted` sum of a touched group a value
        leaves is summed again, where its error bound wants it (:func:`~ivm_assets.rules.recount.recount_wanted`).
        ``recounting``: instead, the keys of the groups where one does: those whose values
        are to be read."""
        names = (*self.group_keys, *self.partial_types)
        zero = Lit(0)

        def lost(count: str, i: int) -> rel.Expr:
            return Case(and_(gt(Col(count), zero), Call("is_null", (Col(f"s{i}"),))), Lit(1), zero)

        def side(rows: rel.Rel, touched: int, flags: dict[str, rel.Expr]) -> rel.Rel:
            # A recounted sum's ``e<i>`` is the stored bound on the old side and the change's
            # magnitudes on the other: carried apart (``__m<i>``), and ``__h``, a group held.
            bounds = {f"e{i}": Cast(zero, "double") for i in self.recounted} if touched else {}
            items = tuple((c, bounds.get(c, Col(c))) for c in names)
            magnitudes = tuple((f"__m{i}", Col(f"e{i}") if touched else Cast(zero, "double")) for i in self.recounted)
            flag_items = tuple((f"__{c}{i}", flags.get(f"__{c}{i}", zero)) for i in self.sums for c in self._flags(i))
            return rel.Select(rows, items + magnitudes + flag_items + ((TOUCHED, Lit(touched)), ("__h", Lit(1 - touched))))

        mine = {f"__{c}{i}": Col(f"__{c}{i}") for i in self.sums for c in self.partial_flags(i)} | {f"__x{i}": lost(f"__v{i}", i) for i in self.sums}
        parts = [side(change, 1, mine)]
        if old is not None:
            theirs = {f"__x{i}": lost(f"n{i}", i) for i in self.sums}
            if checked:  # an exact sum NULL over values: past 38 digits
                theirs |= {f"__o{i}": lost(f"n{i}", i) for i in self.sums if not self.floating(i)}
            parts.append(side(old, 0, theirs))
        both = parts[0] if len(parts) == 1 else rel.Union_(tuple(parts))
        flags = tuple(f"__{c}{i}" for i in self.sums for c in self._flags(i)) + (TOUCHED, "__h")
        magnitudes = tuple(f"__m{i}" for i in self.recounted)
        calls = tuple((p, "sum", rel.coalesce(Col(p), zero)) for p in (*self.partial_types, *magnitudes)) + tuple((f, "max", Col(f)) for f in flags)
        summed: rel.Rel = rel.Reduce(both, self.group_keys, calls)
        typed = {p: Cast(Col(p), t) for p, t in self.partial_types.items()}
        for i in self.sums:
            typed[f"s{i}"] = Cast(Case(Call("<=", (Col(f"__x{i}"), zero)), Col(f"s{i}")), self.sum_type(i))
        for i in self.recounted:
            typed[f"e{i}"] = recount.error_bound(i, typed[f"s{i}"])
        if recounting:
            wanted = reduce(lambda a, b: Call("or", (a, b)), [recount.recount_wanted(i, typed[f"s{i}"], typed[f"e{i}"]) for i in self.recounted])
            return rel.Select(summed, tuple((k, Col(k)) for k in self.group_keys), wanted)
        for i in self.recounted:
            if (values := self._new_values(bound, i)) is None:
                continue  # no values stored nor changed (none leaves), or no group wants a recount
            summed = self._joined_by_group(summed, recount.summed_again(values, self.group_keys, i), f"r{i}", f"rc{i}")
            wanted = recount.recount_wanted(i, typed[f"s{i}"], typed[f"e{i}"])
            typed[f"s{i}"] = Case(wanted, rel.coalesce(Col(f"r{i}"), Cast(Lit(0), "double")), typed[f"s{i}"])
            typed[f"c{i}"] = Case(wanted, Cast(rel.coalesce(Col(f"rc{i}"), Lit(0)), "bigint"), typed[f"c{i}"])
            typed[f"e{i}"] = Case(wanted, Cast(Lit(0), "double"), typed[f"e{i}"])
        if checked:  # on the row count: every use of the groups reads it
            typed[COUNT] = self._checked(typed[COUNT], view)
        return rel.Select(summed, tuple((k, Col(k)) for k in self.group_keys) + tuple(typed.items()) + ((TOUCHED, Col(TOUCHED)),))

    def partial_flags(self, i: int) -> str:
        """The flags of sum ``i`` that :meth:`partials` computes (``__<c><i>`` per letter): the
        change's values (``v``) and, for a DOUBLE sum only, a value leaving (``d``: the sum
        is then recounted, or the epoch fails; nothing reads it for other sums)."""
        return "vd" if self.floating(i) else "v"

    def _flags(self, i: int) -> str:
        """The flags sum ``i`` carries through :meth:`combined`: :meth:`partial_flags`, for an
        exact sum the old sum unknown (``o``: NULL over values, a DECIMAL sum past 38
        digits), and the sum lost on either side (``x``)."""
        return self.partial_flags(i) + ("x" if self.floating(i) else "ox")

    def _checked(self, count: rel.Expr, view: str) -> rel.Expr:
        """``count``, unless a group's new sums would be wrong: the change's own DECIMAL sum
        overflowed (NULL over values), or the old one did and the change touches it; or a
        value leaves a DOUBLE sum that keeps no values to recount from (the module doc
        says why: NaN and ±Infinity, too, stay in a running sum as long as it runs)."""
        for i in self.sums:
            if i in self.recounted:
                continue
            floating = self.floating(i)
            touched = Call("=", (Col(TOUCHED), Lit(1)))
            if floating:
                carried = and_(touched, gt(Col(f"__d{i}"), Lit(0)))
            else:
                overflow = and_(gt(Col(f"__v{i}"), Lit(0)), Call("is_null", (Col(f"s{i}"),)))
                carried = Call("or", (overflow, and_(gt(Col(f"__o{i}"), Lit(0)), touched)))
            agg = self.aggs[i]
            message = f"{InexactAggregate.MARKER}: {agg.text or agg.func} {'double' if floating else 'decimal'};"
            count = rel.Fail(carried, message, count)
        return count

    # --- step 3: the output change -----------------------------------------------------------
    def values(self, delta: rel.Rel, i: int) -> rel.Rel:
        """The change of aggregate ``i``'s value table (MIN / MAX / COUNT(DISTINCT), a
        :attr:`valued` sum): its non-NULL argument values per group, with weights, consolidated.
        Group keys are read with zeros unsigned (:class:`~ivm_assets.ir.rel.Unsigned`), as
        Spark's GROUP BY takes them (a group's rows are one group's), and so are the values
        of COUNT(DISTINCT) (−0.0 and 0.0 are one value) and of sums. MIN/MAX keep a value's
        sign, which :meth:`_pick` reads."""
        arg = self.aggs[i].arg
        rows = rel.Select(delta, tuple((k, Col(k)) for k in self.group_keys) + (("v", Col(arg)), (WEIGHT, Col(WEIGHT))), present(Col(arg)))
        signed = self.aggs[i].func in ("min", "max")
        return rel.Consolidate(rel.Unsigned(rows, self.group_keys if signed else None), (*self.group_keys, "v"))

    def output(self, bound: set[str]) -> rel.Rel:
        """Δout = −(old groups' rows) + (new groups' rows), consolidated, from the relations
        named in ``bound`` (``new`` always; see the module doc)."""
        old_values, new_values = {}, {}
        for i, a in enumerate(self.aggs):
            if a.func in VALUE_AGGS:
                old_values[i], new_values[i] = self._old_values(bound, i), self._new_values(bound, i)
        groups = (*self.group_keys, *self.partial_types)
        parts = [self._rows(rel.Input("new", groups), new_values, 1)]
        if "old" in bound:
            parts.insert(0, self._rows(rel.Input("old", groups), old_values, -1))
        return rel.Consolidate(parts[0] if len(parts) == 1 else rel.Union_(tuple(parts)), self.columns)

    def _rows(self, groups: rel.Rel, values: dict[int, rel.Rel | None], sign: int) -> rel.Rel:
        """The output rows of ``groups``, of weight ``sign``: alive groups only when grouped
        (a group exists while its row count is positive; a global aggregate's row always)."""
        if self.keys:
            groups = rel.Select(groups, tuple((c, Col(c)) for c in rel.columns(groups)), gt(Col(COUNT), Lit(0)))
        found: dict[str, rel.Expr] = {}
        for i, rows in values.items():
            name = f"m{i}"
            if rows is None:  # no values stored yet: NULL of the value's own type
                found[name] = Cast(rel.Null(), self.arg_types[i] or "bigint")
                continue
            positive = rel.Select(rows, tuple((c, Col(c)) for c in (*self.group_keys, "v")), gt(Col(WEIGHT), Lit(0)))
            groups = self._joined_by_group(groups, self._pick(positive, i, name), name)
            found[name] = Col(name)
        items = tuple((k, Col(k)) for k in self.keys) + tuple((a.name, self._final(i, a, found)) for i, a in enumerate(self.aggs))
        return rel.Select(groups, items + ((WEIGHT, Lit(sign)),))

    def _pick(self, values: rel.Rel, i: int, name: str) -> rel.Rel:
        """Per group of ``values`` (its value rows), aggregate ``i``'s value as ``name``.
        MIN/MAX over FLOAT/DOUBLE pick a zero's sign as Java's ``Double.compare`` orders
        zeros, −0.0 below 0.0, whatever order the engine meets the values in: Spark's MIN/MAX
        find −0.0 and 0.0 equal and keep the one met first, so a group of one sign of zero
        has that sign, and of both either (this sign, each time the group is recomputed)."""
        func, kind = _VALUE_FUNCTIONS[self.aggs[i].func], self.arg_types[i]
        if func not in ("min", "max") or kind not in _FLOATING:
            return rel.Reduce(values, self.group_keys, ((name, func, Col("v")),))
        # Whether the group holds the zero its function prefers: −0.0 for MIN, 0.0 for MAX.
        negative = Call("negative_zero", (Col("v"),))
        preferred = negative if func == "min" else and_(Call("=", (Col("v"), Lit(0))), Call("not", (negative,)))
        flag = f"__z{i}"
        picked = rel.Reduce(values, self.group_keys, ((name, func, Col("v")), (flag, "max", Case(preferred, Lit(1), Lit(0)))))
        # The zeros from the zero found, not literals: Spark's optimizer finds the literals
        # −0.0 and 0.0 equal, and folds a CASE between them into one. m · m is 0.0 for ±0.0
        # (cast: a product is typed BIGINT in the IR).
        zero = Cast(Call("*", (Col(name), Col(name))), kind)
        chosen, other = (Call("neg", (zero,)), zero) if func == "min" else (zero, Call("neg", (zero,)))
        sign = Case(Call("=", (Col(name), Lit(0))), Case(gt(Col(flag), Lit(0)), chosen, other), Col(name))
        return rel.Select(picked, tuple((k, Col(k)) for k in self.group_keys) + ((name, sign),))

    def _old_values(self, bound: set[str] | frozenset[str], i: int) -> rel.Rel | None:
        """Value table ``i``'s rows of the touched groups, if read (``old_values<i>``)."""
        return rel.Input(f"old_values{i}", (*self.group_keys, "v", WEIGHT)) if f"old_values{i}" in bound else None

    def _new_values(self, bound: set[str] | frozenset[str], i: int) -> rel.Rel | None:
        """Value table ``i``'s rows of the touched groups after the change (``dv<i>``)."""
        before = self._old_values(bound, i)
        if f"dv{i}" not in bound:
            return before
        change = rel.Input(f"dv{i}", (*self.group_keys, "v", WEIGHT))
        return change if before is None else rel.Consolidate(rel.Union_((before, change)), (*self.group_keys, "v"))

    def _joined_by_group(self, groups: rel.Rel, per_group: rel.Rel, *names: str) -> rel.Rel:
        """``groups`` with columns ``names`` of ``per_group`` (one row per group key at most;
        NULL for a group without one), matched on the group keys, NULL keys included."""
        renamed = rel.Select(per_group, tuple((f"__k_{k}", Col(k)) for k in self.group_keys) + tuple((n, Col(n)) for n in names))
        on = tuple((k, f"__k_{k}") for k in self.group_keys)
        return keep(rel.Join(groups, renamed, on, "left", null_safe=True), rel.columns(groups), **{n: Col(n) for n in names})

    def _final(self, i: int, agg: AggCall, found: dict[str, rel.Expr]) -> rel.Expr:
        """The aggregate's value from the group's state columns."""
        n, s = Col(f"n{i}"), Col(f"s{i}")
        if agg.func == "count_star":
            return Col(COUNT)
        if agg.func == "count":
            return n
        if agg.func == "sum":
            return Case(gt(n, Lit(0)), s)
        if agg.func == "avg":
            return Case(gt(n, Lit(0)), self._average(i, s, n))
        if agg.func == "count_distinct":
            return Cast(rel.coalesce(found[f"m{i}"], Lit(0)), "bigint")
        return found[f"m{i}"]  # min, max

    def _average(self, i: int, s: rel.Expr, n: rel.Expr) -> rel.Expr:
        """AVG from the sum and count: over DECIMAL the exact quotient rounded once into
        AVG's type, as Spark's AVG does (SQL's ``/`` would round twice); otherwise in double
        precision (a sum of integers is exact, as DECIMAL(38, 0))."""
        found = decimal_rules.parse_type(self.arg_types[i] or "")
        if found:
            precision, scale = decimal_rules.average_type(*found)
            return rel.Average(s, n, precision, scale, self.ansi)
        return Call("/", (Cast(s, "double"), Cast(n, "double")))
