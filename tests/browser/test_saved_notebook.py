"""Issue 14 item 1 in a real JupyterLab: a saved notebook reopens with its transcripts.

A notebook with three turns runs in JupyterLab: one answered at once, one
whose approval card is clicked in the browser (the turn settles in a
continuation, outside the cell), and one left pending. It is saved, its kernel
shut down, and it is opened again with a new kernel, once with JupyterLab's
default widget settings (no widget state in the file) and once with *Save
Widget State Automatically* on. Each time the page must show every turn's
transcript, no "Error displaying widget", no disconnected widget, and the
still-pending call must say it belongs to a kernel session that has ended and
how to decide it (``Chat.load`` with the chat's store, ``chat.approve``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _jupyterlab import (
    ARTIFACTS_DIR,
    JupyterLabServer,
    open_notebook,
    output_area,
    run_cell,
    screenshot,
    wait_for_output,
)
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGETS_SETTINGS = "/lab/api/settings/@jupyter-widgets/jupyterlab-manager:plugin"

SETUP = """\
from nbagent import Chat, Tool, tool

class IssueRefund(Tool):
    \"\"\"Issues a refund for an order.\"\"\"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        return f"refunded order {{order_id}}"

@tool
def get_weather(city: str) -> str:
    \"\"\"Get the weather for a city.\"\"\"
    return f"sunny in {{city}}"

chat = Chat(model="demo").with_tools(get_weather)
clicked = Chat(model="demo").with_tools(IssueRefund)
waiting = Chat(model="demo", store={store!r}).with_tools(IssueRefund)
"""

CELLS = [
    SETUP,
    'chat.ask("What is the weather in Oslo?");',
    'clicked.ask("Refund order 42");',
    'waiting.ask("Refund order 77");\nprint("left pending:", waiting.status)',
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


def _save(page: Page, path: Path, needle: str) -> dict:
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    deadline = time.monotonic() + 20
    while True:
        text = path.read_text()
        if needle in text and '"dirty"' not in text:
            return json.loads(text)
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} was not saved with {needle!r}")
        time.sleep(0.2)


def _outputs(nb: dict, index: int) -> list[dict]:
    """The outputs of cell ``index``, multi-line strings (saved as lists of lines) joined."""
    outs = nb["cells"][index].get("outputs", [])
    for out in outs:
        data = out.get("data", {})
        for mime, value in data.items():
            if isinstance(value, list):
                data[mime] = "".join(value)
    return outs


def test_saved_notebook_reopens_with_its_transcripts(
    page: Page, jupyterlab_server: JupyterLabServer, widget_settings: str
) -> None:
    server = jupyterlab_server
    store = server.root_dir / f"saved-{widget_settings}.db"
    store.unlink(missing_ok=True)
    name = server.write_notebook(
        f"saved-{widget_settings}.ipynb", [CELLS[0].format(store=str(store)), *CELLS[1:]]
    )
    file = server.root_dir / name
    open_notebook(page, server, name)
    for i in range(len(CELLS)):
        run_cell(page, i)
    wait_for_output(page, 1, "sunny in Oslo")
    card = output_area(page, 2).locator(".nba-action").first
    expect(card).to_be_visible()
    card.get_by_role("button", name="Approve", exact=True).click()
    wait_for_output(page, 2, "refunded order 42")
    wait_for_output(page, 2, "complete")
    wait_for_output(page, 3, "left pending: awaiting_approval")
    expect(output_area(page, 3).locator(".nba-action").first).to_be_visible()
    # Live: the pending view's static twin is hidden while its widget is connected.
    time.sleep(1.0)  # the continuation after the click settles and updates the output
    output_area(page, 3).scroll_into_view_if_needed()
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    output_area(page, 3).screenshot(path=str(ARTIFACTS_DIR / f"saved-live-{widget_settings}.png"))
    assert "kernel session that has ended" not in output_area(page, 3).inner_text()

    nb = _save(page, file, "left pending")
    # The saved file: settled turns are HTML only; the pending one keeps its widget.
    for index in (1, 2):
        datas = [o.get("data", {}) for o in _outputs(nb, index)]
        assert not any(WIDGET_MIME in d for d in datas), (index, datas)
        assert any("nba-chat" in d.get("text/html", "") for d in datas)
    assert "refunded order 42" in json.dumps(_outputs(nb, 2))  # settled after the click
    datas = [o.get("data", {}) for o in _outputs(nb, 3)]
    assert any(WIDGET_MIME in d for d in datas)
    assert any("Chat.load" in d.get("text/plain", "") for d in datas)
    screenshot(page, f"saved-before-reopen-{widget_settings}")

    server.shutdown_sessions()
    open_notebook(page, server, name)  # a new kernel
    time.sleep(2.0)  # the widget manager restores what it can
    screenshot(page, f"saved-reopened-{widget_settings}")
    output_area(page, 3).scroll_into_view_if_needed()
    output_area(page, 3).screenshot(
        path=str(ARTIFACTS_DIR / f"saved-reopened-pending-{widget_settings}.png")
    )

    notebook = page.locator(".jp-NotebookPanel:visible .jp-Notebook")
    text = notebook.inner_text()  # what is visible: hidden nodes are not in innerText
    assert "Error displaying widget" not in text
    assert "model not found" not in text
    assert page.locator(".jupyter-widgets-disconnected:visible").count() == 0
    expect(output_area(page, 1)).to_contain_text("sunny in Oslo")
    expect(output_area(page, 1)).to_contain_text("complete")
    expect(output_area(page, 2)).to_contain_text("approved by you")
    expect(output_area(page, 2)).to_contain_text("refunded order 42")
    pending = output_area(page, 3)
    expect(pending).to_contain_text("Refund order 77")
    expect(pending).to_contain_text("kernel session that has ended")
    expect(pending).to_contain_text(f'Chat.load("{_chat_id(nb)}"')
    expect(pending).to_contain_text('chat.approve("')
    # No live button stands in the reopened notebook.
    assert pending.get_by_role("button", name="Approve", exact=True).count() == 0 or not (
        pending.get_by_role("button", name="Approve", exact=True).first.is_visible()
    )


def _chat_id(nb: dict) -> str:
    for out in _outputs(nb, 3):
        text = out.get("data", {}).get("text/plain", "")
        if "Chat.load(" in text:
            return text.split('Chat.load("', 1)[1].split('"', 1)[0]
    raise AssertionError("no Chat.load hint in the pending cell")


HAND_OVER = [
    SETUP.format(store=None),
    'clicked.ask("Refund order 43")\nprint("status:", clicked.status)',
    "clicked.approve(clicked.pending_approvals[0])\nclicked.complete();",
]


def test_the_cell_that_continues_a_turn_shows_it(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    """Issue 14 item 12: an earlier view says where its turn went; the later cell shows it.

    The earlier cell's output is updated from the later cell's execution: it
    must reach JupyterLab, which applies display updates only to the cell whose
    request the update names.
    """
    name = jupyterlab_server.write_notebook("hand-over.ipynb", HAND_OVER)
    open_notebook(page, jupyterlab_server, name)
    for i in range(len(HAND_OVER)):
        run_cell(page, i)
    first, second = output_area(page, 1), output_area(page, 2)
    wait_for_output(page, 2, "refunded order 43")
    wait_for_output(page, 2, "continues turn 1 from cell [2]")
    wait_for_output(page, 1, "continued in cell [3]")
    shown = first.inner_text()
    assert "status: awaiting_approval" in shown and "approved, decided in code" in shown
    assert "refunded order 43" not in shown  # that happened in cell [3]
    assert first.get_by_role("button", name="Approve", exact=True).count() == 0
    later = second.inner_text()
    assert "complete" in later and "Refund order 43" not in later
    second.scroll_into_view_if_needed()
    screenshot(page, "hand-over")


def test_a_pending_card_after_a_kernel_restart(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    """Restarting the kernel closes the card's model: the transcript and the way to decide show."""
    store = jupyterlab_server.root_dir / "restart.db"
    store.unlink(missing_ok=True)
    cells = [SETUP.format(store=str(store)), 'waiting.ask("Refund order 78");']
    name = jupyterlab_server.write_notebook("restart.ipynb", cells)
    open_notebook(page, jupyterlab_server, name)
    run_cell(page, 0)
    run_cell(page, 1)
    area = output_area(page, 1)
    expect(area.locator(".nba-action").first).to_be_visible()
    expect(area.locator(".nba-orphan")).to_be_hidden()
    # Not awaited: the command waits for the confirmation dialog clicked below.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    expect(area.locator(".nba-orphan")).to_be_visible(timeout=30_000)
    shown = area.inner_text()
    assert "Refund order 78" in shown and "kernel session that has ended" in shown
    assert "Chat.load(" in shown and "Error displaying widget" not in shown
    area.screenshot(path=str(ARTIFACTS_DIR / "pending-after-restart.png"))
