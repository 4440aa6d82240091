"""One refresh of one view: claim the view, decide the epoch, run it, commit it (the epoch
is planned here, run and committed by :mod:`ivm_assets.engine.execute`).

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

import time
from dataclasses import dataclass, field, replace

from pyspark.sql import SparkSession

from ivm_assets.delta.handles import is_delta_table, latest_version, reusing_handles
from ivm_assets.delta.io_counts import IoCounts, counting
from ivm_assets.delta.log import table_id
from ivm_assets.delta.maintenance import clean_log, remove_tables_except
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.engine import changes as cdc
from ivm_assets.engine.compile import CompiledView
from ivm_assets.engine.cost import estimate
from ivm_assets.engine.execute import execute
from ivm_assets.errors import ExpressionError, RebuildNeeded, RefreshError
from ivm_assets.spark.session import SEMANTIC_SETTINGS
from ivm_assets.rules.incrementalize import fingerprint, identity, operators
from ivm_assets.rules.window import WindowOp
from ivm_assets.state.claim import ClaimSettings, hold
from ivm_assets.state.compaction import compact_from, compaction_due
from ivm_assets.state.layout import DEFAULT_BUCKETS, FORMAT
from ivm_assets.state.progress import EpochRecord, Progress, ProgressState, now
from ivm_assets.state import arrangement


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
    # Where the epoch ran: "in process" (DuckDB), or "spark: <why not in process>"; None for
    # a full epoch that is not a small build (Spark's executors compute and write it).
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
    buckets: int | None,
    full: bool = False,
    claim: ClaimSettings | None = None,
) -> RefreshResult:
    """Bring ``view`` up to the sources' latest versions (see module doc).

    A full refresh replaces an interrupted epoch instead of repeating it (it rewrites every
    table anyway, and it is the way out when a table was changed under an epoch).
    ``buckets`` None (ivm.yaml sets no ``state_buckets``): the view keeps the buckets its
    state was built with, and a view without state gets :data:`~ivm_assets.state.layout.DEFAULT_BUCKETS`,
    so a changed default rebuilds nothing.
    """
    # Planning, the operators, the commits and compaction read the same table versions:
    # each version's log is read once.
    with reusing_handles(), counting() as delta_io:
        return _refresh(spark, view, where=where, relations=relations, buckets=buckets, full=full, claim=claim, delta_io=delta_io)


def _refresh(
    spark: SparkSession,
    view: CompiledView,
    *,
    where: ViewLocation,
    relations: dict[str, str],
    buckets: int | None,
    full: bool,
    claim: ClaimSettings | None,
    delta_io: IoCounts,
) -> RefreshResult:
    began = time.perf_counter()
    progress = Progress(where.progress)
    state = progress.read()
    unclaimed = state.claim is None or state.claim.expired()
    idle = not full and state.started is None and unclaimed
    if idle and _up_to_date(view, where, relations, _source_versions(view, relations), state.committed):
        return _unchanged(view, state.committed, began)  # nothing to do: no claim, no commit
    if buckets is None:
        buckets = _built_buckets(view, where) or DEFAULT_BUCKETS

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
            stats, ran = execute(spark, view, where, relations, record, buckets)
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
            stats, ran = execute(spark, view, where, relations, record, buckets)
        engine = ran.get("engine")
        out_version = latest_version(where.output)
        payload = {**record.payload, "stats": stats, "output_version_after": out_version, "engine": engine}
        if "operator" in ran:
            payload["engine_operator"] = ran["operator"]  # `ivm explain` shows the reason beside it
        done = EpochRecord(record.epoch, "committed", record.mode, record.reason, payload, now())
        tables = [t for op in operators(view.root) for t in op.state_tables] if view.root is not None else []
        due = [(t, found) for t in tables if (found := compaction_due(t, where.state_root)) is not None]
        clean = record.epoch % LOG_CLEANUP_EPOCHS == 0
        if not due and record.mode != "full" and not clean:
            held.finish(committed=done, started=None)
        else:
            held.commit(committed=done, started=None)
            # All only touch what the committed epoch no longer needs to be right, under the
            # claim (so no other epoch reads an older state version meanwhile).
            stats["state_tables_compacted"] = sum(compact_from(table, spark, where.state_root, *found) for table, found in due)
            if record.mode == "full":
                stats["stale_state_tables_removed"] = remove_tables_except(where.state_root, [t.table_name for t in tables])
            if clean:
                for uri in [where.progress, *(t.uri(where.state_root) for t in tables)]:
                    clean_log(uri)
    stats["delta_log_reads"] = delta_io.log_reads
    stats["delta_change_reads"] = delta_io.change_reads
    stats["delta_commits"] = delta_io.commits  # claim and its release included
    sources = {s: (r["from"], r["to"]) for s, r in record.payload["sources"].items()}
    return RefreshResult(
        view.name, record.mode, record.reason, record.epoch, sources, stats.get("rows_in", 0), stats.get("rows_out", 0),
        time.perf_counter() - began, out_version, stats, (record.payload.get("cost") or {}).get("text"), engine,
    )


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

# Recorded by every epoch since consolidation keeps the sign of a zero (ivm_assets.zset):
# FLOAT and DOUBLE values stored before it hold 0.0 for −0.0, and a change that removes
# the −0.0 would not find them. Its level: 1 (true) when state kept signs but MIN/MAX's
# value tables and top-k buffers did not, 2 since they do, 3 since windows emit them (a
# window view's output held 0.0 for −0.0 before; other views need no rebuild for it).
SIGNED_ZEROS = "signed_zeros"
SIGNED_ZEROS_LEVEL = 3


def _unsigned_zeros(view: CompiledView, where: ViewLocation, last: dict) -> str | None:
    """Why the view must be rebuilt to keep the sign of zeros (None when it need not): its
    last epoch stored zeros unsigned, and its output or a state table has a FLOAT or DOUBLE
    column (read once per view: the next epoch records that zeros are signed)."""
    level = int(last.get(SIGNED_ZEROS) or 0)
    if level >= SIGNED_ZEROS_LEVEL:  # every refresh after the first at this level
        return None
    ops = list(operators(view.root)) if view.root is not None else []
    if level == 2 and not any(isinstance(op, WindowOp) for op in ops):
        return None
    # Types as text, nested ones included (a name inside a struct may rebuild in vain).
    stored = [f.dataType.simpleString() for f in view.schema.fields]
    for op in ops:
        for t in op.state_tables:
            if is_delta_table(uri := t.uri(where.state_root)):
                stored += [str(f.type) for f in arrow_schema(uri)]
    if any(word in text for text in stored for word in ("float", "double")):
        return "an earlier version stored −0.0 as 0.0 in FLOAT and DOUBLE columns: view rebuilt to keep the sign of zeros"
    return None


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
    plan = {"plan_identity": identity(view.root, FORMAT), "plan_fingerprint": fingerprint(view.root, FORMAT)} if view.root is not None else {}
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
        "plan_fingerprint": plan.get("plan_fingerprint"),
        "plan_identity": plan.get("plan_identity"),
        "output_version": latest_version(where.output) if is_delta_table(where.output) else None,
        "sql_hash": view.definition.sql_hash,
        "semantics": view.semantics,
        SIGNED_ZEROS: SIGNED_ZEROS_LEVEL,
        "compiled": view.record(),
        "cost": {**cost.to_json(), "text": cost.describe()} if cost else None,
    }
    number = state.latest.epoch + 1 if state.latest else 1
    return EpochRecord(number, "started", mode, reason, payload, now())


def _full_reason(
    view: CompiledView, where: ViewLocation, last: dict | None, source_problem: str | None, full: str | None, plan: dict[str, str]
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
    if unsigned := _unsigned_zeros(view, where, last):
        return unsigned
    if source_problem:  # before the plan check: a source's own change names the column
        return source_problem
    # Compared by identity; an epoch recorded before identities were, by its fingerprint.
    compared = "plan_identity" if last.get("plan_identity") else "plan_fingerprint"
    if plan and last.get(compared) != plan[compared]:
        return "operator plan changed (new engine version or upstream schema): state rebuilt"
    return None


def _built_buckets(view: CompiledView, where: ViewLocation) -> int | None:
    """The buckets the view's state was built with, as its first state table's last commit
    recorded them (None: no state yet, or no layout recorded)."""
    tables = [t for op in operators(view.root) for t in op.state_tables] if view.root is not None else []
    head = arrangement.head_layout(tables[0], where.state_root) if tables else None
    return head[1].buckets if head is not None and head[1] is not None else None


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
            name, head = table.table_name, arrangement.head_layout(table, where.state_root)
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
            if why := recorded.difference(arrangement.layout_of(table, buckets, []), compare_hashes=False):
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
