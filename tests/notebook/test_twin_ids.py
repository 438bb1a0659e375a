"""The notice a waiting view leaves for a reopened notebook (its twin) names calls by the
provider's ids, which can hold anything: quotes, backticks, newlines, markup, bidi overrides.
Whatever they hold, the code it gives decides exactly that call (each id a Python string
literal), the Markdown fence holds the whole code, and no markup comes out of it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from _views import Cells
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from nbagent import Chat, Tool
from nbagent._display import flush_dirty
from nbagent._html import INVISIBLE
from nbagent.notebook import ChatView, _auto
from nbagent.notebook._auto import NotebookExtension
from nbagent.notebook._fallback import _literal
from nbagent.testing import ScriptedProvider, call_tools, reply


class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        return "ok"


HIDDEN = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{INVISIBLE}]")

IDS = [
    'c1")\n```\n<img src=x onerror=alert(1)>\n[click](javascript:alert(2)) **bold**\n```',
    "c2'\"\\` ``` ````",
    "c3 \u202eevil\u2066 \x1b[31m",
    "toolu_01ABC",
]


@given(st.text())
def test_an_id_as_a_python_literal_is_exactly_that_id(text: str) -> None:
    literal = _literal(text)
    assert ast.literal_eval(literal) == text
    assert literal.startswith('"') and HIDDEN.search(literal) is None and "\n" not in literal


@pytest.mark.parametrize("call_id", IDS)
def test_the_twins_code_decides_that_call_and_its_markdown_holds_no_markup(
    cells: Cells, tmp_path: Path, call_id: str
) -> None:
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 1}, call_id)), reply("ok")]),
        display=True,
        store=tmp_path / "chats.db",
    ).with_tools(Refund)
    chat.extend(NotebookExtension())
    cells.run(2, cell="A")
    chat.ask("go")
    flush_dirty()
    view = _auto.turn_view(chat)
    assert isinstance(view, ChatView)
    twin = cells.outputs[f"{view.display_id}-twin"]
    for kind in ("text/plain", "text/markdown"):
        decided = re.findall(r"chat\.approve\((\"(?:[^\"\\]|\\.)*\")\)", twin[kind])
        assert decided and all(ast.literal_eval(d) == call_id for d in decided), kind
    md = MarkdownIt("commonmark", {"html": True})
    tokens = md.parse(twin["text/markdown"])
    fences = [t for t in tokens if t.type == "fence" and t.info == "python"]
    assert len(fences) == 1 and "chat.complete()" in fences[0].content
    rendered = md.render(twin["text/markdown"])
    for html in (rendered, twin["text/html"]):
        assert "<img" not in html and 'href="javascript' not in html and "<strong>bold" not in html
    notice = twin["text/plain"].split("kernel session")[1]  # the notice, not the transcript
    assert HIDDEN.search(notice) is None
