"""A source's recorded versions are versions of one table: its location and Delta table id
are part of what a view was built from (issue 23: a source pointed at another table at the
same version was not noticed, and the view kept the old table's rows)."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

from ivm_assets.delta.write import create_table
from ivm_assets.errors import RefreshError
from tests.conftest import assert_oracle, output_rows

SQL = "SELECT name, COUNT(*) AS n FROM people GROUP BY name"
A = {"id": [1, 2], "name": ["n", "s"]}
B = {"id": [1, 2, 3, 4], "name": ["n", "x", "x", "y"]}


def _repoint(builder, name: str, folder: str) -> None:
    builder.sources[name] = f"sources/{folder}"
    builder.write_config()


@pytest.mark.parametrize("policy", ["auto", "incremental"])
def test_source_pointed_at_another_table_at_the_same_version(builder, policy):
    builder.source("people", A)
    builder.source("people_b", B)
    del builder.sources["people_b"]
    builder.view("v", SQL, refresh=policy)
    project = builder.load()
    project.refresh()
    assert output_rows(project, "v") == [("n", 1), ("s", 1)]
    _repoint(builder, "people", "people_b")  # also at version 0
    project = builder.load()
    if policy == "incremental":
        with pytest.raises(RefreshError) as info:
            project.refresh()
        assert "source people now reads" in str(info.value) and "people_b" in str(info.value) and "--full" in str(info.value)
        assert output_rows(project, "v") == [("n", 1), ("s", 1)]  # as it was
        project.refresh(full=True)
    else:
        (result,) = project.refresh()
        assert result.mode == "full" and "source people now reads" in result.reason and "people_b" in result.reason
    assert output_rows(project, "v") == [("n", 1), ("x", 2), ("y", 1)]
    assert_oracle(project)
    assert project.refresh()[0].mode == "unchanged"


def test_source_deleted_and_created_again_at_the_same_version(builder):
    uri = builder.source("people", A)
    builder.view("v", SQL)
    project = builder.load()
    project.refresh()
    shutil.rmtree(uri)
    create_table(uri, pa.table(B))  # version 0 again, another table id
    (result,) = project.refresh()
    assert result.mode == "full" and "is another Delta table than before" in result.reason
    assert output_rows(project, "v") == [("n", 1), ("x", 2), ("y", 1)]
    assert_oracle(project)
