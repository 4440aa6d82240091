"""ivm_assets: incrementally maintained SQL views over Delta Lake, computed with Spark.

The public names load on first use: ``import ivm_assets`` (and ``ivm --help``) pulls in
neither pyspark nor dagster; ``ivm_assets.IvmProject`` imports the engine.
"""

from __future__ import annotations

import importlib

from ivm_assets.errors import (
    CommitConflictError,
    ConfigError,
    ExpressionError,
    IvmError,
    NotIncrementalError,
    RefreshError,
    SourceError,
    SqlError,
    ViewBusyError,
    ViewCycleError,
)

# Name → module, imported when the name is first asked for. Dagster components are found as
# `ivm_assets.<Name>` (the `dagster_dg_cli.registry_modules` entry point names this package).
_LAZY = {
    "IvmProject": "ivm_assets.project",
    "ViewStatus": "ivm_assets.view_status",
    "RefreshResult": "ivm_assets.engine.refresh",
    "IvmProjectComponent": "ivm_assets.dagster.components.ivm_project.component",
}

__all__ = [
    "CommitConflictError",
    "ConfigError",
    "ExpressionError",
    "IvmError",
    "IvmProject",
    "NotIncrementalError",
    "RefreshError",
    "RefreshResult",
    "SourceError",
    "SqlError",
    "ViewBusyError",
    "ViewCycleError",
    "ViewStatus",
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'ivm_assets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
