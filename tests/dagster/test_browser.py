"""The UI in a real browser: headless Chromium (Debian's) drives `dg dev` on the demo.

It opens the asset graph and a view's page, clicks "Materialize", and finds the run's
success and the view's `ivm/mode` on the page. ``IVM_UPDATE_SCREENSHOTS=1`` also writes the
two screenshots of docs/ (the asset graph and a view's page).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DOCS = Path(__file__).resolve().parents[2] / "docs"
# No network, no background services, no GPU: a quiet, deterministic headless browser.
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium: apt-get install -y chromium (scripts/setup.sh does)"),
]


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def _open(page, url: str) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    # Dagster's first-visit "Join the Dagster community" dialog covers the page.
    skip = page.get_by_role("button", name="Skip")
    if skip.count():
        skip.click()


def _screenshot(page, name: str, tmp_path: Path) -> None:
    target = DOCS / name if os.environ.get("IVM_UPDATE_SCREENSHOTS") else tmp_path / name
    page.screenshot(path=str(target), full_page=True)


def test_asset_graph_view_page_and_materialize(dagster_dev, page, tmp_path):
    _open(page, f"{dagster_dev.url}/locations/{dagster_dev.repository}@{dagster_dev.location}/asset-groups/ivm_views/lineage")
    for view in ("revenue_by_region_day", "region_totals", "product_stock", "order_status_funnel", "top_customers"):
        page.get_by_text(view, exact=True).first.wait_for()
    page.get_by_text("orders", exact=True).first.wait_for()  # a source feeding them
    _screenshot(page, "dagster-asset-graph.png", tmp_path)

    _open(page, f"{dagster_dev.url}/assets/product_stock")
    page.get_by_text("Freshness policy").first.wait_for()
    page.get_by_text("Fails if more than 2 hours since last materialization").wait_for()
    page.get_by_text("Materialize", exact=True).first.click()
    # The toast links to the run: follow it and wait for the run's success.
    page.get_by_role("link", name="View", exact=True).first.click()
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]+"))
    page.get_by_text("Success", exact=True).first.wait_for(timeout=240_000)
    run_id = page.url.rstrip("/").split("/")[-1]
    page.get_by_text("product_stock: refreshing").first.wait_for()  # the view's own event in the run's log

    [latest] = dagster_dev.latest("product_stock")["assetMaterializations"]
    assert latest["runId"] == run_id
    mode = next(e["text"] for e in latest["metadataEntries"] if e["label"] == "ivm/mode")
    _open(page, f"{dagster_dev.url}/assets/product_stock")
    row = page.locator("tr", has=page.get_by_text("ivm/mode", exact=True)).first
    row.wait_for()
    assert row.inner_text().split()[-1] == mode
    lineage = page.locator("tr", has=page.get_by_text("ivm/column_lineage", exact=True)).first
    assert "order_lines.quantity, products.stock" in lineage.inner_text()  # `available` = stock - SUM(quantity)
    row.scroll_into_view_if_needed()
    _screenshot(page, "dagster-view-page.png", tmp_path)
