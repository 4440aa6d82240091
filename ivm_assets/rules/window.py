"""The window operator's rule on changes, written once for both engines (its derivation is
:mod:`ivm_assets.operators.window`'s module doc).

The epoch binds ``delta``, the input's change (consolidated), and ``old``, the stored input
rows of the partitions it touches (when there are any).
"""

from __future__ import annotations

from ivm_assets.errors import UnrepeatableRows
from ivm_assets.rules import rel
from ivm_assets.zset import WEIGHT


def rule(columns: tuple[str, ...], calls: tuple[tuple[str, str], ...], present: set[str]) -> rel.Rel:
    """Δout = W(X_new(P)) − W(X_old(P)), X_new(P) = X_old(P) + ΔX, P the touched partitions.

    Rows are read as they are, zeros signed: each row shows its own value, as in Spark. W(X_old)
    must be what was emitted, and −0.0 ties with 0.0 (Spark may give either the first place,
    or have MIN pick either), so an epoch whose touched partitions already hold a −0.0 fails
    with :class:`~ivm_assets.errors.UnrepeatableRows` and the view is recomputed. A −0.0 the
    change brings is emitted as W gives it; an epoch that touches its partition later
    recomputes the view."""
    delta = rel.Input("delta", columns + (WEIGHT,))
    old = None
    if "old" in present:
        message = f"{UnrepeatableRows.MARKER}: a window over a partition holding -0.0 in a FLOAT or DOUBLE column;"
        old = rel.NoNegativeZero(rel.Input("old", columns + (WEIGHT,)), message)
    new = delta if old is None else rel.Consolidate(rel.Union_((old, delta)), columns)
    out: rel.Rel = rel.Window(new, columns, calls, 1)
    if old is not None:
        out = rel.Union_((out, rel.Window(old, columns, calls, -1)))
    return rel.Consolidate(out, columns + tuple(name for name, _ in calls))
