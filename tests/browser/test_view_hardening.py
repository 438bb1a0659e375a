"""Issue 13, item 16 in a real JupyterLab: a call with a 2 MB argument.

The view shows a bounded preview, the card has no editor (its Edit button is
disabled and says why), and Approve runs the tool with the whole argument.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _jupyterlab import JupyterLabServer, open_notebook, output_area, run_cell, screenshot
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

BIG = """\
from pathlib import Path
from nbagent import Chat, Tool
from nbagent.testing import ScriptedProvider, call_tools, reply

SEEN = Path({seen!r})

class Put(Tool):
    \"\"\"Stores a document.\"\"\"
    requires_approval = True

    def execute(self, text: str, path: str) -> str:
        SEEN.write_text(str(len(text)))
        return "stored"

provider = ScriptedProvider([
    call_tools(("put", {{"text": "a" * 2_000_000, "path": "/etc/x"}}, "c_big")),
    reply("Stored it."),
])
big = Chat(provider=provider).with_tools(Put)
answer = big.ask("Store it")
"""


def test_huge_arguments_card(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    seen = Path(jupyterlab_server.root_dir) / "hardening-big.seen"
    seen.unlink(missing_ok=True)
    path = jupyterlab_server.write_notebook("hardening-big.ipynb", [BIG.format(seen=str(seen))])
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    area = output_area(page, 0)
    card = area.locator(".nba-action").first
    expect(card).to_be_visible(timeout=30_000)
    expect(area.locator(".nba-call")).to_contain_text("… 1,998,000 more characters")
    expect(card.get_by_role("button", name="Edit arguments")).to_be_disabled()
    expect(card).to_contain_text("too large to edit here")
    screenshot(page, "hardening-big-card")
    card.get_by_role("button", name="Approve").click()
    expect(area).to_contain_text("Stored it.", timeout=30_000)
    assert seen.read_text() == "2000000"  # the tool got the whole argument
