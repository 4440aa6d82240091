"""State rows finished on the driver: the same rows Spark's null-safe match and latest-row
window give, or None where Arrow and Spark could disagree (consolidation on the driver:
tests/state/test_consolidate.py)."""

from __future__ import annotations

import collections
import random
import struct
from decimal import Decimal

import pyarrow as pa
import pytest

from ivm_assets.state import driver_rows


def _rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def test_matching_is_null_safe_on_every_key_column():
    state = pa.table({
        "a": pa.array([1, 1, 2, None, None, 3], pa.int64()),
        "b": pa.array(["x", "y", "x", "x", None, None]),
        "w": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
    })
    wanted = pa.table({"ka": pa.array([1, None, 3, 7], pa.int32()), "kb": pa.array(["y", None, None, "x"])})
    found = driver_rows.matching(state, ("a", "b"), wanted, ("ka", "kb"))
    # (1, y), (NULL, NULL) and (3, NULL) match; (1, x) shares only its first key, (NULL, x) only its second.
    assert _rows(found) == _rows(state.take([1, 4, 5]))


def test_float_keys_match_as_sparks_joins_match_them():
    """−0.0 meets 0.0 and a NaN meets a NaN of other bits; the rows keep their stored values."""
    nan_bits = pa.array([0x7FF8000000000001], pa.int64()).view(pa.float64())  # a NaN, not the canonical one
    stored = pa.table({"k": pa.concat_arrays([pa.array([0.0, -0.0, 2.5, None]), nan_bits]), "w": pa.array([1, 2, 3, 4, 5], pa.int64())})
    found = driver_rows.matching(stored, ("k",), pa.table({"k": pa.array([-0.0, float("nan")])}), ("k",))
    assert sorted(found.column("w").to_pylist()) == [1, 2, 5]
    assert str(found.filter(pa.compute.equal(found.column("w"), 2)).column("k")[0].as_py()) == "-0.0"
    latest = driver_rows.latest(
        pa.table({"k": pa.array([0.0, -0.0, float("nan")]), "__epoch": pa.array([1, 2, 3], pa.int64())}), ("k",), "__epoch"
    )
    assert sorted(latest.column("__epoch").to_pylist()) == [2, 3]


def test_matching_leaves_mixed_types_to_spark():
    ints = pa.table({"k": pa.array([1], pa.int64()), "w": pa.array([1], pa.int64())})
    decimals = pa.table({"k": pa.array([Decimal("1.0")], pa.decimal128(10, 1))})
    assert driver_rows.matching(ints, ("k",), decimals, ("k",)) is None


def test_integer_keys_match_double_keys_as_spark_compares_them(spark):
    """Spark compares a BIGINT with a DOUBLE as DOUBLEs: 2^53 + 1 rounds to 2^53 and meets
    it; −0.0 meets 0; the driver's match gives the rows Spark's null-safe match gives."""
    from ivm_assets.spark.arrow import to_arrow, to_spark

    ints = pa.table({"k": pa.array([0, 2**53, 2**53 + 1, 3, None, -(2**63)], pa.int64()), "w": pa.array(range(6), pa.int64())})
    doubles = pa.table({"d": pa.array([-0.0, float(2**53), None, float("nan"), -9.223372036854776e18])})
    found = driver_rows.matching(ints, ("k",), doubles, ("d",))
    left, right = to_spark(spark, ints), to_spark(spark, doubles)
    by_spark = to_arrow(left.join(right, left["k"].eqNullSafe(right["d"]), "left_semi"))
    assert _rows(found) == _rows(by_spark) == _rows(ints.take([0, 1, 2, 4, 5]))


def test_cancelled_nets_bitwise_identical_rows_floats_included():
    """A row deleted and inserted again unchanged cancels; −0.0 and 0.0 (and NaNs of other
    bits) are different stored values, so they stay apart: cancelling only what is
    certainly the same row is safe whatever the operators compare later."""
    nan = float("nan")
    rows = pa.table({
        "x": pa.array([1.5, 1.5, -0.0, 0.0, nan, nan, None, None]),
        "s": pa.array(["a", "a", "b", "b", "c", "c", None, None]),
        "w": pa.array([1, -1, 1, -1, 1, -1, 1, -1], pa.int64()),
    })
    left = driver_rows.cancelled(rows, ("x", "s"), "w")
    assert sorted((repr(r["x"]), r["w"]) for r in left.to_pylist()) == [("-0.0", 1), ("0.0", -1)]


def _bits(row: dict) -> tuple:
    """A row's values as bits: floats by their bytes, so −0.0 and 0.0 (and NaNs) differ."""
    return tuple(struct.pack("<d", v) if isinstance(v, float) else v for k, v in sorted(row.items()) if k != "w")


@pytest.mark.parametrize("seed", range(6))
def test_cancelled_nets_every_pair_that_cancels_and_keeps_every_row_sum(seed):
    """Random changes (a few keys, so deletions and insertions of the same row meet, floats
    with −0.0 and NaN, NULLs, duplicates of one sign): the rows' weights summed per bitwise
    row are unchanged, and no bitwise row is left both deleted and inserted. Only rows that
    can cancel are hashed, so this checks that the pre-selection misses none."""
    rng = random.Random(seed)
    n = 300
    rows = pa.table({
        "k": pa.array([rng.choice([1, 2, 3, None]) for _ in range(n)], pa.int64()),
        "x": pa.array([rng.choice([0.0, -0.0, float("nan"), 1.5, None]) for _ in range(n)], pa.float64()),
        "s": pa.array([rng.choice(["a", "b", None]) for _ in range(n)]),
        "w": pa.array([rng.choice([1, -1, 2, -2]) for _ in range(n)], pa.int64()),
    })
    before, after = collections.Counter(), collections.Counter()
    for row in rows.to_pylist():
        before[_bits(row)] += row["w"]
    signs = collections.defaultdict(set)
    for row in driver_rows.cancelled(rows, ("k", "x", "s"), "w").to_pylist():
        after[_bits(row)] += row["w"]
        signs[_bits(row)].add(row["w"] > 0)
    assert +before == +after and -before == -after
    assert all(len(s) == 1 for s in signs.values())


def test_cancelled_leaves_a_change_with_nothing_to_cancel_as_it_is():
    """A fact table's batch: new lines inserted, other lines deleted (the same quantities,
    other keys). Nothing cancels, and the rows come back as they were, the duplicate
    insertion included (consolidation is the operators' business)."""
    rows = pa.table({
        "order": pa.array([10, 11, 11, 3, 4], pa.int64()),
        "qty": pa.array([Decimal("1.00"), Decimal("2.00"), Decimal("2.00"), Decimal("1.00"), Decimal("2.00")], pa.decimal128(10, 2)),
        "w": pa.array([1, 1, 1, -1, -1], pa.int64()),
    })
    assert driver_rows.cancelled(rows, ("order", "qty"), "w").equals(rows)


@pytest.mark.parametrize("keys", [("k",), ()])
def test_latest_keeps_the_row_of_the_highest_epoch_per_key(keys):
    rows = pa.table({
        "k": pa.array([1, 1, 2, None, None], pa.int64()),
        "v": pa.array(["old", "new", "only", "n1", "n2"]),
        "__epoch": pa.array([3, 5, 1, 2, 4], pa.int64()),
    })
    done = driver_rows.latest(rows, keys, "__epoch")
    expected = [("new",), ("n2",), ("only",)] if keys else [("new",)]
    assert sorted((r["v"],) for r in done.to_pylist()) == sorted(expected)
