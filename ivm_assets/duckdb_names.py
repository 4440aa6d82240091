"""DuckDB identifiers and string literals, quoted once for both layers that write DuckDB SQL
(the state layer's consolidation and the in-process epochs), and the one way both run a
query over Arrow tables (:func:`arrow_query`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# The statement :func:`arrow_query` runs, compiled once; its own names cannot clash with a
# table's (the IR's input names have no leading underscores).
_QUERY = compile("__ivm_out = __ivm_con.sql(__ivm_query).to_arrow_table()", "<ivm_assets.arrow_query>", "exec")


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
    table per statement, a tenth of a small epoch's statements (benchmarks/README.md).
    """
    namespace = {"__ivm_con": con, "__ivm_query": query, **tables}
    exec(_QUERY, namespace)  # noqa: S102 - a fixed statement; the tables are its only variables
    return namespace["__ivm_out"]
