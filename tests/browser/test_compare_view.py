"""``nbagent.compare`` in a real JupyterLab: the runs side by side, in the light and dark themes.

A chat denies a call, a fork approves it; the comparison's differences are
highlighted (a tinted background), readable on both themes, the shared
history folds (``<details>``) and opens on a click, and the model's markup
stays text.
"""

from __future__ import annotations

import time

import pytest
from _jupyterlab import JupyterLabServer, open_notebook, output_area, run_cell, screenshot
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SETUP = """\
import nbagent
from nbagent import Chat, Tool, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

class IssueRefund(Tool):
    \"\"\"Issues a refund for an order.\"\"\"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        return f"refunded order {order_id}"

@tool
def find_order(order_id: int) -> str:
    \"\"\"Looks an order up.\"\"\"
    return "<b>delivered</b>"

provider = ScriptedProvider([
    call_tools(("find_order", {"order_id": 1}, "f1")),
    call_tools(("issue_refund", {"order_id": 1}, "r1")),
    reply("Not refunded. <img src=x onerror=\\"window.__nba_xss = 1\\">"),
    reply("Refunded."),
])
chat = Chat(provider=provider, display=False).with_tools(find_order, IssueRefund)
chat.ask("Refund order 1")
chat.deny("r1", reason="not yet")
chat.complete()
fork = chat.fork("r1", decision="approved")
fork.display = False
fork.complete()
"""


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(float(x)) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3])


def _alpha(css: str) -> float:
    parts = css[css.index("(") + 1 : css.index(")")].split(",")
    return float(parts[3]) if len(parts) == 4 else 1.0


def _colours(page: Page, cell: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    area = output_area(page, cell)
    diff = area.locator('.nba-cmp-diff[data-field="text"]').first
    text = _rgb(diff.evaluate("n => getComputedStyle(n).color"))
    tint_css = diff.evaluate("n => getComputedStyle(n).backgroundColor")
    page_bg = _rgb(
        area.locator(".nba-cmp").first.evaluate(
            "n => { let e = n; while (e) { const c = getComputedStyle(e).backgroundColor;"
            " if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c;"
            " e = e.parentElement; } return 'rgb(255, 255, 255)'; }"
        )
    )
    a = _alpha(tint_css)  # the tint is translucent: what shows is it over the background
    tint = tuple(round(a * c + (1 - a) * b) for c, b in zip(_rgb(tint_css), page_bg, strict=True))
    return text, tint, page_bg


def test_compare_shows_runs_side_by_side_in_both_themes(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    path = jupyterlab_server.write_notebook(
        "compare-themes.ipynb", [SETUP, "diff = nbagent.compare(chat, fork, display=True)"]
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    run_cell(page, 1)
    area = output_area(page, 1)
    expect(area.locator(".nba-cmp-table").first).to_be_visible(timeout=30_000)
    expect(area.locator('.nba-cmp-diff[data-field="call 1 decision"]')).to_have_count(2)
    expect(area.locator(".nba-cmp-diff").first).to_be_visible()
    assert page.evaluate("() => window.__nba_xss === undefined"), "the model's markup ran"
    expect(area.locator(".nba-cmp-table").first).to_contain_text("<img src=x")  # shown as text

    shared = area.locator(".nba-cmp-shared > td > details")
    expect(shared.locator("> summary")).to_contain_text("step 1 is the same in both runs")
    expect(shared.locator(".nba-tool")).not_to_be_visible()
    shared.locator("> summary").click()
    expect(shared.locator(".nba-tool")).to_have_text("find_order")

    text, tint, background = _colours(page, 1)
    assert min(text) < 100 and min(background) > 200, (text, background)  # dark on light
    assert tint != background, tint  # the difference is tinted
    area.scroll_into_view_if_needed()
    screenshot(page, "compare-light")

    change = "t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})"
    page.evaluate(change, "JupyterLab Dark")
    try:
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        time.sleep(0.5)
        text, tint, background = _colours(page, 1)
        assert min(text) > 150 and max(background) < 100, (text, background)  # light on dark
        assert tint != background and max(tint) < 160, tint  # tinted, still dark
        area.scroll_into_view_if_needed()
        screenshot(page, "compare-dark")
    finally:
        page.evaluate(change, "JupyterLab Light")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")
