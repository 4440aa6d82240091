"""Views declared in Python: the SQL comes from a function, inputs may be Dagster assets.

A Python view joins its project like a ``views/*.sql`` file: same checks, lineage, runs.
An input that is a Dagster asset (an ``AssetSpec`` or single-asset ``AssetsDefinition``)
must be a Delta table with change data feed, found through its ``dagster/uri`` metadata;
the SQL reads it by the last part of its key, or by the name it is given in a mapping.

Example:
    >>> @ivm_view(inputs={"orders": raw_orders, "customers": "customers"})   # doctest: +SKIP
    ... def big_orders() -> str:
    ...     return "SELECT o.order_id, c.region FROM orders o JOIN customers c USING (customer_id)"
    >>> views = ivm_view_assets(project=project, python_views=[big_orders])  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Union

import dagster as dg

from ivm_assets.config import Freshness, ViewSettings
from ivm_assets.errors import ConfigError
from ivm_assets.project import IvmProject

AssetInput = Union[str, dg.AssetKey, dg.AssetSpec, dg.AssetsDefinition]


@dataclass(frozen=True)
class IvmPythonView:
    """A view declared in code: its SQL, the Dagster assets it reads (name → key, Delta URI)."""

    name: str
    sql: str
    settings: ViewSettings
    asset_inputs: dict[str, tuple[dg.AssetKey, str]] = field(default_factory=dict)
    file: str | None = None
    line: int | None = None


def ivm_view(
    fn: Callable[[], str] | None = None,
    *,
    name: str | None = None,
    sql: str | None = None,
    inputs: Sequence[AssetInput] | Mapping[str, AssetInput] = (),
    description: str | None = None,
    group: str | None = None,
    owners: Sequence[str] = (),
    tags: Mapping[str, str] | None = None,
    refresh: Literal["auto", "incremental", "full"] = "auto",
    freshness: Mapping[str, str] | None = None,
) -> IvmPythonView | Callable[[Callable[[], str]], IvmPythonView]:
    """Declare a view: ``@ivm_view(...)`` on a function returning the SQL, or ``ivm_view(name=…, sql=…)``.

    ``inputs`` lists what the SQL reads besides the project's own sources and views: Dagster
    assets whose ``dagster/uri`` is a Delta table (plain names are the project's own).
    """
    settings = ViewSettings(
        refresh=refresh, description=description, group=group, owners=list(owners), tags=dict(tags or {}),
        freshness=Freshness(**freshness) if freshness else None,
    )

    def build(func: Callable[[], str] | None) -> IvmPythonView:
        view_name = name or (func.__name__ if func else None)
        if not view_name:
            raise ConfigError("ivm_view: give `name=` when the SQL is passed as `sql=`")
        text = sql if sql is not None else func()  # type: ignore[misc]
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"ivm_view `{view_name}`: expected the function to return the view's SQL, found {text!r}")
        file = line = None
        if func is not None:
            file = inspect.getsourcefile(func)
            line = inspect.getsourcelines(func)[1]
        return IvmPythonView(
            name=view_name, sql=text, settings=settings, asset_inputs=_asset_inputs(view_name, inputs), file=file, line=line
        )

    if fn is not None:
        return build(fn)
    if sql is not None:
        return build(None)
    return build


def _asset_inputs(view: str, inputs: Sequence[AssetInput] | Mapping[str, AssetInput]) -> dict[str, tuple[dg.AssetKey, str]]:
    pairs = list(inputs.items()) if isinstance(inputs, Mapping) else [(None, i) for i in inputs]
    out = {}
    for alias, item in pairs:
        if isinstance(item, (str, dg.AssetKey)):
            continue  # the project's own source or view: checked when the view joins the project
        if isinstance(item, dg.AssetsDefinition):
            if len(item.specs) != 1:
                raise ConfigError(f"ivm_view `{view}`: input {item.node_def.name} defines several assets; pass one AssetSpec")
            item = next(iter(item.specs))
        uri = item.metadata.get("dagster/uri")
        uri = getattr(uri, "value", uri)
        if not isinstance(uri, str):
            raise ConfigError(
                f"ivm_view `{view}`: input asset {item.key.to_user_string()} has no `dagster/uri` metadata; "
                "expected the URI of the Delta table it writes (with change data feed on)"
            )
        out[alias or item.key.path[-1]] = (item.key, uri)
    return out


def add_python_views(project: IvmProject, views: Sequence[IvmPythonView]) -> IvmProject:
    """``project`` with ``views`` added (each may read the ones before it)."""
    for view in views:
        project = project.with_view(
            view.name, view.sql, settings=view.settings, file=view.file,
            sources={name: uri for name, (_, uri) in view.asset_inputs.items()},
        )
    return project


def external_keys(views: Sequence[IvmPythonView]) -> dict[str, dg.AssetKey]:
    """Relation name → asset key of inputs that Dagster assets (not ivm sources) provide."""
    return {name: key for view in views for name, (key, _) in view.asset_inputs.items()}
