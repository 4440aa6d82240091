"""Running one planned epoch (:func:`execute`): in process (DuckDB over Arrow,
:mod:`ivm_assets.render.duckdb.epoch`) when it is small and every operator translates, else in Spark;
then its commits, in the order the refresh's crash recovery relies on
(:mod:`ivm_assets.engine.refresh`); and what its failures amount to (a rebuild, a data
error, a conflicting commit).
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets import settings
from ivm_assets.ir import decimal_rules
from ivm_assets.delta import storage_errors
from ivm_assets.delta.commit import Epoch, holds_epoch
from ivm_assets.delta.handles import latest_version
from ivm_assets.delta.read import read_arrow
from ivm_assets.delta.snapshot import arrow_schema as arrow_schema_at, row_count
from ivm_assets.engine import changes as cdc
from ivm_assets.engine import output
from ivm_assets.engine.compile import CompiledView
from ivm_assets.epoch_context import EpochContext
from ivm_assets.errors import (
    ChangeTooLarge, CommitConflictError, ExpressionError, InexactAggregate, LostDataFile, RebuildNeeded, RefreshError, UnrepeatableRows,
)
from ivm_assets.render.duckdb.epoch import LOCAL_CHANGE_ROWS, LocalEpoch
from ivm_assets.render.spark.binding import spark_change
from ivm_assets.errors import Untranslatable
from ivm_assets.spark.arrow import arrow_schema, to_spark
from ivm_assets.spark.batches import Batch, discard_pending, materialize
from ivm_assets.spark.metrics import counting_jobs
from ivm_assets.spark.session import LazySession, tuned_for
from ivm_assets.state.progress import EpochRecord
from ivm_assets.zset import WEIGHT

if TYPE_CHECKING:
    from ivm_assets.engine.refresh import ViewLocation


def execute(
    spark: SparkSession, view: CompiledView, where: ViewLocation, relations: dict[str, str], record: EpochRecord, buckets: int
) -> tuple[dict, dict[str, str]]:
    """Run the epoch ``record`` planned: its statistics, and where it ran: ``engine`` ("in
    process", or Spark and why; absent for a full epoch that is not a small build) and, when
    an operator kept it out of process, that ``operator``'s id."""
    epoch = Epoch(f"ivm:{view.name}", record.epoch, {"ivm.view": view.name, "ivm.mode": record.mode})
    notes: dict[str, str] = {}
    try:
        try:
            stats = _run_epoch(spark, view, where, relations, record, epoch, buckets, notes, small_builds=True)
        except Exception as exc:
            if not _too_large_for_driver(exc):
                raise
            if "small_build" not in notes:
                if record.mode == "full":
                    raise
                raise ChangeTooLarge(view.name) from exc
            # A small build whose joins multiplied its rows past what the driver may collect:
            # the same epoch again, its rows written by the executors. A table the first
            # attempt committed already holds the epoch and is skipped, as after a crash; its
            # rows are the ones the executors would write (tests/test_state_parity.py).
            discard_pending()
            stats = _run_epoch(spark, view, where, relations, record, epoch, buckets, notes, small_builds=False)
            stats["small_build_too_large"] = 1
        finally:
            discard_pending()
    except CommitConflictError as exc:
        raise RefreshError(
            f"view {view.name!r}: a table changed under epoch {record.epoch} of this refresh: {exc}. "
            f"Nothing was applied twice. Run `ivm refresh --full {view.name}` to rebuild the view from its sources."
        ) from exc
    except RebuildNeeded:
        raise
    except Exception as exc:
        needed = _rebuild_needed(exc, view.name, where)
        if needed is not None:
            raise needed from exc
        lost = storage_errors.executor_failure(exc)
        if lost is not None:
            raise lost from None  # the client's text is not chained: it might hold a secret
        if _data_error(exc):
            raise ExpressionError(view.name, str(exc)) from exc
        raise
    return stats, {k: notes[k] for k in ("engine", "operator") if k in notes}


@contextmanager
def _in_spark(spark: SparkSession | LazySession, stats: dict, *, small: bool) -> Iterator[SparkSession]:
    """Spark work of an epoch, in the session it yields (a lazy one starts here): settings
    tuned to the epoch's size, its jobs counted in ``stats``. Entered only where an epoch
    needs Spark."""
    session = spark.session() if isinstance(spark, LazySession) else spark
    with tuned_for(session, small=small), counting_jobs(session) as jobs:
        yield session
    if jobs.value is not None:
        stats["spark_jobs"] = stats.get("spark_jobs", 0) + jobs.value


def _too_large_for_driver(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark refusing to bring a job's results to the driver: together
    they exceed ``spark.driver.maxResultSize`` (1 GiB unless the project sets it)."""
    return "is bigger than spark.driver.maxResultSize" in str(exc)


def _data_error(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark failing on the data (SQLSTATE class 22: an overflow, an
    invalid cast, a division by zero under ANSI mode), or a rule's own computation failing
    the same way (``decimal_rules.OVERFLOW`` raised in a Python worker)."""
    state = getattr(exc, "getSqlState", lambda: None)()
    return bool(state and state.startswith("22")) or decimal_rules.OVERFLOW in str(exc)


_MISSING_FILE = ("No such file or directory", "Failed to open local file", "FileNotFoundException", "FILE_NOT_EXIST")


def _rebuild_needed(exc: BaseException, view: str, where: ViewLocation) -> RebuildNeeded | None:
    """The :class:`RebuildNeeded` that ``exc``, raised while an epoch ran, amounts to: a
    missing data file of the view's own tables, an aggregate that cannot stay exact or rows a
    rule cannot compute again (both raised inside the plan); None for anything else."""
    text = f"{getattr(exc, 'filename', None) or ''} {exc}"
    inexact = re.search(re.escape(InexactAggregate.MARKER) + r": ([^;\n]+) (decimal|double);", text)
    if inexact:
        return InexactAggregate(view, inexact.group(1).strip(), inexact.group(2))
    if unrepeatable := re.search(re.escape(UnrepeatableRows.MARKER) + r": ([^;\n]+);", text):
        return UnrepeatableRows(view, unrepeatable.group(1).strip())
    if not isinstance(exc, FileNotFoundError) and not any(m in text for m in _MISSING_FILE):
        return None
    state = re.search(re.escape(where.state_root) + r"/([^/\s'\"]+)/[^\s'\"]*?\.parquet", text)
    if state:
        return LostDataFile(view, f"state table {state.group(1)}", state.group(0))
    out = re.search(re.escape(where.output) + r"/[^\s'\"]*?\.parquet", text)
    return LostDataFile(view, "the output table", out.group(0)) if out else None



def _run_epoch(
    spark: SparkSession | LazySession, view: CompiledView, where: ViewLocation, relations: dict[str, str], record: EpochRecord,
    epoch: Epoch, buckets: int, notes: dict[str, str], *, small_builds: bool = True,
) -> dict:
    """Compute the epoch ``record`` planned and commit it (state, then output). An
    incremental epoch runs in process when it can, and touches ``spark`` only otherwise. A
    full one is a small build when ``small_builds`` and its sources are few (noted in
    ``notes["small_build"]``).

    A source's large change (:func:`~ivm_assets.engine.changes.large_range`) is read by
    Spark's executors, and its epoch runs in Spark; its ``rows_in`` is the Delta log's count."""
    sources = record.payload["sources"]
    full = record.mode == "full"
    stats: dict[str, int] = {}
    config = settings.current()
    limit = config.small_build_rows
    builds_here = bool(full and small_builds and limit)  # a build may be small, or in process
    # The sources' rows from the Delta log's file statistics (no data is read), counted once.
    counts = {name: row_count(relations[name], s["to"]) for name, s in sources.items()} if builds_here else {}
    build_rows = _source_rows(counts, limit) if builds_here else None
    small_build = build_rows is not None
    if small_build:
        stats["small_build_rows"] = build_rows
        notes["small_build"] = f"{build_rows} source rows"
    change_rows: dict[str, int] = {}
    tables: dict[str, pa.Table] = {}
    large: dict[str, cdc.LargeRange] = {}
    if not full:
        for name, s in sources.items():
            found = cdc.large_range(name, relations[name], s["from"], s["to"]) if view.root is not None else None
            if found is not None:
                large[name] = found
                change_rows[name] = found.rows
                continue
            tables[name] = cdc.read_range(name, relations[name], s["from"], s["to"], columns=cdc.used_columns(view.root, name))
            change_rows[name] = tables[name].num_rows
        stats.update({f"rows_in.{name}": rows for name, rows in change_rows.items()})
        stats["rows_in"] = sum(change_rows.values())
        if large:
            stats["changes_read_on_executors"] = len(large)
            stats["change_bytes_read_on_executors"] = sum(found.files.bytes for found in large.values())
    if view.root is None:
        with _in_spark(spark, stats, small=not full or small_build) as spark:
            frames = {name: to_spark(spark, table) for name, table in tables.items()} or {
                name: cdc.read_full(spark, relations[name], s["to"]) for name, s in sources.items()
            }
            stats.update(_recompute(spark, view, where, frames, epoch, record.payload["output_version"], few=small_build))
        return stats
    ctx = EpochContext(
        spark, epoch, full, where.state_root, buckets, {}, record.payload["state_versions"], stats,
        record.payload.get("state_layouts", {}), change_rows, ansi=view.semantics.get("ansi") == "true",
        time_zone=view.semantics.get("time_zone", "UTC"), small_build=small_build,
    )
    if view.root.unchanged(ctx):
        stats["rows_out"] = 0
        return stats  # no source change reaches the view: no state or output to touch
    if large:
        notes["engine"] = f"spark: the change of {', '.join(sorted(large))} is read by the executors"
    if builds_here and config.process_build_bytes and config.small_epochs != "spark":
        # A build in process is an epoch from empty state whose change is every source row:
        # the same rules as a small incremental epoch's (state reads find nothing, and each
        # state table and the output are written anew).
        tables = _snapshots(view, relations, sources, counts, config.process_build_bytes, notes)
    build_in_process = bool(tables) and full
    if build_in_process:
        stats["build_source_bytes"] = sum(t.nbytes for t in tables.values())
    computed = _in_process(ctx, view, tables, notes) if (build_in_process or not full) and not large else None
    if computed is not None:
        _commit(ctx, view, where, record, epoch, stats, computed, None, at_once=True)
        if build_in_process:
            # Its sources' columns are dropped now; Arrow's allocator keeps freed pages for
            # reuse and would hold them (0.3-0.5 GiB after TPC-H Q3's build at SF 1).
            pa.default_memory_pool().release_unused()
        return stats
    if full:
        tables = {}  # a build's source snapshots, which Spark reads again: not held meanwhile
    with _in_spark(spark, stats, small=ctx.small) as spark:
        ctx.spark = spark
        if full:
            ctx.changes.update({
                name: cdc.read_full(spark, relations[name], s["to"], columns=cdc.used_columns(view.root, name))
                for name, s in sources.items()
            })
        else:
            ctx.changes.update({name: to_spark(spark, table) for name, table in tables.items()})
            ctx.changes.update({
                name: cdc.read_large(spark, found, columns=cdc.used_columns(view.root, name)) for name, found in large.items()
            })
        shaped = output.shape(spark_change(ctx, view.root), view.root.columns, view.schema)
        # A full refresh writes its output straight from the plan, which is read once:
        # materializing it first would cost a checkpoint and a count for nothing.
        _commit(ctx, view, where, record, epoch, stats, materialize(shaped, small=True) if not full else None, shaped)
    return stats


def _commit(
    ctx: EpochContext, view: CompiledView, where: ViewLocation, record: EpochRecord, epoch: Epoch, stats: dict,
    computed: Batch | None, shaped: DataFrame | None, *, at_once: bool = False,
) -> None:
    """The epoch's commits: each state table's (queued in ``ctx.writes``), then the output's,
    ``computed`` (an incremental change) merged, or ``shaped`` (a full result) written.

    An epoch computed in process (``at_once``) makes them all at once instead: each is a few
    milliseconds of delta-rs I/O on a folder and a few round trips on object storage, and
    none depends on another (each is fenced to its own recorded version, and a crash
    between any two is recovered alike, whichever order they landed in). An epoch in Spark
    keeps the order: its state rows may still be computed by Spark jobs, which a session
    runs one at a time."""
    after = record.payload["output_version"]

    def write_output() -> None:
        if holds_epoch(where.output, epoch):  # the interrupted attempt already applied this epoch's output change
            rows = computed.rows if computed is not None else row_count(where.output, latest_version(where.output))
            if rows is not None:
                stats["rows_out"] = rows
            return
        if computed is not None and ctx.full:
            stats["rows_written"] = stats["rows_out"] = output.overwrite_expanded(where.output, computed.table, epoch, after=after)
        elif computed is None:
            stats["rows_written"] = stats["rows_out"] = output.overwrite(
                where.output, output.expand(shaped, view.schema.names), view.schema, epoch, after=after, few=ctx.small_build
            )
        else:
            stats["rows_out"] = computed.rows
            if computed.rows:
                output.apply_change(where.output, computed, view.schema, epoch, output_version=after)

    commits = [*(partial(append.commit, ctx) for append in ctx.writes), write_output]
    if not at_once:
        written = [commit() for commit in commits]
    else:
        with ThreadPoolExecutor(max_workers=min(len(commits), COMMIT_THREADS), thread_name_prefix="ivm-commit") as pool:
            # Each in a copy of this context: the refresh's Delta handle cache goes along.
            futures = [pool.submit(contextvars.copy_context().run, commit) for commit in commits]
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:  # after a failure, start no other commit (those running finish)
                future.cancel()
        failed = next((f for f in futures if not f.cancelled() and f.exception() is not None), None)
        if failed is not None:
            raise failed.exception()
        written = [f.result() for f in futures]
    state_rows = [w for w in written[:-1] if w is not None]  # None: the table had nothing to commit
    if state_rows:
        stats["state_rows_written"] = stats.get("state_rows_written", 0) + sum(state_rows)


# Commits of an epoch computed in process made at once (see _commit); more threads than
# this gain nothing on two cores, and a store may throttle a burst.
COMMIT_THREADS = 4


def _snapshots(
    view: CompiledView, relations: dict[str, str], sources: dict[str, dict], counts: dict[str, int | None], budget: int,
    notes: dict[str, str],
) -> dict[str, pa.Table]:
    """A build's input in process: each source's rows at its version (the columns the view
    reads) as a change set of insertions (weight +1), read by delta-rs; empty, with the
    reason in ``notes["engine"]``, when they would take more than ``budget`` bytes as Arrow
    (``IVM_PROCESS_BUILD_MB``): estimated from their row ``counts`` (the Delta log's) and
    the columns' types before anything is read, then counted as each source is read."""
    columns = {name: cdc.used_columns(view.root, name) for name in sources}
    estimate = 0
    for name, s in sources.items():
        rows = counts[name]
        if rows is None:
            notes["engine"] = f"spark: the Delta log of {name} does not count its rows"
            return {}
        schema = arrow_schema_at(relations[name], s["to"])
        estimate += rows * (WEIGHT_BYTES + sum(arrow_width(schema.field(c).type) for c in columns[name] or schema.names))
    if estimate > budget:
        notes["engine"] = f"spark: the sources' columns take ~{_mib(estimate)} as Arrow (in process up to {_mib(budget)}, IVM_PROCESS_BUILD_MB)"
        return {}
    tables: dict[str, pa.Table] = {}
    for name, s in sources.items():
        rows = read_arrow(relations[name], s["to"], list(columns[name]) if columns[name] is not None else None)
        tables[name] = rows.append_column(WEIGHT, pa.repeat(pa.scalar(1, pa.int64()), rows.num_rows))
        if (held := sum(t.nbytes for t in tables.values())) > budget:
            notes["engine"] = f"spark: the sources' columns take over {_mib(held)} as Arrow (in process up to {_mib(budget)}, IVM_PROCESS_BUILD_MB)"
            return {}
    return tables


# An Arrow column's bytes per row where its type does not say (strings: offsets and a guess
# of the text; the reads count the real size), and those of the weight column.
VARIABLE_WIDTH_BYTES = 20
WEIGHT_BYTES = 8


def arrow_width(type_: pa.DataType) -> float:
    """Bytes per row of an Arrow column of ``type_``: exact for fixed-width types."""
    try:
        return type_.bit_width / 8
    except ValueError:
        return VARIABLE_WIDTH_BYTES


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB"


def _in_process(ctx: EpochContext, view: CompiledView, tables: dict[str, pa.Table], notes: dict[str, str]) -> Batch | None:
    """The output change of a small epoch computed in process (:mod:`ivm_assets.render.duckdb.epoch`;
    an incremental one, or a small build: every row inserted into empty state), its state
    commits queued; None, with the reason in ``notes["engine"]``, when the epoch must run
    in Spark (nothing was committed)."""
    if settings.current().small_epochs == "spark":
        notes["engine"] = "spark: IVM_SMALL_EPOCHS=spark"
        return None
    if sum(ctx.change_rows.values()) > LOCAL_CHANGE_ROWS:
        notes["engine"] = f"spark: {sum(ctx.change_rows.values())} change rows (in process up to {LOCAL_CHANGE_ROWS})"
        return None
    stats = dict(ctx.stats)
    try:
        change = LocalEpoch(ctx, tables).run(view.root, arrow_schema(view.schema))
    except Untranslatable as why:
        ctx.writes.clear()
        ctx.stats.clear()
        ctx.stats.update(stats)  # state reads counted again by the Spark epoch
        notes["engine"] = f"spark: {why}"
        if why.operator is not None:
            notes["operator"] = why.operator
        return None
    notes["engine"] = "in process"
    ctx.stats["epochs_in_process"] = 1
    return Batch.of_table(ctx.spark, change)


def _recompute(
    spark: SparkSession, view: CompiledView, where: ViewLocation, frames: dict[str, DataFrame], epoch: Epoch, after: int | None,
    *, few: bool,
) -> dict:
    """Full recompute with Spark SQL itself (views with constructs that are not incremental);
    ``few``: a small build, its rows written from the driver."""
    for name, frame in frames.items():
        frame.drop(WEIGHT).createOrReplaceTempView(name)
    rows = spark.sql(view.sql)
    rows = rows.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in view.schema.fields])
    if holds_epoch(where.output, epoch):
        return {}
    written = output.overwrite(where.output, rows, view.schema, epoch, after=after, few=few)
    return {"rows_written": written, "rows_out": written}


def _source_rows(counts: dict[str, int | None], bound: int) -> int | None:
    """The rows the sources hold together (``counts``: each one's, from the Delta log's file
    statistics); None when some count is unknown (no statistics) or the total passes ``bound``.

    A full epoch over at most ``IVM_SMALL_BUILD_ROWS`` source rows (default 50,000) is a
    small build: it runs as a small epoch does in Spark (one partition, no adaptive planning,
    interpreted) and its state and output come to the driver as Arrow and are written by
    delta-rs, where a large one's are written by the executors. Below that size Spark's
    write jobs and file commit protocol cost more than the rows (the tests' builds: the SQL
    step fixtures took 8 % less time, the small TPC-H test 20 %). A join can still multiply
    its rows: the driver then holds what an incremental epoch of that size would. Before
    either, a build whose sources' columns fit ``IVM_PROCESS_BUILD_MB`` runs in process where
    its rules translate (:func:`_snapshots`), unless the setting is 0."""
    if any(rows is None for rows in counts.values()):
        return None
    total = sum(counts.values())
    return total if total <= bound else None
