"""Issue 13 in a real JupyterLab: what a model or tool produced renders as text.

The chat's ``text/markdown``, ``text/plain`` and ``text/html`` are displayed on
their own, so JupyterLab renders each with its own renderer (marked and its
math pre-pass for markdown, the ANSI-aware renderer for plain text); none may
produce a link, an image or a script, and the vectors read as written. Then a
call with a 2 MB argument: the view shows a bounded preview, the card has no
editor, and Approve runs the tool with the whole argument.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _jupyterlab import JupyterLabServer, open_notebook, output_area, run_cell, screenshot
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

EVIL = (
    "[click](javascript:alert(1)) <javascript:alert(2)> https://evil.example/bare\n\n"
    "<img src=x onerror=alert(3)>\n\n<a href=http://evil.example>a</a>\n\n"
    "a\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07link\x1b]8;;\x07"
)

SETUP = """\
from IPython.display import display
from nbagent import Chat, Tool
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.testing import ScriptedProvider, call_tools, reply

EVIL = {evil!r}

class Echo(Tool):
    \"\"\"Returns its text.\"\"\"
    requires_approval = True

    def execute(self, text: str) -> str:
        return "echo: " + text

provider = ScriptedProvider([
    call_tools(("tool" + EVIL, {{"x": EVIL, EVIL: 1}}, "c_unknown"),
               ("echo", {{"text": EVIL}}, "c_ok"), text=EVIL),
    reply(EVIL),
])
chat = Chat(provider=provider, display=False).with_tools(Echo)
chat.ask(EVIL)
chat.approve("c_ok")
chat.complete()
bundle = chat_mimebundle(chat)
print("ready", chat.status)
"""

SHOW = 'display({{"{mime}": bundle["{mime}"]}}, raw=True)'

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

MIMES = ["text/markdown", "text/plain", "text/html"]


def test_fallbacks_render_every_vector_as_text(
    page: Page, jupyterlab_server: JupyterLabServer
) -> None:
    cells = [SETUP.format(evil=EVIL), *(SHOW.format(mime=m) for m in MIMES)]
    path = jupyterlab_server.write_notebook("hardening-fallbacks.ipynb", cells)
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    expect(output_area(page, 0)).to_contain_text("ready complete", timeout=30_000)
    for i, mime in enumerate(MIMES, start=1):
        run_cell(page, i)
        area = output_area(page, i)
        expect(area).to_contain_text("[click](javascript:alert(1))", timeout=30_000)
        expect(area).to_contain_text("<img src=x onerror=alert(3)>")
        expect(area).to_contain_text("\\x1b[31mred")  # the escape is seen, not run
        live = area.locator("a, img, script, iframe, object, embed, [class*='ansi-']")
        found = live.evaluate_all(
            "ns => ns.map(n => [n.tagName, n.getAttribute('href'), n.textContent, n.outerHTML])"
        )
        if mime == "text/plain":
            # JupyterLab itself links the URLs of any plain-text output, each to the URL
            # it shows; nothing else may be live (no OSC 8 link, no ANSI styling).
            found = [f for f in found if not (f[0] == "A" and f[1] == f[2])]
        assert found == [], f"{mime}: {[f[3] for f in found]}"
    screenshot(page, "hardening-fallbacks")


def test_huge_arguments_card(page: Page, jupyterlab_server: JupyterLabServer) -> None:
    seen = Path(jupyterlab_server.root_dir) / "hardening-big.seen"
    seen.unlink(missing_ok=True)
    path = jupyterlab_server.write_notebook("hardening-big.ipynb", [BIG.format(seen=str(seen))])
    open_notebook(page, jupyterlab_server, path)
    run_cell(page, 0)
    area = output_area(page, 0)
    card = area.locator(".nba-action").first
    expect(card).to_be_visible(timeout=30_000)
    # The argument folds: its start and size on the card, a bounded part of it on a click.
    # :visible: the live card, not its static twin (hidden while the view is connected)
    expect(area.locator(".nba-call:visible")).to_contain_text("(2,000,000 characters)")
    expect(area.locator(".nba-call:visible")).to_contain_text("more characters")
    expect(card.get_by_role("button", name="Edit arguments")).to_be_disabled()
    expect(card).to_contain_text("too large to edit here")
    screenshot(page, "hardening-big-card")
    card.get_by_role("button", name="Approve").click()
    expect(area).to_contain_text("Stored it.", timeout=30_000)
    assert seen.read_text() == "2000000"  # the tool got the whole argument
