"""`ivm explain`: the dataflow of a view as text."""

from __future__ import annotations

from ivm_assets.engine.compile import CompiledView
from ivm_assets.engine.cost import CostEstimate
from ivm_assets.engine.refresh import ViewLocation
from ivm_assets.render.duckdb.epoch import LOCAL_CHANGE_ROWS
from ivm_assets.rules.operator import Operator
from ivm_assets.state.progress import EpochRecord


def explain_view(
    view: CompiledView, where: ViewLocation, pending: CostEstimate | None = None, last: EpochRecord | None = None
) -> str:
    """Operators (with their rule on changes), their state tables, what is not incremental,
    where the ``last`` committed epoch ran (and which operator kept it out of process), and
    for the changes ``pending`` since it the cost model's estimate and the engine it picks."""
    d = view.definition
    lines = [
        f"view {d.name}  ({d.file})",
        f"  output:   {where.output}  ({', '.join(f'{f.name} {f.dataType.simpleString()}' for f in view.schema.fields)})",
        f"  refresh:  {d.settings.refresh}",
        f"  reads:    {', '.join(d.dependencies)}",
    ]
    if view.root is None:
        lines.append("  maintained by: FULL RECOMPUTE")
        for finding in view.findings:
            lines.append(f"    - {finding.describe()}")
        return "\n".join(lines)
    lines.append("  maintained by: INCREMENTAL dataflow")
    if d.settings.refresh == "full":
        lines.append("    (but `refresh: full` is set: every refresh recomputes)")
    lines.append("  small epochs: in process (DuckDB over Arrow) where their expressions and key types allow, else in Spark")
    if last is not None:
        ran = last.payload.get("engine") or ("in Spark" if last.mode == "full" else "no change reached an operator")
        lines.append(f"  last epoch: {last.epoch} ({last.mode}), {ran}")
    if pending is not None:
        lines.append(f"  next refresh: {pending.describe()}; {_engine(pending)}")
    lines.append("  operators:")
    kept_out = (last.payload.get("engine_operator"), last) if last is not None else (None, None)
    _tree(view.root, where, lines, 2, kept_out)
    return "\n".join(lines)


def _engine(pending: CostEstimate) -> str:
    """Where the next epoch runs, as :func:`~ivm_assets.engine.execute.execute` decides it
    from the change's size (whether its rules render in process is known when it runs)."""
    if pending.recompute_is_cheaper():
        return "engine: a rebuild, in process where the sources' columns fit IVM_PROCESS_BUILD_MB, else Spark"
    if pending.change_rows is not None and pending.change_rows > LOCAL_CHANGE_ROWS:
        return f"engine: Spark ({pending.change_rows:,} change rows; in process up to {LOCAL_CHANGE_ROWS:,})"
    return "engine: in process (DuckDB over Arrow) where every operator renders there, else Spark"


def _tree(op: Operator, where: ViewLocation, lines: list[str], depth: int, kept_out: tuple[str | None, EpochRecord | None]) -> None:
    pad = "  " * depth
    lines.append(f"{pad}{op.id}: {op.describe()}")
    operator, last = kept_out
    if op.id == operator and last is not None:
        why = str(last.payload.get("engine", "")).removeprefix("spark: ")
        lines.append(f"{pad}  in Spark at epoch {last.epoch}, not in process: {why}")
    for table in op.state_tables:
        lines.append(f"{pad}  state [{table.layout_kind}, key {', '.join(table.keys) or '-'}]: {table.uri(where.state_root)}")
    for child in op.inputs:
        _tree(child, where, lines, depth + 1, kept_out)
