"""DuckDB identifiers and string literals, quoted once for both layers that write DuckDB SQL:
the state layer's consolidation and the in-process epochs."""

from __future__ import annotations


def q(name: str) -> str:
    """``name`` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def string_literal(text: str) -> str:
    """``text`` as a DuckDB string literal (no escapes: a quote is doubled, a backslash is itself)."""
    return "'" + text.replace("'", "''") + "'"
