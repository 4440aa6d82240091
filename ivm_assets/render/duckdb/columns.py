"""Arrow helpers the in-process rules share: quoting for DuckDB, casts to a state's types,
rows with NULL keys set apart."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.ir.types import arrow_type, common_type
from ivm_assets.errors import Untranslatable
from ivm_assets.spark.arrow import spark_type
from ivm_assets.state.layout import hash_type


def cast_columns(table: pa.Table, schema: pa.Schema | None, names: list[str]) -> pa.Table:
    """``table``'s ``names`` typed as the state table's columns of those names (a value that
    does not fit is Spark's overflow: the epoch goes to Spark, which reports it); as they
    are when ``schema`` is None (a full epoch makes the table)."""
    if schema is None:
        return table.select(names)
    try:
        return table.select(names).cast(pa.schema([schema.field(n) for n in names]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise Untranslatable(f"a value does not fit its state column ({exc})") from exc


def check_key_types(left: pa.Table, right: pa.Table, pairs, what: str, *, full: bool = False) -> None:
    """Refuse (:class:`Untranslatable`) key pairs (left column, right column) whose values
    are not of one family: Spark compares those through implicit casts DuckDB does not
    mirror. ``what`` names the pairs in the message.

    In a ``full`` epoch (a small build, which lays out the state tables) also pairs that
    Spark hashes as their pair's common type (an INT beside a DECIMAL: as DOUBLE) while each
    side alone would be hashed otherwise (the INT as BIGINT): each side's table is laid out
    by its own type (``local.epoch.own_hashes``), and Spark's build uses the pair's."""
    for a, b in pairs:
        lt, rt = left.schema.field(a).type, right.schema.field(b).type
        families = {arrow_type(lt).family, arrow_type(rt).family}
        if "float" in families and len(families - {"null"}) > 1:
            # Spark compares them as DOUBLEs and hashes the pair's common type; the state
            # lookups on the driver match each side as its own type.
            raise Untranslatable(f"{what} {a} = {b} compares a FLOAT with a {' and '.join(sorted(families - {'float'}))}")
        common_type([arrow_type(lt), arrow_type(rt)], f"{what} {a} = {b}")
        if full:
            ls, rs = spark_type(lt), spark_type(rt)
            if not hash_type(ls, rs) == hash_type(ls) == hash_type(rs):
                raise Untranslatable(f"{what} {a} = {b} is typed {ls.simpleString()} and {rs.simpleString()}: Spark lays out its state")


def split_null_keys(table: pa.Table, keys: tuple[str, ...]) -> tuple[pa.Table, pa.Table]:
    """``table`` as (its rows whose keys are all present, its rows with a NULL key)."""
    if all(table.column(k).null_count == 0 for k in keys):
        return table, table.slice(0, 0)  # no copy of a build's millions of rows
    present = pc.is_valid(table.column(keys[0]))
    for k in keys[1:]:
        present = pc.and_(present, pc.is_valid(table.column(k)))
    return table.filter(present), table.filter(pc.invert(present))

