"""Rewrite rule: named windows (``OVER w … WINDOW w AS (…)``) written out at each use.

A use may refine its window (``OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)``) and a
definition may build on another (``WINDOW w AS (PARTITION BY k), w2 AS (w ORDER BY v)``):
what the use leaves out comes from the definition. The rest of the engine then sees
ordinary windows only.

Example:
    >>> import sqlglot
    >>> s = sqlglot.parse_one("SELECT RANK() OVER w AS r FROM t WINDOW w AS (PARTITION BY k ORDER BY v)", read="spark")
    >>> inline_named_windows(s).sql("spark")
    'SELECT RANK() OVER (PARTITION BY k ORDER BY v) AS r FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from ivm_assets.errors import LoweringError

_PARTS = ("partition_by", "order", "spec")


def inline_named_windows(statement: exp.Expression) -> exp.Expression:
    """``statement`` with every SELECT's named windows written out where they are used.

    Raises :class:`LoweringError` for a window name no WINDOW clause defines.
    """
    statement = statement.copy()
    for select in list(statement.find_all(exp.Select)):
        defined = {w.this.name.lower(): w for w in select.args.get("windows") or []}
        if not defined:
            continue
        for window in list(select.find_all(exp.Window)):
            if window.arg_key == "windows" or window.find_ancestor(exp.Select) is not select:
                continue
            _fill(window, defined, set())
        select.set("windows", None)
    return statement


def _fill(window: exp.Window, defined: dict[str, exp.Window], seen: set[str]) -> None:
    """Complete ``window`` from the definition its ``alias`` names, recursively."""
    name = window.args.get("alias")
    if name is None:
        return
    key = name.name.lower()
    if key not in defined or key in seen:
        raise LoweringError(f"window {name.name} is not defined by a WINDOW clause of its SELECT", window)
    base = defined[key].copy()
    _fill(base, defined, seen | {key})  # a definition building on another names it as a use does
    for part in _PARTS:
        if not window.args.get(part) and base.args.get(part):
            window.set(part, base.args[part])
    window.set("alias", None)

