"""The notebook view's *Thinking* section, in-process, with a thinking model behind the real SDK.

Per step the model's thinking is a folded ``<details>`` before its text: open
while it streams, folded once the step settles and in the static HTML; a
redacted block says so; everything the model wrote is escaped.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ipywidgets
import pytest
from _views import widgets_in

import nbagent
from nbagent.notebook import ChatView
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import FakeToolCall, Turn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers" / "reasoning"))
from _setup import provider, server

EVIL = "<script>alert(1)</script> & <b>bold</b>"


def _html(view: ChatView) -> str:
    return "".join(
        w.value for w in widgets_in(view) if isinstance(w, (ipywidgets.HTML, ActionCard))
    )


@pytest.mark.parametrize("kind", ["anthropic", "responses"])
def test_thinking_streams_open_then_folds(kind: str) -> None:
    @nbagent.tool
    def look(city: str) -> str:
        """Look.

        Args:
            city: City.
        """
        return "sunny"

    with server() as fake:
        fake.script(
            [
                Turn(reasoning=f"Plan: {EVIL}", tool_calls=[FakeToolCall("look", {"city": "P"})]),
                Turn(reasoning="Redacted.", reasoning_redacted=True, text="It is **sunny**."),
            ]
        )
        chat = nbagent.Chat(provider=provider(kind, fake), stream=True, reasoning="low")
        chat.with_tools(look)
        view = ChatView(chat)
        live: list[str] = []

        def seen(_event: Any) -> None:
            live.append(_html(view))

        chat.on("reasoning_delta", seen)
        chat.ask("Weather?")
        view._flush_text()

    streaming = [h for h in live if 'nba-thinking" open' in h]
    assert streaming, "the thinking did not stream into the view"
    assert "Plan: &lt;script&gt;" in streaming[-1] and "<script>alert" not in streaming[-1]

    final = _html(view).split("</style>", 1)[1]
    assert final.count('<details class="nba-entry nba-thinking">') == 2  # folded, one per step
    assert " open" not in final.split("nba-thinking", 1)[1].split(">", 1)[0]
    assert "Plan: &lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in final
    assert "encrypted or redacted" in final  # the redacted block says so
    assert final.index("Plan:") < final.index("look") < final.index("<strong>sunny</strong>")
    assert "run by the provider" not in final  # thinking is not also a provider-item line
    assert final.count("Plan: &lt;script&gt;") == 1

    static = chat_mimebundle(chat)["text/html"]
    assert static.count('<details class="nba-entry nba-thinking">') == 2
    assert "<script>alert" not in static
    assert "run by the provider" not in static and static.count("Plan: &lt;script&gt;") == 1
    text = chat_mimebundle(chat)["text/plain"]
    assert "(thinking: Plan: <script>" in text


def test_a_chat_without_thinking_shows_no_section() -> None:
    with server() as fake:
        fake.script(["Hello."])
        chat = nbagent.Chat(provider=provider("anthropic", fake))
        view = ChatView(chat)
        chat.ask("Hi")
    assert "nba-thinking" not in _html(view).split("</style>", 1)[1]
