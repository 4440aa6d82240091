"""Views declared in Python join the project's lineage graph and runs."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa
import pytest

from ivm_assets.dagster import IvmResource, build_ivm_specs, ivm_view, ivm_view_assets
from ivm_assets.dagster.python_views import add_python_views
from ivm_assets.delta.read import read_small
from ivm_assets.delta.write import create_table
from ivm_assets.errors import ConfigError


def test_python_view_reads_a_dagster_asset_and_a_project_view(builder, tmp_path):
    builder.source("events", {"k": pa.array([1, 2, 3], pa.int64()), "v": pa.array([5, 6, 7], pa.int64())})
    builder.view("big", "SELECT k, v FROM events WHERE v > 5")
    project = builder.load()
    labels_uri = str(tmp_path / "labels")
    create_table(labels_uri, pa.table({"k": pa.array([2, 3], pa.int64()), "label": ["two", "three"]}))
    raw_labels = dg.AssetSpec(key=["raw", "labels"], metadata={"dagster/uri": labels_uri})

    @ivm_view(inputs={"labels": raw_labels}, group="python", owners=["team:shop"])
    def labelled_big() -> str:
        return "SELECT b.k, b.v, l.label FROM big b JOIN labels l ON l.k = b.k"

    assert labelled_big.name == "labelled_big"
    views = ivm_view_assets(project=project, python_views=[labelled_big])
    spec = build_ivm_specs(add_python_views(project, [labelled_big]), python_views=[labelled_big]).views["labelled_big"]
    assert {d.asset_key for d in spec.deps} == {dg.AssetKey("big"), dg.AssetKey(["raw", "labels"])}
    assert spec.group_name == "python" and spec.owners == ["team:shop"]
    lineage = spec.metadata["dagster/column_lineage"].deps_by_column
    assert [(d.asset_key.to_user_string(), d.column_name) for d in lineage["label"]] == [("raw/labels", "label")]
    reference = spec.metadata["dagster/code_references"].code_references[0]
    assert reference.file_path == __file__ and reference.line_number == labelled_big.line

    result = dg.materialize([views], resources={"ivm": IvmResource()})
    assert {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()} == {"big", "labelled_big"}
    rows = sorted(read_small(project.location("labelled_big").output).to_pylist(), key=lambda r: r["k"])
    assert rows == [{"k": 2, "v": 6, "label": "two"}, {"k": 3, "v": 7, "label": "three"}]


def test_python_view_with_sql_argument_and_unknown_table(builder):
    builder.source("events", {"k": pa.array([1], pa.int64())})
    project = builder.load()
    view = ivm_view(name="ks", sql="SELECT k FROM events")
    assert add_python_views(project, [view]).views["ks"].dependencies == ("events",)
    with pytest.raises(ConfigError, match="no `dagster/uri` metadata"):
        ivm_view(name="x", sql="SELECT 1 AS one", inputs=[dg.AssetSpec("raw")])
    from ivm_assets.errors import SqlError

    with pytest.raises(SqlError, match="unknown table `missing`"):
        add_python_views(project, [ivm_view(name="bad", sql="SELECT k FROM missing")])
