"""What a view's columns are and where they come from, known without starting Spark.

Dagster loads definitions in every process it starts (webserver, daemon, each run), so asset
specs must be cheap to build: a Spark session costs ~10 s. Column names, types and lineage
here come from sqlglot over the sources' Delta schemas (read from the Delta log). A view
whose output table already exists reports the exact types Spark gave it; otherwise the types
are sqlglot's inference, which can differ in precision (e.g. the scale of a DECIMAL SUM).
Anything that cannot be worked out (a source not created yet, SQL sqlglot cannot qualify)
leaves the columns unknown rather than failing the load.

Example:
    >>> facts = view_facts(IvmProject.load("demo_project"))          # doctest: +SKIP
    >>> facts["region_totals"].lineage["revenue"]                     # doctest: +SKIP
    (('revenue_by_region_day', 'revenue'),)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import lineage
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from ivm_assets.delta.handles import is_delta_table
from ivm_assets.delta.snapshot import arrow_schema
from ivm_assets.errors import IvmError
from ivm_assets.project import IvmProject
from ivm_assets.spark.arrow import spark_schema
from ivm_assets.sql.dialect import DIALECT


@dataclass(frozen=True)
class ViewFacts:
    """A view's output columns (name, Spark SQL type) and, per column, the (relation, column) it reads."""

    columns: tuple[tuple[str, str], ...] | None = None
    lineage: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


def delta_columns(uri: str) -> tuple[tuple[str, str], ...] | None:
    """(name, type) of a Delta table's latest schema, or None if there is no table yet."""
    try:
        if not is_delta_table(uri):
            return None
        return tuple((f.name, f.dataType.simpleString()) for f in spark_schema(arrow_schema(uri)).fields)
    except (IvmError, OSError, ValueError):
        return None


def view_facts(project: IvmProject) -> dict[str, ViewFacts]:
    """Columns and column lineage of every view, in dependency order (views of views included)."""
    known: dict[str, tuple[tuple[str, str], ...] | None] = {name: delta_columns(uri) for name, uri in project.sources.items()}
    facts: dict[str, ViewFacts] = {}
    for name in project.order:
        definition = project.views[name]
        deps = definition.dependencies
        if any(known.get(d) is None for d in deps):
            facts[name] = ViewFacts(columns=delta_columns(project.location(name).output))
            known[name] = facts[name].columns
            continue
        schema = {d: dict(known[d]) for d in deps}  # type: ignore[arg-type]
        try:
            qualified = qualify(definition.statement.copy(), schema=schema, dialect=DIALECT, quote_identifiers=False)
            typed = annotate_types(qualified, schema=schema, dialect=DIALECT)
            inferred = tuple((s.alias_or_name, s.type.sql("spark").lower() if s.type else "unknown") for s in typed.selects)
            facts[name] = ViewFacts(
                columns=delta_columns(project.location(name).output) or inferred,
                lineage={col: _column_sources(col, qualified, schema) for col, _ in inferred},
            )
        except (SqlglotError, KeyError, ValueError):
            facts[name] = ViewFacts(columns=delta_columns(project.location(name).output))
        known[name] = facts[name].columns
    return facts


def _column_sources(column: str, qualified: exp.Expression, schema: dict) -> tuple[tuple[str, str], ...]:
    """The (table, column) pairs an output column is computed from (none for ``COUNT(*)``)."""
    node = lineage(column, qualified, schema=schema, dialect=DIALECT)
    found = {
        (n.source.name, n.name.split(".")[-1])
        for n in node.walk()
        if isinstance(n.source, exp.Table) and not n.downstream
    }
    return tuple(sorted(found))
