"""Each rule written once (ivm_assets.rules) gives the same rows and types rendered by Spark
and by DuckDB, on random change sets and state rows: NULL keys, −0.0 beside 0.0, NaNs,
negative and large weights, a residual condition. (Whether a rule is *right* is the
recompute oracle's business: tests/operators run every operator both ways against it.)"""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ivm_assets.local.expressions import register
from ivm_assets.rules import render_duckdb, render_spark
from ivm_assets.rules import residual_semi_join, semi_join, set_operation
from ivm_assets.rules.join import JoinRule
from ivm_assets.rules.set_operation import SIDE
from ivm_assets.spark.arrow import to_arrow, to_spark
from ivm_assets.state import consolidate
from ivm_assets.zset import WEIGHT

KEYS = {"int": (pa.int64(), [1, 2, 3, 2**62]), "double": (pa.float64(), [0.0, -0.0, float("nan"), 1.5, float("-inf")])}
WEIGHTS = [1, 1, 2, -1, -2, 3_000_000]


def _zset(rng: random.Random, prefix: str, key_type: str, rows: int, *, nulls: bool = False, positive: bool = False) -> pa.Table:
    t, keys = KEYS[key_type]
    pick = lambda: None if nulls else rng.choice(keys)  # noqa: E731
    data = {
        f"{prefix}k": pa.array([pick() for _ in range(rows)], t),
        f"{prefix}v": pa.array([rng.choice([None, -1, 0, 5, 7]) for _ in range(rows)], pa.int64()),
        WEIGHT: pa.array([abs(w) if positive else w for w in (rng.choice(WEIGHTS) for _ in range(rows))], pa.int64()),
    }
    table = pa.table(data)
    return consolidate.in_arrow(table, (f"{prefix}k", f"{prefix}v")) if positive else table


def _both(spark, node, tables: dict[str, pa.Table], schema: pa.Schema) -> tuple[pa.Table, pa.Table]:
    frames = {name: to_spark(spark, t) for name, t in tables.items()}
    by_spark = to_arrow(render_spark.render(node, frames)).select(schema.names).cast(schema)
    con = duckdb.connect(config={"threads": 1})
    register(con)
    for name, t in tables.items():
        con.register(name, t)
    query, _ = render_duckdb.render(node, {name: t.schema for name, t in tables.items()})
    by_duckdb = con.sql(query).to_arrow_table().select(schema.names).cast(schema)
    return by_spark, by_duckdb


def _sorted_bits(table: pa.Table) -> pa.Table:
    columns = [c.combine_chunks().view(pa.int64()) if c.type == pa.float64() else c for c in table.columns]
    bits = pa.table(columns, names=table.column_names)
    return bits.take(pc.sort_indices(bits, sort_keys=[(c, "ascending") for c in bits.column_names]))


def _agree(spark, node, tables, schema) -> pa.Table:
    by_spark, by_duckdb = _both(spark, node, tables, schema)
    assert _sorted_bits(by_duckdb).equals(_sorted_bits(by_spark)), f"DuckDB:\n{by_duckdb}\nSpark:\n{by_spark}"
    return by_spark


def _pair_tables(rng: random.Random, key_type: str, *, state: bool) -> dict[str, pa.Table]:
    tables = {
        "dl": _zset(rng, "l", key_type, 12), "dr": _zset(rng, "r", key_type, 8),
        "nulls": _zset(rng, "l", key_type, 3, nulls=True), "left_nulls": _zset(rng, "l", key_type, 3, nulls=True),
        "right_nulls": _zset(rng, "r", key_type, 3, nulls=True),
    }
    if state:
        tables |= {"old_left": _zset(rng, "l", key_type, 20, positive=True), "old_right": _zset(rng, "r", key_type, 20, positive=True)}
    return tables


def _schema(tables: dict[str, pa.Table], columns: tuple[str, ...]) -> pa.Schema:
    fields = {f.name: f for t in tables.values() for f in t.schema}
    return pa.schema([fields[c] for c in columns] + [pa.field(WEIGHT, pa.int64())])


CASES = [(key_type, seed, state) for key_type in KEYS for seed in (1, 2) for state in (True, False)]


@pytest.mark.parametrize(("key_type", "seed", "state"), CASES)
def test_semi_and_anti_joins(spark, key_type, seed, state):
    rng = random.Random(seed)
    tables = _pair_tables(rng, key_type, state=state)
    present = {"dl", "dr"} | ({"old_left", "old_right"} if state else set())
    for anti in (False, True):
        node = semi_join.rule(("lk", "lv"), ("rk", "rv"), ("lk",), ("rk",), anti, present)
        _agree(spark, node, tables, _schema(tables, ("lk", "lv")))
        residual = residual_semi_join.rule(("lk", "lv"), ("rk", "rv"), ("lk",), ("rk",), anti, "`rv` > `lv`", present)
        _agree(spark, residual, tables, _schema(tables, ("lk", "lv")))


@pytest.mark.parametrize(("key_type", "seed", "state"), CASES)
def test_inner_and_outer_joins(spark, key_type, seed, state):
    rng = random.Random(seed)
    tables = _pair_tables(rng, key_type, state=state)
    present = {"dl", "dr"} | ({"old_left", "old_right"} if state else set())
    cases = ((), None), ((), "`rv` > `lv`"), (("left",), None), (("right",), "`rv` <> `lv`"), (("left", "right"), "`rv` > `lv`")
    for preserved, residual in cases:
        rule = JoinRule(("lk", "lv"), ("rk", "rv"), ("lk",), ("rk",), residual, preserved)
        done = _agree(spark, rule.rule(present), tables, _schema(tables, rule.columns))
        assert done.num_rows > 0 or (not preserved and not state)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_set_operations(spark, seed):
    rng = random.Random(seed)
    change = _zset(rng, "l", "double", 16)
    change = change.append_column(SIDE, pa.array([rng.choice([0, 1]) for _ in range(change.num_rows)], pa.int32()))
    change = consolidate.in_arrow(change, ("lk", "lv", SIDE))
    old = _zset(rng, "l", "double", 16, positive=True)
    old = consolidate.in_arrow(old.append_column(SIDE, pa.array([rng.choice([0, 1]) for _ in range(old.num_rows)], pa.int32())), ("lk", "lv", SIDE))
    for kind in ("intersect", "except"):
        for all_ in (False, True):
            for present in ({"change"}, {"change", "old"}):
                tables = {"change": change} | ({"old": old} if "old" in present else {})
                _agree(spark, set_operation.rule(("lk", "lv"), kind, all_, present), tables, _schema(tables, ("lk", "lv")))


def pc_abs(table: pa.Table) -> pa.Table:
    """``table`` with every weight made positive (stored rows)."""
    return table.set_column(table.schema.get_field_index(WEIGHT), WEIGHT, pc.abs(table.column(WEIGHT)))


WINDOW_CALLS = (
    ("r", "RANK() OVER (PARTITION BY `lk` ORDER BY `lv`)"),
    ("dr", "DENSE_RANK() OVER (PARTITION BY `lk` ORDER BY `lv` DESC)"),
    ("n", "ROW_NUMBER() OVER (PARTITION BY `lk` ORDER BY `lv` DESC NULLS FIRST, `lk`)"),
    ("s", "SUM(`lv`) OVER (PARTITION BY `lk` ORDER BY `lv`)"),
    ("c", "COUNT(`lv`) OVER (PARTITION BY `lk`)"),
    ("lo", "MIN(`lv`) OVER (ORDER BY `lv` NULLS LAST)"),
)


@pytest.mark.parametrize("seed", [1, 2])
def test_windows(spark, seed):
    """Rows repeated by their weight, NULL partitions and orders, ties: the window's rule."""
    from ivm_assets.rules import window

    rng = random.Random(seed)
    small = lambda t: t.set_column(2, WEIGHT, pa.array([rng.choice([1, 2, 3, -1, -2]) for _ in range(t.num_rows)], pa.int64()))  # noqa: E731
    delta = consolidate.in_arrow(small(_zset(rng, "l", "int", 14)), ("lk", "lv"))
    old = pc_abs(small(_zset(rng, "l", "int", 14)))
    old = old.set_column(0, "lk", pa.array([rng.choice([None, 1, 2]) for _ in range(old.num_rows)], pa.int64()))
    old = consolidate.in_arrow(old, ("lk", "lv"))
    int64 = pa.schema([("lk", pa.int64()), ("lv", pa.int64()), *((name, pa.int64()) for name, _ in WINDOW_CALLS), (WEIGHT, pa.int64())])
    for present in ({"delta"}, {"delta", "old"}):
        tables = {"delta": delta} | ({"old": old} if "old" in present else {})
        done = _agree(spark, window.rule(("lk", "lv"), WINDOW_CALLS, present), tables, int64)
        assert done.num_rows > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_distinct(spark, seed):
    from ivm_assets.rules import distinct

    rng = random.Random(seed)
    delta = consolidate.in_arrow(_zset(rng, "l", "double", 16), ("lk", "lv"))
    old = _zset(rng, "l", "double", 16, positive=True)
    for present in ({"delta"}, {"delta", "old"}):
        tables = {"delta": delta} | ({"old": old} if "old" in present else {})
        _agree(spark, distinct.rule(("lk", "lv"), present), tables, _schema(tables, ("lk", "lv")))
