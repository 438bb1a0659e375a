"""Input cards in a real JupyterLab: an MCP server's form filled in Chromium.

A server of our own on the official SDK (``tests/mcp_client/inputs_server.py``) asks for a
booking's details in the middle of its tool's call; the cell awaits ``chat.ask_async``
(ipykernel >= 7.4 delivers a click to an awaiting cell). The test submits the form with a
required field empty (the card says so and the input still waits), fills it in, ticks a
box, clicks **Accept**, and sees the tool's result; the card folds to one line. A second
test answers ``ask_user`` (the cell returns while it waits, as with an approval) by
typing and pressing Enter.
"""

from __future__ import annotations

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

SERVER = Path(__file__).resolve().parents[1] / "mcp_client" / "inputs_server.py"

SETUP = """\
import sys
from nbagent import Chat, MCPServer, ModelRequest
from nbagent.testing import ScriptedProvider, call_tools, reply

def model(request: ModelRequest):
    results = [m.content for m in request.messages if getattr(m, "role", "") == "tool"]
    if results:
        return reply("the tool said: " + results[-1])
    return call_tools(("inp_book_table", {{"day": "Friday"}}))

server = MCPServer.stdio(sys.executable, [{server!r}], prefix="inp", timeout=120)
chat = Chat(provider=ScriptedProvider([model], repeat_last=True)).with_tools(server)
"""

ASK = 'reply = await chat.ask_async("Book a table on Friday")\nprint("answer:", reply.content)'


def test_an_elicitation_form_filled_and_accepted_in_the_browser(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    path = jupyterlab_server.write_notebook(
        "input-form.ipynb", [SETUP.format(server=str(SERVER)), ASK]
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1, wait=False)
    area = output_area(page, 1)
    card = area.locator('.nba-action[data-kind="input"]')
    expect(card).to_contain_text("inp asks you to fill in", timeout=60_000)
    expect(card).to_contain_text("Who is the table on Friday for?")
    name = card.get_by_label("Name (required)")
    guests = card.get_by_label("Guests (required)")
    expect(name).to_be_visible()
    guests.fill("3")
    card.get_by_role("button", name="Accept").click()
    # a required field left empty: the error on the card, the form (and what was typed) kept
    expect(card.locator(".nba-action-error")).to_contain_text("Name: required", timeout=30_000)
    expect(guests).to_have_value("3")
    screenshot(page, "input-form-error")
    name.fill("Ada")
    card.get_by_label("Vegetarian").check()
    card.get_by_role("button", name="Accept").click()
    wait_for_output(
        page, 1, "answer: the tool said: booked Friday for Ada, 3 guests, vegetarian=True", 60
    )
    # settled: the view is static, and the call's line keeps how its form was answered
    expect(area).to_contain_text("Answered by you after", timeout=30_000)
    expect(area.locator("button:visible")).to_have_count(0)
    screenshot(page, "input-form-answered")


ASK_USER = """\
from nbagent import Chat, ModelRequest, ask_user
from nbagent.testing import ScriptedProvider, call_tools, reply

def model(request: ModelRequest):
    results = [m.content for m in request.messages if getattr(m, "role", "") == "tool"]
    if results:
        return reply("you said: " + results[-1])
    return call_tools(("ask_user", {"question": "Which city?"}))

chat = Chat(provider=ScriptedProvider([model], repeat_last=True)).with_tools(ask_user)
chat.ask("Plan a trip")
print("status:", chat.status)
"""


def test_ask_user_answered_by_typing_and_enter(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    path = jupyterlab_server.write_notebook("input-ask-user.ipynb", [ASK_USER])
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    area = wait_for_output(page, 0, "status: awaiting_approval", 30)
    card = area.locator('.nba-action[data-kind="input"]')
    expect(card).to_contain_text("Which city?", timeout=30_000)
    box = card.get_by_label("Your answer")
    box.fill("Lisbon")
    box.press("Enter")
    wait_for_output(page, 0, "you said: Lisbon", 60)
    expect(area).to_contain_text("Answered by you after", timeout=30_000)
