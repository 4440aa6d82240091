"""The window operator's rule on changes, written once for both engines (its derivation is
:mod:`ivm_assets.operators.window`'s module doc).

The epoch binds ``delta``, the input's change (consolidated), and ``old``, the stored input
rows of the partitions it touches (when there are any).
"""

from __future__ import annotations

from ivm_assets.rules import rel
from ivm_assets.zset import WEIGHT


def rule(columns: tuple[str, ...], calls: tuple[tuple[str, str], ...], present: set[str]) -> rel.Rel:
    """Δout = W(X_new(P)) − W(X_old(P)), X_new(P) = X_old(P) + ΔX, P the touched partitions.
    Rows are read with zeros unsigned (:class:`~ivm_assets.rules.rel.Unsigned`): rows tied
    but for a zero's sign would take their places in either order, and W(X_old) recomputed
    must be what was emitted."""
    delta = rel.Unsigned(rel.Input("delta", columns + (WEIGHT,)))
    old = rel.Unsigned(rel.Input("old", columns + (WEIGHT,))) if "old" in present else None
    new = delta if old is None else rel.Consolidate(rel.Union_((old, delta)), columns)
    out: rel.Rel = rel.Window(new, columns, calls, 1)
    if old is not None:
        out = rel.Union_((out, rel.Window(old, columns, calls, -1)))
    return rel.Consolidate(out, columns + tuple(name for name, _ in calls))
