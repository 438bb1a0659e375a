"""A batch in a real JupyterLab: the live progress widget shows the parked rows after
``batch()`` returned, and follows them (in the batch's cell) as they are decided from
another cell and continue by themselves, ending as the static final bar."""

from __future__ import annotations

import pytest
from _jupyterlab import JupyterLabServer, open_notebook, run_cell, screenshot, wait_for_output
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

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

RUN = """\
result = nbagent.batch(tickets, lambda: Chat("demo").with_tools(order_status, issue_refund),
                       prompt="{ask} order {order_id}")
print("returned:", list(result["status"]))
"""

DECIDE = """\
run = result.attrs["nbagent_batch"]
for chat in run.chats.values():
    for call in chat.pending_approvals:
        chat.approve(call, by="inbox")
print("decided")
"""


def test_the_progress_widget_follows_parked_rows_after_the_cell_returned(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    path = jupyterlab_server.write_notebook("batch-progress.ipynb", [SETUP, RUN, DECIDE])
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = wait_for_output(page, 1, "returned: ['done', 'awaiting_approval'", timeout=60)
    bar = area.locator(".nba-batch:visible")  # not the copy in its hidden static twin
    expect(bar).to_contain_text("done 2/4", timeout=30_000)
    expect(bar.locator('[data-status="awaiting_approval"]')).to_contain_text("2")
    expect(area).to_contain_text("continue by themselves")
    screenshot(page, "batch-progress-parked")
    run_cell(page, 2)
    wait_for_output(page, 2, "decided")
    # the batch's own cell follows: all done, drawn by the continuation on nbagent's loop
    expect(area.locator(".nba-batch:visible")).to_contain_text("done 4/4", timeout=30_000)
    expect(area.locator('.nba-batch:visible [data-status="done"]')).to_contain_text("4")
    expect(area.locator('.nba-batch:visible [data-status="awaiting_approval"]')).to_contain_text(
        "0"
    )
    # final: static, the twin idle. The widget shows "done 4/4" a moment before the output
    # goes static (draw sets the widget's value, then swaps): wait for it, do not count once
    expect(area.locator(".nba-batch")).to_have_count(1)
    screenshot(page, "batch-progress-done")
