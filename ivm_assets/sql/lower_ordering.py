"""Lowering of ``ORDER BY … LIMIT`` (a TopK over the query, ties ordered first) and of window
functions (one Window node per PARTITION BY), for :mod:`ivm_assets.sql.lower`.

``fresh`` is the lowering's name generator (:meth:`~ivm_assets.sql.lower.Lowering.fresh`):
columns these add (hidden sort keys, computed partition keys, window results) get names no
other column of the plan has.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ivm_assets.errors import LoweringError
from ivm_assets.sql.plan import Node, Project, SortKey, TopK, Window, q
from ivm_assets.sql.render import render


def hidden_sort_keys(select: exp.Select, scope: dict, fresh: Callable[[str], str]) -> tuple[tuple[str, str], ...]:
    """Sort keys of a SELECT's ORDER BY that are not among its outputs, as extra columns."""
    outputs = tuple(p.alias_or_name for p in select.expressions)
    return tuple(
        (fresh("sort"), render(o.this, scope))
        for o in select.args["order"].expressions
        if _output_position(o.this, select, outputs) is None
    )


def top_k(query: exp.Expression, node: Node, outputs: tuple[str, ...], hidden, fresh: Callable[[str], str]) -> Node:
    """``ORDER BY … LIMIT n [OFFSET m]`` over ``node``, whose first columns are the query's
    outputs and whose last are the ``hidden`` sort keys (dropped again above the top-k).

    The order is total: :func:`~ivm_assets.sql.order_ties.order_ties` appended every output
    column, and a hidden sort key is a column of its own.
    """
    extra = iter(name for name, _ in hidden)
    keys: list[SortKey] = []
    for ordered in query.args["order"].expressions:
        position = _output_position(ordered.this, query, outputs)
        name = node.columns[position] if position is not None else next(extra, None)
        if name is None:
            raise LoweringError(f"No lowering rule for ORDER BY {ordered.this.sql('spark')} (not an output column)")
        desc = bool(ordered.args.get("desc"))
        nulls_first = ordered.args.get("nulls_first")
        if name not in {k for k, _, _ in keys}:  # a repeated key cannot change the order
            keys.append((name, desc, (not desc) if nulls_first is None else bool(nulls_first)))
    offset = query.args.get("offset")
    top = TopK(node, tuple(keys), int(query.args["limit"].expression.this), int(offset.expression.this) if offset else 0)
    if hidden:
        return Project(top, tuple((c, q(c)) for c in node.columns[: len(outputs)]))
    return top


def windows(
    node: Node, projections: list[exp.Expression], scope: dict, fresh: Callable[[str], str]
) -> tuple[Node, list[exp.Expression]]:
    """The window functions of ``projections`` (SELECT list and QUALIFY) as one Window
    node per PARTITION BY (partition expressions computed as columns first), and the
    expressions with each function replaced by its column."""
    pre: list[tuple[str, str]] = []
    groups: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    replaced: list[tuple[exp.Expression, str]] = []
    for window in (w for p in projections for w in p.find_all(exp.Window)):
        if any(window == seen for seen, _ in replaced):
            continue
        keys = []
        for e in window.args.get("partition_by") or []:
            if isinstance(e, exp.Column):
                keys.append(scope[(e.table.lower(), e.name.lower())])
            else:
                keys.append(fresh("part"))
                pre.append((keys[-1], render(e, scope)))
        spec = window.copy()
        spec.set("partition_by", [exp.column(k, quoted=True) for k in keys])
        name = fresh(window.this.sql_name().lower() if isinstance(window.this, exp.Func) else "window")
        groups.setdefault(tuple(keys), []).append((name, render(spec, scope)))
        replaced.append((window, name))
    if pre:
        node = Project(node, tuple((c, q(c)) for c in node.columns) + tuple(pre))
    for keys, calls in groups.items():
        node = Window(node, keys, tuple(calls))

    def replace(e: exp.Expression) -> exp.Expression:
        found = next((name for seen, name in replaced if isinstance(e, exp.Window) and e == seen), None)
        return exp.column(found, quoted=True) if found else e

    return node, [p.transform(replace) for p in projections]


def _output_position(expr: exp.Expression, query: exp.Expression, outputs: tuple[str, ...]) -> int | None:
    """Which output column an ORDER BY expression names: by position (``ORDER BY 2``), by
    alias, or by repeating a SELECT expression; None for anything else."""
    if isinstance(expr, exp.Literal) and not expr.is_string:
        return int(expr.this) - 1
    if isinstance(expr, exp.Column) and not expr.table:
        lowered = [o.lower() for o in outputs]
        if expr.name.lower() in lowered:
            return lowered.index(expr.name.lower())
    if isinstance(query, exp.Select):
        return next((i for i, p in enumerate(query.expressions) if p.unalias() == expr), None)
    return None
