"""The consistency check: a view's output equals its query recomputed from the sources.

Runs the engine's oracle (:func:`ivm_assets.engine.oracle.check_view`) at the source
versions the view's last refresh consumed. It recomputes the whole query, so it costs a full
refresh: opt in per project (``consistency_checks=True``), and make it ``blocking`` to keep
downstream views from being refreshed on top of a wrong result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

import dagster as dg

from ivm_assets.engine.oracle import check_view
from ivm_assets.errors import RefreshError
from ivm_assets.project import IvmProject

CHECK_NAME = "ivm_consistency"


def check_specs(views: Mapping[str, dg.AssetSpec], *, blocking: bool) -> list[dg.AssetCheckSpec]:
    return [
        dg.AssetCheckSpec(
            name=CHECK_NAME,
            asset=spec.key,
            blocking=blocking,
            description=(
                f"`{name}` equals its SQL recomputed at the source versions of its last refresh. "
                "Costs about a full refresh of the view (see `ivm/check_duration_s`)."
            ),
        )
        for name, spec in views.items()
    ]


def run_check(project: IvmProject, view: str, *, key: dg.AssetKey, blocking: bool) -> dg.AssetCheckResult:
    """The oracle's verdict on ``view`` with the rows missing from / extra in its output."""
    severity = dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN
    started = time.monotonic()
    try:
        result = check_view(project, view)
    except RefreshError as exc:
        return dg.AssetCheckResult(
            asset_key=key, check_name=CHECK_NAME, passed=False, severity=severity, description=str(exc),
            metadata={"ivm/check_duration_s": round(time.monotonic() - started, 3)},
        )
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK_NAME,
        passed=result.ok,
        severity=severity,
        description=None if result.ok else f"{result.missing} rows missing, {result.extra} rows extra",
        metadata={
            "rows_missing": result.missing,
            "rows_extra": result.extra,
            "sample_missing": dg.MetadataValue.json(_plain(result.sample_missing)),
            "sample_extra": dg.MetadataValue.json(_plain(result.sample_extra)),
            "ivm/check_duration_s": round(time.monotonic() - started, 3),
        },
    )


def _plain(rows: list[dict]) -> list[dict]:
    """Rows with dates and decimals as strings, so they serialize as JSON metadata."""
    return json.loads(json.dumps(rows, default=str))
