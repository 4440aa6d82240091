"""`ivm explain`: the dataflow of a view as text."""

from __future__ import annotations

from ivm_assets.engine.compile import CompiledView
from ivm_assets.engine.cost import CostEstimate
from ivm_assets.engine.refresh import ViewLocation
from ivm_assets.rules.operator import Operator
from ivm_assets.state.progress import EpochRecord


def explain_view(
    view: CompiledView, where: ViewLocation, pending: CostEstimate | None = None, last: EpochRecord | None = None
) -> str:
    """Operators (with their rule on changes), their state tables, what is not incremental,
    where the ``last`` committed epoch ran, and the cost model's estimate for the changes
    ``pending`` since it."""
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
        lines.append(f"  next refresh: {pending.describe()}")
    lines.append("  operators:")
    _tree(view.root, where, lines, depth=2)
    return "\n".join(lines)


def _tree(op: Operator, where: ViewLocation, lines: list[str], depth: int) -> None:
    pad = "  " * depth
    lines.append(f"{pad}{op.id}: {op.describe()}")
    for table in op.state_tables:
        lines.append(f"{pad}  state [{table.layout_kind}, key {', '.join(table.keys) or '-'}]: {table.uri(where.state_root)}")
    for child in op.inputs:
        _tree(child, where, lines, depth + 1)
