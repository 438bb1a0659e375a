"""The approvals inbox in a real JupyterLab: filter, preview "approve all matching", confirm,
and the chats continue (their tool's side effects on disk, their statuses in a later cell)."""

from __future__ import annotations

import re

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
import nbagent
from nbagent import Chat, Tool

EFFECTS = Path({effects!r})

class WriteFile(Tool):
    \"\"\"Write a file.\"\"\"
    requires_approval = True
    server = "fs"

    def execute(self, path: str, text: str = "") -> str:
        with EFFECTS.open("a") as f:
            f.write(path + "\\n")
        return f"wrote {{path}}"

chats = []
for p in ["/tmp/a1.txt", "/tmp/a2.txt", "/srv/<b>.txt"]:
    chat = Chat(model="demo", display=False).with_tools(WriteFile)
    chat.ask(f"Write a file at {{p}} with text hi")
    chats.append(chat)
print("parked:", [c.status for c in chats])
"""


def test_filter_preview_confirm_and_the_chats_continue(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    effects = jupyterlab_server.root_dir / "inbox.effects"
    effects.unlink(missing_ok=True)
    path = jupyterlab_server.write_notebook(
        "inbox.ipynb",
        [
            SETUP.format(effects=str(effects)),
            "box = nbagent.inbox(chats)\nbox",
            "box.wait(30)\nprint('statuses:', [c.status for c in chats])",
        ],
    )
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    wait_for_output(
        page, 0, "parked: ['awaiting_approval', 'awaiting_approval', 'awaiting_approval']"
    )
    run_cell(page, 1)
    inbox = output_area(page, 1).locator(".nba-inbox:visible")
    expect(inbox.locator(".nba-inbox-counts")).to_have_text("3 pending calls", timeout=30_000)
    rows = inbox.locator(".nba-inbox-row:not(.nba-inbox-header)")
    expect(rows).to_have_count(3)
    expect(rows.first.locator(".nba-inbox-age")).to_have_text(re.compile(r"^\d+s$"))
    expect(inbox).to_contain_text("/srv/<b>.txt")  # the model's text, shown as text
    # every call shares its reason: said once, not on each row; no button wraps
    header = inbox.locator(".nba-inbox-header .nba-inbox-col")
    expect(header).to_have_text(["chat", "server", "tool", "arguments", "age"])
    expect(inbox.locator(".nba-inbox-whyall")).to_have_count(1)
    expect(inbox.locator(".nba-inbox-why")).to_have_count(0)
    for button in inbox.locator(".nba-inbox-actions button").all():
        height = button.evaluate("b => b.getBoundingClientRect().height")
        line = button.evaluate("b => parseFloat(getComputedStyle(b).lineHeight) || 16")
        assert height < 2 * line + 8, (button.text_content(), height)
    for box in (inbox.locator(".nba-inbox-reason"), inbox.locator(".nba-inbox-text")):
        fits = box.evaluate(
            "i => { const c = document.createElement('canvas').getContext('2d');"
            " c.font = getComputedStyle(i).font;"
            " return c.measureText(i.placeholder).width <= i.clientWidth; }"
        )
        assert fits, box.get_attribute("placeholder")
    # a filter the box cannot read says so and matches nothing
    inbox.locator(".nba-inbox-text").fill("order_id<abc")
    inbox.locator(".nba-inbox-text").press("Enter")
    expect(inbox.locator(".nba-inbox-filter-problem")).to_contain_text(
        "does not understand 'order_id<abc'", timeout=10_000
    )
    expect(inbox.get_by_role("button", name="Approve all matching (0)…")).to_be_disabled()

    inbox.locator(".nba-inbox-text").fill("path=/tmp/*")
    inbox.locator(".nba-inbox-text").press("Enter")
    expect(rows).to_have_count(2, timeout=10_000)
    expect(inbox.locator(".nba-inbox-counts")).to_have_text("3 pending calls, 2 matching")

    inbox.get_by_role("button", name="Approve all matching (2)…").click()
    preview = inbox.locator(".nba-inbox-preview:visible")
    expect(preview.locator(".nba-inbox-preview-title")).to_have_text(
        "Approve all matching: 2 calls (filter: path=/tmp/*)", timeout=10_000
    )
    expect(preview.locator(".nba-inbox-preview-call")).to_have_count(2)
    position = preview.locator(".nba-inbox-preview-list").evaluate(
        "l => getComputedStyle(l).listStylePosition"
    )
    assert position == "inside"  # numbers inside the scrolling box, never clipped
    expect(preview).to_contain_text('write_file(path="/tmp/a1.txt"')
    expect(preview).to_contain_text('write_file(path="/tmp/a2.txt"')
    assert not effects.exists()  # a preview decides nothing
    screenshot(page, "inbox-preview")

    preview.get_by_role("button", name="Confirm: approve 2 calls").click()
    expect(inbox.locator(".nba-inbox-summary")).to_have_text("Approved 2 calls.", timeout=10_000)
    expect(inbox.locator(".nba-inbox-preview:visible")).to_have_count(0)
    expect(inbox.locator(".nba-inbox-counts")).to_have_text("1 pending call, 0 matching")

    run_cell(page, 2)
    wait_for_output(page, 2, "statuses: ['complete', 'complete', 'awaiting_approval']", timeout=30)
    assert sorted(effects.read_text().split()) == ["/tmp/a1.txt", "/tmp/a2.txt"]
    inbox.locator(".nba-inbox-decided > summary").click()
    expect(inbox.locator(".nba-inbox-decided-row:visible")).to_have_count(2)
    expect(inbox.locator(".nba-inbox-decided")).to_contain_text("approved in this inbox")
    screenshot(page, "inbox-confirmed")

    # select the last row by hand and deny it with a reason
    inbox.get_by_role("button", name="Clear filter").click()
    expect(rows).to_have_count(1, timeout=10_000)
    rows.first.locator(".nba-inbox-check").check()
    inbox.locator(".nba-inbox-reason").fill("not outside /tmp")
    inbox.get_by_role("button", name="Deny selected (1)").click()
    expect(inbox.locator(".nba-inbox-summary")).to_have_text(
        "Denied 1 call (not outside /tmp).", timeout=10_000
    )
    expect(inbox.locator(".nba-inbox-empty")).to_have_text("Nothing waits for a decision.")
    expect(inbox.locator(".nba-inbox-reason")).to_have_value("")  # used up by the deny
    run_cell(page, 2)
    wait_for_output(page, 2, "statuses: ['complete', 'complete', 'complete']", timeout=30)
    assert sorted(effects.read_text().split()) == ["/tmp/a1.txt", "/tmp/a2.txt"]  # never ran

    # JupyterLab's dark theme: the inbox follows it
    page.evaluate(
        "window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})"
    )
    page.wait_for_function("document.body.dataset.jpThemeLight === 'false'", timeout=15_000)
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=15_000)
    background = inbox.evaluate("el => getComputedStyle(el).backgroundColor")
    channels = [int(x) for x in background[background.index("(") + 1 : -1].split(",")[:3]]
    assert sum(channels) / 3 < 80, background  # a dark background, not the light default
    screenshot(page, "inbox-dark")
    page.evaluate(
        "window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})"
    )


STORED = """\
import nbagent
from nbagent import Chat, Tool

class Deploy(Tool):
    \"\"\"Deploy a service.\"\"\"
    requires_approval = True

    def execute(self, service: str) -> str:
        return f"deployed {{service}}"

for svc in ["api", "web"]:
    with Chat(model="demo", store={path!r}, display=False) as chat:
        chat.with_tools(Deploy).ask(f"Deploy the service {{svc}}")
box = nbagent.inbox({path!r})
box
"""


def test_a_decision_from_another_process_shows_as_decided_elsewhere(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    from nbagent.store import SQLiteStore

    db = jupyterlab_server.root_dir / "inbox-stored.db"
    db.unlink(missing_ok=True)
    path = jupyterlab_server.write_notebook("inbox-stored.ipynb", [STORED.format(path=str(db))])
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    inbox = output_area(page, 0).locator(".nba-inbox:visible")
    expect(inbox.locator(".nba-inbox-counts")).to_have_text("2 pending calls", timeout=30_000)
    store = SQLiteStore(db)  # this test's process: not the kernel
    (first, _) = sorted(store.pending_approvals(), key=lambda c: c.arguments["service"])
    store.deny(first.id, chat_id=first.chat_id, reason="change freeze", by="ops")
    store.close()
    # no click, no cell: the shown inbox reads the store by itself
    expect(inbox.locator(".nba-inbox-counts")).to_have_text("1 pending call", timeout=10_000)
    inbox.locator(".nba-inbox-decided > summary").click()
    expect(inbox.locator(".nba-inbox-decided-row:visible")).to_contain_text(
        "denied elsewhere by ops"
    )
    expect(inbox.locator(".nba-inbox-decided-row:visible")).to_contain_text("change freeze")
    screenshot(page, "inbox-decided-elsewhere")
