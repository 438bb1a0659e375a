"""Keys typed in a card stay in the card (a real JupyterLab).

Shift+Enter (and Ctrl+Enter, Alt+Enter) in a card's reason box, its argument editor or
an input card's answer box used to reach JupyterLab and run the cell again: a new paid
request to the model, a new chat, and what was typed lost. Now the card keeps them: the
cell does not run again, what was typed stays, Shift+Enter in the editor is a new line.
"""

from __future__ import annotations

import time

import pytest
from _jupyterlab import JupyterLabServer, open_notebook, output_area, run_cell, wait_for_output
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SETUP = '''\
from nbagent import Chat, Tool, ask_user
from nbagent.testing import ScriptedProvider, call_tools, reply

class IssueRefund(Tool):
    """Issues a refund for an order."""
    requires_approval = True
    def execute(self, order_id: int) -> str:
        return f"refunded order {order_id}"

def asker(request):
    results = [m.content for m in request.messages if getattr(m, "role", "") == "tool"]
    if results:
        return reply("you said: " + results[-1])
    return call_tools(("ask_user", {"question": "Which city?"}))

runs = 0
'''
REFUND = 'runs += 1\nchat = Chat(model="demo").with_tools(IssueRefund)\nchat.ask("Refund order 18")'
ASK = (
    "runs += 1\n"
    "other = Chat(provider=ScriptedProvider([asker], repeat_last=True)).with_tools(ask_user)\n"
    'other.ask("Plan a trip")'
)
COUNT = 'print("runs:", runs, chat.status, other.status)'


def test_enter_chords_in_a_card_do_not_run_the_cell_again(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    server = jupyterlab_server
    path = server.write_notebook("card-keys.ipynb", [SETUP, REFUND, ASK, COUNT])
    try:
        open_notebook(page, server, path)
        for i in range(3):
            run_cell(page, i)
        card = output_area(page, 1).locator('.nba-action[data-kind="approval"]')
        expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()

        # the reason box: Enter with a modifier reaches no JupyterLab shortcut, denies nothing
        reason = card.get_by_placeholder("reason (optional)")
        for key in ("Shift+Enter", "Alt+Enter", "Control+Enter"):
            reason.fill("typing a reason")
            reason.press(key)
            time.sleep(1.0)
            expect(reason).to_have_value("typing a reason")
            expect(card.get_by_role("button", name="Approve", exact=True)).to_be_enabled()

        # the argument editor: Shift+Enter is a new line, not a run
        card.get_by_role("button", name="Edit arguments").click()
        editor = card.get_by_label("Edited arguments (JSON)")
        expect(editor).to_be_visible()
        editor.press("End")
        editor.press("Shift+Enter")
        editor.press("Control+Enter")
        time.sleep(1.0)
        expect(editor).to_be_visible()
        assert editor.input_value().count("\n") > 0

        # an input card's answer box
        answer = output_area(page, 2).get_by_label("Your answer")
        expect(answer).to_be_visible()
        answer.fill("Lis")
        answer.press("Shift+Enter")
        time.sleep(1.0)
        expect(answer).to_have_value("Lis")

        run_cell(page, 3)
        # each cell ran once; both chats still wait where they waited
        wait_for_output(page, 3, "runs: 2 awaiting_approval awaiting_approval")
        assert page.locator(".jp-Notebook .jp-Cell").count() == 4  # Alt+Enter added none
    finally:
        server.shutdown_sessions()


def test_a_click_while_another_cell_runs_says_it_was_sent(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    """The kernel handles a click only when the busy cell ends: the card said nothing for
    seconds. It now says at once that the click was sent and waits for the kernel."""
    server = jupyterlab_server
    cells = [SETUP, REFUND, 'import time; time.sleep(6); print("slept")', COUNT]
    path = server.write_notebook("card-busy.ipynb", cells)
    try:
        open_notebook(page, server, path)
        run_cell(page, 0)
        run_cell(page, 1)
        card = output_area(page, 1).locator('.nba-action[data-kind="approval"]')
        approve = card.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_visible()
        run_cell(page, 2, wait=False)
        time.sleep(1.0)
        approve.click()
        expect(card).to_contain_text("sent — waiting for the kernel", timeout=1_000)
        wait_for_output(page, 2, "slept", timeout=30)
        expect(output_area(page, 1)).to_contain_text("refunded order 18", timeout=30_000)
        expect(page.get_by_text("sent — waiting for the kernel")).to_have_count(0)
    finally:
        server.shutdown_sessions()
