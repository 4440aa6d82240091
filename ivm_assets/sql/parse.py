"""Parsing a view's SQL (Spark dialect) and turning parser/analyzer errors into SqlErrors.

Example:
    >>> stmt = parse_view("v", "SELECT a FROM t JOIN u ON t.k = u.k", file=None)
    >>> [name for name, *_ in referenced_tables(stmt, "SELECT a FROM t JOIN u ON t.k = u.k")]
    ['t', 'u']
"""

from __future__ import annotations

import hashlib
import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ivm_assets.errors import SqlError
from ivm_assets.sql.constructs import locate
from ivm_assets.sql.dialect import DIALECT


def parse_view(view: str, text: str, *, file: str | None) -> exp.Expression:
    """The single statement in ``text``, or a SqlError pointing at the syntax error."""
    try:
        statements = [s for s in sqlglot.parse(text, read=DIALECT) if s is not None]
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        near, col = first.get("highlight") or "", first.get("col")
        if col is not None and near and "\n" not in near:
            col = max(1, col - len(near) + 1)  # sqlglot gives the token's last column; point at its first
        raise SqlError(
            f"malformed SQL{f' near `{near}`' if near else ''}: {_readable(first.get('description') or str(exc))}",
            view=view,
            file=file,
            line=first.get("line"),
            col=col,
            hint="a view is one SELECT statement in Spark SQL",
        ) from exc
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        found = "nothing" if not statements else ", ".join(type(s).__name__.upper() for s in statements)
        raise SqlError(
            f"expected exactly one SELECT query, found {found}",
            view=view,
            file=file,
            hint="put one query per .sql file; the file name is the view name",
        )
    return statements[0]


def _readable(description: str) -> str:
    """sqlglot's parse message without its Python internals (class and token reprs)."""
    description = re.sub(r"<class '(?:[\w.]*\.)?(\w+)'>", r"\1", description)
    return re.sub(r"<Token token_type: TokenType\.SENTINEL[^>]*>", "the end of the query", description)


def referenced_tables(statement: exp.Expression, text: str) -> list[tuple[str, int | None, int | None]]:
    """(name, line, col) of every table the query reads that is not one of its own CTEs."""
    cte_names = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    seen: dict[str, tuple[str, int | None, int | None]] = {}
    for table in statement.find_all(exp.Table):
        name = table.name
        if not name or name.lower() in cte_names or name in seen:
            continue
        line, col = locate(table, text)
        seen[name] = (name, line, col)
    return list(seen.values())


def normalized_sql(statement: exp.Expression) -> str:
    """The statement re-rendered canonically (whitespace, case and comments don't matter)."""
    return statement.sql(dialect=DIALECT, normalize=True, comments=False)


def sql_hash(statement: exp.Expression) -> str:
    return hashlib.sha256(normalized_sql(statement).encode()).hexdigest()[:16]


def spark_error(exc: Exception, *, view: str, file: str | None, text: str) -> SqlError:
    """A SqlError from a Spark AnalysisException/ParseException, located in ``text``."""
    line = col = None
    contexts = exc.getQueryContext() if hasattr(exc, "getQueryContext") else []
    if contexts:
        start = contexts[0].startIndex()
        if start is not None and start >= 0:
            line = text.count("\n", 0, start) + 1
            col = start - (text.rfind("\n", 0, start) + 1) + 1
    message = str(exc).split("\n")[0]
    condition = exc.getCondition() if hasattr(exc, "getCondition") else None
    hints = {
        "UNRESOLVED_COLUMN.WITH_SUGGESTION": "check the column name against the table's schema",
        "UNRESOLVED_COLUMN.WITHOUT_SUGGESTION": "check the column name against the table's schema",
        "AMBIGUOUS_REFERENCE": "qualify the column with its table alias, e.g. o.id",
        "TABLE_OR_VIEW_NOT_FOUND": "declare the table under `sources:` in ivm.yaml or add views/<name>.sql",
    }
    return SqlError(message, view=view, file=file, line=line, col=col, hint=hints.get(condition or "", None))
