"""A small relational IR over weighted rows: what a rule on changes computes, written once.

A rule (e.g. :mod:`ivm_assets.rules.semi_join`) builds a :data:`Rel` from the relations an
epoch gives it (change sets, state rows looked up by the keys of a change; :class:`Input`),
and each engine renders the same tree: :mod:`ivm_assets.rules.render_spark` as DataFrames,
:mod:`ivm_assets.rules.render_duckdb` as one DuckDB query over Arrow tables. Reading state
and appending to it stay with the engine (how a state table is read differs: Spark scans
buckets, the driver reads row groups); what is computed from what was read is the rule's,
so the two engines cannot drift apart on it.

Every relation is a z-set: its columns plus the BIGINT weight ``__w`` where the rule says
so. Names are the contract: a :class:`Join`'s two inputs have disjoint column names (a rule
renames with :class:`Select`), so no engine has to resolve an ambiguous column.

Expressions are a closed set too: columns, BIGINT literals, the arithmetic and comparisons
the rules need, CASE, COALESCE, and :class:`SparkSql`, a view's own expression (a join's
residual condition), which each engine renders by its own expression rules (DuckDB's refuse
what they cannot compute exactly as Spark does: the epoch then runs in Spark).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from ivm_assets.zset import WEIGHT

# --- expressions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Col:
    name: str


@dataclass(frozen=True)
class Lit:
    """A BIGINT literal."""

    value: int


@dataclass(frozen=True)
class Null:
    """NULL of the type of the input column ``like`` (an outer join's padding)."""

    like: str


@dataclass(frozen=True)
class Call:
    """``op`` over ``args``: ``+ - *`` (BIGINT), ``> <= = <>``, ``and``, ``not``, ``coalesce``,
    ``greatest``, ``least``, ``is_null``."""

    op: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Case:
    """CASE WHEN ``when`` THEN ``then`` ELSE ``otherwise`` END."""

    when: Expr
    then: Expr
    otherwise: Expr


@dataclass(frozen=True)
class SparkSql:
    """A Spark SQL expression of the view (a residual join condition) over the columns of
    the relation it is evaluated on."""

    text: str


Expr = Union[Col, Lit, Null, Call, Case, SparkSql]


def add(a: Expr, b: Expr) -> Call:
    return Call("+", (a, b))


def sub(a: Expr, b: Expr) -> Call:
    return Call("-", (a, b))


def mul(a: Expr, b: Expr) -> Call:
    return Call("*", (a, b))


def gt(a: Expr, b: Expr) -> Call:
    return Call(">", (a, b))


def coalesce(*args: Expr) -> Call:
    return Call("coalesce", args)


# --- relations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    """A relation the epoch binds by ``name`` (a change set, state rows) with ``columns``."""

    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Select:
    """``items`` (name, expression) of the rows of ``input`` where ``where`` holds."""

    input: Rel
    items: tuple[tuple[str, Expr], ...]
    where: Expr | None = None


JoinKind = Literal["inner", "left", "semi", "anti"]


@dataclass(frozen=True)
class Join:
    """Rows of ``left`` and ``right`` whose ``on`` columns are equal (``=``: a NULL matches
    nothing) and, given, where ``residual`` holds. ``inner`` and ``left`` (outer) output both
    inputs' columns; ``semi`` and ``anti`` the left rows with or without a match."""

    left: Rel
    right: Rel
    on: tuple[tuple[str, str], ...]
    kind: JoinKind
    residual: Expr | None = None

    def __post_init__(self) -> None:
        shared = set(columns(self.left)) & set(columns(self.right))
        if shared:
            raise ValueError(f"a join's inputs share the column names {sorted(shared)}: rename one side")


@dataclass(frozen=True)
class Union_:
    """The rows of every input (a z-set sum), columns matched by name in the first's order."""

    inputs: tuple[Rel, ...]


@dataclass(frozen=True)
class GroupSum:
    """Per distinct ``keys`` (NULL equal to NULL): the BIGINT sum of each expression."""

    input: Rel
    keys: tuple[str, ...]
    sums: tuple[tuple[str, Expr], ...]


@dataclass(frozen=True)
class Consolidate:
    """``input`` consolidated on ``columns`` (:mod:`ivm_assets.state.consolidate`, the one rule)."""

    input: Rel
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Window:
    """W(rows): the rows of ``input`` with a positive weight, each repeated as many times as
    its weight, ``columns`` then each of ``calls`` (name, a Spark SQL window expression) computed
    over them, every output row of weight ``sign``."""

    input: Rel
    columns: tuple[str, ...]
    calls: tuple[tuple[str, str], ...]
    sign: int


Rel = Union[Input, Select, Join, Union_, GroupSum, Consolidate, Window]


def columns(rel: Rel) -> tuple[str, ...]:
    """The column names of ``rel``, in order."""
    if isinstance(rel, Input):
        return rel.columns
    if isinstance(rel, Select):
        return tuple(name for name, _ in rel.items)
    if isinstance(rel, Join):
        return columns(rel.left) + (columns(rel.right) if rel.kind in ("inner", "left") else ())
    if isinstance(rel, Union_):
        return columns(rel.inputs[0])
    if isinstance(rel, GroupSum):
        return rel.keys + tuple(name for name, _ in rel.sums)
    if isinstance(rel, Window):
        return rel.columns + tuple(name for name, _ in rel.calls) + (WEIGHT,)
    return rel.columns + (WEIGHT,)


def keep(rel: Rel, names: tuple[str, ...], **computed: Expr) -> Select:
    """``names`` of ``rel`` as they are, then the ``computed`` columns."""
    return Select(rel, tuple((n, Col(n)) for n in names) + tuple(computed.items()))


def renamed(rel: Rel, mapping: dict[str, str]) -> Select:
    """``rel`` with columns renamed by ``mapping`` (others as they are)."""
    return Select(rel, tuple((mapping.get(n, n), Col(n)) for n in columns(rel)))


def empty(rel_: Rel) -> Select:
    """No rows, with ``rel_``'s columns."""
    return Select(rel_, tuple((n, Col(n)) for n in columns(rel_)), Call("=", (Lit(0), Lit(1))))
