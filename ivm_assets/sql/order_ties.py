"""order_ties: every order a result depends on made total, so that ties have one answer.

SQL leaves open which of several tied rows ``ORDER BY … LIMIT`` keeps, which row number
ROW_NUMBER gives each row of a tie, and so what LAG and LEAD see and which rows a ROWS
frame holds. A maintained view must give one answer, the one a recompute gives, so
ivm_assets breaks ties the same way everywhere:

- ``ORDER BY … LIMIT`` (with or without OFFSET): then by every output column, by position,
  ascending (NULLs first);
- ROW_NUMBER, LAG, LEAD and functions over a ROWS frame: then by every column the SELECT
  list references, in order of first appearance, ascending (NULLs first). Rows equal in all
  of those are interchangeable: whichever comes first, the output rows are the same (the
  window sees only those columns: :mod:`~ivm_assets.sql.prune_columns` projects the others,
  a join's keys say, away below it, so such rows are one row there too).

- the same functions in a SELECT with GROUP BY (they run over its groups): then by every
  GROUP BY expression, which together tell the groups apart (without GROUP BY there is one).

RANK, DENSE_RANK and RANGE frames (the default frame with ORDER BY) give tied rows the same
value.
The rewritten query is what the engine maintains, what a full recompute runs and what the
correctness oracle compares with; it is one of the answers SQL allows for the original.

Example:
    >>> import sqlglot
    >>> order_ties(sqlglot.parse_one("SELECT a, b FROM t ORDER BY a DESC LIMIT 3", read="spark")).sql("spark")
    'SELECT a, b FROM t ORDER BY a DESC, 1, 2 LIMIT 3'
"""

from __future__ import annotations

from sqlglot import exp

# Window functions whose value for a row depends on where it lands among its ties.
ORDER_DEPENDENT = (exp.RowNumber, exp.Lag, exp.Lead)


def order_ties(statement: exp.Expression) -> exp.Expression:
    """``statement`` (qualified: stars expanded) with its tie-breaking sort keys appended."""
    statement = statement.copy()
    for node in list(statement.find_all(exp.Select, exp.SetOperation)):
        if node.args.get("limit") is not None and node.args.get("order") is not None:
            order = node.args["order"]
            for i in range(1, len(node.named_selects) + 1):
                order.append("expressions", exp.Ordered(this=exp.Literal.number(i), nulls_first=True))
    for window in list(statement.find_all(exp.Window)):
        if needs_total_order(window):
            _break_window_ties(window)
    return statement


def needs_total_order(window: exp.Window) -> bool:
    """Whether the function's value depends on the order among rows with equal sort keys."""
    spec = window.args.get("spec")
    rows_frame = spec is not None and str(spec.args.get("kind") or "").upper() == "ROWS"
    return isinstance(window.this, ORDER_DEPENDENT) or (rows_frame and window.args.get("order") is not None)


def _break_window_ties(window: exp.Window) -> None:
    select = window.find_ancestor(exp.Select)
    if select is None:
        return
    group = select.args.get("group")
    if group is not None:
        breakers = list(group.expressions)
    elif any(not isinstance(a.parent, exp.Window) for p in select.expressions for a in p.find_all(exp.AggFunc)):
        return  # one group: no ties
    else:
        breakers = _referenced_columns(select)
    order = window.args.get("order")
    if order is None:
        order = exp.Order(expressions=[])
        window.set("order", order)
    present = {o.this for o in order.expressions}
    for column in breakers:
        if column not in present:
            present.add(column)
            order.append("expressions", exp.Ordered(this=column.copy(), nulls_first=True))


def _referenced_columns(select: exp.Select) -> list[exp.Column]:
    """The distinct columns the SELECT list references, in order of first appearance."""
    seen: list[exp.Column] = []
    for projection in select.expressions:
        for column in projection.find_all(exp.Column):
            if column.table and column not in seen:
                seen.append(column)
    return seen
