"""A SELECT's FROM items and where each condition applies among them: the join kinds, an
order of inner joins without avoidable cross products, the placement of WHERE and ON
conditions around outer joins, and join keys split from the other conditions."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlglot import exp

from ivm_assets.errors import LoweringError
from ivm_assets.sql.conditions import tables_of

OUTER = ("left", "right", "full")


@dataclass(frozen=True)
class FromItem:
    """One FROM item: the relation, how it joins the items before it, its ON conjuncts."""

    expression: exp.Expression
    kind: str  # "first", "inner", "left", "right", "full", "semi" or "anti"
    on: tuple[exp.Expression, ...]

    @property
    def alias(self) -> str:
        return self.expression.alias_or_name.lower()


def join_kind(join: exp.Join) -> str:
    if join.args.get("method") or join.args.get("using"):
        raise LoweringError(f"No lowering rule for {join.args.get('method') or 'USING'} JOIN")
    side, kind = (join.args.get("side") or "").lower(), (join.args.get("kind") or "").lower()
    if kind in ("semi", "anti"):
        return kind
    return side if side in OUTER else "inner"


def connected_order(items: list[FromItem], where: list[exp.Expression]) -> tuple[list[FromItem], list[exp.Expression]]:
    """Inner-joined FROM items reordered so that each joins the ones before it on an
    equality where some order allows it, and their ON conditions moved to WHERE (the same
    thing for inner joins).

    Taken in FROM order, ``FROM part, supplier, lineitem WHERE p_partkey = l_partkey AND
    s_suppkey = l_suppkey`` would start with the cross product of parts and suppliers: as
    join state that is every pair, and every change to either side touches all of the
    other. Greedily the next item is the first one in FROM order with an equality to the
    items placed, or, when none has one, the next one in FROM order (a cross product the
    query itself asks for).
    """
    conds = [*where, *(c for i in items for c in i.on)]
    links = [(tables_of(c.this), tables_of(c.expression)) for c in conds if isinstance(c, exp.EQ)]
    links = [(a, b) for a, b in links if a and b and not a & b]
    remaining, placed, present = list(items[1:]), [items[0]], {items[0].alias}

    def linked(alias: str) -> bool:
        return any((a <= present and b == {alias}) or (b <= present and a == {alias}) for a, b in links)

    while remaining:
        chosen = next((i for i in remaining if linked(i.alias)), remaining[0])
        remaining.remove(chosen)
        placed.append(chosen)
        present.add(chosen.alias)
    ordered = [FromItem(placed[0].expression, "first", ())]
    ordered += [FromItem(i.expression, "inner", ()) for i in placed[1:]]
    return ordered, conds


def placement(items: list[FromItem], where: list[exp.Expression]):
    """Where each condition goes in the left-deep join tree of ``items``.

    A condition applies at the lowest point where all its tables are present, except that
    it never moves below an outer join that pads one of its tables with NULLs (a LEFT
    JOIN pads its new item, a RIGHT JOIN the items before it, FULL both): WHERE conditions
    on a padded item stay above that join, and so do an inner join's ON conditions below
    which such a join lies within their scope. At its point a condition on one item alone
    filters that item, one across items joins them (inner join) or filters the result
    (outer join). An outer join's own ON conditions stay with it, except those on its
    padded side alone (LEFT: the new item; RIGHT: the items before), which filter that
    side first; a SEMI or ANTI JOIN keeps all of its own. Returns (position → conditions,
    outer/semi/anti join position → its ON conditions);
    positions are ("own", i), ("pre", i) (the items before i), ("on", i), ("after", i),
    ("end",).
    """
    aliases = [i.alias for i in items]
    index = {a: i for i, a in enumerate(aliases)}
    pads = [
        ({a} if i.kind in ("left", "full") else set()) | (set(aliases[:n]) if i.kind in ("right", "full") else set())
        for n, (a, i) in enumerate(zip(aliases, items))
    ]
    any_outer = any(i.kind in OUTER for i in items)
    placed: dict[tuple, list[exp.Expression]] = defaultdict(list)
    outer_on: dict[int, list[exp.Expression]] = defaultdict(list)

    def place(cond: exp.Expression, scope_end: int, is_where: bool) -> None:
        tables = tables_of(cond)
        if not tables <= set(index):
            raise LoweringError(f"No lowering rule for a condition on tables outside its FROM: {cond.sql('spark')}")
        if not tables:
            placed[("on", scope_end) if any_outer and not is_where else ("end",)].append(cond)
            return
        barrier = max((n for n in range(1, scope_end + 1) if pads[n] & tables), default=-1)
        pos = max(max(index[t] for t in tables), barrier)
        if tables == {aliases[pos]} and aliases[pos] not in pads[pos]:
            placed[("own", pos)].append(cond)
        elif items[pos].kind in OUTER:
            placed[("after", pos)].append(cond)
        else:
            placed[("on", pos)].append(cond)

    for cond in where:
        place(cond, len(items) - 1, True)
    for pos, item in enumerate(items):
        for cond in item.on:
            tables = tables_of(cond)
            if item.kind in ("semi", "anti"):
                outer_on[pos].append(cond)
            elif item.kind not in OUTER:
                place(cond, pos, False)
            elif tables and item.kind == "left" and tables <= {aliases[pos]}:
                placed[("own", pos)].append(cond)
            elif tables and item.kind == "right" and tables <= set(aliases[:pos]):
                placed[("pre", pos)].append(cond)
            else:
                outer_on[pos].append(cond)
    return placed, outer_on


def split_keys(conds, present: set[str], alias: str):
    """Join conditions as (left key expressions, right key expressions, the rest):
    equalities between the items ``present`` and the new item ``alias`` become keys."""
    left_keys: list[exp.Expression] = []
    right_keys: list[exp.Expression] = []
    residual: list[exp.Expression] = []
    for cond in conds:
        if isinstance(cond, exp.EQ):
            lt, rt = tables_of(cond.this), tables_of(cond.expression)
            if lt and rt and lt <= present and rt == {alias}:
                left_keys.append(cond.this), right_keys.append(cond.expression)
                continue
            if lt and rt and rt <= present and lt == {alias}:
                left_keys.append(cond.expression), right_keys.append(cond.this)
                continue
        residual.append(cond)
    return left_keys, right_keys, residual
