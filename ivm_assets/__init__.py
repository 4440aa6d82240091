"""ivm_assets: incrementally maintained SQL views over Delta Lake, computed with Spark."""

from __future__ import annotations

from ivm_assets.engine.refresh import RefreshResult
from ivm_assets.errors import (
    CommitConflictError,
    ConfigError,
    IvmError,
    NotIncrementalError,
    RefreshError,
    SourceError,
    SqlError,
    ViewBusyError,
    ViewCycleError,
)
from ivm_assets.project import IvmProject, ViewStatus

__all__ = [
    "CommitConflictError",
    "ConfigError",
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

# Dagster components are found as `ivm_assets.<Name>` (the `dagster_dg_cli.registry_modules`
# entry point names this package); they load lazily so the engine does not need Dagster.
_COMPONENTS = {"IvmProjectComponent": "ivm_assets.dagster.components.ivm_project.component"}


def __getattr__(name: str):
    if name in _COMPONENTS:
        import importlib

        return getattr(importlib.import_module(_COMPONENTS[name]), name)
    raise AttributeError(f"module 'ivm_assets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_COMPONENTS])
