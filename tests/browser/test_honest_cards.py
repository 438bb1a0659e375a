"""Cards that never lie, in a real JupyterLab: a pending card of a stored chat updates by
itself when the call is approved from the store, and a turn answered on its last allowed
step shows no budget card."""

from __future__ import annotations

import time

import pytest
from _jupyterlab import (
    JupyterLabServer,
    open_notebook,
    output_area,
    run_cell,
    screenshot,
    wait_for_output,
)
from _kernel_tools import refund_tool
from playwright.sync_api import Page, expect

from nbagent.store import SQLiteStore

pytestmark = pytest.mark.browser

SETUP = """\
from nbagent import Chat, tool

@tool
def get_weather(city: str) -> str:
    \"\"\"Get the weather for a city.\"\"\"
    return f"sunny in {{city}}"

chat = Chat(model="demo", store={db!r}).with_tools(IssueRefund, get_weather)
"""


def test_a_stale_card_updates_when_the_store_decides(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    root = jupyterlab_server.root_dir
    db, side_effect = root / "stale.db", root / "stale.effects"
    for p in (db, side_effect):
        p.unlink(missing_ok=True)
    path = jupyterlab_server.write_notebook(
        "stale-card.ipynb",
        [refund_tool(side_effect) + SETUP.format(db=str(db)), 'chat.ask("Refund order 42")'],
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    card = output_area(page, 1).locator(".nba-action").first
    expect(card).to_contain_text("needs approval", timeout=30_000)
    expect(output_area(page, 1)).to_contain_text("awaiting approval")
    with SQLiteStore(db) as store:  # decided elsewhere: no click in this notebook
        (pending,) = store.pending_approvals()
        store.approve(pending.id, by="ops")
    area = wait_for_output(page, 1, "approved elsewhere by ops at ", timeout=30)
    wait_for_output(page, 1, "refunded order 42", timeout=30)
    # :visible: not the waiting view's static twin (hidden, and idle once the turn settles)
    expect(area.locator(".nba-status:visible")).to_contain_text("complete", timeout=30_000)
    expect(area.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    time.sleep(0.5)
    assert side_effect.read_text() == "42\n"
    screenshot(page, "stale-card-updated")


def test_no_budget_card_when_the_answer_lands_on_the_last_step(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    root = jupyterlab_server.root_dir
    db = root / "budget.db"
    db.unlink(missing_ok=True)
    path = jupyterlab_server.write_notebook(
        "budget-last-step.ipynb",
        [
            refund_tool(root / "budget.effects") + SETUP.format(db=str(db)),
            # ask the model, run the tool, the answer: exactly three steps
            'chat.ask("What\'s the weather in Paris?", max_steps=3)\nprint("status:", chat.status)',
        ],
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = wait_for_output(page, 1, "status: complete", timeout=30)
    expect(area.locator(".nba-status:visible")).to_contain_text("complete")
    # steps as max_steps counts them: "step 1", the tool round, "step 3"; "3 steps" taken
    expect(area).to_contain_text("step 3")
    expect(area.locator(".nba-status:visible")).to_contain_text("3 steps")
    expect(area.locator('.nba-action[data-kind="budget"]')).to_have_count(0)
    expect(area).not_to_contain_text("budget")
