"""`ivm.yaml`: the project file, validated with pydantic.

```yaml
warehouse: warehouse            # folder (relative to this file) or URI for outputs and state
sources:                        # table name -> Delta table path (relative) or URI
  orders: data/orders
views:                          # optional settings per view (views/<name>.sql)
  revenue:
    refresh: auto               # auto | incremental | full
lease_seconds: 60               # a refresh's claim on a view lapses this long after its holder stops renewing it
```
Unknown keys and wrong types are errors that name the file, the line and the key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ivm_assets.errors import ConfigError

RefreshPolicy = Literal["auto", "incremental", "full"]

# Names of sources and views: plain Spark SQL identifiers, which are also valid Delta table
# folder names and Dagster asset key parts.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_RULE = "letters A-Z, digits and _, not starting with a digit"


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a source or a view (None when it can)."""
    return None if _NAME.fullmatch(name) else f"{name!r} is not a plain SQL identifier ({NAME_RULE})"


def case_collisions(names: list[str]) -> list[tuple[str, str]]:
    """Pairs of ``names`` that differ only in case: Spark SQL resolves table names
    case-insensitively, so such a pair would name one table."""
    seen: dict[str, str] = {}
    pairs = []
    for name in names:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            pairs.append((other, name))
    return pairs


class Freshness(BaseModel):
    """How stale a view may get (used by the Dagster integration)."""

    model_config = ConfigDict(extra="forbid")
    fail_window: str | None = None
    warn_window: str | None = None
    cron: str | None = None


class ViewSettings(BaseModel):
    """Per-view settings under ``views:``."""

    model_config = ConfigDict(extra="forbid")
    refresh: RefreshPolicy = "auto"
    description: str | None = None
    group: str | None = None
    owners: list[str] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    freshness: Freshness | None = None


class ProjectConfig(BaseModel):
    """The whole `ivm.yaml`."""

    model_config = ConfigDict(extra="forbid")
    warehouse: str = "warehouse"
    sources: dict[str, str] = Field(default_factory=dict)
    views: dict[str, ViewSettings] = Field(default_factory=dict)
    state_buckets: int = Field(default=16, ge=1, le=4096)
    # How long a refresh's claim on a view holds without renewal (the holder renews it every
    # third of this): how soon a refresh can take over from one that was killed.
    lease_seconds: float = Field(default=60.0, gt=0, le=86400)



def _key_lines(node: yaml.Node, path: tuple = ()) -> dict[tuple, int]:
    """(key path) -> 1-based line, for pointing errors at the offending key."""
    lines: dict[tuple, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            here = path + (key.value,)
            lines[here] = key.start_mark.line + 1
            lines.update(_key_lines(value, here))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            lines.update(_key_lines(item, path + (i,)))
    return lines


def load_config(path: Path) -> ProjectConfig:
    """Read and validate ``path`` (an ``ivm.yaml``)."""
    if not path.is_file():
        raise ConfigError(
            f"{path}: expected a project file `ivm.yaml` here, found none. Create one with at least "
            "`sources:` mapping table names to Delta table paths (see docs/tutorial.md)."
        )
    text = path.read_text()
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings (warehouse, sources, views), found {type(data).__name__}")
    try:
        config = ProjectConfig.model_validate(data)
    except ValidationError as exc:
        lines = _key_lines(node) if node is not None else {}
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)
            where = f"{path}:{line}" if line else str(path)
            key = ".".join(str(p) for p in loc) or "(top level)"
            if err["type"] == "extra_forbidden":
                allowed = _allowed_keys(loc[:-1])
                problems.append(f"{where}: unknown key `{key}`; expected one of: {', '.join(allowed)}")
            else:
                problems.append(f"{where}: `{key}`: {err['msg']} (found {err.get('input')!r})")
        raise ConfigError("invalid ivm.yaml:\n  " + "\n  ".join(problems)) from exc
    _check_source_names(config, path, _key_lines(node) if node is not None else {})
    return config


def _check_source_names(config: ProjectConfig, path: Path, lines: dict[tuple, int]) -> None:
    def where(name: str) -> str:
        line = lines.get(("sources", name))
        return f"{path}:{line}" if line else str(path)

    for name in config.sources:
        if problem := name_problem(name):
            raise ConfigError(f"{where(name)}: source name {problem}; rename it")
    for a, b in case_collisions(list(config.sources)):
        raise ConfigError(
            f"{where(b)}: sources `{a}` and `{b}` differ only in case, and Spark SQL resolves table names "
            "case-insensitively, so both would read one table; rename one"
        )


def _allowed_keys(parent: tuple) -> list[str]:
    model: type[BaseModel] = ProjectConfig
    if len(parent) >= 2 and parent[0] == "views":
        model = ViewSettings if len(parent) == 2 else Freshness
    return list(model.model_fields)
