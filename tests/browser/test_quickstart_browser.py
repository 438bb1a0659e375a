"""The quickstart in a real JupyterLab: Run All ends with the refund's card waiting, one
click on Approve runs it once and the answer appears under the card, and the last cell's
``chat.log`` says so when run again (issue 25 item 1)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _jupyterlab import (
    JupyterLabServer,
    cell_count,
    open_notebook,
    output_area,
    run_all,
    run_cell,
    screenshot,
    wait_for_output,
)
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

QUICKSTART = Path(__file__).resolve().parents[2] / "notebooks" / "01_quickstart.ipynb"


def test_run_all_ends_with_the_refund_card_and_a_click_runs_it_once(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    shutil.copy(QUICKSTART, jupyterlab_server.root_dir / "quickstart.ipynb")
    open_notebook(page, jupyterlab_server, "quickstart.ipynb")
    run_all(page, timeout=180)
    last = cell_count(page) - 1
    wait_for_output(page, last, "awaiting_approval")
    card = output_area(page, 1).locator(".nba-action").first  # the first code cell's view
    expect(card).to_be_visible(timeout=30_000)
    expect(card.locator(".nba-tool")).to_have_text("issue_refund")
    screenshot(page, "quickstart-run-all")
    card.get_by_role("button", name="Approve", exact=True).dblclick()
    wait_for_output(page, 1, "issue_refund(order_id=42): refunded order 42", timeout=60)
    run_cell(page, last)
    wait_for_output(page, last, "refunded order 42")
    text = output_area(page, last).inner_text()
    assert "awaiting_approval" not in text and text.count("refunded order 42") == 1
    screenshot(page, "quickstart-approved")
