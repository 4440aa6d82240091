"""`ivm.yaml`: the project file, validated with pydantic.

```yaml
warehouse: warehouse            # folder (relative to this file) or URI for outputs and state
sources:                        # table name -> Delta table path (relative) or URI
  orders: data/orders
  events:                       # or with storage settings of its own
    path: s3://other-bucket/events
    storage_options: {AWS_REGION: eu-west-1}
storage_options:                # handed to delta-rs for every table (keys as delta-rs documents them)
  AWS_ENDPOINT_URL: https://s3.example.com
  AWS_SECRET_ACCESS_KEY: ${S3_SECRET}   # resolved from the environment at load time
views:                          # optional settings per view (views/<name>.sql)
  revenue:
    refresh: auto               # auto | incremental | full
lease_seconds: 60               # a refresh's claim on a view lapses this long after its holder stops renewing it
spark:                          # where Spark work runs (default: local[*] in this process)
  master: spark://spark-master:7077   # or remote: sc://connect-host:15002 (Spark Connect)
  conf: {spark.executor.memory: 8g}
  shared_filesystem: false      # true: local folders are the same path on every executor
  executor_io: python           # or hadoop: executors read s3a:// / abfss:// with Hadoop's connectors
```
Unknown keys and wrong types are errors that name the file, the line and the key, and so is
a ``${NAME}`` reference to an environment variable that is not set (never its value).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

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


# Storage option values as written: YAML reads `AWS_ALLOW_HTTP: true` as a boolean, and
# delta-rs takes text.
OptionValue = str | bool | int | float


def _as_text(options: Mapping[str, OptionValue]) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}


class SourceSettings(BaseModel):
    """A source given as a mapping: its location and storage settings of its own."""

    model_config = ConfigDict(extra="forbid")
    path: str
    storage_options: dict[str, str] = Field(default_factory=dict)

    _text = field_validator("storage_options", mode="before")(lambda v: _as_text(v) if isinstance(v, Mapping) else v)


class SparkSettings(BaseModel):
    """Where a project's Spark work runs (``spark:``); an ``IvmResource``'s fields go over these,
    and these over ``$IVM_SPARK_MASTER`` / ``$IVM_SPARK_REMOTE``."""

    model_config = ConfigDict(extra="forbid")
    master: str | None = None
    remote: str | None = None
    conf: dict[str, str] = Field(default_factory=dict)
    # Executors on other hosts cannot see the driver's folders: a local-folder warehouse or
    # source with a cluster master is refused unless every executor sees the same path there
    # (one host, or a shared mount), which only the user can know.
    shared_filesystem: bool = False
    # How executors reach object store tables: pyarrow in their Python workers (works with any
    # Spark), or Hadoop's connectors where the cluster has them (docs/deploy.md).
    executor_io: Literal["python", "hadoop"] = "python"

    _text = field_validator("conf", mode="before")(lambda v: _as_text(v) if isinstance(v, Mapping) else v)


class ProjectConfig(BaseModel):
    """The whole `ivm.yaml`. Storage option values are kept as written (``${NAME}``
    references unresolved): resolved ones live only where they are used
    (:func:`resolve_options`), so no dump of the config shows a secret."""

    model_config = ConfigDict(extra="forbid")
    warehouse: str = "warehouse"
    sources: dict[str, str | SourceSettings] = Field(default_factory=dict)
    views: dict[str, ViewSettings] = Field(default_factory=dict)
    # Unset: a view keeps the buckets its state was built with, a new one gets
    # state.layout.DEFAULT_BUCKETS (see :func:`ivm_assets.engine.refresh.refresh_view`).
    state_buckets: int | None = Field(default=None, ge=1, le=4096)
    # How long a refresh's claim on a view holds without renewal (the holder renews it every
    # third of this): how soon a refresh can take over from one that was killed.
    lease_seconds: float = Field(default=60.0, gt=0, le=86400)
    # Handed to delta-rs (and pyarrow's file systems) for the warehouse and the sources.
    storage_options: dict[str, str] = Field(default_factory=dict)
    spark: SparkSettings = Field(default_factory=SparkSettings)

    _text = field_validator("storage_options", mode="before")(lambda v: _as_text(v) if isinstance(v, Mapping) else v)

    def source_path(self, name: str) -> str:
        source = self.sources[name]
        return source if isinstance(source, str) else source.path



_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def resolve_options(options: Mapping[str, str], *, where: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``options`` with each ``${NAME}`` replaced by environment variable NAME's value.

    ``where`` names the setting in errors (``/p/ivm.yaml:7: `storage_options.KEY```): an
    unset variable is a ConfigError naming the key and the variable, never a value.

    >>> resolve_options({"AWS_REGION": "${REGION}", "AWS_ALLOW_HTTP": "true"}, where="ivm.yaml", environ={"REGION": "eu-west-1"})
    {'AWS_REGION': 'eu-west-1', 'AWS_ALLOW_HTTP': 'true'}
    """
    environ = os.environ if environ is None else environ
    resolved = {}
    for key, value in options.items():
        def lookup(match: re.Match) -> str:
            name = match.group(1)
            if name not in environ:
                raise ConfigError(
                    f"{where.format(key=key)}: refers to environment variable ${{{name}}}, which is not set in this process. "
                    "Set it in every process that refreshes (the CLI's shell, the Dagster code server and run workers), "
                    "or write the value in place of the reference."
                )
            return environ[name]

        resolved[key] = _REFERENCE.sub(lookup, value)
    return resolved


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
            if loc[:1] == ("sources",) and len(loc) >= 3 and loc[2] in ("str", "SourceSettings"):
                # A source is a path or a mapping: report against the form that was written.
                if (loc[2] == "str") == isinstance(err.get("input"), dict) and len(loc) == 3:
                    continue
                loc = loc[:2] + loc[3:]
            line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)
            where = f"{path}:{line}" if line else str(path)
            key = ".".join(str(p) for p in loc) or "(top level)"
            if err["type"] == "extra_forbidden":
                allowed = _allowed_keys(loc[:-1])
                problems.append(f"{where}: unknown key `{key}`; expected one of: {', '.join(allowed)}")
            else:
                problems.append(f"{where}: `{key}`: {err['msg']} (found {err.get('input')!r})")
        raise ConfigError("invalid ivm.yaml:\n  " + "\n  ".join(problems)) from exc
    lines = _key_lines(node) if node is not None else {}
    _check_source_names(config, path, lines)
    if config.spark.master and config.spark.remote:
        line = lines.get(("spark", "remote"))
        raise ConfigError(
            f"{path}:{line}: `spark` sets both `master` ({config.spark.master}) and `remote` ({config.spark.remote}); "
            "a session is either classic Spark on a master or a Spark Connect client: keep one"
        )
    for key_path, options in _option_sets(config):
        for key in options:
            line = lines.get((*key_path, key)) or lines.get(key_path)
            where = f"{path}:{line}" if line else str(path)
            resolve_options({key: options[key]}, where=f"{where}: `{'.'.join(key_path)}.{{key}}`")
    return config


def _option_sets(config: ProjectConfig) -> list[tuple[tuple[str, ...], dict[str, str]]]:
    """Each ``storage_options`` mapping of the config with its key path."""
    found = [(("storage_options",), config.storage_options)]
    for name, source in config.sources.items():
        if isinstance(source, SourceSettings):
            found.append((("sources", name, "storage_options"), source.storage_options))
    return found


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
    elif len(parent) >= 2 and parent[0] == "sources":
        model = SourceSettings
    elif parent[:1] == ("spark",):
        model = SparkSettings
    return list(model.model_fields)
