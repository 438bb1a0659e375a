"""A cost budget in a real JupyterLab: the card names the cost budget, and its
**Continue (+$X)** raises it and resumes the turn to its answer."""

from __future__ import annotations

import pytest
from _jupyterlab import (
    JupyterLabServer,
    open_notebook,
    run_cell,
    screenshot,
    wait_for_output,
)
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SETUP = """\
import dataclasses
from nbagent import Chat, tool
from nbagent.providers import ModelInfo, register_model
from nbagent.testing import ScriptedProvider, call_tools, reply

# $1 a token, so each request below costs $10
register_model(ModelInfo("browser-priced", "openai", True, 1_000_000, 1e6, 1e6))

def priced(response):
    return dataclasses.replace(response, model="browser-priced", input_tokens=8, output_tokens=2)

@tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return f"value of {key}"

script = [priced(call_tools(("lookup", {"key": "a"}))), priced(reply("all done"))]
chat = Chat(provider=ScriptedProvider(script), max_cost_usd=10.0).with_tools(lookup)
"""


def test_continue_raises_the_cost_budget_and_resumes(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    path = jupyterlab_server.write_notebook(
        "cost-budget.ipynb",
        [SETUP, 'chat.ask("go")\nprint("status:", chat.status, chat.exhausted_budget)'],
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = wait_for_output(page, 1, "status: budget_exhausted cost", timeout=30)
    card = area.locator('.nba-action[data-kind="budget"]')
    expect(card).to_contain_text("Cost budget exhausted.", timeout=30_000)
    expect(area).to_contain_text("value of a")  # the requested call ran before the stop
    screenshot(page, "cost-budget-card")
    card.get_by_role("button", name="Continue (+$10.00)").click()
    wait_for_output(page, 1, "all done", timeout=30)
    # :visible: not the waiting view's static twin; once the turn settles the view itself
    # is static HTML, so the card is read from what the output area shows.
    expect(area.locator(".nba-status:visible")).to_contain_text("complete", timeout=30_000)
    expect(area).to_contain_text("budget ran out; continued", timeout=30_000)
    expect(area.locator("button:visible")).to_have_count(0)
    screenshot(page, "cost-budget-continued")


STEPS = """\
from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

@tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return f"value of {key}"

script = [call_tools(("lookup", {"key": "a"})), reply("all done")]
chat = Chat(provider=ScriptedProvider(script), max_steps=1).with_tools(lookup)
"""


def test_one_click_on_a_step_budgets_continue_reaches_the_answer(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    """Issue 25, U6: one click to the next answer, one line left, "step" counted one way."""
    path = jupyterlab_server.write_notebook(
        "step-budget.ipynb", [STEPS, 'chat.ask("go")\nprint("status:", chat.status)']
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = wait_for_output(page, 1, "status: budget_exhausted", timeout=30)
    card = area.locator('.nba-action[data-kind="budget"]')
    expect(card).to_contain_text("Step budget exhausted.", timeout=30_000)
    expect(area.locator(".nba-status:visible")).to_contain_text("1 step ·")
    # max_steps=1 and the tool round is due: the budget again plus that round
    card.get_by_role("button", name="Continue (+2 steps)").click()
    wait_for_output(page, 1, "all done", timeout=30)
    expect(area.locator(".nba-status:visible")).to_contain_text("complete", timeout=30_000)
    expect(area.locator(".nba-status:visible")).to_contain_text("3 steps")
    expect(area.get_by_text("budget ran out")).to_have_count(1)  # one card, one line
    expect(area.locator("button:visible")).to_have_count(0)
    screenshot(page, "step-budget-continued")
