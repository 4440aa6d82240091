"""Compiling a view: analysis by Spark, the construct check, lowering and incrementalization.

Spark's analyzer is the authority on what the SQL means (unknown or ambiguous columns,
types of the result); sqlglot supplies the structure the incremental plan is built from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import pyspark
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from ivm_assets.config import ViewSettings
from ivm_assets.errors import NotIncrementalError, SqlError
from ivm_assets.rules.operator import Operator
from ivm_assets.spark.session import LazySession
from ivm_assets.sql.constructs import Finding, find_non_incremental, locate
from ivm_assets.sql.dialect import DIALECT
from ivm_assets.rules.incrementalize import incrementalize
from ivm_assets.sql.lower import LoweringError, lower
from ivm_assets.sql.named_windows import inline_named_windows
from ivm_assets.sql.order_ties import order_ties
from ivm_assets.sql.parse import spark_error, sql_hash
from ivm_assets.sql.plan import Plan
from ivm_assets.sql.prune_columns import prune_columns
from ivm_assets.sql.top_k_per_group import top_k_per_group


@dataclass(frozen=True)
class ViewDefinition:
    """A view as declared: its name, SQL, file and settings (no Spark needed)."""

    name: str
    text: str
    file: str | None
    statement: exp.Expression
    settings: ViewSettings
    dependencies: tuple[str, ...]

    @cached_property
    def sql_hash(self) -> str:
        """Hash of the normalized statement (generating its text costs ~4 ms, asked for
        several times a refresh)."""
        return sql_hash(self.statement)


@dataclass
class CompiledView:
    """A view ready to refresh: output schema, and the dataflow when it is incremental."""

    definition: ViewDefinition
    schema: T.StructType
    findings: list[Finding] = field(default_factory=list)
    plan: Plan | None = None
    root: Operator | None = None
    # The query every refresh computes: the view's text, or its ties ordered (see order_ties).
    sql: str = ""
    # The Spark settings the view was analyzed under and is computed under (ANSI mode, time
    # zone: :func:`~ivm_assets.spark.session.semantics`); an epoch records them.
    semantics: dict[str, str] = field(default_factory=dict)
    # What Spark's analysis of the view depends on (:func:`compile_key`), recorded with each
    # epoch beside the schema it gave, so that a later process compiles without Spark.
    key: str = ""

    def record(self) -> dict[str, str]:
        """What an epoch records for :func:`compile_view` to use instead of Spark's analysis."""
        return {"key": self.key, "schema": self.schema.json()}

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def incremental(self) -> bool:
        return self.root is not None

    def reason(self) -> str | None:
        """Why the view can only be refreshed by full recompute (None if it is incremental)."""
        if not self.findings:
            return None
        return "not incrementally maintainable: " + "; ".join(f.describe() for f in self.findings)


def analyze(spark: SparkSession, view: ViewDefinition, schemas: Mapping[str, T.StructType]) -> T.StructType:
    """The result schema Spark gives the view, with its relations registered as empty temp views."""
    for name in view.dependencies:
        spark.createDataFrame([], schemas[name]).createOrReplaceTempView(name)
    try:
        schema = spark.sql(view.text).schema
    except (AnalysisException, ParseException) as exc:
        raise spark_error(exc, view=view.name, file=view.file, text=view.text) from exc
    names = [f.name for f in schema.fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SqlError(
            f"the query returns several columns named {', '.join(duplicates)}; a Delta table needs distinct names",
            view=view.name,
            file=view.file,
            hint="give each output column its own alias (… AS name)",
        )
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields])


def compile_key(view: ViewDefinition, inputs: list[T.StructType], settings: Mapping[str, str]) -> str:
    """A digest of everything Spark's analysis of ``view`` depends on: its SQL, the schemas of
    the relations it reads (in its dependency order), the session's semantic settings and
    Spark's version (the view's refresh policy too, which decides what compiling raises)."""
    parts = [view.sql_hash, view.settings.refresh, *(s.json() for s in inputs), json.dumps(dict(sorted(settings.items()))),
             pyspark.__version__]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def compile_view(
    spark: SparkSession | LazySession, view: ViewDefinition, schemas: Mapping[str, T.StructType], *,
    semantics: Mapping[str, str], key: str = "", schema: T.StructType | None = None,
) -> CompiledView:
    """Analyze ``view`` and build its incremental dataflow (or record why there is none).

    ``schema``: the result schema an earlier analysis under the same ``key`` recorded; then
    Spark is not asked again (the rest of compiling needs no Spark).
    """
    schema = schema if schema is not None else analyze(spark, view, schemas)
    compiled = CompiledView(
        view, schema, find_non_incremental(view.statement, view.text), sql=view.text, semantics=dict(semantics), key=key
    )
    sg_schema = {n: {f.name: f.dataType.simpleString() for f in schemas[n].fields} for n in view.dependencies}
    if any(isinstance(n, exp.Window) or (isinstance(n, exp.Limit) and n.parent.args.get("order")) for n in view.statement.walk()):
        # Ties ordered as the incremental plan orders them, for the recomputes too.
        try:
            qualified = qualify(inline_named_windows(view.statement), schema=sg_schema, dialect=DIALECT, quote_identifiers=False)
            compiled.sql = order_ties(qualified).sql(dialect=DIALECT)
        except (SqlglotError, KeyError, LoweringError) as exc:
            compiled.findings.append(Finding(f"query whose ties cannot be ordered ({exc})", None, None))
    if not compiled.findings:
        try:
            qualified = qualify(inline_named_windows(view.statement), schema=sg_schema, dialect=DIALECT, quote_identifiers=False)
            relations = {n: tuple(f.name for f in schemas[n].fields) for n in view.dependencies}
            compiled.plan = top_k_per_group(prune_columns(lower(qualified, relations, sg_schema)))
            compiled.root = incrementalize(compiled.plan)
        except (LoweringError, OptimizeError, KeyError) as exc:
            node = exc.node if isinstance(exc, LoweringError) else None
            line, col = locate(node, view.text) if node is not None else (None, None)
            compiled.findings.append(Finding(f"construct without an incremental rule ({exc})", line, col))
    if compiled.findings and view.settings.refresh == "incremental":
        first = compiled.findings[0]
        raise NotIncrementalError(
            f"`refresh: incremental` is set but the view uses {first.construct}, which is only maintained by full recompute",
            view=view.name,
            file=view.file,
            line=first.line,
            col=first.col,
            hint="rewrite that part of the query, or set `refresh: auto` for this view in ivm.yaml to allow full recomputes",
        )
    return compiled
