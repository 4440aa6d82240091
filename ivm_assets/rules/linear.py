"""The linear operators' rules on changes, written once for both engines: scan, filter,
project and UNION ALL distribute over the addition of z-sets, so each applies itself to the
change set row by row and keeps the weights (Δout = op(Δin)). This holds only for
deterministic expressions, which :mod:`ivm_assets.sql.constructs` guarantees.

Each rule reads the change of its input bound as ``change`` (UNION ALL: ``change<i>``).
"""

from __future__ import annotations

from ivm_assets.rules import rel
from ivm_assets.rules.rel import Col, SparkSql
from ivm_assets.zset import WEIGHT

_WEIGHT = ((WEIGHT, Col(WEIGHT)),)


def scan(source_columns: tuple[str, ...], columns: tuple[str, ...]) -> rel.Rel:
    """Δout = Δsource, its columns renamed."""
    change = rel.Input("change", tuple(dict.fromkeys(source_columns)) + (WEIGHT,))  # a column may be read twice
    return rel.Select(change, tuple((c, Col(s)) for s, c in zip(source_columns, columns)) + _WEIGHT)


def filter_(columns: tuple[str, ...], predicate: str) -> rel.Rel:
    """Δout = σ(Δin): the rows where the view's ``predicate`` is true, weights unchanged."""
    change = rel.Input("change", columns + (WEIGHT,))
    return rel.Select(change, tuple((c, Col(c)) for c in columns) + _WEIGHT, SparkSql(predicate))


def project(columns: tuple[str, ...], exprs: tuple[tuple[str, str], ...]) -> rel.Rel:
    """Δout = π(Δin): the view's expressions per row, weights unchanged."""
    change = rel.Input("change", columns + (WEIGHT,))
    return rel.Select(change, tuple((name, SparkSql(sql)) for name, sql in exprs) + _WEIGHT)


def union_all(inputs: tuple[tuple[str, ...], ...], columns: tuple[str, ...]) -> rel.Rel:
    """Δout = Σ Δin_i, the inputs' columns matched by position."""
    parts = tuple(
        rel.Select(rel.Input(f"change{i}", names + (WEIGHT,)), tuple((c, Col(n)) for n, c in zip(names, columns)) + _WEIGHT)
        for i, names in enumerate(inputs)
    )
    return parts[0] if len(parts) == 1 else rel.Union_(parts)
