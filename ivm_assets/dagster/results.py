"""A refresh result as Dagster sees it: a MaterializeResult with what the epoch did.

Besides the ``ivm/*`` facts of the epoch, each materialization carries the table metadata
Dagster reads from materializations (``dagster/column_schema``, ``dagster/column_lineage``,
``dagster/row_count``), and the column lineage once more as a markdown table
(``ivm/column_lineage``): open-source Dagster records lineage but does not display it.
"""

from __future__ import annotations

import os

import dagster as dg

from ivm_assets.dagster.lineage import delta_columns
from ivm_assets.dagster.translator import lineage_markdown
from ivm_assets.delta.handles import is_delta_table, latest_version
from ivm_assets.delta.snapshot import row_count, snapshot_bytes
from ivm_assets.engine.refresh import RefreshResult
from ivm_assets.project import IvmProject
from ivm_assets.spark.session import describe


def data_version(result: RefreshResult) -> dg.DataVersion:
    """The source versions the output now reflects: equal versions mean equal data."""
    return dg.DataVersion(";".join(f"{s}@{to}" for s, (_, to) in sorted(result.source_versions.items())))


def materialize_result(project: IvmProject, result: RefreshResult, spec: dg.AssetSpec) -> dg.MaterializeResult:
    where = project.location(result.view)
    metadata: dict[str, object] = {
        "ivm/mode": result.mode,
        "ivm/epoch": result.epoch,
        "ivm/source_versions": {s: f"{'∅' if a is None else a}→{b}" for s, (a, b) in result.source_versions.items()},
        "ivm/change_rows_per_source": {
            s: result.stats.get(f"rows_in.{s}", 0) for s in result.source_versions
        },
        "ivm/change_rows_in": result.rows_in,
        "ivm/change_rows_out": result.rows_out,
        "ivm/duration_s": round(result.duration_s, 3),
        "dagster/uri": where.output,
        "ivm/spark": describe(project.session),
    }
    if result.reason:
        # Markdown wraps in the UI; a plain text value is cut at the column's width.
        metadata["ivm/reason"] = dg.MetadataValue.md(result.reason)
    if result.cost:
        metadata["ivm/cost"] = dg.MetadataValue.md(result.cost)
    if result.engine:
        metadata["ivm/engine"] = result.engine  # "in process", or "spark: <why not in process>"
    columns = None
    if is_delta_table(where.output):
        version = latest_version(where.output)
        metadata["ivm/output_version"] = version
        rows = row_count(where.output, version)
        if rows is not None:
            metadata["dagster/row_count"] = rows
        columns = delta_columns(where.output)
        if columns is not None:
            metadata["dagster/column_schema"] = dg.TableSchema(columns=[dg.TableColumn(name=n, type=t) for n, t in columns])
    lineage = spec.metadata.get("dagster/column_lineage")
    if isinstance(lineage, dg.TableColumnLineage):
        metadata["dagster/column_lineage"] = lineage
    if columns is not None or lineage is not None:
        metadata["ivm/column_lineage"] = dg.MetadataValue.md(lineage_markdown(columns, lineage))
    state_bytes = _state_bytes(where.state_root)
    if state_bytes is not None:
        metadata["ivm/state_bytes"] = state_bytes
    return dg.MaterializeResult(asset_key=spec.key, metadata=metadata, data_version=data_version(result))


def _state_bytes(state_root: str) -> int | None:
    """Size of the view's operator state tables; None for remote warehouses (listing is not free)."""
    if "://" in state_root or not os.path.isdir(state_root):
        return None
    total = 0
    for entry in os.scandir(state_root):
        if entry.is_dir() and not entry.name.startswith("_") and is_delta_table(entry.path):
            total += snapshot_bytes(entry.path, version=latest_version(entry.path))
    return total
