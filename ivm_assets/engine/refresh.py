"""One refresh of one view: claim the view, decide the epoch, run it, commit it.

Order of commits in an epoch (the crash tests kill the process after each in turn): the
claim with the ``started`` progress record (one commit) → each state table (append, or
overwrite on full) → output (MERGE, or overwrite on full; an epoch computed in process
commits its state tables and output at once, in any order) → ``committed`` progress record
with the claim's release (one commit; when a compaction is due, the epoch was full, or
every ``LOG_CLEANUP_EPOCHS``-th epoch: ``committed``, compactions and log cleanup, then
the release). A refresh that finds a ``started`` epoch
without ``committed`` repeats it from the inputs that record fixed. Every table commit is
fenced to the version the ``started`` record fixed for that table, so even two attempts of
one epoch running at once apply it once.
"""

from __future__ import annotations

import contextvars
import re
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets import decimal_rules, settings
from ivm_assets.delta.commit import Epoch, holds_epoch
from ivm_assets.delta.handles import is_delta_table, latest_version, log_reads, reusing_handles
from ivm_assets.delta.log import table_id
from ivm_assets.delta.maintenance import clean_log, remove_tables_except
from ivm_assets.delta.snapshot import row_count
from ivm_assets.engine import changes as cdc
from ivm_assets.engine import output
from ivm_assets.engine.compile import CompiledView
from ivm_assets.engine.cost import estimate
from ivm_assets.errors import (
    CommitConflictError, ExpressionError, InexactAggregate, LostDataFile, RebuildNeeded, RefreshError,
)
from ivm_assets.local.epoch import LOCAL_CHANGE_ROWS, LocalEpoch, Untranslatable
from ivm_assets.operators.base import Batch, EpochContext, discard_pending, materialize
from ivm_assets.spark.arrow import arrow_schema, to_spark
from ivm_assets.spark.metrics import counting_jobs
from ivm_assets.spark.session import SEMANTIC_SETTINGS, LazySession, tuned_for
from ivm_assets.sql.incrementalize import fingerprint, operators
from ivm_assets.state.arrangement import FORMAT
from ivm_assets.state.claim import ClaimSettings, hold
from ivm_assets.state.progress import EpochRecord, Progress, ProgressState, now
from ivm_assets.testing import faults
from ivm_assets.zset import WEIGHT


# Every this many epochs, after the epoch committed and before the claim is released, the
# view's internal tables' logs are cleaned (``delta.clean_log``, ~1-8 ms a table): each then
# holds the commits since its last checkpoint plus at most this many epochs' worth.
LOG_CLEANUP_EPOCHS = 10


@dataclass(frozen=True)
class RefreshResult:
    """What one refresh of one view did."""

    view: str
    mode: str  # "incremental" | "full" | "unchanged"
    reason: str | None
    epoch: int | None
    source_versions: dict[str, tuple[int | None, int]]
    rows_in: int
    rows_out: int
    duration_s: float
    output_version: int | None = None
    stats: dict[str, int] = field(default_factory=dict)
    # The cost model's estimate before the epoch (None when the mode was forced otherwise).
    cost: str | None = None
    # Where an incremental epoch ran: "in process" (DuckDB), or "spark: <why not in process>".
    engine: str | None = None

    def summary(self) -> str:
        ranges = ", ".join(f"{s} {a if a is not None else '∅'}→{b}" for s, (a, b) in self.source_versions.items())
        why = f" ({self.reason})" if self.reason else ""
        return (
            f"{self.view}: {self.mode}{why}; sources {ranges}; "
            f"{self.rows_in} change rows in, {self.rows_out} out; {self.duration_s:.2f}s"
        )


@dataclass
class ViewLocation:
    """Where a view's output, state and progress live."""

    output: str
    state_root: str

    @property
    def progress(self) -> str:
        return f"{self.state_root}/_progress"


def refresh_view(
    spark: SparkSession,
    view: CompiledView,
    *,
    where: ViewLocation,
    relations: dict[str, str],
    buckets: int,
    full: bool = False,
    claim: ClaimSettings | None = None,
) -> RefreshResult:
    """Bring ``view`` up to the sources' latest versions (see module doc).

    A full refresh replaces an interrupted epoch instead of repeating it (it rewrites every
    table anyway, and it is the way out when a table was changed under an epoch).
    """
    # Planning, the operators, the commits and compaction read the same table versions:
    # each version's log is read once.
    with reusing_handles():
        return _refresh(spark, view, where=where, relations=relations, buckets=buckets, full=full, claim=claim)


def _refresh(
    spark: SparkSession,
    view: CompiledView,
    *,
    where: ViewLocation,
    relations: dict[str, str],
    buckets: int,
    full: bool,
    claim: ClaimSettings | None,
) -> RefreshResult:
    began, log_reads_before, commits_before = time.perf_counter(), log_reads(), faults.commits_made()
    progress = Progress(where.progress)
    state = progress.read()
    unclaimed = state.claim is None or state.claim.expired()
    idle = not full and state.started is None and unclaimed
    if idle and _up_to_date(view, where, relations, _source_versions(view, relations), state.committed):
        return _unchanged(view, state.committed, began)  # nothing to do: no claim, no commit

    def begin(state: ProgressState) -> dict:
        """What to record with the claim: nothing for an interrupted epoch (finished exactly
        as planned), else the next epoch planned from ``state``, if there is one. An epoch
        that failed on the data (:class:`ExpressionError`) would fail again on the same
        inputs: it is replaced by a full epoch over the sources as they are now."""
        failed = state.started.payload.get("failed") if state.started is not None else None
        if not full and state.started is not None and failed is None:
            return {}
        if failed and not full and view.definition.settings.refresh == "incremental":
            raise RefreshError(
                f"view {view.name!r}: its last epoch failed on the data ({failed}) and would fail again on the same "
                "changes; with `refresh: incremental` it is not rebuilt on its own. Correct the rows, then run "
                f"`ivm refresh --full {view.name}`."
            )
        why = f"the last attempt failed on the data ({failed}); rebuilt from the sources" if failed and not full else None
        record = _plan_epoch(view, where, relations, state, full=full or failed is not None, buckets=buckets,
                             why_full=why or "full refresh requested")
        return {"started": record} if record is not None else {}

    with hold(progress, view.name, claim or ClaimSettings(), begin) as held:
        state = held.state
        record = state.started
        if record is None:
            return _unchanged(view, state.committed, began)
        try:
            stats, engine = _execute(spark, view, where, relations, record, buckets)
        except ExpressionError as error:
            # Recorded, so that the next refresh rebuilds instead of repeating (see begin).
            held.commit(started=replace(record, payload={**record.payload, "failed": error.condition}))
            raise
        except RebuildNeeded as needed:
            if record.mode == "full" or view.definition.settings.refresh == "incremental":
                raise
            # Nothing an incremental epoch could do gets the state right: rebuild from the
            # sources, in a new epoch that replaces this one (as `--full` would).
            record = _plan_epoch(view, where, relations, held.state, full=True, buckets=buckets, why_full=needed.reason)
            held.commit(started=record)
            stats, engine = _execute(spark, view, where, relations, record, buckets)
        out_version = latest_version(where.output)
        payload = {**record.payload, "stats": stats, "output_version_after": out_version, "engine": engine}
        done = EpochRecord(record.epoch, "committed", record.mode, record.reason, payload, now())
        tables = [t for op in operators(view.root) for t in op.state_tables] if view.root is not None else []
        due = [(t, found) for t in tables if (found := t.compaction_due(where.state_root)) is not None]
        clean = record.epoch % LOG_CLEANUP_EPOCHS == 0
        if not due and record.mode != "full" and not clean:
            held.finish(committed=done, started=None)
        else:
            held.commit(committed=done, started=None)
            # All only touch what the committed epoch no longer needs to be right, under the
            # claim (so no other epoch reads an older state version meanwhile).
            stats["state_tables_compacted"] = sum(table.compact_from(spark, where.state_root, *found) for table, found in due)
            if record.mode == "full":
                stats["stale_state_tables_removed"] = remove_tables_except(where.state_root, [t.table_name for t in tables])
            if clean:
                for uri in [where.progress, *(t.uri(where.state_root) for t in tables)]:
                    clean_log(uri)
    stats["delta_log_reads"] = log_reads() - log_reads_before
    stats["delta_commits"] = faults.commits_made() - commits_before  # claim and its release included
    sources = {s: (r["from"], r["to"]) for s, r in record.payload["sources"].items()}
    return RefreshResult(
        view.name, record.mode, record.reason, record.epoch, sources, stats.get("rows_in", 0), stats.get("rows_out", 0),
        time.perf_counter() - began, out_version, stats, (record.payload.get("cost") or {}).get("text"), engine,
    )


def _execute(
    spark: SparkSession, view: CompiledView, where: ViewLocation, relations: dict[str, str], record: EpochRecord, buckets: int
) -> tuple[dict, str | None]:
    """Run the epoch ``record`` planned: its statistics, and where it ran ("in process", or
    Spark and why; None for a full epoch)."""
    epoch = Epoch(f"ivm:{view.name}", record.epoch, {"ivm.view": view.name, "ivm.mode": record.mode})
    notes: dict[str, str] = {}
    try:
        try:
            stats = _run_epoch(spark, view, where, relations, record, epoch, buckets, notes)
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
        if _data_error(exc):
            raise ExpressionError(view.name, str(exc)) from exc
        raise
    return stats, notes.get("engine")


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


def _data_error(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark failing on the data (SQLSTATE class 22: an overflow, an
    invalid cast, a division by zero under ANSI mode), or a rule's own computation failing
    the same way (``decimal_rules.OVERFLOW`` raised in a Python worker)."""
    state = getattr(exc, "getSqlState", lambda: None)()
    return bool(state and state.startswith("22")) or decimal_rules.OVERFLOW in str(exc)


_MISSING_FILE = ("No such file or directory", "Failed to open local file", "FileNotFoundException", "FILE_NOT_EXIST")


def _rebuild_needed(exc: BaseException, view: str, where: ViewLocation) -> RebuildNeeded | None:
    """The :class:`RebuildNeeded` that ``exc``, raised while an epoch ran, amounts to: a
    missing data file of the view's own tables, or an aggregate that cannot stay exact (raised
    inside the plan); None for anything else."""
    text = f"{getattr(exc, 'filename', None) or ''} {exc}"
    inexact = re.search(re.escape(InexactAggregate.MARKER) + r": ([^;\n]+) (decimal|double);", text)
    if inexact:
        return InexactAggregate(view, inexact.group(1).strip(), inexact.group(2))
    if not isinstance(exc, FileNotFoundError) and not any(m in text for m in _MISSING_FILE):
        return None
    state = re.search(re.escape(where.state_root) + r"/([^/\s'\"]+)/[^\s'\"]*?\.parquet", text)
    if state:
        return LostDataFile(view, f"state table {state.group(1)}", state.group(0))
    out = re.search(re.escape(where.output) + r"/[^\s'\"]*?\.parquet", text)
    return LostDataFile(view, "the output table", out.group(0)) if out else None


def _unchanged(view: CompiledView, last: EpochRecord, began: float) -> RefreshResult:
    sources = {s: (r["to"], r["to"]) for s, r in last.payload["sources"].items()}
    return RefreshResult(view.name, "unchanged", None, last.epoch, sources, 0, 0, time.perf_counter() - began)


def _source_versions(view: CompiledView, relations: dict[str, str]) -> dict[str, int]:
    return {name: latest_version(relations[name]) for name in view.definition.dependencies}


def _identity(uri: str, version: int) -> dict[str, str]:
    """What a source's recorded versions are versions of: its location and its Delta table id."""
    return {"location": uri, "table_id": table_id(uri, version)}


def _identity_change(name: str, recorded: dict, now: dict) -> str | None:
    """How source ``name`` is another table than the one an epoch consumed, or None. Epochs
    recorded before identities were (no ``location``) are taken as the same table."""
    if recorded.get("location") is None:
        return None
    if recorded["location"] != now["location"]:
        return f"source {name} now reads {now['location']}, another table than {recorded['location']}"
    if recorded.get("table_id") != now["table_id"]:
        return (
            f"source {name} at {now['location']} is another Delta table than before (table id {now['table_id']}, "
            f"was {recorded.get('table_id')}: deleted and created again, or replaced)"
        )
    return None


# What epochs recorded before semantics were: the settings every session had then.
_EARLIER_SEMANTICS = {"ansi": "false", "time_zone": "UTC"}


def _semantics_change(last: dict, now: dict[str, str]) -> str | None:
    """Which Spark setting that changes the view's meaning differs from the last epoch's
    (ANSI mode, session time zone), in words; None when none does."""
    recorded = last.get("semantics") or _EARLIER_SEMANTICS
    for name, value in now.items():
        if recorded.get(name) != value:
            return f"Spark SQL semantics changed ({SEMANTIC_SETTINGS[name]}: {recorded.get(name)} → {value}): view recomputed"
    return None


def _up_to_date(
    view: CompiledView, where: ViewLocation, relations: dict[str, str], latest: dict[str, int], last: EpochRecord | None
) -> bool:
    """Whether the last committed epoch consumed every source's ``latest`` version, of the
    same tables, with the current SQL, and its output is there."""
    if last is None or last.payload.get("sql_hash") != view.definition.sql_hash or not is_delta_table(where.output):
        return False
    if _semantics_change(last.payload, view.semantics):
        return False
    consumed = last.payload["sources"]
    if {name: s["to"] for name, s in consumed.items()} != latest:
        return False
    return not any(_identity_change(name, s, _identity(relations[name], s["to"])) for name, s in consumed.items())


def _plan_epoch(
    view: CompiledView, where: ViewLocation, relations: dict[str, str], state: ProgressState, *, full: bool, buckets: int,
    why_full: str = "full refresh requested",
):
    """The next epoch's record, or None when no source moved and nothing forces a refresh;
    ``why_full`` is the reason recorded for a ``full`` epoch after a first build."""
    versions = _source_versions(view, relations)  # fixed here: the epoch reads up to these
    if not full and _up_to_date(view, where, relations, versions, state.committed):
        return None
    last = state.committed.payload if state.committed else None
    sources: dict[str, dict] = {}
    for name, upto in versions.items():
        before = last["sources"].get(name) if last else None
        # Only the columns the view reads are recorded and compared: other columns may change freely.
        schema = cdc.column_signature(relations[name], upto, cdc.used_columns(view.root, name))
        sources[name] = {"from": before["to"] if before else None, "to": upto, "schema": schema, **_identity(relations[name], upto)}
    # Checking the change feeds reads each source's history: done once, used twice.
    problem = _source_problem(view, last, sources, relations) if last else None
    state_versions, state_layouts, state_problem = _state_tables(view, where, last, buckets)
    plan = fingerprint(view.root, FORMAT) if view.root is not None else None
    reason = _full_reason(view, where, last, problem, why_full if full else None, plan) or state_problem
    cost = None
    if reason is None:
        cost = estimate(relations, {name: (s["from"], s["to"]) for name, s in sources.items()})
        if cost.recompute_is_cheaper() and view.definition.settings.refresh == "auto":
            reason = cost.describe()
    mode = "full" if reason else "incremental"
    if problem and view.definition.settings.refresh == "incremental" and not full:
        raise RefreshError(
            f"view {view.name!r} has `refresh: incremental` but cannot be refreshed incrementally now: {problem}. "
            "Run `ivm refresh --full` (or set `refresh: auto`) to rebuild it from the sources."
        )
    payload = {
        "sources": sources,
        "state_versions": state_versions,
        "state_layouts": state_layouts,
        "plan_fingerprint": plan,
        "output_version": latest_version(where.output) if is_delta_table(where.output) else None,
        "sql_hash": view.definition.sql_hash,
        "semantics": view.semantics,
        "compiled": view.record(),
        "cost": {**cost.to_json(), "text": cost.describe()} if cost else None,
    }
    number = state.latest.epoch + 1 if state.latest else 1
    return EpochRecord(number, "started", mode, reason, payload, now())


def _full_reason(
    view: CompiledView, where: ViewLocation, last: dict | None, source_problem: str | None, full: str | None, plan: str | None
) -> str | None:
    if last is None or not is_delta_table(where.output):
        return "first build"
    if full:
        return full
    if view.definition.settings.refresh == "full":
        return "`refresh: full` in ivm.yaml"
    if not view.incremental:
        return view.reason()
    if last.get("sql_hash") != view.definition.sql_hash:
        return "view SQL changed"
    if changed := _semantics_change(last, view.semantics):
        return changed
    if source_problem:  # before the plan check: a source's own change names the column
        return source_problem
    if plan is not None and last.get("plan_fingerprint") != plan:
        return "operator plan changed (new engine version or upstream schema): state rebuilt"
    return None


def _state_tables(view: CompiledView, where: ViewLocation, last: dict | None, buckets: int):
    """Each state table's version and recorded layout now, and why the state cannot be
    used by an incremental epoch (None when it can).

    Incremental epochs read state as of these versions, and every epoch commits to each
    table right after them (or creates the table when None).
    """
    versions: dict[str, int | None] = {}
    layouts: dict[str, str | None] = {}
    problem = None
    recorded_versions = (last or {}).get("state_versions", {})
    for op in operators(view.root) if view.root is not None else ():
        for table in op.state_tables:
            name, head = table.table_name, table.head_layout(where.state_root)
            versions[name], recorded = head if head else (None, None)
            layouts[name] = recorded.to_json() if recorded else None
            if problem or last is None:
                continue
            if head is None:
                if recorded_versions.get(name) is not None:
                    problem = f"state table {name} is missing: state rebuilt"
                continue
            if recorded is None:
                problem = f"state format changed: 1 → {FORMAT} (layout not recorded): state rebuilt"
                continue
            if why := recorded.difference(table.layout(buckets, []), compare_hashes=False):
                problem = f"state layout changed: {why}"
    return versions, layouts, problem


def _source_problem(view: CompiledView, last: dict, sources: dict, relations: dict[str, str]) -> str | None:
    """Why some source's change feed cannot carry this epoch (None if all can)."""
    for name, s in sources.items():
        before = last["sources"].get(name)
        if before is None:
            return f"new source {name}"
        if moved := _identity_change(name, before, s):
            return moved
        why = cdc.unusable_range(
            name, relations[name], s["from"], s["to"], recorded_schema=before.get("schema"), schema_now=s["schema"],
            columns=cdc.used_columns(view.root, name),
        )
        if why:
            return why
    return None


def _run_epoch(
    spark: SparkSession | LazySession, view: CompiledView, where: ViewLocation, relations: dict[str, str], record: EpochRecord,
    epoch: Epoch, buckets: int, notes: dict[str, str],
) -> dict:
    """Compute the epoch ``record`` planned and commit it (state, then output). An
    incremental epoch runs in process when it can, and touches ``spark`` only otherwise.

    A source's large change (:func:`~ivm_assets.engine.changes.large_range`) is read by
    Spark's executors, and its epoch runs in Spark; its ``rows_in`` is the Delta log's count."""
    sources = record.payload["sources"]
    full = record.mode == "full"
    stats: dict[str, int] = {}
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
        with _in_spark(spark, stats, small=not full) as spark:
            frames = {name: to_spark(spark, table) for name, table in tables.items()} or {
                name: cdc.read_full(spark, relations[name], s["to"]) for name, s in sources.items()
            }
            stats.update(_recompute(spark, view, where, frames, epoch, record.payload["output_version"]))
        return stats
    ctx = EpochContext(
        spark, epoch, full, where.state_root, buckets, {}, record.payload["state_versions"], stats,
        record.payload.get("state_layouts", {}), change_rows, ansi=view.semantics.get("ansi") == "true",
        time_zone=view.semantics.get("time_zone", "UTC"),
    )
    if view.root.unchanged(ctx):
        stats["rows_out"] = 0
        return stats  # no source change reaches the view: no state or output to touch
    if large:
        notes["engine"] = f"spark: the change of {', '.join(sorted(large))} is read by the executors"
    computed = _in_process(ctx, view, tables, notes) if not full and not large else None
    if computed is not None:
        _commit(ctx, view, where, record, epoch, stats, computed, None, at_once=True)
        return stats
    with _in_spark(spark, stats, small=not full) as spark:
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
        shaped = output.shape(view.root.step(ctx), view.root.columns, view.schema)
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
        if computed is None:
            stats["rows_written"] = stats["rows_out"] = output.overwrite(
                where.output, output.expand(shaped, view.schema.names), view.schema, epoch, after=after
            )
        else:
            stats["rows_out"] = computed.rows
            if computed.rows:
                output.apply_change(where.output, computed, view.schema, epoch, output_version=after)

    commits = [*ctx.writes, write_output]
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

def _in_process(ctx: EpochContext, view: CompiledView, tables: dict[str, pa.Table], notes: dict[str, str]) -> Batch | None:
    """The output change of a small incremental epoch computed in process
    (:mod:`ivm_assets.local.epoch`), its state commits queued; None, with the reason in
    ``notes["engine"]``, when the epoch must run in Spark (nothing was committed)."""
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
        return None
    notes["engine"] = "in process"
    ctx.stats["epochs_in_process"] = 1
    return Batch.of_table(ctx.spark, change)


def _recompute(
    spark: SparkSession, view: CompiledView, where: ViewLocation, frames: dict[str, DataFrame], epoch: Epoch, after: int | None
) -> dict:
    """Full recompute with Spark SQL itself (views with constructs that are not incremental)."""
    for name, frame in frames.items():
        frame.drop(WEIGHT).createOrReplaceTempView(name)
    rows = spark.sql(view.sql)
    rows = rows.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in view.schema.fields])
    if holds_epoch(where.output, epoch):
        return {}
    written = output.overwrite(where.output, rows, view.schema, epoch, after=after)
    return {"rows_written": written, "rows_out": written}
