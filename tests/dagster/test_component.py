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


def _same_names(tmp_path, spark, folder: str):
    from tests.conftest import ProjectBuilder

    return _project(ProjectBuilder(tmp_path / folder, spark), "ks")


def test_key_prefix_keeps_two_projects_with_the_same_names_apart(tmp_path, spark):
    from ivm_assets import IvmProject
    from ivm_assets.dagster import IvmResource, build_ivm_source_sensor, ivm_source_assets, ivm_view_assets

    roots = {name: _same_names(tmp_path, spark, name) for name in ("east", "west")}
    assets, sensors = [], []
    for name, root in roots.items():
        project = IvmProject.load(root)
        views = ivm_view_assets(project=project, key_prefix=name)
        assets += [views, ivm_source_assets(project=project, key_prefix=name)]
        sensors.append(build_ivm_source_sensor(project=project, key_prefix=name))
        assert views.op.name == f"ivm_{name}" and views.keys == {dg.AssetKey([name, "ks"])}
        [spec] = views.specs
        assert {d.asset_key for d in spec.deps} == {dg.AssetKey([name, "events"])}
        assert spec.metadata["dagster/column_lineage"].deps_by_column["k"][0].asset_key == dg.AssetKey([name, "events"])
    defs = dg.Definitions(assets=assets, sensors=sensors, resources={"ivm": IvmResource()})
    dg.Definitions.validate_loadable(defs)
    assert {s.name for s in sensors} == {"ivm_east_source_sensor", "ivm_west_source_sensor"}


def _dg_project(root, projects: dict[str, str], *, prefixed: bool):
    """A dg project folder (pyproject + defs folder) with one ivm component per project."""
    (root / "two_shops" / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "two_shops"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n\n'
        '[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\nroot_module = "two_shops"\n'
    )
    (root / "two_shops" / "__init__.py").write_text("")
    (root / "two_shops" / "definitions.py").write_text(
        "from pathlib import Path\n\nimport dagster as dg\n\n\n@dg.definitions\ndef defs():\n"
        "    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)\n"
    )
    for name, project in projects.items():
        (root / "two_shops" / "defs" / name).mkdir()
        prefix = f"\n  key_prefix: {name}" if prefixed else ""
        (root / "two_shops" / "defs" / name / "defs.yaml").write_text(
            f"type: ivm_assets.IvmProjectComponent\nattributes:\n  project: {project}{prefix}\n"
        )


@pytest.mark.slow
def test_dg_check_defs_accepts_two_prefixed_projects_with_the_same_names(tmp_path, spark):
    import os
    import subprocess
    import sys
    from pathlib import Path

    projects = {name: str(_same_names(tmp_path, spark, name)) for name in ("east", "west")}
    root = tmp_path / "dg_project"
    _dg_project(root, projects, prefixed=True)
    out = subprocess.run([str(Path(sys.executable).parent / "dg"), "check", "defs", "--use-active-venv"], cwd=root,
                         capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "All definitions loaded successfully" in out.stdout
    # The same two projects without prefixes collide on their keys (what `dg check defs` reports).
    with create_defs_folder_sandbox() as sandbox:
        for name, project in projects.items():
            sandbox.scaffold_component(
                component_cls=IvmProjectComponent, defs_path=name,
                defs_yaml_contents={"type": "ivm_assets.IvmProjectComponent", "attributes": {"project": project}},
            )
        with pytest.raises(Exception, match=r"Duplicate asset key: AssetKey\(\['ks'\]\)"):
            with sandbox.build_all_defs() as defs:
                dg.Definitions.validate_loadable(defs)
