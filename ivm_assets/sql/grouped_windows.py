"""Rewrite rule: a SELECT with window functions over its own GROUP BY or aggregates becomes
windows over a subquery that does the grouping.

SQL evaluates a SELECT's window functions after its GROUP BY and HAVING, over the groups;
so the grouping can move into a subquery of its own and the windows run over its rows, which
the window operator then maintains like any other input. The subquery outputs each GROUP
BY expression and each aggregate call once; above it, the SELECT list, QUALIFY and ORDER BY
read those columns instead. DISTINCT, ORDER BY, LIMIT and OFFSET stay with the outer query.

Example (on a qualified statement):
    >>> import sqlglot
    >>> s = sqlglot.parse_one(
    ...     "SELECT t.g AS g, RANK() OVER (ORDER BY SUM(t.x) DESC) AS r FROM t AS t GROUP BY t.g", read="spark")
    >>> split_grouped_windows(s).sql("spark")
    'SELECT _ivm_grouped._k0 AS g, RANK() OVER (ORDER BY _ivm_grouped._a1 DESC) AS r FROM (SELECT t.g AS _k0, SUM(t.x) AS _a1 FROM t AS t GROUP BY t.g) AS _ivm_grouped'
"""

from __future__ import annotations

from sqlglot import exp

from ivm_assets.errors import LoweringError

GROUPED = "_ivm_grouped"
# The FROM clause's key among a SELECT's arguments (sqlglot renamed it from "from").
_FROM = "from_" if "from_" in exp.Select.arg_types else "from"


def split_grouped_windows(select: exp.Select) -> exp.Select:
    """``select`` as windows over a subquery holding its grouping (see the module doc).

    Raises :class:`LoweringError` when the SELECT list holds a subquery (its aggregates
    and columns would need sorting out by scope) or a column that is neither grouped nor
    aggregated.
    """
    group = select.args.get("group")
    keys = [g.copy() for g in group.expressions] if group else []
    names: list[tuple[exp.Expression, str]] = []
    inner: list[exp.Expression] = []

    def name_of(e: exp.Expression, prefix: str) -> str:
        found = next((n for seen, n in names if seen == e), None)
        if found is None:
            found = f"{prefix}{len(names)}"
            names.append((e.copy(), found))
            inner.append(exp.alias_(e.copy(), found))
        return found

    for key in keys:
        name_of(key, "_k")

    def replace(e: exp.Expression) -> exp.Expression:
        if isinstance(e, exp.AggFunc) and not isinstance(e.parent, exp.Window):
            return exp.column(name_of(e, "_a"), table=GROUPED)
        if any(e == k for k in keys):
            return exp.column(name_of(e, "_k"), table=GROUPED)
        return e

    for part in [*select.expressions, select.args.get("qualify"), select.args.get("order")]:
        if part is not None and part.find(exp.Subquery, exp.Exists):
            raise LoweringError("No lowering rule for a subquery in a SELECT with windows over GROUP BY", part)
    # The outer query keeps SELECT list, QUALIFY, ORDER BY, LIMIT, OFFSET and DISTINCT; the
    # grouping subquery FROM, joins, WHERE, GROUP BY and HAVING.
    outer = select.copy()
    for arg in ("joins", "where", "group", "having"):
        outer.set(arg, None)
    outer.set("expressions", [p.transform(replace) for p in select.expressions])
    for arg in ("qualify", "order"):
        if select.args.get(arg) is not None:
            outer.set(arg, select.args[arg].transform(replace))
    for column in outer.find_all(exp.Column):
        if column.table and column.table != GROUPED:
            raise LoweringError(f"column {column.sql('spark')} is neither grouped nor aggregated", column)
    grouping = select.copy()
    for arg in ("qualify", "order", "limit", "offset", "distinct"):
        grouping.set(arg, None)
    grouping.set("expressions", inner)
    outer.set(_FROM, exp.From(this=exp.Subquery(this=grouping, alias=exp.TableAlias(this=exp.to_identifier(GROUPED)))))
    return outer
