"""The IR (:mod:`ivm_assets.rules.rel`) rendered as one DuckDB query over Arrow tables.

Column types are followed through the tree (as Arrow types) for the two places that need
them: consolidation normalises float columns, and a view's own expression is translated by
:mod:`ivm_assets.local.expressions`, which types every column it reads.
"""

from __future__ import annotations

import pyarrow as pa

from ivm_assets.local.columns import q
from ivm_assets.local.expressions import arrow_type, translate
from ivm_assets.rules import rel
from ivm_assets.state import consolidate
from ivm_assets.zset import WEIGHT

_BINARY = {"+", "-", "*", ">", "<=", "=", "<>"}
_BIGINT = pa.int64()


def expr(e: rel.Expr, types: dict[str, pa.DataType]) -> str:
    if isinstance(e, rel.Null):
        return "NULL"  # typed by the epoch's cast of the rule's output to the operator's schema
    if isinstance(e, rel.Col):
        return q(e.name)
    if isinstance(e, rel.Lit):
        return f"CAST({int(e.value)} AS BIGINT)"
    if isinstance(e, rel.Case):
        return f"(CASE WHEN {expr(e.when, types)} THEN {expr(e.then, types)} ELSE {expr(e.otherwise, types)} END)"
    if isinstance(e, rel.SparkSql):
        return translate(e.text, {n: arrow_type(t) for n, t in types.items() if n != WEIGHT})[0]
    args = [expr(a, types) for a in e.args]
    if e.op in _BINARY:
        return f"({args[0]} {e.op} {args[1]})"
    if e.op == "and":
        return f"({args[0]} AND {args[1]})"
    if e.op == "not":
        return f"(NOT {args[0]})"
    if e.op == "is_null":
        return f"({args[0]} IS NULL)"
    if e.op in ("coalesce", "greatest", "least"):
        return f"{e.op}({', '.join(args)})"
    raise ValueError(f"no DuckDB rendering of {e.op!r}")


def _type(e: rel.Expr, types: dict[str, pa.DataType], schemas: dict[str, pa.Schema]) -> pa.DataType:
    """The Arrow type of an IR expression: a column's own; every computed value the rules
    make is a BIGINT (weights, counts) or a boolean."""
    if isinstance(e, rel.Col):
        return types[e.name]
    if isinstance(e, rel.Null):
        return next(s.field(e.like).type for s in schemas.values() if e.like in s.names)
    if isinstance(e, rel.Call) and e.op in (">", "<=", "=", "<>", "and", "not", "is_null"):
        return pa.bool_()
    return _BIGINT


def render(node: rel.Rel, schemas: dict[str, pa.Schema]) -> tuple[str, dict[str, pa.DataType]]:
    """``node`` as a DuckDB query over the tables registered under its inputs' names
    (``schemas``), and its columns' Arrow types."""
    if isinstance(node, rel.Input):
        schema = schemas[node.name]
        return f"SELECT {', '.join(q(c) for c in node.columns)} FROM {q(node.name)}", {c: schema.field(c).type for c in node.columns}
    if isinstance(node, rel.Select):
        sql, types = render(node.input, schemas)
        where = f" WHERE {expr(node.where, types)}" if node.where is not None else ""
        items = ", ".join(f"{expr(e, types)} AS {q(name)}" for name, e in node.items)
        return f"SELECT {items} FROM ({sql}){where}", {name: _type(e, types, schemas) for name, e in node.items}
    if isinstance(node, rel.Join):
        (left, lt), (right, rt) = render(node.left, schemas), render(node.right, schemas)
        both = {**lt, **rt}
        conditions = [f"l.{q(a)} = r.{q(b)}" for a, b in node.on]
        if node.residual is not None:
            conditions.append(expr(node.residual, both))
        on = " AND ".join(conditions) or "TRUE"
        if node.kind in ("semi", "anti"):
            exists = f"{'NOT ' if node.kind == 'anti' else ''}EXISTS (SELECT 1 FROM ({right}) r WHERE {on})"
            return f"SELECT * FROM ({left}) l WHERE {exists}", lt
        kind = "JOIN" if node.kind == "inner" else "LEFT JOIN"
        return f"SELECT * FROM ({left}) l {kind} ({right}) r ON {on}", both
    if isinstance(node, rel.Union_):
        parts = [render(i, schemas) for i in node.inputs]
        names = list(parts[0][1])
        select = ", ".join(q(n) for n in names)
        return " UNION ALL ".join(f"SELECT {select} FROM ({sql})" for sql, _ in parts), parts[0][1]
    if isinstance(node, rel.GroupSum):
        sql, types = render(node.input, schemas)
        # Keys grouped as Spark groups them, and output in normal form (DuckDB would keep the
        # first −0.0 or NaN it saw of a group).
        normal = [consolidate.normal_sql(q(c), t) for c, t in types.items() if c in node.keys]
        rest = [q(c) for c in types if c not in node.keys]
        sql = f"SELECT {', '.join([*normal, *rest])} FROM ({sql})"
        keys = ", ".join(q(k) for k in node.keys)
        sums = ", ".join(f"CAST(sum({expr(e, types)}) AS BIGINT) AS {q(name)}" for name, e in node.sums)
        grouped = f" GROUP BY {keys}" if keys else ""
        out = {k: types[k] for k in node.keys} | {name: _BIGINT for name, _ in node.sums}
        return f"SELECT {', '.join(x for x in (keys, sums) if x)} FROM ({sql}){grouped}", out
    if isinstance(node, rel.Window):
        sql, types = render(node.input, schemas)
        w = q(WEIGHT)
        # Each row repeated as many times as its weight, as Spark's explode(array_repeat(…)).
        repeated = f"SELECT * EXCLUDE (__rep) FROM (SELECT *, unnest(range({w})) AS __rep FROM ({sql}) WHERE {w} > 0)"
        column_types = {n: t for n, t in types.items() if n != WEIGHT}
        calls = [(name, translate(text, {n: arrow_type(t) for n, t in column_types.items()})[0]) for name, text in node.calls]
        items = [*(q(c) for c in node.columns), *(f"{call} AS {q(name)}" for name, call in calls), f"CAST({node.sign} AS BIGINT) AS {w}"]
        # A call's type is what DuckDB gives it (the operator's consumers cast as their state
        # says); tracked as BIGINT, which only float normalisation would read.
        out = {c: types[c] for c in node.columns} | {name: _BIGINT for name, _ in node.calls} | {WEIGHT: _BIGINT}
        return f"SELECT {', '.join(items)} FROM ({repeated})", out
    sql, types = render(node.input, schemas)
    schema = pa.schema([(n, t) for n, t in types.items()])
    out = {c: types[c] for c in node.columns} | {WEIGHT: _BIGINT}
    return consolidate.duckdb_sql(node.columns, schema, f"({sql})"), out
