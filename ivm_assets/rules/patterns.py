"""Patterns several rules share, written once."""

from __future__ import annotations

from ivm_assets.ir import rel
from ivm_assets.ir.rel import Col, Lit, keep
from ivm_assets.zset import WEIGHT


def key_name(key: str) -> str:
    """A key of the counts :func:`before_after` makes, named apart from the columns of the
    input the counts are joined to."""
    return f"__c_{key}"


def before_after(change: rel.Rel, old: rel.Rel | None, keys: tuple[str, ...], before: str, after: str) -> rel.Rel:
    """Per key of ``change`` or ``old`` (a z-set's current rows for the keys a change
    touches): the total weight of its rows before (column ``before``) and after (``after``)
    the change, the keys renamed by :func:`key_name`."""
    rows: rel.Rel = keep(change, keys, **{before: Lit(0), "__d": Col(WEIGHT)})
    if old is not None:
        rows = rel.Union_((rows, keep(old, keys, **{before: Col(WEIGHT), "__d": Lit(0)})))
    summed = rel.group_sum(rows, keys, ((before, Col(before)), ("__d", Col("__d"))))
    renamed = tuple((key_name(k), Col(k)) for k in keys)
    return rel.Select(summed, renamed + ((before, Col(before)), (after, rel.add(Col(before), Col("__d")))))
