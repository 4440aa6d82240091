"""A small relational IR over weighted rows: what a rule on changes computes, written once.

A rule (e.g. :mod:`ivm_assets.rules.semi_join`) builds a :data:`Rel` from the relations an
epoch gives it (change sets, state rows looked up by the keys of a change; :class:`Input`),
and each engine renders the same tree: :mod:`ivm_assets.render.spark.rel` as DataFrames,
:mod:`ivm_assets.render.duckdb.rel` as one DuckDB query over Arrow tables. Reading state
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

from dataclasses import dataclass, fields, replace
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
    """NULL of the type of the input column ``like`` (an outer join's padding); without
    ``like``, NULL of no type, which a union or the epoch's final cast types."""

    like: str | None = None


@dataclass(frozen=True)
class Call:
    """``op`` over ``args``: ``+ - *`` (BIGINT), ``/`` (DOUBLE), ``neg``, ``> < <= = <>``,
    ``and``, ``or``, ``not``, ``coalesce``, ``greatest``, ``least``, ``is_null``, ``is_nan``,
    ``is_infinite``, ``negative_zero`` (a FLOAT/DOUBLE −0.0; false for NULL)."""

    op: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Case:
    """CASE WHEN ``when`` THEN ``then`` ELSE ``otherwise`` END (no ELSE: NULL)."""

    when: Expr
    then: Expr
    otherwise: Expr | None = None


@dataclass(frozen=True)
class Cast:
    """``value`` as the Spark type ``to``, named as Spark's ``simpleString`` names it
    (``bigint``, ``int``, ``double``, ``decimal(p,s)``). A value the type cannot hold is
    Spark's (NULL, or an error under ANSI mode); DuckDB raises, and the epoch runs in Spark."""

    value: Expr
    to: str


@dataclass(frozen=True)
class Fail:
    """``value``, unless ``when`` holds: then the epoch fails with ``message`` (Spark's
    ``raise_error``, DuckDB's ``error``)."""

    when: Expr
    message: str
    value: Expr


@dataclass(frozen=True)
class Average:
    """AVG from an exact DECIMAL ``total`` and a positive ``count``: the quotient rounded
    once into DECIMAL(precision, scale), as Spark's AVG (:func:`ivm_assets.ir.decimal_rules.divide`).
    A quotient too wide for the type is NULL, or under ``ansi`` an error named as Spark's."""

    total: Expr
    count: Expr
    precision: int
    scale: int
    ansi: bool


@dataclass(frozen=True)
class SparkSql:
    """A Spark SQL expression of the view (a residual join condition) over the columns of
    the relation it is evaluated on."""

    text: str


Expr = Union[Col, Lit, Null, Call, Case, Cast, Fail, Average, SparkSql]


def add(a: Expr, b: Expr) -> Call:
    return Call("+", (a, b))


def sub(a: Expr, b: Expr) -> Call:
    return Call("-", (a, b))


def mul(a: Expr, b: Expr) -> Call:
    return Call("*", (a, b))


def gt(a: Expr, b: Expr) -> Call:
    return Call(">", (a, b))


def lt(a: Expr, b: Expr) -> Call:
    return Call("<", (a, b))


def and_(a: Expr, b: Expr) -> Call:
    return Call("and", (a, b))


def present(a: Expr) -> Call:
    """``a IS NOT NULL``."""
    return Call("not", (Call("is_null", (a,)),))


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
    nothing; with ``null_safe``, NULL matches NULL) and, given, where ``residual`` holds.
    ``inner`` and ``left`` (outer) output both inputs' columns; ``semi`` and ``anti`` the
    left rows with or without a match."""

    left: Rel
    right: Rel
    on: tuple[tuple[str, str], ...]
    kind: JoinKind
    residual: Expr | None = None
    null_safe: bool = False

    def __post_init__(self) -> None:
        shared = set(columns(self.left)) & set(columns(self.right))
        if shared:
            raise ValueError(f"a join's inputs share the column names {sorted(shared)}: rename one side")


@dataclass(frozen=True)
class Union_:
    """The rows of every input (a z-set sum), columns matched by name in the first's order."""

    inputs: tuple[Rel, ...]


@dataclass(frozen=True)
class Reduce:
    """Per distinct ``keys`` (NULL equal to NULL, floats as Spark groups them; ``signed``:
    as consolidation compares rows, −0.0 apart from 0.0, every NaN one): each call
    (name, function, expression), the function ``sum``, ``min``, ``max`` or ``count``. A sum
    is typed by each engine its own way: a rule casts it where its type matters."""

    input: Rel
    keys: tuple[str, ...]
    calls: tuple[tuple[str, str, Expr], ...]
    signed: bool = False


@dataclass(frozen=True)
class Repeat:
    """Each row of ``input`` repeated |weight| times, its weight replaced by the column
    ``sign`` (+1 or −1): a sum over the copies keeps the type of its argument, where a
    product with the weight would widen a DECIMAL and could lose its scale."""

    input: Rel
    sign: str


# One sort key: (column, descending, NULLs first). A FLOAT/DOUBLE column sorts as Spark
# sorts it: NaN above every value, −0.0 tied with 0.0. Rows that every key of an order finds
# tied but for a zero's sign then come as Java's Double.compare orders them, −0.0 below 0.0
# in each float key's own direction (so rows Spark may put either way come one way, always).
SortKey = tuple[str, bool, bool]


@dataclass(frozen=True)
class Ordered:
    """``input`` with each call (name, function, expression) computed over the rows of its
    ``partition`` (none: all rows) in ``order``, a total order: ``running_sum``, the sum over
    the rows up to and including this one; ``max_after``, the max over this row and those after."""

    input: Rel
    partition: tuple[str, ...]
    order: tuple[SortKey, ...]
    calls: tuple[tuple[str, str, Expr], ...]


@dataclass(frozen=True)
class First:
    """The first ``n`` rows of each ``partition`` of ``input`` (none: of all rows) in ``order``."""

    input: Rel
    partition: tuple[str, ...]
    order: tuple[SortKey, ...]
    n: int


@dataclass(frozen=True)
class Places:
    """Each row of ``input`` once per place ``from_ + 1 … to`` (BIGINT expressions; none
    when ``to`` ≤ ``from_``), the place in the column ``name``."""

    input: Rel
    name: str
    from_: Expr
    to: Expr


@dataclass(frozen=True)
class Consolidate:
    """``input`` consolidated on ``columns`` (:mod:`ivm_assets.state.consolidate`, the one rule)."""

    input: Rel
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Unsigned:
    """The rows of ``input`` with −0.0 as 0.0 in every FLOAT and DOUBLE column (of
    ``only``, given): what an operator reads where it takes rows Spark finds equal as one
    (an aggregate's group keys in its value tables). Consolidation keeps a zero's sign
    (:mod:`ivm_assets.zset`); these operators give 0.0."""

    input: Rel
    only: tuple[str, ...] | None = None


@dataclass(frozen=True)
class NoNegativeZero:
    """The rows of ``input`` as they are, unless a FLOAT or DOUBLE column holds −0.0: then
    the epoch fails with ``message`` (checked on the weight, which every consumer reads).
    What a rule reads where it must compute again what it emitted and a zero's sign would
    let it come out otherwise (a window's rows: −0.0 and 0.0 tie, and take their places in
    either order)."""

    input: Rel
    message: str


@dataclass(frozen=True)
class Window:
    """W(rows): the rows of ``input`` with a positive weight, each repeated as many times as
    its weight, ``columns`` then each of ``calls`` (name, a Spark SQL window expression) computed
    over them, every output row of weight ``sign``."""

    input: Rel
    columns: tuple[str, ...]
    calls: tuple[tuple[str, str], ...]
    sign: int


Rel = Union[Input, Select, Join, Union_, Reduce, Repeat, Ordered, First, Places, Consolidate, Unsigned, NoNegativeZero, Window]
_RELATIONS = (Input, Select, Join, Union_, Reduce, Repeat, Ordered, First, Places, Consolidate, Unsigned, NoNegativeZero, Window)


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
    if isinstance(rel, Reduce):
        return rel.keys + tuple(name for name, _, _ in rel.calls)
    if isinstance(rel, Repeat):
        return tuple(c for c in columns(rel.input) if c != WEIGHT) + (rel.sign,)
    if isinstance(rel, Ordered):
        return columns(rel.input) + tuple(name for name, _, _ in rel.calls)
    if isinstance(rel, (First, Unsigned, NoNegativeZero)):
        return columns(rel.input)
    if isinstance(rel, Places):
        return columns(rel.input) + (rel.name,)
    if isinstance(rel, Window):
        return rel.columns + tuple(name for name, _ in rel.calls) + (WEIGHT,)
    return rel.columns + (WEIGHT,)


def bound(rel_: Rel, name: str, to: Rel) -> Rel:
    """``rel_`` with each :class:`Input` called ``name`` replaced by ``to``, which has at least
    that input's columns: a rule computed over another rule's result in one query."""
    if isinstance(rel_, Input):
        if rel_.name != name:
            return rel_
        missing = set(rel_.columns) - set(columns(to))
        if missing:
            raise ValueError(f"input {name} is bound to a relation without the columns {sorted(missing)}")
        return Select(to, tuple((c, Col(c)) for c in rel_.columns))
    changes = {}
    for f in fields(rel_):
        value = getattr(rel_, f.name)
        if isinstance(value, _RELATIONS):
            changes[f.name] = bound(value, name, to)
        elif isinstance(value, tuple) and value and all(isinstance(v, _RELATIONS) for v in value):
            changes[f.name] = tuple(bound(v, name, to) for v in value)
    return replace(rel_, **changes)


def keep(rel: Rel, names: tuple[str, ...], **computed: Expr) -> Select:
    """``names`` of ``rel`` as they are, then the ``computed`` columns."""
    return Select(rel, tuple((n, Col(n)) for n in names) + tuple(computed.items()))


def renamed(rel: Rel, mapping: dict[str, str]) -> Select:
    """``rel`` with columns renamed by ``mapping`` (others as they are)."""
    return Select(rel, tuple((mapping.get(n, n), Col(n)) for n in columns(rel)))


def positive_copies(rel_: Rel) -> Repeat:
    """The rows of ``rel_`` with a positive weight, each repeated as many times as its weight
    (their sign column ``__s`` is +1): the rows a :class:`Window` computes over."""
    positive = Select(rel_, tuple((c, Col(c)) for c in columns(rel_)), Call(">", (Col(WEIGHT), Lit(0))))
    return Repeat(positive, "__s")


def group_sum(input: Rel, keys: tuple[str, ...], sums: tuple[tuple[str, Expr], ...], *, signed: bool = False) -> Select:
    """Per distinct ``keys`` (as :class:`Reduce` groups them): the BIGINT sum of each expression."""
    reduced = Reduce(input, keys, tuple((name, "sum", e) for name, e in sums), signed)
    return Select(reduced, tuple((k, Col(k)) for k in keys) + tuple((name, Cast(Col(name), "bigint")) for name, _ in sums))


def empty(rel_: Rel) -> Select:
    """No rows, with ``rel_``'s columns."""
    return Select(rel_, tuple((n, Col(n)) for n in columns(rel_)), Call("=", (Lit(0), Lit(1))))
