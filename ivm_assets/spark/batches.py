"""Change sets held by Spark during an epoch: computed once, and small ones brought to the
driver as Arrow, many in one Spark job (:func:`materialize`); the column helpers every
Spark rendering shares.

A change set is a Spark DataFrame of an operator's columns plus an integer weight ``__w``:
+n means n copies of the row arrive, −n that n copies leave.
"""

from __future__ import annotations

import threading
from functools import lru_cache, reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ivm_assets.spark.arrow import to_arrow, to_spark
from ivm_assets.spark.cluster import keep_on_executors, release
from ivm_assets.sql.plan import q


@lru_cache(maxsize=4096)
def col(name: str) -> Column:
    """The column ``name`` (quoted). Cached: an unresolved column is an immutable value, and
    every construction is a round trip to the JVM, which small epochs make by the thousand."""
    return F.col(q(name))


# Spark repeats a row at most this many times (array_repeat takes an INT).
MAX_COPIES = 2**31 - 1


def copies(count: Column) -> Column:
    """``count`` as the INT that ``array_repeat`` takes, or an error naming the limit: a cast
    alone would wrap a larger count around to a wrong, possibly negative, one."""
    too_many = F.raise_error(F.lit(f"a row with more than {MAX_COPIES} copies cannot be repeated in Spark"))
    return F.when(count <= MAX_COPIES, count.cast("int")).otherwise(too_many)


class Batch:
    """A computed change set: the frame, its row count, and (when small) its Arrow copy."""

    def __init__(self, df: DataFrame, rows: int, table: pa.Table | None = None) -> None:
        self._df, self._rows, self._table = df, rows, table
        self._spark: SparkSession | None = None

    @classmethod
    def of_table(cls, spark: SparkSession, table: pa.Table) -> Batch:
        """A small change set held as Arrow; its Spark frame is made on first use (~15 ms
        each, and many are only stored or looked up by, never joined)."""
        batch = cls(None, table.num_rows, table)  # type: ignore[arg-type]
        batch._spark = spark
        return batch

    @property
    def df(self) -> DataFrame:
        if self._df is None:
            self._df = to_spark(self._spark, self._table)
        return self._df

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def table(self) -> pa.Table | None:
        return self._table

    def values(self, column: str) -> list:
        """Distinct values of ``column`` (read from the Arrow copy when there is one)."""
        if self.table is not None:
            return sorted(v for v in pc.unique(self.table.column(column)).to_pylist() if v is not None)
        return sorted(r[0] for r in self.df.select(col(column)).distinct().collect() if r[0] is not None)


class _Pending(Batch):
    """A small change set not computed yet. The first use of any pending batch computes all
    of this thread's pending batches in one Spark job (see :func:`_compute_pending`): an
    operator that materializes both its inputs before looking at either pays one job, not
    two. A pending batch's plan never refers to another pending batch, because building a
    plan over a batch uses its ``df``, which computes it first."""

    def __init__(self, plan: DataFrame) -> None:
        self._plan = plan
        self._error: BaseException | None = None
        self._done = False
        _pending().append(self)

    def _resolve(self) -> None:
        if self._error is not None:
            raise self._error
        if not self._done:
            _compute_pending(self)

    @property
    def df(self) -> DataFrame:
        self._resolve()
        return Batch.df.fget(self)

    @property
    def rows(self) -> int:
        self._resolve()
        return self._rows

    @property
    def table(self) -> pa.Table | None:
        self._resolve()
        return self._table

    def _set(self, table: pa.Table) -> None:
        self._df, self._rows, self._table, self._spark = None, table.num_rows, table, self._plan.sparkSession
        self._done = True


_local = threading.local()


def _pending() -> list[_Pending]:
    if not hasattr(_local, "pending"):
        _local.pending = []
    return _local.pending


def unforced(batch: Batch) -> DataFrame:
    """A frame of ``batch``'s rows that does not compute a pending batch: its plan, which
    then runs inside the job of whoever uses this frame. For plans over local relations
    (every small change set's inputs) that yields the same rows as computing the batch:
    same rows in the same order, one partition."""
    if isinstance(batch, _Pending) and not batch._done and batch._error is None:
        return batch._plan
    return batch.df


def _kept() -> list[DataFrame]:
    if not hasattr(_local, "kept"):
        _local.kept = []
    return _local.kept


def discard_pending() -> None:
    """Forget this thread's pending batches (an epoch ended, possibly by an error: its
    unused batches must not be computed in the next epoch's job), and release what it
    kept on the executors."""
    _pending().clear()
    release(_kept())


_TAG = "__batch"


def _compute_pending(wanted: _Pending) -> None:
    """Collect every pending batch of this thread (``wanted`` among them) in one job.

    The plans are unioned side by side: a tag column says which batch a row belongs to, and
    batch i's columns are renamed ``__b<i>_<j>`` (NULL in the other batches' rows); the
    collected Arrow table is split by tag on the driver, each part with its own names and
    nullability back.
    """
    batch = [p for p in _pending() if not p._done]
    if wanted not in batch:
        batch.append(wanted)
    _pending().clear()
    try:
        if len(batch) == 1:
            batch[0]._set(to_arrow(batch[0]._plan))
            return
        frames = [
            p._plan.select(F.lit(i).alias(_TAG), *[col(c).alias(f"__b{i}_{j}") for j, c in enumerate(p._plan.columns)])
            for i, p in enumerate(batch)
        ]
        together = to_arrow(reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames))
        tags = together.column(_TAG)
        for i, p in enumerate(batch):
            fields = p._plan.schema.fields
            part = together.filter(pc.equal(tags, i)).select([f"__b{i}_{j}" for j in range(len(fields))])
            schema = pa.schema([pa.field(f.name, t, f.nullable) for f, t in zip(fields, part.schema.types)])
            p._set(part.rename_columns([f.name for f in fields]).cast(schema))
    except BaseException as exc:
        for p in batch:
            if not p._done:
                p._error = exc
        raise


def materialize(df: DataFrame, *, small: bool) -> Batch:
    """Compute ``df`` once (later readers reuse the result) and count its rows.

    A ``small`` result (an incremental change) comes back to the driver as Arrow and
    returns as a local relation: later steps over it then cost no extra Spark jobs, and its
    Arrow copy can be committed to a state table as it is. Spark jobs, not data volume,
    dominate the time of small refreshes, so a small result is computed when first used,
    in the same job as every other small result materialized before that use. A large
    result (full refresh) stays on the executors (:func:`keep_on_executors`) until the epoch ends.
    """
    if small:
        return _Pending(df)
    df = keep_on_executors(df)
    _kept().append(df)
    return Batch(df, df.count())


def nothing(df: DataFrame) -> Batch:
    """A change set known to be empty (see :meth:`Operator.unchanged`), without running it."""
    return Batch(df.limit(0), 0)


def null_safe_match(left: DataFrame, right: DataFrame, pairs: list[tuple[str, str]], *, signed: bool = False) -> Column | None:
    """Join condition ``left.a <=> right.b AND …`` (None when there are no pairs): keys as
    Spark compares them, −0.0 equal to 0.0. ``signed``: z-set rows (:mod:`ivm_assets.zset`),
    where the sign of a zero in a FLOAT or DOUBLE column tells rows apart."""
    cond: Column | None = None
    floats = float_columns(left) if signed else {}
    for a, b in pairs:
        term = left[q(a)].eqNullSafe(right[q(b)])
        if a in floats:
            term = term & (negative_zero(left[q(a)]) == negative_zero(right[q(b)]))
        cond = term if cond is None else cond & term
    return cond


def float_columns(df: DataFrame) -> dict[str, T.DataType]:
    """``df``'s FLOAT and DOUBLE columns and their types: where a zero's sign is a value's."""
    return {f.name: f.dataType for f in df.schema.fields if isinstance(f.dataType, (T.FloatType, T.DoubleType))}


def negative_zero(c: Column) -> Column:
    """Whether a FLOAT or DOUBLE is −0.0 (false for NULL). Spark has no function for a
    double's bits and compares −0.0 equal to 0.0; its text is '-0.0' (read only for zeros)."""
    return F.when(c == 0, c.cast("string").startswith("-")).otherwise(F.lit(False))
