"""Which SQL constructs a view uses that ivm_assets cannot maintain incrementally.

The check runs on the parsed (not yet qualified) statement, so every finding can point at
the line and column of the construct in the user's file. A finding never makes a view wrong:
under ``refresh: auto`` the view is refreshed by full recompute with the finding as reason;
under ``refresh: incremental`` it is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

# Spark built-ins whose result changes from one evaluation to the next.
NONDETERMINISTIC = {
    "rand", "randn", "random", "uuid", "shuffle", "now", "current_timestamp", "current_date",
    "current_time", "localtimestamp", "current_timezone", "monotonically_increasing_id",
    "spark_partition_id", "input_file_name", "input_file_block_start", "input_file_block_length",
    "randstr", "uniform", "try_reflect", "reflect", "java_method", "unix_timestamp",
}
# The same built-ins where sqlglot parses them into a node of their own (the names above
# then never appear as an anonymous call).
_NONDETERMINISTIC_NODES = (
    exp.Rand, exp.Randn, exp.Uuid, exp.Shuffle, exp.Randstr, exp.Uniform, exp.CurrentTimestamp,
    exp.CurrentDate, exp.CurrentTime, exp.CurrentDatetime,
)


def nondeterministic(node: exp.Expression) -> bool:
    """Whether ``node`` is a call of a built-in whose result changes between evaluations."""
    return isinstance(node, _NONDETERMINISTIC_NODES) or (
        isinstance(node, exp.Anonymous) and str(node.this).lower() in NONDETERMINISTIC
    )


SUPPORTED_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
SUPPORTED_WINDOW_FUNCTIONS = (exp.RowNumber, exp.Rank, exp.DenseRank, exp.Lag, exp.Lead, *SUPPORTED_AGGREGATES)


@dataclass(frozen=True)
class Finding:
    """One construct that forces a full recompute, and where it is."""

    construct: str
    line: int | None
    col: int | None

    def describe(self) -> str:
        where = f" at line {self.line}, column {self.col}" if self.line is not None else ""
        return f"{self.construct}{where}"


def find_non_incremental(statement: exp.Expression, text: str) -> list[Finding]:
    """Every construct in ``statement`` that is not maintained incrementally, in text order."""
    findings: list[Finding] = []
    seen: set[tuple[str, int | None, int | None]] = set()

    def add(construct: str, node: exp.Expression, keyword: str | None = None) -> None:
        line, col = locate(node, text, keyword)
        if (construct, line, col) not in seen:
            seen.add((construct, line, col))
            findings.append(Finding(construct, line, col))

    for node in statement.walk():
        _check(node, add)
    return sorted(findings, key=lambda f: (f.line or 0, f.col or 0))


def _check(node: exp.Expression, add) -> None:  # noqa: C901 - one flat table of rules
    if isinstance(node, exp.Window):
        _check_window(node, add)
    elif isinstance(node, exp.Join):
        if node.args.get("method"):
            add(f"{node.args['method'].upper()} JOIN", node, r"\bnatural\b")
    elif isinstance(node, exp.Exists) and not _where_conjunct(node):
        add("EXISTS (subquery) other than a condition of WHERE", node, r"\bexists\b")
    elif isinstance(node, exp.In) and node.args.get("query") and not _where_conjunct(node):
        add("IN (subquery) other than a condition of WHERE", node, r"\bin\s*\(\s*select\b")
    elif isinstance(node, exp.In) and node.args.get("query") and isinstance(node.this, exp.Tuple) and _negated(node):
        add("NOT IN (subquery) with several columns", node, r"\bnot\s+in\b")
    elif isinstance(node, exp.Subquery) and not isinstance(
        node.parent, (exp.From, exp.Join, exp.With, exp.CTE, exp.SetOperation, exp.In)
    ):
        problem = _scalar_subquery_problem(node)
        if problem:
            add(f"scalar subquery {problem}", node, r"\(\s*select\b")
    elif isinstance(node, exp.Limit):
        if not (node.parent and node.parent.args.get("order")):
            add("LIMIT without ORDER BY (which rows it keeps is not defined)", node, r"\blimit\b")
        elif not _count(node):
            add("LIMIT by other than a constant count", node, r"\blimit\b")
    elif isinstance(node, exp.Offset):
        parent = node.parent
        if not (parent and parent.args.get("order") and parent.args.get("limit")) or not _count(node):
            add("OFFSET without ORDER BY … LIMIT or by other than a constant count", node, r"\boffset\b")
    elif nondeterministic(node):
        name = node.sql_name() if not isinstance(node, exp.Anonymous) else str(node.this)
        add(f"non-deterministic function {name.upper()}", node, rf"\b{re.escape(name)}\b")
    elif isinstance(node, exp.AggFunc):
        _check_aggregate(node, add)
    elif isinstance(node, exp.Group) and any(node.args.get(k) for k in ("grouping_sets", "cube", "rollup")):
        add("GROUPING SETS / ROLLUP / CUBE", node, r"\bgrouping\s+sets\b|\brollup\b|\bcube\b")
    elif isinstance(node, exp.With) and node.args.get("recursive"):
        add("WITH RECURSIVE", node, r"\brecursive\b")
    elif isinstance(node, (exp.Lateral, exp.Unnest, exp.Explode, exp.Posexplode, exp.Inline)):
        add("generator / LATERAL VIEW", node, r"\blateral\b|\bexplode\b|\binline\b|\bposexplode\b")
    elif isinstance(node, (exp.Pivot, exp.TableSample, exp.Values)):
        add(type(node).__name__.upper(), node, rf"\b{type(node).__name__}\b")


def _check_window(node: exp.Window, add) -> None:
    if node.arg_key == "windows":
        return  # a WINDOW clause's definition: checked at its uses (see sql/named_windows.py)
    function = node.this
    if not isinstance(function, SUPPORTED_WINDOW_FUNCTIONS) or isinstance(function.this, exp.Distinct):
        name = function.sql_name() if isinstance(function, exp.Func) else type(function).__name__
        add(f"window function {name.upper()}", node, r"\bover\b")


def _count(node: exp.Limit | exp.Offset) -> bool:
    """Whether LIMIT / OFFSET takes a constant, non-negative integer."""
    value = node.expression
    return isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()


def _where_conjunct(node: exp.Expression) -> bool:
    """Whether ``node`` (or NOT ``node``) is one of the AND-ed conditions of a WHERE: the
    place where [NOT] EXISTS and [NOT] IN (subquery) become semi and anti joins."""
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if isinstance(parent, exp.Not):
        parent = parent.parent
    while isinstance(parent, (exp.Paren, exp.And)):
        parent = parent.parent
    return isinstance(parent, exp.Where) and isinstance(parent.parent, exp.Select)


def _negated(node: exp.Expression) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return isinstance(parent, exp.Not)


def _scalar_subquery_problem(node: exp.Subquery) -> str | None:
    """Why a scalar subquery has no rule (None when it has one): it must be one aggregate
    without GROUP BY or HAVING (exactly one row, or one per correlation group) in WHERE,
    SELECT or HAVING. Its correlation (equalities only) is checked by the lowering."""
    query = node.this
    if not isinstance(query, exp.Select) or len(query.expressions) != 1:
        return "other than one SELECT of one value"
    if query.args.get("group") or query.args.get("having") or not _own_aggregates(query.expressions[0]):
        return "that is not one aggregate without GROUP BY or HAVING (it could return no row or several)"
    clause = node
    while clause.parent is not None and not isinstance(clause.parent, exp.Select):
        clause = clause.parent
    if clause.arg_key not in ("where", "expressions", "having"):
        return "outside WHERE, SELECT and HAVING"
    return None


def _own_aggregates(node: exp.Expression) -> bool:
    """Whether ``node`` calls an aggregate itself (not in a window or a subquery of its own)."""
    for agg in node.find_all(exp.AggFunc):
        if agg is node:
            return True
        parent = agg.parent
        while parent is not None and parent is not node and not isinstance(parent, exp.Query):
            parent = parent.parent
        if not isinstance(agg.parent, exp.Window) and (parent is node or parent is None):
            return True
    return False


def _check_aggregate(node: exp.AggFunc, add) -> None:
    if isinstance(node.parent, exp.Window):
        return  # reported as a window function
    if not isinstance(node, SUPPORTED_AGGREGATES):
        name = node.sql_name()
        add(f"aggregate function {name.upper()}", node, rf"\b{re.escape(name)}\b")
        return
    if isinstance(node.this, exp.Distinct):
        if not isinstance(node, (exp.Count, exp.Min, exp.Max)):
            add(f"{node.sql_name().upper()}(DISTINCT …)", node, rf"\b{node.sql_name()}\b")
        elif len(node.this.expressions) != 1:
            add("COUNT(DISTINCT over several columns)", node, r"\bcount\b")
    if node.args.get("expressions") and not isinstance(node, exp.Count):
        add(f"{node.sql_name().upper()} with several arguments", node, rf"\b{node.sql_name()}\b")


def locate(node: exp.Expression, text: str, keyword: str | None = None) -> tuple[int | None, int | None]:
    """Line and column (1-based) of ``node`` in ``text``.

    sqlglot records positions on identifiers and some functions; keywords such as LIMIT or
    OVER carry none, so those are found by searching the text from the node's first known
    position (or the start) for ``keyword``.
    """
    start = _first_offset(node)
    if keyword:
        matches = [m.start() for m in re.finditer(keyword, _code_only(text), re.IGNORECASE)]
        if matches:
            # The occurrence nearest the node's own position: JOIN keywords precede the
            # table name, OVER follows the function, LIMIT has no position at all.
            anchor = start if start is not None else 0
            return _line_col(text, min(matches, key=lambda m: abs(m - anchor)))
    if start is not None:
        return _line_col(text, start)
    return None, None


_NOT_CODE = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.DOTALL)


def _code_only(text: str) -> str:
    """``text`` with comments and string literals blanked (offsets kept), for keyword search."""
    return _NOT_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _first_offset(node: exp.Expression) -> int | None:
    offsets = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    return min(offsets) if offsets else None


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col
