"""A card keeps keyboard focus and says what happens (a real JupyterLab).

Enter on a focused Approve used to leave the focus on the page's body (every control of the
card is disabled at the click, and the redraw found nothing focused to put back), so a
keyboard user had to find the card again; the "sent — waiting for the kernel" note was no
status and a refused edit's error no alert, so a screen reader said neither. Now focus stays
in the card (the clicked control again once it is back, the card itself meanwhile; its cell
when the settled view takes the card away), the note is a ``role="status"`` and the error a
``role="alert"``.
"""

from __future__ import annotations

import pytest
from _jupyterlab import JupyterLabServer, cell, open_notebook, output_area, run_cell
from playwright.sync_api import Locator, Page, expect

pytestmark = pytest.mark.browser

SETUP = '''\
import time
from nbagent import Chat, Tool

class IssueRefund(Tool):
    """Issues a refund for an order."""
    requires_approval = True
    def execute(self, order_id: int) -> str:
        return f"refunded order {order_id}"
'''
REFUND = 'chat = Chat(model="demo").with_tools(IssueRefund)\nchat.ask("Refund order 18")'
EDIT = 'other = Chat(model="demo").with_tools(IssueRefund)\nother.ask("Refund order 19")'
BUSY = "time.sleep(4)"

FOCUS_IN = "(card) => card.contains(document.activeElement)"
FOCUSED_LABEL = "() => document.activeElement.textContent"


def focus_in(card: Locator) -> bool:
    return bool(card.evaluate(FOCUS_IN))


def test_enter_on_approve_keeps_focus_in_the_card_and_says_so(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    server = jupyterlab_server
    path = server.write_notebook("card-focus.ipynb", [SETUP, REFUND, EDIT, BUSY])
    open_notebook(page, server, path)
    for i in range(3):
        run_cell(page, i)
    card = output_area(page, 1).locator('.nba-action[data-kind="approval"]')
    approve = card.get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_enabled()

    run_cell(page, 3, wait=False)  # the kernel is busy: the click waits for it
    approve.focus()
    page.keyboard.press("Enter")
    expect(card.get_by_role("status")).to_contain_text("waiting for the kernel")
    assert focus_in(card), page.evaluate("() => document.activeElement.outerHTML.slice(0, 200)")
    # the call ran and the turn ended: the settled view is plain HTML, the card gone; focus
    # is on the cell it was in (where a keyboard user goes on), not the page's body
    expect(output_area(page, 1)).to_contain_text("refunded order 18", timeout=30_000)
    expect(card).to_have_count(0)
    assert focus_in(cell(page, 1)), page.evaluate(
        "() => document.activeElement.outerHTML.slice(0, 200)"
    )

    # a refused edit: the error is an alert, and focus is back on the button pressed
    card = output_area(page, 2).locator('.nba-action[data-kind="approval"]')
    card.get_by_role("button", name="Edit arguments").click()
    card.get_by_label("Edited arguments (JSON)").fill('{"order_id": "not a number"}')
    ok = card.get_by_role("button", name="Approve with these arguments")
    ok.focus()
    page.keyboard.press("Enter")
    expect(card.get_by_role("alert")).to_contain_text("invalid")
    expect(ok).to_be_enabled()
    expect(ok).to_be_focused()
    assert page.evaluate(FOCUSED_LABEL) == "Approve with these arguments"
