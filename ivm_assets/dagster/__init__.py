"""ivm views as Dagster assets: translator, multi_asset, resource, sources, sensors, automation, checks, component.

See docs/dagster.md.
"""

from ivm_assets.dagster.asset_decorator import (
    FULL_REFRESH_TAG,
    IvmRunConfig,
    IvmSpecs,
    build_ivm_check_schedule,
    build_ivm_specs,
    ivm_view_assets,
)
from ivm_assets.dagster.automation import ivm_eager
from ivm_assets.dagster.checks import CHECK_NAME
from ivm_assets.dagster.python_views import IvmPythonView, ivm_view
from ivm_assets.dagster.sensors import build_ivm_sensor, build_ivm_source_sensor
from ivm_assets.dagster.sources import ivm_source_assets
from ivm_assets.dagster.resources import IvmResource
from ivm_assets.dagster.translator import IvmSourceProps, IvmTranslator, IvmViewProps

__all__ = [
    "CHECK_NAME",
    "FULL_REFRESH_TAG",
    "IvmPythonView",
    "IvmResource",
    "IvmRunConfig",
    "IvmSourceProps",
    "IvmSpecs",
    "IvmTranslator",
    "IvmViewProps",
    "build_ivm_check_schedule",
    "build_ivm_sensor",
    "build_ivm_source_sensor",
    "build_ivm_specs",
    "ivm_eager",
    "ivm_source_assets",
    "ivm_view",
    "ivm_view_assets",
]
