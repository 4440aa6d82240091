"""Arrow helpers the in-process rules share: quoting for DuckDB, casts to a state's types,
rows with NULL keys set apart."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.local.sql_types import arrow_type, common_type
from ivm_assets.local.untranslatable import Untranslatable


def cast_columns(table: pa.Table, schema: pa.Schema, names: list[str]) -> pa.Table:
    """``table``'s ``names`` typed as the state table's columns of those names (a value that
    does not fit is Spark's overflow: the epoch goes to Spark, which reports it)."""
    try:
        return table.select(names).cast(pa.schema([schema.field(n) for n in names]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise Untranslatable(f"a value does not fit its state column ({exc})") from exc


def check_key_types(left: pa.Table, right: pa.Table, pairs, what: str) -> None:
    """Refuse (:class:`Untranslatable`) key pairs (left column, right column) whose values
    are not of one family: Spark compares those through implicit casts DuckDB does not
    mirror. ``what`` names the pairs in the message."""
    for a, b in pairs:
        common_type([arrow_type(left.schema.field(a).type), arrow_type(right.schema.field(b).type)], f"{what} {a} = {b}")


def split_null_keys(table: pa.Table, keys: tuple[str, ...]) -> tuple[pa.Table, pa.Table]:
    """``table`` as (its rows whose keys are all present, its rows with a NULL key)."""
    present = pa.array([True] * table.num_rows, pa.bool_())
    for k in keys:
        present = pc.and_(present, pc.is_valid(table.column(k)))
    return table.filter(present), table.filter(pc.invert(present))

