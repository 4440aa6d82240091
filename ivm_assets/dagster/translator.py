"""How views and sources become Dagster asset specs; subclass to change keys, groups, metadata.

Example:
    >>> class Translator(IvmTranslator):                                  # doctest: +SKIP
    ...     def get_asset_spec(self, view: IvmViewProps) -> dg.AssetSpec:
    ...         return super().get_asset_spec(view).replace_attributes(key=["shop", view.name])
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import dagster as dg

from ivm_assets.config import Freshness, ViewSettings
from ivm_assets.dagster.automation import ivm_eager
from ivm_assets.engine.compile import ViewDefinition
from ivm_assets.errors import ConfigError
from ivm_assets.project import IvmProject

KINDS = {"spark", "delta"}
DEFAULT_GROUP = "ivm_views"
SOURCE_GROUP = "ivm_sources"


@dataclass(frozen=True)
class IvmViewProps:
    """Everything known about one view when its asset spec is built (no Spark involved).

    ``dependency_keys`` maps each source or view the SQL reads to the asset key the translator
    gave it; ``columns``/``column_lineage`` are None/empty when they cannot be known yet.
    """

    project: IvmProject
    definition: ViewDefinition
    dependency_keys: dict[str, dg.AssetKey]
    columns: tuple[tuple[str, str], ...] | None = None
    column_lineage: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    code_line: int | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def settings(self) -> ViewSettings:
        return self.definition.settings

    @property
    def uri(self) -> str:
        return self.project.location(self.name).output


@dataclass(frozen=True)
class IvmSourceProps:
    """One Delta source of a project."""

    project: IvmProject
    name: str
    uri: str


class IvmTranslator:
    """Default mapping of ivm views and sources to asset specs.

    Views are keyed by their name, sources by theirs; views go to the group from ``ivm.yaml``
    (default ``ivm_views``), sources to ``ivm_sources``.
    """

    def get_source_asset_spec(self, source: IvmSourceProps) -> dg.AssetSpec:
        return dg.AssetSpec(
            key=dg.AssetKey([source.name]),
            group_name=SOURCE_GROUP,
            description=f"Delta table read by ivm views: {source.uri}",
            kinds={"delta"},
            metadata={"dagster/uri": source.uri, "dagster/table_name": source.name},
        )

    def get_asset_spec(self, view: IvmViewProps) -> dg.AssetSpec:
        settings = view.settings
        definition = view.definition
        metadata: dict[str, object] = {
            "dagster/table_name": view.name,
            "dagster/uri": view.uri,
            "ivm/sql": dg.MetadataValue.md(f"```sql\n{definition.text.strip()}\n```"),
            "ivm/refresh_policy": settings.refresh,
        }
        if view.columns is not None:
            metadata["dagster/column_schema"] = dg.TableSchema(
                columns=[dg.TableColumn(name=n, type=t) for n, t in view.columns]
            )
        if view.column_lineage:
            lineage = dg.TableColumnLineage(
                deps_by_column={
                    col: [dg.TableColumnDep(asset_key=view.dependency_keys[t], column_name=c) for t, c in deps]
                    for col, deps in view.column_lineage.items()
                    if deps
                }
            )
            metadata["dagster/column_lineage"] = lineage
            # Open-source Dagster records column lineage but does not display it: a table does.
            metadata["ivm/column_lineage"] = dg.MetadataValue.md(lineage_markdown(view.columns, lineage))
        if definition.file is not None:
            metadata["dagster/code_references"] = code_reference(definition.file, view.code_line or 1)
        return dg.AssetSpec(
            key=dg.AssetKey([view.name]),
            deps=[view.dependency_keys[d] for d in definition.dependencies],
            description=settings.description or _leading_comment(definition.text) or f"ivm view `{view.name}`",
            group_name=settings.group or DEFAULT_GROUP,
            code_version=definition.sql_hash,
            owners=settings.owners,
            tags=settings.tags,
            kinds=set(KINDS),
            freshness_policy=freshness_policy(settings.freshness, view=view.name),
            automation_condition=self.get_automation_condition(view),
            metadata=metadata,
        )

    def get_automation_condition(self, view: IvmViewProps) -> dg.AutomationCondition | None:
        """Refresh when a source's observed version or an upstream view changes (and build missing views);
        an update that arrives during the view's run requests one more refresh after it (:func:`ivm_eager`)."""
        return ivm_eager()


def lineage_markdown(columns: tuple[tuple[str, str], ...] | None, lineage: dg.TableColumnLineage | None) -> str:
    """One row per output column: its type and the ``asset.column`` pairs it is computed from."""
    deps = lineage.deps_by_column if lineage is not None else {}
    names = [(n, t) for n, t in columns] if columns is not None else [(n, "") for n in deps]
    rows = ["| column | type | computed from |", "|---|---|---|"]
    for name, type_ in names:
        sources = ", ".join(f"`{d.asset_key.to_user_string()}.{d.column_name}`" for d in deps.get(name, ()))
        rows.append(f"| `{name}` | {type_} | {sources or '(no source column, e.g. COUNT(*))'} |")
    return "\n".join(rows)


def code_reference(file: str, line: int) -> dg.CodeReferencesMetadataValue:
    """A link to the file that declares a view (code references are beta in Dagster 1.13)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.CodeReferencesMetadataValue(
            code_references=[dg.LocalFileCodeReference(file_path=str(Path(file).resolve()), line_number=line)]
        )


def _leading_comment(sql: str) -> str | None:
    """The ``--`` comment lines a view file starts with, as its description."""
    lines = []
    for line in sql.splitlines():
        stripped = line.strip()
        if not stripped.startswith("--"):
            break
        lines.append(stripped[2:].strip())
    return " ".join(lines) or None


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str, *, view: str, key: str) -> timedelta:
    """``30m``, ``1h``, ``2d`` … as a timedelta; a ConfigError naming the view and key otherwise."""
    match = _DURATION.match(text)
    if not match:
        raise ConfigError(
            f"ivm.yaml: views.{view}.freshness.{key}: expected a duration like 30m, 1h or 2d "
            f"(units s, m, h, d, w), found {text!r}"
        )
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def freshness_policy(freshness: Freshness | None, *, view: str) -> dg.FreshnessPolicy | None:
    """``freshness:`` from ivm.yaml as a Dagster policy.

    ``{fail_window, warn_window}`` is a time window; ``{cron, fail_window}`` a cron deadline by
    which the view must have been refreshed within ``fail_window`` (default one day).
    """
    if freshness is None:
        return None
    if freshness.cron is not None:
        if freshness.warn_window is not None:
            raise ConfigError(
                f"ivm.yaml: views.{view}.freshness: `warn_window` only applies to time windows; "
                "with `cron` give `fail_window` (how long before each deadline a refresh counts)"
            )
        bound = parse_duration(freshness.fail_window, view=view, key="fail_window") if freshness.fail_window else timedelta(days=1)
        return dg.FreshnessPolicy.cron(deadline_cron=freshness.cron, lower_bound_delta=bound)
    if freshness.fail_window is None:
        raise ConfigError(f"ivm.yaml: views.{view}.freshness: expected `fail_window` (e.g. 1h) or `cron`; found neither")
    fail = parse_duration(freshness.fail_window, view=view, key="fail_window")
    warn = parse_duration(freshness.warn_window, view=view, key="warn_window") if freshness.warn_window else None
    return dg.FreshnessPolicy.time_window(fail_window=fail, warn_window=warn)

