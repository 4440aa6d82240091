"""TPC-H data as Delta sources, and TPC-H-style refresh batches: for the test suite's TPC-H
check and the benchmarks under ``benchmarks/``.

Data comes from ``tpchgen-cli`` (the ``dev`` extra), offline, at any scale factor; the
batches are RF1 (new orders copied from existing ones, with their lineitems, under fresh
keys), RF2 (existing orders deleted with their lineitems) and dimension updates, each a
delta-rs commit.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ivm_assets.delta.read import read_snapshot
from ivm_assets.delta.write import create_table, delete_rows, update_rows, write
from ivm_assets.spark.arrow import normalize_schema

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def generate_parquet(sf: float, data_dir: Path) -> Path:
    """TPC-H parquet at ``sf`` under ``data_dir``, generated once per scale factor and reused by later runs."""
    out = data_dir / f"sf{sf:g}" / "parquet"
    out.mkdir(parents=True, exist_ok=True)
    # Tables are generated one by one (to a name of their own) so a table added to TABLES
    # later is generated alone, and an interrupted generation leaves no partial table behind.
    for name in TABLES:
        if (out / f"{name}.parquet").exists():
            continue
        part = out / f".{name}"
        shutil.rmtree(part, ignore_errors=True)
        tpchgen = Path(sys.executable).with_name("tpchgen-cli")
        cmd = [str(tpchgen), "parquet", "-s", f"{sf:g}", "-o", str(part), "--tables", name, "--no-progress", "-q"]
        print(f"generating TPC-H sf={sf:g}: {' '.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True)
        (part / f"{name}.parquet").rename(out / f"{name}.parquet")
        shutil.rmtree(part)
    return out


def create_sources(parquet_dir: Path, sources_dir: Path | str) -> dict[str, str]:
    """Fresh Delta source tables (CDF on) from the cached parquet, so no earlier run's batches
    remain, under ``sources_dir`` (a folder, or an object store URI whose storage options are
    registered).

    tpchgen-cli writes string_view columns and parquet field ids; both are dropped so the
    Delta schema is the plain one Spark and the refresh batches write.
    """
    sources = {}
    for name in TABLES:
        # Streamed batch by batch: lineitem at SF 10 does not fit in memory as one table.
        file = pq.ParquetFile(parquet_dir / f"{name}.parquet")
        schema = file.schema_arrow
        plain = pa.schema([pa.field(f.name, f.type, f.nullable) for f in normalize_schema(schema)])
        batches = (batch.cast(plain) for batch in file.iter_batches(batch_size=1 << 17))
        uri = f"{sources_dir}/{name}"
        create_table(uri, pa.RecordBatchReader.from_batches(plain, batches))
        sources[name] = uri
    return sources


def _money(rng: random.Random) -> str:
    """An account balance as TPC-H draws it: -999.99 to 9999.99."""
    return f"CAST('{rng.randint(-99999, 999999) / 100:.2f}' AS DECIMAL(15,2))"


SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")
TYPE_SYLLABLES = (
    ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"),
    ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"),
    ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER"),
)


@dataclass(frozen=True)
class DimensionUpdate:
    """Per batch, ``share`` × --dim-updates random rows of ``table`` get new values in ``columns``
    (column → SQL literal drawn from the TPC-H domain), as one ``update_rows`` commit."""

    table: str
    key: str
    share: float
    columns: dict[str, Callable[[random.Random], str]]

    def rows(self, dim_updates: int) -> int:
        return max(1, round(dim_updates * self.share)) if dim_updates > 0 else 0


DIMENSION_UPDATES = (
    # c_mktsegment: Q3's filter; c_acctbal: a Q10 group column.
    DimensionUpdate("customer", "c_custkey", 1.0, {"c_mktsegment": lambda r: f"'{r.choice(SEGMENTS)}'", "c_acctbal": _money}),
    # s_acctbal: no view reads it (Q5 joins supplier): the change must leave every view alone.
    DimensionUpdate("supplier", "s_suppkey", 1.0, {"s_acctbal": _money}),
    # p_type: Q14's PROMO test; p_size: Q19's filter.
    DimensionUpdate("part", "p_partkey", 0.4, {
        "p_type": lambda r: "'" + " ".join(r.choice(s) for s in TYPE_SYLLABLES) + "'",
        "p_size": lambda r: f"CAST({r.randint(1, 50)} AS INT)",
    }),
)


def _in_list(column: str, keys: Sequence[int]) -> str:
    return f"{column} IN ({', '.join(str(k) for k in sorted(keys))})"


@dataclass
class RefreshBatches:
    """TPC-H-style refresh batches, each as RF1, RF2 and dimension updates (four commits + one per dimension).

    RF1 inserts ``size`` new orders with their lineitems: copies of randomly sampled existing
    orders (and their 1–7 lineitems) under fresh keys above every key so far, so values follow
    the generated distributions. RF2 deletes ``size`` existing orders with their lineitems:
    with ``rf2="lowest"`` the lowest keys still present, as one key range per table; with
    ``rf2="random"`` orders drawn at random (seeded), so the keys are scattered over the whole
    range. Then ``dim_updates`` customers (c_mktsegment, c_acctbal), as many suppliers
    (s_acctbal) and 2/5 as many parts (p_type, p_size) chosen at random get new values drawn
    from the TPC-H domains (a third of them the value the row already has), through
    ``update_rows`` (delta-rs, like the other writes).
    """

    spark: SparkSession
    sources: dict[str, str]
    size: int
    next_key: int
    seed: int
    rf2: str = "random"
    dim_updates: int = 5
    dim_keys: dict[str, list[int]] = field(default_factory=dict)
    applied: int = 0
    rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def apply(self) -> None:
        self._insert_orders()
        self._delete_orders()
        self._update_dimensions()
        self.applied += 1

    def _insert_orders(self) -> None:
        orders = read_snapshot(self.spark, self.sources["orders"])
        picked = orders.orderBy(F.rand(self.seed + self.applied)).limit(self.size).toArrow()
        new_keys = pa.array(range(self.next_key, self.next_key + picked.num_rows), pa.int64())
        key_map = self.spark.createDataFrame(pa.table({"l_orderkey": picked.column("o_orderkey"), "__new": new_keys}))
        lines = read_snapshot(self.spark, self.sources["lineitem"])
        new_lines = lines.join(key_map, "l_orderkey").withColumn("l_orderkey", F.col("__new")).select(*lines.columns)
        index = picked.schema.get_field_index("o_orderkey")
        write(self.sources["orders"], picked.set_column(index, "o_orderkey", new_keys), mode="append")
        write(self.sources["lineitem"], new_lines, mode="append")
        self.next_key += picked.num_rows

    def _delete_orders(self) -> None:
        if self.rf2 == "lowest":
            orders = read_snapshot(self.spark, self.sources["orders"])
            oldest = orders.select("o_orderkey").orderBy("o_orderkey").limit(self.size)
            low, high = oldest.agg(F.min("o_orderkey"), F.max("o_orderkey")).first()
            delete_rows(self.sources["orders"], f"o_orderkey >= {low} AND o_orderkey <= {high}")
            delete_rows(self.sources["lineitem"], f"l_orderkey >= {low} AND l_orderkey <= {high}")
            return
        existing = self._column("orders", "o_orderkey")
        keys = self.rng.sample(existing, min(self.size, len(existing)))
        delete_rows(self.sources["orders"], _in_list("o_orderkey", keys))
        delete_rows(self.sources["lineitem"], _in_list("l_orderkey", keys))

    def _update_dimensions(self) -> None:
        for dim in DIMENSION_UPDATES:
            n = dim.rows(self.dim_updates)
            if n == 0:
                continue
            if dim.table not in self.dim_keys:  # dimension keys never change: read them once
                self.dim_keys[dim.table] = self._column(dim.table, dim.key)
            keys = self.rng.sample(self.dim_keys[dim.table], min(n, len(self.dim_keys[dim.table])))
            # A third of the values are the row's own: delta-rs rewrites the row all the same,
            # and the change feed reports an update that changes nothing.
            set_sql = {
                column: f"CASE {dim.key} "
                + " ".join(f"WHEN {k} THEN {draw(self.rng) if self.rng.random() >= 1 / 3 else column}" for k in keys)
                + f" ELSE {column} END"
                for column, draw in dim.columns.items()
            }
            update_rows(self.sources[dim.table], set_sql=set_sql, predicate=_in_list(dim.key, keys))

    def _column(self, table: str, name: str) -> list[Any]:
        """One column of a source's latest snapshot (keys to sample from), read by Spark."""
        return read_snapshot(self.spark, self.sources[table]).select(name).toArrow().column(name).to_pylist()

    def describe(self) -> str:
        rf2 = "the lowest order keys (one key range)" if self.rf2 == "lowest" else "existing orders drawn at random (scattered keys)"
        dims = ", ".join(f"{d.rows(self.dim_updates)} {d.table} rows ({', '.join(d.columns)})" for d in DIMENSION_UPDATES)
        return (
            f"RF1 inserts {self.size} orders with their lineitems; RF2 deletes {self.size} orders with their lineitems, "
            f"{rf2}; " + (f"dimension updates: {dims}." if self.dim_updates > 0 else "no dimension updates.")
        )


def make_batches(
    spark: SparkSession, sources: dict[str, str], fraction: float, seed: int, *, rf2: str = "random", dim_updates: int = 5
) -> RefreshBatches:
    stats = read_snapshot(spark, sources["orders"]).agg(F.count("*"), F.max("o_orderkey")).first()
    size = max(1, round(stats[0] * fraction))
    return RefreshBatches(spark, sources, size=size, next_key=stats[1] + 1, seed=seed, rf2=rf2, dim_updates=dim_updates)
