"""How a state table is laid out: its buckets, how each key enters the bucket hash, and the
record of that layout every commit carries.

Every commit to a state table records the table's :class:`StateLayout` (format version,
bucket count, how each key is hashed, columns) in its commit metadata. A refresh compares
the recorded layout with the one it would use before it plans an incremental epoch, and
rebuilds the view instead when they differ: keys hashed one way and looked up another would
miss their rows. Compaction re-buckets with the recorded layout, never with a guess.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.sql.plan import q
from ivm_assets.zset import BUCKET

# Version of the state layout. 1: layout not recorded; 2: recorded in every commit.
FORMAT = 2
LAYOUT_KEY = "ivm.layout"
# The buckets of a new view's state tables when ivm.yaml sets no ``state_buckets``. A
# scattered change touches every bucket, and an append writes one file per bucket it
# touches: at TPC-H SF 1 (1,500 orders a batch) 4 buckets against 16 made the join views'
# refreshes 15-25 % faster (their commits 25-40 %) and their rebuilds no slower; lookups
# select row groups by key within a bucket either way (benchmarks/README.md). Views built
# with 16 (the default until 2026-12-01) keep them.
DEFAULT_BUCKETS = 4


_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_NUMERIC = (*_INTEGRAL, T.FloatType, T.DoubleType, T.DecimalType)


UNHASHED = "unhashed"
_OWN = "own"


@dataclass(frozen=True)
class StateLayout:
    """How a state table is laid out: what a lookup must agree with to find its rows.

    ``hashes`` says per key how it enters the bucket hash: a Spark type it is cast to,
    ``own`` (hashed as it is) or ``unhashed`` (see :func:`hash_type`).
    """

    format: int
    kind: str
    buckets: int
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    hashes: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StateLayout:
        d = json.loads(text)
        return cls(d["format"], d["kind"], d["buckets"], tuple(d["keys"]), tuple(d["columns"]), tuple(d["hashes"]))

    def types(self) -> list:
        """The hash types as :func:`with_bucket` takes them."""
        return self.types_of(self.hashes)

    @staticmethod
    def types_of(hashes: tuple[str, ...]) -> list:
        """``hashes`` (as :func:`hash_names` gives them) as :func:`with_bucket` takes them."""
        parsed = {"bigint": T.LongType(), "double": T.DoubleType(), _OWN: None, UNHASHED: UNHASHED}
        return [parsed[h] for h in hashes]

    def difference(self, wanted: StateLayout, *, compare_hashes: bool = True) -> str | None:
        """What differs from ``wanted`` in words ("buckets 4 → 16"), or None."""
        for name in ("format", "kind", "buckets", "keys", "columns", *(("hashes",) if compare_hashes else ())):
            have, want = getattr(self, name), getattr(wanted, name)
            if have != want:
                show = (lambda v: ", ".join(v) or "none") if isinstance(have, tuple) else str
                return f"{name} {show(have)} → {show(want)}"
        return None


def hash_names(types: list) -> tuple[str, ...]:
    """:class:`StateLayout` ``hashes`` for hash types as :func:`hash_type` gives them."""
    return tuple(_OWN if t is None else t if t == UNHASHED else t.simpleString() for t in types)


def default_hash_types(df: DataFrame, keys: tuple[str, ...]) -> list:
    """Each key hashed by its own type (state that only its own operator looks up)."""
    return [hash_type(df.schema[k].dataType) for k in keys]


def hash_type(left: T.DataType, right: T.DataType | None = None) -> T.DataType | str | None:
    """How a key is hashed for bucketing, so that keys Spark finds equal share a bucket.

    A type to cast to (INT = BIGINT hash as BIGINT, other numbers as DOUBLE), None to hash
    as it is (same type on both sides), or UNHASHED for pairs Spark compares through a cast
    that could make different-looking values equal ('1.5' = 1, '2020-01-01' = a
    timestamp): those keys do not take part in the hash, trading pruning for correctness.
    """
    right = left if right is None else right
    if isinstance(left, _INTEGRAL) and isinstance(right, _INTEGRAL):
        return T.LongType()
    if isinstance(left, _NUMERIC) and isinstance(right, _NUMERIC):
        return T.DoubleType()
    if left == right:
        return None
    return UNHASHED


def with_bucket(df: DataFrame, keys: tuple[str, ...], buckets: int, types: list | None = None) -> DataFrame:
    """``df`` plus ``__bucket``: pmod(hash(keys as :func:`hash_type` says), buckets).

    ``types`` defaults to :func:`hash_type` of each key's own type. Without hashed keys every
    row goes to bucket 0.
    """
    types = default_hash_types(df, keys) if types is None else types
    hashed = [df[q(k)].cast(t) if t is not None else df[q(k)] for k, t in zip(keys, types) if t != UNHASHED]
    if not hashed:
        return df.withColumn(BUCKET, F.lit(0))
    return df.withColumn(BUCKET, F.pmod(F.hash(*hashed), F.lit(buckets)))
