"""A change data feed on S3 (the local server, see conftest.py) read by Spark's executors
from the files the Delta log names equals delta-rs' ``load_cdf``; a vacuumed removed file
is found missing with a HEAD."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from ivm_assets.delta import change_files, storage
from ivm_assets.delta.handles import latest_version
from ivm_assets.delta.write import create_table
from tests.delta.test_change_files import _edit, _rows, _same_as_load_cdf

pytestmark = pytest.mark.s3


def test_a_partitioned_range_on_s3_equals_load_cdf(s3_project):
    uri = f"{s3_project.base}/t"
    create_table(uri, _rows(range(100)), partition_by=["part"])
    _edit(uri)
    upto = latest_version(uri)
    whole = _same_as_load_cdf(s3_project.spark, uri, 0, upto)
    assert sum(whole.values()) > 100
    _same_as_load_cdf(s3_project.spark, uri, 3, upto, columns=("id", "part"))
    assert change_files.missing_files(change_files.change_files(uri, after=0, upto=upto)) == []
    DeltaTable(uri, storage_options=storage.options_for(uri)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert change_files.missing_files(change_files.change_files(uri, after=0, upto=upto))
