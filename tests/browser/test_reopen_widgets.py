"""Issue 24 item 6 in a real JupyterLab: every widget nbagent draws survives a saved notebook.

A notebook runs a batch whose refund rows park on a gated tool, shows
``nbagent.inbox(result)`` over them, a chat view and a comparison of two
runs. It is saved while the batch and the inbox are still live, its kernel is
shut down, and it is opened again with a new kernel (JupyterLab's default
widget settings, and with *Save Widget State Automatically*). No cell may show
"Error displaying widget" / "model not found" or a disconnected widget; each
shows its static form: the batch bar with its counts, the inbox's rows, the
transcript, the comparison.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _jupyterlab import (
    JupyterLabServer,
    open_notebook,
    output_area,
    run_cell,
    screenshot,
    wait_for_output,
)
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

WIDGETS_SETTINGS = "/lab/api/settings/@jupyter-widgets/jupyterlab-manager:plugin"

SETUP = '''\
import pandas as pd
import nbagent
from nbagent import Chat, tool

@tool
def order_status(order_id: int) -> str:
    """Look up an order's status.

    Args:
        order_id: The order number.
    """
    return "delivered"

@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    return f"refunded order {order_id}"

tickets = pd.DataFrame({"order_id": [41, 42, 43, 44],
                        "ask": ["Check the status of", "Refund", "Check the status of", "Refund"]})
'''

CELLS = [
    SETUP,
    "result = nbagent.batch(tickets, lambda: Chat('demo').with_tools(order_status, issue_refund),\n"
    "                       prompt='{ask} order {order_id}')\n"
    "print('returned:', list(result['status']))",
    "inbox = nbagent.inbox(result)\ninbox",
    "a = Chat('demo').with_tools(order_status)\na.ask('Check the status of order 7');",
    "b = Chat('demo').with_tools(order_status)\nb.ask('Check the status of order 7')\n"
    "nbagent.compare(a, b, names=['first', 'second']);",
]


@pytest.fixture(params=["default", "save-widget-state"])
def widget_settings(
    request: pytest.FixtureRequest, jupyterlab_server: JupyterLabServer
) -> Iterator[str]:
    """JupyterLab's widget manager settings: default, or widget state saved with the file."""
    mode: str = request.param
    raw = json.dumps({"saveState": mode == "save-widget-state"})
    jupyterlab_server.api("PUT", WIDGETS_SETTINGS, {"raw": raw})
    try:
        yield mode
    finally:
        jupyterlab_server.api("PUT", WIDGETS_SETTINGS, {"raw": "{}"})
        jupyterlab_server.shutdown_sessions()


def _save(page: Page, path: Path, needle: str) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    deadline = time.monotonic() + 20
    while True:
        text = path.read_text()
        if needle in text and '"dirty"' not in text:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} was not saved with {needle!r}")
        time.sleep(0.2)


def test_a_saved_batch_inbox_view_and_comparison_reopen_static(
    page: Page, jupyterlab_server: JupyterLabServer, widget_settings: str
) -> None:
    server = jupyterlab_server
    name = server.write_notebook(f"reopen-{widget_settings}.ipynb", CELLS)
    open_notebook(page, server, name)
    for i in range(len(CELLS)):
        run_cell(page, i)
    batch = wait_for_output(page, 1, "returned: ['done', 'awaiting_approval'", timeout=60)
    expect(batch.locator(".nba-batch:visible")).to_contain_text("done 2/4", timeout=30_000)
    inbox = output_area(page, 2)
    expect(inbox.locator(".nba-inbox:visible, .nba-inbox-static:visible").first).to_be_visible()
    wait_for_output(page, 3, "delivered")
    wait_for_output(page, 4, "second")
    # Live, the static stand-ins stay hidden: one bar, one inbox.
    assert batch.locator(".nba-batch:visible").count() == 1
    assert "Approvals inbox: 2 pending" not in inbox.inner_text()
    _save(page, server.root_dir / name, "returned:")
    screenshot(page, f"reopen-before-{widget_settings}")

    server.shutdown_sessions()
    open_notebook(page, server, name)  # a new kernel; nothing run
    time.sleep(2.0)  # the widget manager restores what it can
    screenshot(page, f"reopen-after-{widget_settings}")

    notebook = page.locator(".jp-NotebookPanel:visible .jp-Notebook")
    text = notebook.inner_text()  # only what is visible
    assert "Error displaying widget" not in text
    assert "model not found" not in text
    assert page.locator(".jupyter-widgets-disconnected:visible").count() == 0
    # The batch: its bar with the counts it had.
    bar = output_area(page, 1).locator(".nba-batch:visible")
    expect(bar).to_have_count(1)
    expect(bar).to_contain_text("done 2/4")
    expect(bar.locator('[data-status="awaiting_approval"]')).to_contain_text("2")
    # The inbox: its rows, and how to decide them now.
    shown = output_area(page, 2)
    expect(shown).to_contain_text("Approvals inbox")
    expect(shown.locator("tbody tr:visible")).to_have_count(2)
    expect(shown).to_contain_text("issue_refund")
    expect(shown).to_contain_text("kernel session that has ended")
    # The chat view and the comparison.
    expect(output_area(page, 3)).to_contain_text("Check the status of order 7")
    expect(output_area(page, 3)).to_contain_text("delivered")
    expect(output_area(page, 4)).to_contain_text("first")
    expect(output_area(page, 4)).to_contain_text("second")
