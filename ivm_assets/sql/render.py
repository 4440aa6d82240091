"""Spark SQL text of a lowered expression: its qualified columns (``alias.column``) replaced by
the internal names of the plan's columns, through a lowering scope that maps
``(alias, column)`` (lower case) to them.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from ivm_assets.sql.dialect import DIALECT


def render(node: exp.Expression, scope: Mapping[tuple[str, str], str]) -> str:
    """Spark SQL text of ``node`` with every qualified column replaced by its internal name."""

    def swap(e: exp.Expression) -> exp.Expression:
        if isinstance(e, exp.Column) and e.table:
            return exp.column(scope[(e.table.lower(), e.name.lower())], quoted=True)
        return e

    return node.copy().transform(swap).sql(dialect=DIALECT)
