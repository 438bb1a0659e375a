"""A long chat stays small in a saved notebook (issue 28, item 5).

A view's static forms hold one whole copy of the chat (its HTML, older entries folded and
saved folded: a finished call as its one line), not three; ``text/markdown`` and
``text/plain`` say how much folds and show the rest. ``chat``'s own repr still prints
everything. A view following a long chat opens no more widget models than its live
pages show: the entry widgets of folded pages are reused, so the widget state a
notebook saves does not grow with the chat.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from nbagent import Chat, LLMToolResponse, ModelRequest, ToolCall, ToolResultMessage, tool
from nbagent.notebook import ChatView
from nbagent.notebook._fallback import chat_mimebundle


class Lookups:
    """``n`` tool calls, one per response, then an answer; a later turn: one call, an answer."""

    name = "scripted"
    model = "scripted-model"

    def __init__(self, n: int, note: int = 80):
        self.n, self.note, self.made = n, note, 0

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        last = request.messages[-1]
        if not isinstance(last, ToolResultMessage) or self.made < self.n:
            self.made += 1
            call = ToolCall(f"call_{self.made:05d}", "lookup", {"key": f"item-{self.made}"})
            return LLMToolResponse("", (call,), 120, 12, self.model, self.name, "tool_use")
        return LLMToolResponse(f"Looked up {self.made} items.", (), 150, 20, self.model, self.name)

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


def lookups(n: int, note: int = 80) -> Chat:
    @tool
    def lookup(key: str) -> dict[str, Any]:
        """Look up an item by key.

        Args:
            key: The item's key.
        """
        return {"key": key, "value": len(key), "note": "x" * note}

    chat = Chat(provider=Lookups(n, note), max_steps=2 * n + 5, display=False, stream=False)
    return chat.with_tools(lookup)


def size(data: dict[str, Any]) -> int:
    return sum(len(str(v).encode()) for v in data.values())


def saved(n: int, note: int) -> tuple[dict[str, str], str]:
    """A view's static forms after ``n`` calls, and what a terminal prints for ``chat``."""
    chat = lookups(n, note)
    view = ChatView(chat)
    chat.ask(f"Look up {n} items")
    data = view.fallback_bundle()
    view.close()
    return data, chat_mimebundle(chat)["text/plain"]


@pytest.mark.parametrize("note", [0, 80, 400])
def test_a_long_chats_view_saves_one_copy_of_it(note: int) -> None:
    (few, few_printed), (data, printed) = saved(60, note), saved(180, note)
    # each more call costs the saved forms at most twice what it costs the printed transcript
    assert size(data) - size(few) <= 2 * (len(printed.encode()) - len(few_printed.encode()))
    html, markdown, text = data["text/html"], data["text/markdown"], data["text/plain"]
    # the HTML has every call, the older ones saved folded: a line each, no body under it
    assert all(re.search(rf"item-{i}\b", html) for i in range(1, 181))
    assert html.count('class="nba-result"') < 40
    # the others show the end and say what folds; the printed transcript keeps it all
    folded = r"(\d+) earlier entries not shown here: the HTML form lists them"
    shown = re.match(rf"\[{folded}\]\n", text)
    assert shown and int(shown[1]) > 300  # the last ones show: the folded part's words first
    assert re.match(rf"\*{folded}\*\n", markdown)
    assert '"item-180"' in text and "item-180" in markdown and '"item-1"' not in text
    assert '"item-180"' in printed and '"item-1"' in printed
    assert "-- complete" in text and "Looked up 180 items." in markdown


def test_a_short_chats_view_keeps_all_three_forms_whole() -> None:
    chat = lookups(3)
    view = ChatView(chat)
    chat.ask("Look up 3 items")
    data = view.fallback_bundle()
    view.close()
    for kind in ("text/html", "text/markdown", "text/plain"):
        assert "item-1" in data[kind] and "item-3" in data[kind]
        assert "not shown here" not in data[kind]
    assert data["text/html"].count('class="nba-result"') == 3  # each call opens on a click


@pytest.mark.parametrize("page_size", [5, 25])
def test_a_view_following_a_long_chat_opens_as_many_models_as_it_shows(
    constructed: list[Any], page_size: int
) -> None:
    def models(n: int) -> int:
        chat = lookups(n)
        view = ChatView(chat, turn=1, page_size=page_size)
        constructed.clear()
        chat.ask(f"Look up {n} items")
        shown = len(view._html) + len(view._pages)
        count = len(constructed)
        view.close()
        assert shown <= count <= shown + 2 * page_size + 10
        return count

    few, many = models(4 * page_size), models(16 * page_size)
    assert many <= few + 3  # folded pages' models are reused, not made anew


def test_reused_widgets_show_what_they_show_now() -> None:
    """A page shown again after folding ("Show earlier") draws its own entries."""
    chat = lookups(40)
    view = ChatView(chat, turn=1, page_size=5, live_pages=1)
    chat.ask("Look up 40 items")
    view.show_earlier()
    view.show_earlier()
    values = [w.value for box in view._body.children for w in box.children]
    view.close()
    keys = [v for v in values if "nba-call" in v]
    assert len(keys) == len(set(keys))  # no widget shows two entries
    numbers = [int(v.split("item-")[1].split("&")[0]) for v in keys]
    assert numbers == sorted(numbers) and numbers[-1] == 40
