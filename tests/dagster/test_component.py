"""IvmProjectComponent loaded from defs.yaml in a defs-folder sandbox."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa
import pytest
from dagster.components.testing import create_defs_folder_sandbox

from ivm_assets import IvmProjectComponent


def _project(builder, view: str, source: str = "events"):
    builder.source(source, {"k": pa.array([1], pa.int64())})
    builder.view(view, f"SELECT k FROM {source}")
    builder.write_config()
    return builder.root


def test_component_loads_a_project_folder(builder):
    root = _project(builder, "ks")
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(
            component_cls=IvmProjectComponent,
            defs_path="shop",
            defs_yaml_contents={
                "type": "ivm_assets.IvmProjectComponent",
                "attributes": {"project": str(root), "consistency_checks": True, "sensor": True},
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert isinstance(component, IvmProjectComponent)
            views = defs.resolve_assets_def("ks")
            assert views.op.name == "ivm_shop"
            assert defs.resolve_assets_def("events").is_observable
            assert [c.name for c in views.check_specs] == ["ivm_consistency"]
            assert defs.resolve_sensor_def("ivm_shop_refresh_sensor").default_status == dg.DefaultSensorStatus.STOPPED
            assert defs.resolve_sensor_def("ivm_shop_source_sensor").default_status == dg.DefaultSensorStatus.RUNNING
            assert defs.resolve_schedule_def("ivm_shop_consistency_checks_schedule").cron_schedule == "0 * * * *"
            dg.Definitions.validate_loadable(defs)


def test_two_instances_get_distinct_op_names(builder, tmp_path, spark):
    from tests.conftest import ProjectBuilder

    first = _project(builder, "ks")
    second = _project(ProjectBuilder(tmp_path / "other", spark), "other_ks", source="other_events")
    with create_defs_folder_sandbox() as sandbox:
        for name, root in (("a", first), ("b", second)):
            sandbox.scaffold_component(
                component_cls=IvmProjectComponent,
                defs_path=name,
                defs_yaml_contents={"type": "ivm_assets.IvmProjectComponent", "attributes": {"project": str(root), "observe_cron": None}},
            )
        with sandbox.build_all_defs() as defs:
            assert defs.resolve_assets_def("ks").op.name == "ivm_a"
            assert defs.resolve_assets_def("other_ks").op.name == "ivm_b"


def test_misspelled_attribute_is_rejected_with_its_line(builder):
    root = _project(builder, "ks")
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(component_cls=IvmProjectComponent, defs_path="shop")
        (path / "defs.yaml").write_text(
            f"type: ivm_assets.IvmProjectComponent\nattributes:\n  project: {root}\n  consistency_cheks: true\n"
        )
        with pytest.raises(Exception) as error:
            with sandbox.load_component_and_build_defs(defs_path=path):
                pass
        cause = error.value.__cause__  # the tree error wraps pydantic's, which carries the location
        assert "attributes.consistency_cheks at" in str(cause) and "defs.yaml:4" in str(cause)
        assert "Extra inputs are not permitted" in str(cause)
