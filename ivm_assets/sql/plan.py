"""The ordinary (non-incremental) relational plan of a view.

Plan nodes are small immutable values that check their invariants when built. Every node
produces named columns; names are internal (unique within a plan) and expressions are Spark
SQL text over the input's column names. :mod:`ivm_assets.rules.incrementalize` turns a plan
into incremental operators; rewrite rules such as :mod:`ivm_assets.sql.prune_columns` map
plans to plans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

AggFunc = Literal["count_star", "count", "sum", "avg", "min", "max", "count_distinct"]


def q(name: str) -> str:
    """``name`` quoted as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


class Node:
    """A relational plan node; ``columns`` are the names it outputs."""

    columns: tuple[str, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return ()


def _check_unique(columns: tuple[str, ...], what: str) -> None:
    if len(set(columns)) != len(columns):
        raise ValueError(f"{what}: duplicate column names {columns}")


def _check_join(node: Join | OuterJoin, what: str) -> None:
    """Keys pair up and belong to their side; sets the output columns (left's, right's)."""
    if len(node.left_keys) != len(node.right_keys):
        raise ValueError(f"{what}: as many left keys as right keys")
    if not set(node.left_keys) <= set(node.left.columns) or not set(node.right_keys) <= set(node.right.columns):
        raise ValueError(f"{what}: keys must be columns of their side")
    object.__setattr__(node, "columns", node.left.columns + node.right.columns)
    _check_unique(node.columns, what)


@dataclass(frozen=True)
class Scan(Node):
    """All rows of a source table or an upstream view (``relation``), renamed to ``columns``."""

    relation: str
    source_columns: tuple[str, ...]
    columns: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.source_columns) != len(self.columns):
            raise ValueError("Scan: one output name per source column")
        _check_unique(self.columns, "Scan")


@dataclass(frozen=True)
class _SameColumns(Node):
    """A node with one input whose output columns are the input's."""

    input: Node
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", self.input.columns)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Filter(_SameColumns):
    """Rows of ``input`` for which ``predicate`` is true (NULL counts as false)."""

    predicate: str


@dataclass(frozen=True)
class Project(Node):
    """One output row per input row: ``exprs`` are (name, Spark SQL expression) pairs."""

    input: Node
    exprs: tuple[tuple[str, str], ...]
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(name for name, _ in self.exprs))
        _check_unique(self.columns, "Project")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Join(Node):
    """Inner join on ``left_keys[i] = right_keys[i]`` (NULL never matches), then ``residual``.

    No keys means a cross join. Output columns are the left's then the right's.
    """

    left: Node
    right: Node
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    residual: str | None = None
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        _check_join(self, "Join")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class OuterJoin(Node):
    """``side`` (LEFT, RIGHT or FULL) outer join on ``left_keys[i] = right_keys[i]`` and
    ``residual``: the inner join's rows, plus each row of a preserved side that matches
    none, with NULLs for the other side's columns. Output columns are the left's then the
    right's. WHERE conditions never go in here: they apply above, to the padded rows too.
    """

    left: Node
    right: Node
    side: Literal["left", "right", "full"]
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    residual: str | None = None
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if self.side not in ("left", "right", "full"):
            raise ValueError(f"OuterJoin: side must be left, right or full, not {self.side!r}")
        _check_join(self, "OuterJoin")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class SemiJoin(Node):
    """The rows of ``left`` that pass a test against ``right``, a set of keys (its columns
    are exactly ``right_keys``); output columns are the left's.

    ``semi`` (EXISTS, IN): rows with a right row of equal keys; ``anti`` (NOT EXISTS): rows
    without; NULL keys never match. ``not_in`` (``x NOT IN (SELECT c …)``): the last key
    pair is (x, c), the others correlate a row with its group of right rows; a row passes
    when its group is empty, or has no NULL c and no c equal to x (a NULL x then fails).

    A ``residual`` (semi and anti only: the non-equality correlations of EXISTS) is a
    predicate over a left row and a right row that a match must satisfy too; the right's
    columns are then its keys followed by the columns the residual reads.
    """

    left: Node
    right: Node
    kind: Literal["semi", "anti", "not_in"]
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    residual: str | None = None
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if self.kind not in ("semi", "anti", "not_in"):
            raise ValueError(f"SemiJoin: kind must be semi, anti or not_in, not {self.kind!r}")
        if len(self.left_keys) != len(self.right_keys) or len(self.left_keys) < (2 if self.kind == "not_in" else 1):
            raise ValueError("SemiJoin: as many left keys as right keys, at least one (two for not_in: group and value)")
        if self.residual is not None and self.kind == "not_in":
            raise ValueError("SemiJoin: a residual applies to semi and anti joins only")
        right_ok = (
            self.right.columns[: len(self.right_keys)] == self.right_keys
            if self.residual is not None
            else self.right.columns == self.right_keys
        )
        if not set(self.left_keys) <= set(self.left.columns) or not right_ok:
            raise ValueError("SemiJoin: left keys must be left columns, and the right's columns its keys (then the residual's)")
        _check_unique(self.left.columns + self.right.columns, "SemiJoin")
        object.__setattr__(self, "columns", self.left.columns)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class AggCall:
    """One aggregate: ``func`` over input column ``arg`` (None for COUNT(*)), named ``name``."""

    name: str
    func: AggFunc
    arg: str | None
    # The call as the view's SQL writes it (for messages; not part of the plan's identity,
    # nor of its repr, which names operators and their state tables).
    text: str = field(default="", compare=False, repr=False)
    # Whether the argument is of an integer or DECIMAL type, as the SQL front end types it
    # (sqlglot, from the sources' schemas): a SUM/AVG over anything else may sum DOUBLEs,
    # and keeps its values (:mod:`ivm_assets.rules.aggregate` says why). Not part of the
    # plan's identity: the state tables it adds are.
    exact: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.arg is None) != (self.func == "count_star"):
            raise ValueError(f"AggCall {self.func}: argument required except for COUNT(*)")


@dataclass(frozen=True)
class Aggregate(Node):
    """GROUP BY ``keys`` (input columns; NULLs form one group) computing ``aggs``.

    Without keys it is a global aggregate: exactly one output row, even over no input.
    """

    input: Node
    keys: tuple[str, ...]
    aggs: tuple[AggCall, ...]
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if not set(self.keys) <= set(self.input.columns):
            raise ValueError("Aggregate: keys must be input columns")
        object.__setattr__(self, "columns", self.keys + tuple(a.name for a in self.aggs))
        _check_unique(self.columns, "Aggregate")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Distinct(_SameColumns):
    """Each distinct input row once (NULLs equal to each other)."""


@dataclass(frozen=True)
class UnionAll(Node):
    """The rows of every input, duplicates kept; columns are taken by position."""

    inputs: tuple[Node, ...]
    columns: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.inputs) < 2 or any(len(i.columns) != len(self.columns) for i in self.inputs):
            raise ValueError("UnionAll: two or more inputs with the same number of columns")

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs


@dataclass(frozen=True)
class _SetOperation(Node):
    """``left`` combined with ``right`` row by row (columns by position, NULLs equal to each
    other); ``all`` keeps multiplicities, otherwise each row comes out at most once."""

    left: Node
    right: Node
    all: bool
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if len(self.left.columns) != len(self.right.columns):
            raise ValueError(f"{type(self).__name__}: both inputs need the same number of columns")
        object.__setattr__(self, "columns", self.left.columns)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Intersect(_SetOperation):
    """INTERSECT [ALL]: a row ``min(l, r)`` times (ALL), or once when ``l > 0 and r > 0``,
    where l and r are its multiplicities in the left and the right input."""


@dataclass(frozen=True)
class Except(_SetOperation):
    """EXCEPT [ALL]: a row ``max(l − r, 0)`` times (ALL), or once when ``l > 0 and r = 0``."""


# One sort key: (column, descending, NULLs first).
SortKey = tuple[str, bool, bool]


@dataclass(frozen=True)
class TopK(Node):
    """``ORDER BY order LIMIT limit OFFSET offset``: the rows at positions offset + 1 to
    offset + limit of ``input`` sorted by ``order``, each copy of a duplicate taking one place;
    with ``partition``, of each partition (a per-group top-k), and with ``position``, an
    extra column of that name holding the place (what ROW_NUMBER gives).

    The order must be total (every input column in it, after the query's own sort keys), so
    that which rows are in is defined even when the query's sort keys tie.
    """

    input: Node
    order: tuple[SortKey, ...]
    limit: int
    offset: int = 0
    partition: tuple[str, ...] = ()
    position: str | None = None
    columns: tuple[str, ...] = field(init=False)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.input,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", self.input.columns + ((self.position,) if self.position else ()))
        _check_unique(self.columns, "TopK")
        if not set(self.partition) <= set(self.input.columns):
            raise ValueError("TopK: partition columns must be input columns")
        if not set(self.input.columns) <= {c for c, _, _ in self.order}:
            raise ValueError("TopK: the order must be total: every input column in it")
        if self.limit < 0 or self.offset < 0:
            raise ValueError("TopK: limit and offset must not be negative")


@dataclass(frozen=True)
class Window(Node):
    """The input's columns plus one column per window function: ``calls`` are (name, Spark
    SQL window expression) pairs that all partition by ``partition`` (input columns; none
    means one partition of every row). Each call's ORDER BY is total where the function's
    value depends on the order among ties (ROW_NUMBER, LAG, LEAD, ROWS frames)."""

    input: Node
    partition: tuple[str, ...]
    calls: tuple[tuple[str, str], ...]
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if not set(self.partition) <= set(self.input.columns) or not self.calls:
            raise ValueError("Window: partition columns must be input columns, and one call at least")
        object.__setattr__(self, "columns", self.input.columns + tuple(name for name, _ in self.calls))
        _check_unique(self.columns, "Window")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Plan:
    """A lowered view: the root node, and the view's column names (by position)."""

    root: Node
    output_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.output_names) != len(self.root.columns):
            raise ValueError("Plan: one output name per root column")


def walk(node: Node):
    """Every node of the tree under ``node``, parents before children."""
    yield node
    for child in node.children:
        yield from walk(child)
