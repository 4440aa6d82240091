"""Window functions that DuckDB computes exactly as Spark does, for
:mod:`ivm_assets.render.duckdb.expressions` (whose translator takes this visit).

The window operator computes its functions over the rows of the partitions a change touches
(each row repeated by its weight), in either engine. In DuckDB, rendered here:

- ROW_NUMBER, RANK, DENSE_RANK;
- LAG and LEAD by a literal offset ≥ 0, with an optional default of the value's family,
  typed as the value (Spark casts the default to it; one that does not fit fails in
  DuckDB, and Spark decides). A row's value is copied, never computed: a DOUBLE's −0.0
  and NaN come through as they are, in both;
- COUNT, SUM and AVG of integers and of DECIMALs of up to 18 digits (AVG: see
  :func:`_average`), MIN and MAX, over the default frame or an explicit one: ``ROWS BETWEEN`` bounds of UNBOUNDED, n PRECEDING, CURRENT ROW
  or n FOLLOWING (n a literal), ``RANGE BETWEEN`` bounds of UNBOUNDED or CURRENT ROW (the
  same rows in both: a RANGE offset compares values, whose types Spark and DuckDB treat
  differently, and is refused). SUM over a frame of exact values has one answer whatever
  order the engine adds them in, so DuckDB's segment trees give Spark's sliding sums.

Partitions and orders by columns of the value families, Spark's NULL order written out
(ASC: NULLS FIRST); by floats refused (Spark normalises −0.0 and NaN there). Ties are
already broken by the view's lowering (``sql/order_ties.py``), and copies of one row are
alike in every column, so a ROWS frame or a LAG sees the same values in both engines.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_assets.ir.decimal_rules import average_type, sum_type
from ivm_assets.duckdb_names import string_literal
from ivm_assets.render.duckdb.division import decimal_divide
from ivm_assets.ir.types import DOUBLE, VALUE_FAMILIES, SqlType
from ivm_assets.render.duckdb.sql_types import duckdb_type
from ivm_assets.errors import Untranslatable

_RANKING = {"RowNumber": "row_number()", "Rank": "rank()", "DenseRank": "dense_rank()"}
_BIGINT = SqlType("number", 19, 0, integer=True)


def _literal_count(node: exp.Expression | None, what: str, default: int) -> int:
    """A frame bound's or offset's literal count of rows (``default`` when absent)."""
    if node is None:
        return default
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    raise Untranslatable(f"{what} that is not a literal count of rows ({node.sql('spark')})")


def _bound(value, side: str | None, kind: str, what: str) -> str:
    """One bound of a frame, as both engines read it."""
    if value == "UNBOUNDED":
        return f"UNBOUNDED {side}"
    if value == "CURRENT ROW":
        return "CURRENT ROW"
    if kind != "ROWS":
        raise Untranslatable(f"a RANGE frame with an offset ({what})")
    return f"{_literal_count(value, f'a frame bound ({what})', 0)} {side}"


class WindowFunctions:
    """The visit of a window function, taken by the translator of
    :mod:`ivm_assets.render.duckdb.expressions`, whose ``_operand`` and ``__call__`` it uses."""

    def visit_Window(self, node: exp.Window) -> tuple[str, SqlType]:
        func, what = node.this, node.sql("spark")
        name = type(func).__name__
        frame = self._frame(node.args.get("spec"), what)
        if frame and (name in _RANKING or isinstance(func, (exp.Lag, exp.Lead))):
            raise Untranslatable(f"a frame on {name.upper()} ({what})")
        # FLOAT/DOUBLE too: DuckDB partitions and orders them as Spark does (−0.0 with 0.0,
        # peers in an order; every NaN with every NaN, above every other value).
        keyed = (*VALUE_FAMILIES, "double", "float")
        partition = [self._operand(c, keyed, "PARTITION BY")[0] for c in node.args.get("partition_by") or []]
        order = []
        for o in (node.args.get("order").expressions if node.args.get("order") else []):
            x, _ = self._operand(o.this, keyed, "a window's ORDER BY")
            desc = bool(o.args.get("desc"))
            first = o.args.get("nulls_first")
            first = (not desc) if first is None else bool(first)
            order.append(f"{x} {'DESC' if desc else 'ASC'} NULLS {'FIRST' if first else 'LAST'}")
        over = " ".join(x for x in (
            f"PARTITION BY {', '.join(partition)}" if partition else "", f"ORDER BY {', '.join(order)}" if order else "", frame) if x)

        def window(call: str) -> str:
            return f"{call} OVER ({over})"

        if name in _RANKING:
            return f"({window(_RANKING[name])})", SqlType("number", 10, 0, integer=True)
        if isinstance(func, (exp.Lag, exp.Lead)):
            call, t = self._shifted(func, what)
            to = duckdb_type(t)
            return (f"(CAST({window(call)} AS {to}))" if to else f"({window(call)})"), t
        if isinstance(func, exp.Count) and isinstance(func.this, exp.Star):
            return f"({window('count(*)')})", _BIGINT
        if not isinstance(func, (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)) or func.expressions or func.args.get("distinct"):
            raise Untranslatable(f"no in-process rule for the window function {func.sql('spark')}")
        x, xt = self._operand(func.this, VALUE_FAMILIES, f"{name.upper()} OVER")
        if isinstance(func, exp.Count):
            return f"({window(f'count({x})')})", _BIGINT
        if isinstance(func, exp.Sum):  # Spark's type; past its range an error in DuckDB (the epoch goes to Spark)
            t = _window_sum_type(xt)
            return f"(CAST({window(f'sum({x})')} AS {duckdb_type(t)}))", t
        if isinstance(func, exp.Avg):
            return _average(window, x, xt, what)
        return f"({window(f'{name.lower()}({x})')})", xt

    def _frame(self, spec: exp.WindowSpec | None, what: str) -> str:
        """An explicit frame as DuckDB SQL ('' for none)."""
        if spec is None:
            return ""
        kind = str(spec.args.get("kind") or "").upper()
        if kind not in ("ROWS", "RANGE"):
            raise Untranslatable(f"a {kind or 'window'} frame ({what})")
        start = _bound(spec.args.get("start"), spec.args.get("start_side"), kind, what)
        end = _bound(spec.args.get("end"), spec.args.get("end_side"), kind, what)
        return f"{kind} BETWEEN {start} AND {end}"

    def _shifted(self, func: exp.Lag | exp.Lead, what: str) -> tuple[str, SqlType]:
        """LAG/LEAD: the value ``offset`` rows before/after in the partition, else the default."""
        x, xt = self._operand(func.this, (*VALUE_FAMILIES, "double"), type(func).__name__.upper())
        offset = _literal_count(func.args.get("offset"), f"{type(func).__name__.upper()} by an offset", 1)
        args = [x, str(offset)]
        default = func.args.get("default")
        if default is not None:
            d, dt = self(default)
            if dt.family not in (xt.family, "null") or (xt.family == "number" and xt.integer and not dt.integer):
                raise Untranslatable(f"a default of another type than the value ({what}: Spark casts it)")
            args.append(f"CAST({d} AS {duckdb_type(xt)})" if duckdb_type(xt) else d)
        return f"{type(func).__name__.lower()}({', '.join(args)})", xt


def _average(window, x: str, xt: SqlType, what: str) -> tuple[str, SqlType]:
    """AVG OVER, as Spark computes it over the frame: NULL over no value; over DECIMAL(p, s)
    of up to 18 digits the exact sum divided by the count, rounded into DECIMAL(p + 4, s + 4)
    as the aggregate's AVG is (:func:`~ivm_assets.render.duckdb.division.decimal_divide`); over
    integers a DOUBLE, which Spark sums row by row in double precision: the same value only
    while every partial sum is exact, so a frame whose absolute values reach 2^53 together
    fails in DuckDB, and Spark decides."""
    count = window(f"count({x})")
    if xt.integer:
        exact = f"{window(f'sum(abs(CAST({x} AS HUGEINT)))')} < {2**53}"
        quotient = f"CAST({window(f'sum({x})')} AS DOUBLE) / CAST({count} AS DOUBLE)"
        message = string_literal(f"{what}: a sum of integers that DOUBLE may not hold exactly (Spark decides)")
        return f"(CASE WHEN {count} = 0 THEN NULL WHEN {exact} THEN {quotient} ELSE error({message}) END)", DOUBLE
    if xt.family != "number":
        raise Untranslatable(f"AVG OVER a {xt.family}")
    _window_sum_type(xt)  # the same bound on the running sum as SUM OVER's
    precision, scale = average_type(*xt.as_decimal())
    return f"(CASE WHEN {count} = 0 THEN NULL ELSE {decimal_divide(window(f'sum({x})'), count, precision, scale)} END)", SqlType(
        "number", precision, scale)


def _window_sum_type(xt: SqlType) -> SqlType:
    """SUM OVER's type, as Spark gives it: BIGINT over integers, DECIMAL(p + 10, s) over
    DECIMAL(p, s). Only up to 18 digits: Spark's running sum is bounded by the result type on
    the way (past it NULL, or an error under ANSI), DuckDB's only by 38 digits, and an order
    that passes p + 10 digits between two rows must be out of reach (10¹⁰ rows of the
    largest values)."""
    if xt.integer:
        return _BIGINT
    if xt.family != "number":
        raise Untranslatable(f"SUM OVER a {xt.family}")
    precision, scale = xt.as_decimal()
    if precision > 18:
        raise Untranslatable(f"SUM OVER a number of {precision} digits")
    return SqlType("number", *sum_type(precision, scale))
