"""DuckDB identifiers and string literals, quoted once for both layers that write DuckDB SQL
(the state layer's consolidation and the in-process epochs), and the one way both run a
query over Arrow tables (:func:`arrow_query`)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from ivm_assets.recent import Recent

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# The statement :func:`arrow_query` runs, compiled once; its own names cannot clash with a
# table's (the IR's input names have no leading underscores). DuckDB 2 names a DB-API
# result's Arrow method ``to_arrow_table``, DuckDB 1 ``fetch_arrow_table``.
_QUERY = compile(
    "__ivm_result = __ivm_con.execute(__ivm_query)\n"
    "__ivm_out = (getattr(__ivm_result, 'to_arrow_table', None) or __ivm_result.fetch_arrow_table)()",
    "<ivm_assets.arrow_query>", "exec",
)


def q(name: str) -> str:
    """``name`` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def string_literal(text: str) -> str:
    """``text`` as a DuckDB string literal (no escapes: a quote is doubled, a backslash is itself)."""
    return "'" + text.replace("'", "''") + "'"


def arrow_query(con: duckdb.DuckDBPyConnection, query: str, tables: dict[str, pa.Table]) -> pa.Table:
    """``query`` run on ``con`` over ``tables``, each read under its name, as Arrow.

    The tables are found by DuckDB's replacement scan, which reads a name it does not know
    from the variables of the Python frame that runs the query: here a namespace holding
    just the tables. Registering and unregistering each table instead costs ~0.5 ms per
    table per statement, a tenth of a small epoch's statements (benchmarks/README.md in git history, 2026-11-27).

    The text is parsed once per process (:func:`_parsed`). Run as a DB-API statement, not as
    a relation (``con.sql``): a relation parses and binds
    the text once to describe it and again to run it, a third of the time of an epoch's
    statements, which plan more than they compute (q01's and q05's: 52 → 37 ms, 66 → 42 ms).
    """
    namespace = {"__ivm_con": con, "__ivm_query": _parsed(con, query), **tables}
    with warnings.catch_warnings():
        # DuckDB 2 advises con.sql(query).to_arrow_table(), which copies fewer rows; at the
        # sizes of an epoch's statements the second parse and bind cost more than the copy.
        # (The filters are the process's: two threads here at once can at worst let one
        # such warning through, or keep this filter after both.)
        warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)
        exec(_QUERY, namespace)  # noqa: S102 - a fixed statement; the tables are its only variables
    return namespace["__ivm_out"]


# Statements parsed, by their text, most recently used last. An epoch's rules render the
# same text at every epoch of a view (the inputs' names and types are the same), and
# DuckDB parses a statement of a few thousand characters in 2-4 ms, a quarter to a third
# of the statement (TPC-H q01's five: 35 -> 24 ms). A parsed statement holds syntax only:
# its tables are found and bound when it runs, so each run reads the tables it is given.
_PARSED: Recent[str, object] = Recent(512)


def _parsed(con: duckdb.DuckDBPyConnection, query: str) -> object:
    """``query`` parsed (a ``duckdb.Statement``), from the cache when it was parsed before;
    the text itself when it holds more than one statement."""
    found = _PARSED.get(query)
    if found is not None:
        return found
    statements = con.extract_statements(query)
    if len(statements) != 1:
        return query
    _PARSED.put(query, statements[0])
    return statements[0]
