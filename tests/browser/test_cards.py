"""Issue 14 (items 2, 3, 8, 9) in a real JupyterLab: the cards and what they show.

A scripted model (``nbagent.testing.ScriptedProvider``) asks for several gated
calls in one response, then answers in Markdown; the tests click in Chromium
and assert on the cell's DOM and on the tools' side effects on disk:

- **Approve all** decides every waiting call of the response and each tool
  runs exactly once (a double click included);
- **Enter** in a card's reason box denies the call with that reason;
- the answer is rendered Markdown (a ``<table>``, a ``<strong>``), while the
  model's ``<script>``, ``<img onerror>`` and ``javascript:`` link stay text;
- a finished call is one line that expands on a click, showing its result
  (a DataFrame as its table) and, for an error, the traceback on request.
"""

from __future__ import annotations

import time
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

SETUP = """\
from pathlib import Path
import pandas as pd
from nbagent import Chat, Tool, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

EFFECTS = Path({effects!r})

class IssueRefund(Tool):
    \"\"\"Issues a refund for an order.\"\"\"
    requires_approval = True

    def execute(self, order_id: int, amount: float = 20.0) -> str:
        with EFFECTS.open("a") as f:
            f.write(f"{{order_id}}\\n")
        return f"refunded order {{order_id}}"

@tool
def sales(n: int) -> pd.DataFrame:
    \"\"\"Sales figures.\"\"\"
    return pd.DataFrame({{"region": ["north", "<b>south</b>"][:n], "total": [120, 80][:n]}})

@tool
def explode(thing: str) -> str:
    \"\"\"Explodes a thing.\"\"\"
    raise ValueError("cannot explode " + thing + "\\nsecond line of the message")

ANSWER = (
    "**Done.** Here is the summary:\\n\\n"
    "| order | status |\\n|---|---|\\n| 1 | refunded |\\n\\n"
    "<script>window.__nba_xss = 1</script> <img src=x onerror=\\"window.__nba_xss = 2\\"> "
    "[click me](javascript:window.__nba_xss=3)"
)
"""

THREE = """\
provider = ScriptedProvider([
    call_tools(("issue_refund", {"order_id": 1}, "c1"), ("issue_refund", {"order_id": 2}, "c2"),
               ("issue_refund", {"order_id": 3}, "c3"), text="Refunding the three orders."),
    reply(ANSWER),
])
chat = Chat(provider=provider).with_tools(IssueRefund)
answer = chat.ask("Refund orders 1, 2 and 3")
"""

ONE = """\
provider = ScriptedProvider([call_tools(("issue_refund", {"order_id": 7}, "c7")), reply(ANSWER)])
chat = Chat(provider=provider).with_tools(IssueRefund)
answer = chat.ask("Refund order 7")
"""

FINISHED = """\
provider = ScriptedProvider([
    call_tools(("sales", {"n": 2}, "s1"), ("explode", {"thing": "the moon"}, "x1")),
    reply(ANSWER),
])
chat = Chat(provider=provider).with_tools(sales, explode)
answer = chat.ask("Sales, then explode the moon")
"""


def _notebook(server: JupyterLabServer, name: str, ask: str) -> tuple[str, Path]:
    effects = server.root_dir / f"{name}.effects"
    effects.unlink(missing_ok=True)
    path = server.write_notebook(f"{name}.ipynb", [SETUP.format(effects=str(effects)), ask])
    return path, effects


def _shot(page: Page, cell_index: int, name: str) -> None:
    """A screenshot with the cell's output in view (JupyterLab scrolls inside its panel)."""
    output_area(page, cell_index).scroll_into_view_if_needed()
    screenshot(page, name)


def _no_script_ran(page: Page) -> None:
    assert page.evaluate("() => window.__nba_xss === undefined"), "the model's markup ran"


def test_approve_all_decides_every_call_once(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    path, effects = _notebook(jupyterlab_server, "cards-approve-all", THREE)
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = output_area(page, 1)
    batch = area.locator('.nba-action[data-kind="batch"]')
    expect(batch).to_contain_text("3 calls in this response need approval", timeout=30_000)
    cards = area.locator('.nba-action[data-kind="approval"]')
    expect(cards).to_have_count(3)
    # One card per call: the tool's name once, the default it will use shown and marked.
    first = cards.first
    expect(first.locator(".nba-tool")).to_have_count(1)
    expect(first.locator(".nba-defaults")).to_contain_text("amount = 20.0")
    expect(first.locator(".nba-tool")).to_have_attribute("title", "call c1")
    _shot(page, 1, "cards-approve-all-pending")

    batch.get_by_role("button", name="Approve all (3)").dblclick()
    wait_for_output(page, 1, "Done.", timeout=30)
    time.sleep(0.5)
    assert sorted(effects.read_text().split()) == ["1", "2", "3"]  # each ran exactly once
    # The turn settled: its output is now static HTML (no widget left), each call approved.
    expect(batch).to_have_count(0)
    expect(area.locator(".nba-st-ok")).to_have_count(3)
    expect(area.get_by_text("approved by you")).to_have_count(3)
    expect(area.locator(".nba-action .nba-btn-approve")).to_have_count(0)
    _shot(page, 1, "cards-approve-all-done")


def test_enter_in_the_reason_box_denies(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    path, effects = _notebook(jupyterlab_server, "cards-enter-denies", ONE)
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    card = output_area(page, 1).locator('.nba-action[data-kind="approval"]').first
    expect(card).to_be_visible(timeout=30_000)
    box = card.get_by_placeholder("reason (optional)")
    box.fill("wrong customer")
    box.press("Enter")
    area = wait_for_output(page, 1, "denied by you: wrong customer", timeout=30)
    expect(area).to_contain_text("Done.", timeout=30_000)
    time.sleep(0.3)
    assert not effects.exists()  # a denied call never runs


def test_markdown_answer_is_rendered_and_inert(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    path, _ = _notebook(jupyterlab_server, "cards-markdown", FINISHED)
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = wait_for_output(page, 1, "Here is the summary", timeout=30)
    answer = area.locator(".nba-md").last
    expect(answer.locator("strong")).to_have_text("Done.")
    expect(answer.locator("table td").first).to_have_text("1")
    # The model's markup is text: no script element, no image, no javascript: link.
    expect(answer).to_contain_text("<script>window.__nba_xss = 1</script>")
    expect(answer).to_contain_text("[click me](javascript:window.__nba_xss=3)")
    assert answer.locator("script, img, a").count() == 0
    time.sleep(0.3)
    _no_script_ran(page)
    _shot(page, 1, "cards-markdown")


def test_a_finished_call_expands_on_click(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    path, _ = _notebook(jupyterlab_server, "cards-finished", FINISHED)
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = wait_for_output(page, 1, "Here is the summary", timeout=30)
    sales = area.locator('details.nba-done[data-call-id="s1"]')
    expect(sales).to_contain_text("DataFrame, 2 rows × 2 columns")
    table = sales.locator("> :not(summary) .nba-rich table")  # the whole result
    peek = sales.locator("> summary .nba-peek table")  # its first rows, on the folded line
    expect(table).to_be_hidden()  # folded until clicked
    expect(peek).to_be_visible()
    expect(peek.locator("tbody tr")).to_have_count(2)
    sales.locator("> summary").click()
    expect(table).to_be_visible()
    expect(peek).to_be_hidden()  # the open result says it all
    expect(table.locator("td", has_text="<b>south</b>")).to_have_count(1)  # a cell, as text
    assert table.locator("b").count() == 0

    boom = area.locator('details.nba-done[data-call-id="x1"]')
    expect(boom.locator("> summary")).to_contain_text("ValueError: cannot explode the moon")
    boom.locator("> summary").click()
    error = boom.locator(".nba-err")
    expect(error).to_be_visible()
    assert "\n" in error.inner_text()  # the message keeps its newlines
    trace = boom.locator("details.nba-tb")
    trace.locator("summary").click()
    expect(trace.locator("pre")).to_contain_text("Traceback (most recent call last)")
    expect(trace.locator("pre")).to_contain_text("in explode")
    _no_script_ran(page)
    _shot(page, 1, "cards-finished-expanded")


LONG = """\
from IPython.display import display
from nbagent.notebook import ChatView

# The last turn waits for a decision, so the view stays live (a settled view's output is
# static HTML, its older entries folded in a <details>).
provider = ScriptedProvider(
    [reply(f"answer {i}") for i in range(12)] + [call_tools(("issue_refund", {"order_id": 9}))]
)
chat = Chat(provider=provider, display=False).with_tools(IssueRefund)
for i in range(12):
    chat.ask(f"question {i}")
chat.ask("Refund order 9")
view = ChatView(chat, page_size=5, live_pages=1)
display(view)
"""


def test_show_earlier_is_not_cut_off(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    path, _ = _notebook(jupyterlab_server, "cards-long", LONG)
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    more = output_area(page, 1).locator(".nba-more")
    expect(more).to_contain_text("Show earlier (36 more entries)", timeout=30_000)
    # The whole label fits in the button: nothing clipped, on either axis.
    fits = more.evaluate(
        "b => b.scrollWidth <= b.clientWidth + 1 && b.scrollHeight <= b.clientHeight + 1"
    )
    assert fits, more.evaluate(
        "b => [b.scrollWidth, b.clientWidth, b.scrollHeight, b.clientHeight]"
    )
    more.click()
    expect(more).to_contain_text("Show earlier (30 more entries)")
    _shot(page, 1, "cards-show-earlier")


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(x) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3])


def test_cards_follow_the_dark_theme(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    path, _ = _notebook(jupyterlab_server, "cards-dark", FINISHED)
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = wait_for_output(page, 1, "Here is the summary", timeout=30)
    change = "t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})"
    page.evaluate(change, "JupyterLab Dark")
    try:
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        time.sleep(0.5)
        card = area.locator('details.nba-done[data-call-id="s1"]')
        card.locator("> summary").click()
        text = _rgb(area.locator(".nba-md").last.evaluate("n => getComputedStyle(n).color"))
        background = _rgb(card.evaluate("n => getComputedStyle(n).backgroundColor"))
        cell = _rgb(card.locator(".nba-rich td").first.evaluate("n => getComputedStyle(n).color"))
        assert min(text) > 150 and min(cell) > 150, (text, cell)  # light text...
        assert max(background) < 100, background  # ...on a dark card
        _shot(page, 1, "cards-dark-theme")
    finally:
        page.evaluate(change, "JupyterLab Light")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")
