"""The refusal of the in-process path: a construct DuckDB might compute differently from Spark.

Raised by :mod:`ivm_assets.local.expressions` and the in-process operators' bindings, caught
where an epoch chooses its engine: the epoch then runs in Spark.
"""

from __future__ import annotations

from ivm_assets.errors import IvmError


class Untranslatable(IvmError):
    """An expression (or plan) whose in-process result could differ from Spark's: the
    epoch runs in Spark."""
