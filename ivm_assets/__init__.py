"""ivm_assets: incrementally maintained SQL views over Delta Lake, computed with Spark."""

from ivm_assets.engine.refresh import RefreshResult
from ivm_assets.errors import (
    ConfigError,
    IvmError,
    NotIncrementalError,
    RefreshError,
    SourceError,
    SqlError,
    ViewCycleError,
)
from ivm_assets.project import IvmProject, ViewStatus

__all__ = [
    "ConfigError",
    "IvmError",
    "IvmProject",
    "NotIncrementalError",
    "RefreshError",
    "RefreshResult",
    "SourceError",
    "SqlError",
    "ViewCycleError",
    "ViewStatus",
]
