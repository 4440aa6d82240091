"""One refresh of one view: decide the epoch, run it, commit it.

Order of commits in an epoch (the crash tests kill the process after each in turn):
``started`` progress record → each state table (append, or overwrite on full) → output
(MERGE, or overwrite on full) → ``committed`` progress record. A refresh that finds a
``started`` epoch without ``committed`` repeats it from the inputs that record fixed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm_assets.delta import tables as delta
from ivm_assets.delta.tables import WEIGHT, Epoch
from ivm_assets.engine import changes as cdc
from ivm_assets.engine import output
from ivm_assets.engine.compile import CompiledView
from ivm_assets.errors import RefreshError
from ivm_assets.operators.base import EpochContext, materialize
from ivm_assets.spark.session import tuned_for
from ivm_assets.sql.incrementalize import operators
from ivm_assets.state.progress import EpochRecord, Progress


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
) -> RefreshResult:
    """Bring ``view`` up to the sources' latest versions (see module doc)."""
    started = time.perf_counter()
    progress = Progress(where.progress)
    latest = progress.latest()
    if latest is not None and latest.status == "started":
        record = latest  # an interrupted epoch: finish it exactly as planned
    else:
        record = _plan_epoch(view, where, relations, latest, full=full)
        if record is None:
            assert latest is not None
            sources = {s: (r["to"], r["to"]) for s, r in latest.payload["sources"].items()}
            return RefreshResult(view.name, "unchanged", None, latest.epoch, sources, 0, 0, time.perf_counter() - started)
        progress.append(epoch=record.epoch, status="started", mode=record.mode, reason=record.reason, payload=record.payload)
    epoch = Epoch(f"ivm:{view.name}", record.epoch, {"ivm.view": view.name, "ivm.mode": record.mode})
    with tuned_for(spark, small=record.mode != "full"):
        stats = _run_epoch(spark, view, where, relations, record, epoch, buckets)
    out_version = delta.latest_version(where.output)
    payload = {**record.payload, "stats": stats, "output_version_after": out_version}
    progress.append(epoch=record.epoch, status="committed", mode=record.mode, reason=record.reason, payload=payload)
    if view.root is not None:
        stats["state_tables_compacted"] = sum(
            table.compact(spark, where.state_root, buckets) for op in operators(view.root) for table in op.state_tables
        )
    sources = {s: (r["from"], r["to"]) for s, r in record.payload["sources"].items()}
    return RefreshResult(
        view.name, record.mode, record.reason, record.epoch, sources, stats.get("rows_in", 0), stats.get("rows_out", 0),
        time.perf_counter() - started, out_version, stats,
    )


def _plan_epoch(view: CompiledView, where: ViewLocation, relations: dict[str, str], latest: EpochRecord | None, *, full: bool):
    """The next epoch's record, or None when no source moved and nothing forces a refresh."""
    last = latest.payload if latest else None
    sources: dict[str, dict] = {}
    for name in view.definition.dependencies:
        uri = relations[name]
        upto = delta.latest_version(uri)
        before = last["sources"].get(name) if last else None
        sources[name] = {"from": before["to"] if before else None, "to": upto, "schema": cdc.schema_signature(uri, upto)}
    moved = any(s["from"] != s["to"] for s in sources.values())
    up_to_date = last is not None and last.get("sql_hash") == view.definition.sql_hash and delta.is_delta_table(where.output)
    if up_to_date and not moved and not full:
        return None
    # Checking the change feeds reads each source's history: done once, used twice.
    problem = _source_problem(last, sources, relations) if last else None
    reason = _full_reason(view, where, last, problem, full)
    mode = "full" if reason else "incremental"
    if problem and view.definition.settings.refresh == "incremental" and not full:
        raise RefreshError(
            f"view {view.name!r} has `refresh: incremental` but cannot be refreshed incrementally now: {problem}. "
            "Run `ivm refresh --full` (or set `refresh: auto`) to rebuild it from the sources."
        )
    state_versions = {}
    if mode == "incremental":
        for op in operators(view.root):
            for table in op.state_tables:
                uri = table.uri(where.state_root)
                state_versions[table.table_name] = delta.latest_version(uri) if delta.is_delta_table(uri) else None
    payload = {
        "sources": sources,
        "state_versions": state_versions,
        "output_version": delta.latest_version(where.output) if delta.is_delta_table(where.output) else None,
        "sql_hash": view.definition.sql_hash,
    }
    return EpochRecord((latest.epoch + 1) if latest else 1, "planned", mode, reason, payload, None)


def _full_reason(view: CompiledView, where: ViewLocation, last: dict | None, source_problem: str | None, full: bool) -> str | None:
    if last is None or not delta.is_delta_table(where.output):
        return "first build"
    if full:
        return "full refresh requested"
    if view.definition.settings.refresh == "full":
        return "`refresh: full` in ivm.yaml"
    if not view.incremental:
        return view.reason()
    if last.get("sql_hash") != view.definition.sql_hash:
        return "view SQL changed"
    return source_problem


def _source_problem(last: dict, sources: dict, relations: dict[str, str]) -> str | None:
    """Why some source's change feed cannot carry this epoch (None if all can)."""
    for name, s in sources.items():
        before = last["sources"].get(name)
        if before is None:
            return f"new source {name}"
        why = cdc.unusable_range(
            name, relations[name], s["from"], s["to"], recorded_schema=before.get("schema"), schema_now=s["schema"]
        )
        if why:
            return why
    return None


def _run_epoch(
    spark: SparkSession, view: CompiledView, where: ViewLocation, relations: dict[str, str], record: EpochRecord, epoch: Epoch, buckets: int
) -> dict:
    sources = record.payload["sources"]
    stats: dict[str, int] = {}
    if record.mode == "full":
        frames = {name: cdc.read_full(spark, relations[name], s["to"]) for name, s in sources.items()}
    else:
        frames = {}
        for name, s in sources.items():
            frames[name], stats[f"rows_in.{name}"] = cdc.read_range(spark, name, relations[name], s["from"], s["to"])
        stats["rows_in"] = sum(v for k, v in stats.items() if k.startswith("rows_in."))
    if view.root is None:
        return {**stats, **_recompute(spark, view, where, frames, epoch)}
    ctx = EpochContext(spark, epoch, record.mode == "full", where.state_root, buckets, frames, record.payload["state_versions"], stats)
    change = view.root.step(ctx)
    shaped = materialize(output.shape(change, view.root.columns, view.schema), small=record.mode != "full")
    stats["rows_out"] = shaped.rows
    if delta.holds_epoch(where.output, epoch):
        return stats  # the interrupted attempt already applied this epoch's output change
    if record.mode == "full":
        stats["rows_written"] = output.overwrite(where.output, output.expand(shaped.df, view.schema.names), view.schema, epoch)
    elif shaped.rows:
        output.apply_change(where.output, shaped, view.schema, epoch, output_version=record.payload["output_version"])
    return stats


def _recompute(spark: SparkSession, view: CompiledView, where: ViewLocation, frames: dict[str, DataFrame], epoch: Epoch) -> dict:
    """Full recompute with Spark SQL itself (views with constructs that are not incremental)."""
    for name, frame in frames.items():
        frame.drop(WEIGHT).createOrReplaceTempView(name)
    rows = spark.sql(view.definition.text)
    rows = rows.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in view.schema.fields])
    if delta.holds_epoch(where.output, epoch):
        return {}
    written = output.overwrite(where.output, rows, view.schema, epoch)
    return {"rows_written": written, "rows_out": written}
