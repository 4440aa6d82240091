"""Consolidation written once (ivm_assets.state.consolidate): Spark, DuckDB and Arrow give
the same rows and types on adversarial change sets, and those rows are the rule's."""

from __future__ import annotations

import random
import struct
from datetime import date, datetime, timezone
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ivm_assets.spark.arrow import to_arrow, to_spark
from ivm_assets.state import consolidate
from ivm_assets.zset import WEIGHT


def _double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _nans(t: pa.DataType) -> pa.Array:
    """NaNs of different bits: quiet, negative, with a payload, signalling."""
    if t == pa.float32():
        return pa.array([0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7F800001], pa.uint32()).view(pa.float32())
    return pa.array([_double(b) for b in (0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000001, 0x7FF0000000000001)])


BIG = 10**38 - 1
# Per column: its type and the values drawn from (NULL everywhere). Floats get their NaN
# variants in _variant; −0.0 is a value of its own.
POOLS: dict[str, tuple[pa.DataType, list]] = {
    "i": (pa.int64(), [None, 0, -1, 2**63 - 1, -(2**63)]),
    "n": (pa.int32(), [None, 7, -(2**31)]),
    "s": (pa.string(), [None, "a", "a ", " a", "", "ß"]),
    "b": (pa.binary(), [None, b"", b"\x00", b"\x00 "]),
    "t": (pa.bool_(), [None, True, False]),
    "d": (pa.float64(), [None, 0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e308, -5e-324]),
    "f": (pa.float32(), [None, 0.0, -0.0, float("nan"), float("inf"), float("-inf"), 3.25]),
    "dec": (pa.decimal128(38, 0), [None, Decimal(BIG), Decimal(-BIG), Decimal(0)]),
    "frac": (pa.decimal128(38, 37), [None, Decimal("9." + "9" * 37), Decimal("-0." + "0" * 36 + "1")]),
    "ts": (pa.timestamp("us", tz="UTC"), [None, datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc), datetime(1900, 1, 1, tzinfo=timezone.utc)]),
    "ntz": (pa.timestamp("us"), [None, datetime(1969, 12, 31, 23, 59, 59, 999999), datetime(2038, 1, 19, 3, 14, 8)]),
    "day": (pa.date32(), [None, date(1969, 12, 31), date(1583, 1, 1), date(1, 1, 1)]),
}
WEIGHTS = [1, -1, 2, -3, 2**31, -(2**31), 3_000_000_000, -3_000_000_000]


def _variant(rng: random.Random, t: pa.DataType, value):
    """A value equal to ``value`` under the rule, possibly of other bits."""
    if value is None or not pa.types.is_floating(t):
        return value
    if value != value:
        return rng.choice(_nans(t).to_pylist())
    return value


def _zset(seed: int, *, base_rows: int = 40, rows: int = 600) -> pa.Table:
    """Rows drawn from ``base_rows`` distinct ones, float values in equal variants, random
    weights; a draw of one of the first quarter of the base rows, or every fourth draw, is
    followed by its opposite (in another variant), which cancels it."""
    rng = random.Random(seed)
    base = [{c: rng.choice(values) for c, (_, values) in POOLS.items()} for _ in range(base_rows)]
    out: list[dict] = []
    while len(out) < rows:
        i, w = rng.randrange(base_rows), rng.choice(WEIGHTS)
        row = base[i]
        pairs = [w, -w] if i < base_rows // 4 or rng.random() < 0.25 else [w]
        for weight in pairs:
            out.append({**{c: _variant(rng, POOLS[c][0], v) for c, v in row.items()}, WEIGHT: weight})
    return _table(out)


def _table(rows: list[dict]) -> pa.Table:
    columns = {c: pa.array([r[c] for r in rows], t) for c, (t, _) in POOLS.items() if c in rows[0]}
    return pa.table({**columns, WEIGHT: pa.array([r[WEIGHT] for r in rows], pa.int64())})


def _in_spark(spark, table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    return to_arrow(consolidate.in_spark(to_spark(spark, table), columns))


def _in_duckdb(table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    con = duckdb.connect(config={"threads": 1})
    # Not the session's UTC: DuckDB's TIMESTAMP WITH TIME ZONE comes back in it, and the
    # output must still carry the input's type and instants.
    con.execute("SET TimeZone = 'America/New_York'")
    try:
        return consolidate.in_duckdb(con, table, columns)
    finally:
        con.close()


def _in_arrow(table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    done = consolidate.in_arrow(table, columns)
    assert done is not None
    return done


def _bits(table: pa.Table) -> pa.Table:
    """``table`` with floats as their bits (exact comparison, NaN included), sorted."""
    columns = [
        c.combine_chunks().view(pa.int64() if c.type == pa.float64() else pa.int32()) if pa.types.is_floating(c.type) else c
        for c in table.columns
    ]
    bits = pa.table(columns, names=table.column_names)
    return bits.take(pc.sort_indices(bits, sort_keys=[(c, "ascending") for c in bits.column_names]))


def _types(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in schema]


def _all_agree(spark, table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    results = {
        "spark": _in_spark(spark, table, columns),
        "duckdb": _in_duckdb(table, columns),
        "arrow": _in_arrow(table, columns),
    }
    expected_types = _types(consolidate.output_schema(table.schema, columns))
    for name, result in results.items():
        assert _types(result.schema) == expected_types, name
    reference = _bits(results["spark"])
    for name in ("duckdb", "arrow"):
        assert _bits(results[name]).equals(reference), f"{name} differs from Spark:\n{results[name]}\n{results['spark']}"
    return results["spark"]


def test_every_implementation_gives_the_same_rows_and_types(spark):
    table = _zset(seed=25)
    columns = tuple(c for c in table.column_names if c != WEIGHT)
    done = _all_agree(spark, table, columns)
    assert 0 < done.num_rows <= 30
    assert pc.all(pc.not_equal(done.column(WEIGHT), 0)).as_py()


def test_the_rule_by_hand(spark):
    """−0.0 and 0.0 are different rows (each keeps its sign); NaNs of any bits are one
    canonical NaN; NULL equals NULL; 'a' and 'a ' stay apart; weights past 2^31 sum as BIGINT."""
    nans = _nans(pa.float64()).to_pylist()
    rows = [
        (-0.0, "a", 2**31), (0.0, "a", 2**31), (-0.0, "a", 2**31), (0.0, "a", -(2**31)),
        (nans[1], None, 1), (nans[2], None, 1), (nans[3], None, -1),
        (None, "a ", 3_000_000_000), (None, "a ", -3_000_000_000),
        (float("-inf"), "a", 5), (float("inf"), "a", -5),
    ]
    table = pa.table({
        "d": pa.array([r[0] for r in rows], pa.float64()),
        "s": pa.array([r[1] for r in rows], pa.string()),
        WEIGHT: pa.array([r[2] for r in rows], pa.int64()),
    })
    done = _all_agree(spark, table, ("d", "s"))
    expected = pa.table({
        "d": pa.array([-0.0, nans[0], float("-inf"), float("inf")]),
        "s": ["a", None, "a", "a"],
        WEIGHT: pa.array([2**32, 1, 5, -5], pa.int64()),
    })
    assert _bits(done).equals(_bits(expected))


def test_no_columns_sum_every_weight_into_one_row(spark):
    one = pa.table({"k": pa.array([1, 2, 3], pa.int64()), WEIGHT: pa.array([1, 2, -1], pa.int64())})
    assert _all_agree(spark, one.select([WEIGHT]), ()).to_pylist() == [{WEIGHT: 2}]
    gone = pa.table({WEIGHT: pa.array([4, -4], pa.int64())})
    assert _all_agree(spark, gone, ()).num_rows == 0


def test_an_empty_change_set(spark):
    empty = _zset(seed=1).slice(0, 0)
    assert _all_agree(spark, empty, tuple(empty.column_names[:-1])).num_rows == 0


def test_a_weight_sum_past_bigint_is_refused_not_wrapped():
    """Arrow would wrap it: the driver leaves it to Spark (which raises under ANSI); DuckDB
    raises."""
    table = pa.table({"k": pa.array([1, 1], pa.int64()), WEIGHT: pa.array([2**62, 2**62], pa.int64())})
    assert consolidate.in_arrow(table, ("k",)) is None
    with pytest.raises(duckdb.Error):
        _in_duckdb(table, ("k",))


def test_arrow_leaves_nested_types_to_spark():
    table = pa.table({"xs": pa.array([[1.0], [-0.0]]), WEIGHT: pa.array([1, 1], pa.int64())})
    assert consolidate.in_arrow(table, ("xs",)) is None
