"""The IR (:mod:`ivm_assets.ir.rel`) rendered as one DuckDB query over Arrow tables.

Column types are followed through the tree (as Arrow types) for the two places that need
them: consolidation normalises float columns, and a view's own expression is translated by
:mod:`ivm_assets.render.duckdb.expressions`, which types every column it reads.
"""

from __future__ import annotations

import pyarrow as pa

from ivm_assets.ir import decimal_rules
from ivm_assets.duckdb_names import q, string_literal
from ivm_assets.render.duckdb.division import decimal_divide
from ivm_assets.render.duckdb.expressions import translate
from ivm_assets.ir.types import SqlType, arrow_type
from ivm_assets.errors import Untranslatable
from ivm_assets.ir import rel
from ivm_assets.state import consolidate
from ivm_assets.zset import WEIGHT

_BINARY = {"+", "-", "*", "/", ">", "<", "<=", "=", "<>"}
_BOOLEAN = (">", "<", "<=", "=", "<>", "and", "or", "not", "is_null", "is_nan", "is_infinite", "negative_zero")
_BIGINT = pa.int64()
# Spark's simple type names, as DuckDB and Arrow name them.
_TYPES = {
    "tinyint": ("TINYINT", pa.int8()), "smallint": ("SMALLINT", pa.int16()), "int": ("INTEGER", pa.int32()),
    "bigint": ("BIGINT", _BIGINT), "float": ("FLOAT", pa.float32()), "double": ("DOUBLE", pa.float64()),
    "string": ("VARCHAR", pa.string()), "boolean": ("BOOLEAN", pa.bool_()), "date": ("DATE", pa.date32()),
    "timestamp": ("TIMESTAMPTZ", pa.timestamp("us", tz="UTC")), "timestamp_ntz": ("TIMESTAMP", pa.timestamp("us")),
}


def _spark_type(name: str) -> tuple[str, pa.DataType]:
    """A Spark type's simple name (:class:`~ivm_assets.ir.rel.Cast`) as DuckDB's and Arrow's."""
    if name in _TYPES:
        return _TYPES[name]
    found = decimal_rules.parse_type(name)
    if found is None:
        raise Untranslatable(f"no DuckDB type for Spark's {name}")
    precision, scale = found
    return f"DECIMAL({precision}, {scale})", pa.decimal128(precision, scale)


def expr(e: rel.Expr, types: dict[str, pa.DataType]) -> str:
    if isinstance(e, rel.Null):
        return "NULL"  # typed by the epoch's cast of the rule's output to the operator's schema
    if isinstance(e, rel.Col):
        return q(e.name)
    if isinstance(e, rel.Lit):
        return f"CAST({int(e.value)} AS BIGINT)"
    if isinstance(e, rel.Case):
        otherwise = "" if e.otherwise is None else f" ELSE {expr(e.otherwise, types)}"
        return f"(CASE WHEN {expr(e.when, types)} THEN {expr(e.then, types)}{otherwise} END)"
    if isinstance(e, rel.Cast):
        return f"CAST({expr(e.value, types)} AS {_spark_type(e.to)[0]})"
    if isinstance(e, rel.Fail):
        return f"(CASE WHEN {expr(e.when, types)} THEN error({string_literal(e.message)}) ELSE {expr(e.value, types)} END)"
    if isinstance(e, rel.Average):
        # Too wide a quotient raises (ANSI or not): the epoch runs in Spark, which gives its NULL or error.
        return decimal_divide(expr(e.total, types), expr(e.count, types), e.precision, e.scale)
    if isinstance(e, rel.SparkSql):
        return _view_sql(e.text, types)[0]
    args = [expr(a, types) for a in e.args]
    if e.op in _BINARY:
        return f"({args[0]} {e.op} {args[1]})"
    if e.op in ("and", "or"):
        return f"({args[0]} {e.op.upper()} {args[1]})"
    if e.op == "not":
        return f"(NOT {args[0]})"
    if e.op == "neg":
        return f"(-{args[0]})"
    if e.op == "is_null":
        return f"({args[0]} IS NULL)"
    if e.op == "is_nan":
        return f"isnan({args[0]})"
    if e.op == "is_infinite":
        return f"isinf({args[0]})"
    if e.op == "negative_zero":
        return f"coalesce({args[0]} = 0 AND signbit({args[0]}), false)"
    if e.op in ("coalesce", "greatest", "least"):
        return f"{e.op}({', '.join(args)})"
    raise ValueError(f"no DuckDB rendering of {e.op!r}")


def _view_sql(text: str, types: dict[str, pa.DataType], *, condition: bool = False) -> tuple[str, SqlType]:
    """A view's own expression (:class:`~ivm_assets.ir.rel.SparkSql`) as DuckDB SQL, and
    its type, by :mod:`ivm_assets.render.duckdb.expressions`; a ``condition`` must be a boolean."""
    value, t = translate(text, {n: arrow_type(ty) for n, ty in types.items() if n != WEIGHT})
    if condition:
        if t.family not in ("boolean", "null"):
            raise Untranslatable(f"a condition of type {t.family}")
    elif t.family == "number" and not t.integer and not value.startswith('"'):
        # Typed as Spark types it: a later division rounds to a scale derived from it.
        value = f"CAST({value} AS DECIMAL({t.precision}, {t.scale}))"
    return value, t


def _condition(e: rel.Expr, types: dict[str, pa.DataType]) -> str:
    return _view_sql(e.text, types, condition=True)[0] if isinstance(e, rel.SparkSql) else expr(e, types)


def _arrow(t: SqlType) -> pa.DataType:
    """An Arrow type for a view expression's :class:`SqlType`, as far as the renderer needs it
    (floats are normalised, NULLs typed): its width for numbers, its family otherwise."""
    if t.family == "number":
        return _INTEGERS.get(t.precision, _BIGINT) if t.integer else pa.decimal128(t.precision, t.scale)
    if t.family == "timestamp" and t.wall:
        return pa.timestamp("us")
    return _FAMILY_TYPES.get(t.family, pa.string())


_INTEGERS = {3: pa.int8(), 5: pa.int16(), 10: pa.int32(), 20: _BIGINT}
_FAMILY_TYPES = {"double": pa.float64(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "boolean": pa.bool_(), "null": pa.null()}


def _type(e: rel.Expr, types: dict[str, pa.DataType], schemas: dict[str, pa.Schema]) -> pa.DataType:
    """The Arrow type of an IR expression: a column's own, a cast's, AVG's; every other
    computed value the rules make is a BIGINT (weights, counts), a DOUBLE or a boolean."""
    if isinstance(e, rel.Col):
        return types[e.name]
    if isinstance(e, rel.SparkSql):
        value, t = _view_sql(e.text, types)
        named = value[1:-1].replace('""', '"') if value.startswith('"') and value.endswith('"') else None
        return types[named] if named in types else _arrow(t)
    if isinstance(e, rel.Null):
        return next(s.field(e.like).type for s in schemas.values() if e.like in s.names) if e.like else pa.null()
    if isinstance(e, rel.Cast):
        return _spark_type(e.to)[1]
    if isinstance(e, rel.Average):
        return pa.decimal128(e.precision, e.scale)
    if isinstance(e, rel.Fail):
        return _type(e.value, types, schemas)
    if isinstance(e, rel.Case):
        return _type(e.then, types, schemas)
    if isinstance(e, rel.Call) and e.op in _BOOLEAN:
        return pa.bool_()
    if isinstance(e, rel.Call) and e.op == "/":
        return pa.float64()
    if isinstance(e, rel.Call) and e.op in ("neg", "coalesce", "greatest", "least"):
        return _type(e.args[0], types, schemas)
    return _BIGINT


def render(node: rel.Rel, schemas: dict[str, pa.Schema]) -> tuple[str, dict[str, pa.DataType]]:
    """``node`` as a DuckDB query over the tables registered under its inputs' names
    (``schemas``), and its columns' Arrow types."""
    if isinstance(node, rel.Input):
        schema = schemas[node.name]
        return f"SELECT {', '.join(q(c) for c in node.columns)} FROM {q(node.name)}", {c: schema.field(c).type for c in node.columns}
    if isinstance(node, rel.Select):
        sql, types = render(node.input, schemas)
        where = f" WHERE {_condition(node.where, types)}" if node.where is not None else ""
        items = ", ".join(f"{expr(e, types)} AS {q(name)}" for name, e in node.items)
        return f"SELECT {items} FROM ({sql}){where}", {name: _type(e, types, schemas) for name, e in node.items}
    if isinstance(node, rel.Join):
        (left, lt), (right, rt) = render(node.left, schemas), render(node.right, schemas)
        both = {**lt, **rt}
        equal = "IS NOT DISTINCT FROM" if node.null_safe else "="
        conditions = [f"l.{q(a)} {equal} r.{q(b)}" for a, b in node.on]
        if node.residual is not None:
            conditions.append(_condition(node.residual, both))
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
    if isinstance(node, rel.Reduce):
        sql, types = render(node.input, schemas)
        # Keys grouped as Spark groups them, and output in normal form (DuckDB would keep the
        # first −0.0 or NaN it saw of a group); signed, as consolidation does (NaNs one, each
        # float key grouped by its sign bit too).
        normal_key = consolidate.nan_normal_sql if node.signed else consolidate.normal_sql
        normal = [normal_key(q(c), t) for c, t in types.items() if c in node.keys]
        rest = [q(c) for c in types if c not in node.keys]
        sql = f"SELECT {', '.join([*normal, *rest])} FROM ({sql})"
        keys = ", ".join(q(k) for k in node.keys)
        calls = ", ".join(f"{func}({expr(e, types)}) AS {q(name)}" for name, func, e in node.calls)
        signs = [f"signbit({q(k)})" for k in node.keys if node.signed and pa.types.is_floating(types[k])]
        grouped = f" GROUP BY {', '.join([keys, *signs])}" if keys else ""
        out = {k: types[k] for k in node.keys} | {name: _reduced(func, _type(e, types, schemas)) for name, func, e in node.calls}
        return f"SELECT {', '.join(x for x in (keys, calls) if x)} FROM ({sql}){grouped}", out
    if isinstance(node, rel.Repeat):
        sql, types = render(node.input, schemas)
        w = q(WEIGHT)
        # As Spark's explode(array_repeat(…)) in render_spark.
        signed = f"SELECT *, CAST(CASE WHEN {w} > 0 THEN 1 ELSE -1 END AS BIGINT) AS {q(node.sign)}, unnest(range(abs({w}))) AS __rep FROM ({sql})"
        out = {c: t for c, t in types.items() if c != WEIGHT} | {node.sign: _BIGINT}
        return f"SELECT * EXCLUDE (__rep, {w}) FROM ({signed})", out
    if isinstance(node, rel.Ordered):
        sql, types = render(node.input, schemas)
        over = _over(node.partition, node.order, types)
        frames = {
            "running_sum": ("sum", "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"),
            "max_after": ("max", "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"),
        }
        calls, out = [], dict(types)
        for name, func, e in node.calls:
            agg, frame = frames[func]
            t = _type(e, types, schemas)  # a running sum keeps its argument's type, as Spark's of a BIGINT
            calls.append(f"CAST({agg}({expr(e, types)}) OVER ({over} {frame}) AS {_duck_type(t)}) AS {q(name)}")
            out[name] = t
        return f"SELECT *, {', '.join(calls)} FROM ({sql})", out
    if isinstance(node, rel.First):
        sql, types = render(node.input, schemas)
        if not node.partition:
            return f"SELECT * FROM ({sql}) ORDER BY {_order(node.order, types)} LIMIT {int(node.n)}", types
        ranked = f"SELECT *, row_number() OVER ({_over(node.partition, node.order, types)}) AS __n FROM ({sql})"
        return f"SELECT * EXCLUDE (__n) FROM ({ranked}) WHERE __n <= {int(node.n)}", types
    if isinstance(node, rel.Places):
        sql, types = render(node.input, schemas)
        first, last = expr(node.from_, types), expr(node.to, types)
        places = f"CAST(unnest(range(({first}) + 1, ({last}) + 1)) AS INTEGER) AS {q(node.name)}"  # Spark's sequence of INTs
        return f"SELECT *, {places} FROM ({sql}) WHERE {last} > {first}", types | {node.name: pa.int32()}
    if isinstance(node, rel.Unsigned):
        sql, types = render(node.input, schemas)
        floats = {c for c, t in types.items() if pa.types.is_floating(t) and (node.only is None or c in node.only)}
        if not floats:
            return sql, types
        items = [f"CASE WHEN {q(c)} = 0 THEN abs({q(c)}) ELSE {q(c)} END AS {q(c)}" if c in floats else q(c) for c in types]
        return f"SELECT {', '.join(items)} FROM ({sql})", types
    if isinstance(node, rel.NoNegativeZero):
        sql, types = render(node.input, schemas)
        floats = [c for c, t in types.items() if pa.types.is_floating(t)]
        if not floats:
            return sql, types
        found = " OR ".join(expr(rel.Call("negative_zero", (rel.Col(c),)), types) for c in floats)
        w = q(WEIGHT)
        return f"SELECT * REPLACE (CASE WHEN {found} THEN error({string_literal(node.message)}) ELSE {w} END AS {w}) FROM ({sql})", types
    if isinstance(node, rel.Window):
        copies = rel.positive_copies(node.input)
        repeated, types = render(copies, schemas)
        w = q(WEIGHT)
        column_types = {n: t for n, t in types.items() if n != copies.sign}
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


def _order(order: tuple[rel.SortKey, ...], types: dict[str, pa.DataType]) -> str:
    """``order`` as an ORDER BY list, then each FLOAT/DOUBLE key's sign of zero
    (:data:`~ivm_assets.ir.rel.SortKey`; DuckDB's sort finds −0.0 and 0.0 tied)."""
    keys = [f"{q(c)} {'DESC' if desc else 'ASC'} NULLS {'FIRST' if first else 'LAST'}" for c, desc, first in order]
    # −0.0 (true) first where its key ascends.
    signs = {c: f"coalesce({q(c)} = 0 AND signbit({q(c)}), false) {'ASC' if desc else 'DESC'}"
             for c, desc, _ in reversed(order) if pa.types.is_floating(types[c])}
    return ", ".join(keys + [signs[c] for c in dict.fromkeys(c for c, _, _ in order) if c in signs])


def _over(partition: tuple[str, ...], order: tuple[rel.SortKey, ...], types: dict[str, pa.DataType]) -> str:
    by = f"PARTITION BY {', '.join(q(k) for k in partition)} " if partition else ""
    return f"{by}ORDER BY {_order(order, types)}"


def _duck_type(t: pa.DataType) -> str:
    """DuckDB's name of the integer Arrow types a running sum is of."""
    names = {arrow: duck for duck, arrow in _TYPES.values() if pa.types.is_integer(arrow)}
    if t not in names:
        raise Untranslatable(f"a running sum of {t}")
    return names[t]


def _reduced(func: str, arg: pa.DataType) -> pa.DataType:
    """The Arrow type of a :class:`~ivm_assets.ir.rel.Reduce` call, as far as the renderer
    needs it (float normalisation, typed NULLs): a sum of integers is wider in DuckDB, which
    a rule's cast then narrows."""
    if func == "count":
        return _BIGINT
    if func == "sum" and pa.types.is_decimal(arg):
        return pa.decimal128(38, arg.scale)
    if func == "sum" and pa.types.is_integer(arg):
        return _BIGINT
    return arg
