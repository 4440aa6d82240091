"""definitions.py at the repository root: loadable, and creates the demo on first load."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import dagster as dg

ROOT = Path(__file__).resolve().parents[2]


def test_definitions_py_creates_the_demo_and_validates(tmp_path, monkeypatch):
    monkeypatch.setenv("IVM_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("IVM_DEMO_ORDERS", "60")
    spec = importlib.util.spec_from_file_location("ivm_demo_definitions", ROOT / "definitions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (tmp_path / "demo" / "ivm.yaml").exists()
    dg.Definitions.validate_loadable(module.defs)
    repo = module.defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert keys == {"customers", "products", "orders", "order_lines", "revenue_by_region_day", "region_totals",
                    "product_stock", "order_status_funnel", "top_customers"}
    assert repo.has_job("demo_source_changes")
    result = module.defs.get_job_def("demo_source_changes").execute_in_process()
    assert result.success
    from ivm_assets.delta import tables as delta

    assert delta.latest_version(str(tmp_path / "demo" / "sources" / "orders")) == 3
