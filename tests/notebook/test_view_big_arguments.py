"""Issue 13, item 16 (the view part): huge tool arguments are shown as a bounded preview.

A call with a 2 MB string argument and a 50,000-key object: the live view, the
approval card, the static fallbacks and the ``review()`` prompt show a bounded
preview (each string's start and notes such as ``… 1,998,000 more
characters``), while ``chat.tool_calls[i].arguments`` keeps them whole and the
tool gets them whole. Sizes are asserted, not times.
"""

from __future__ import annotations

import json
import re
from typing import Any

import ipywidgets
from _views import widgets_in

from nbagent import Chat, Tool
from nbagent._html import json_preview, pretty_json
from nbagent.notebook import ChatView, review
from nbagent.notebook._fallback import bundle_for
from nbagent.notebook._state import state_for
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply

BIG = 2_000_000
KEYS = 50_000


class Put(Tool):
    """Stores a document."""

    requires_approval = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []

    def execute(self, text: str, data: dict[str, int], path: str = "") -> str:
        self.seen.append({"text": text, "data": data, "path": path})
        return f"stored {len(text)} characters and {len(data)} keys"


def big_chat() -> tuple[Chat, Put]:
    huge = {"text": "a" * BIG, "data": {f"k{i:05d}": i for i in range(KEYS)}, "path": "/etc/x"}
    provider = ScriptedProvider([call_tools(("put", huge, "c_big")), reply("Stored.")])
    put = Put()
    chat = Chat(provider=provider, display=False).with_tools(put)
    state_for(chat)
    chat.ask("Store it")
    assert chat.status == "awaiting_approval"
    return chat, put


# Generous bounds, far below the 2 MB the call holds.
VIEW_BOUND = 60_000


def test_huge_arguments_show_a_bounded_preview() -> None:
    chat, put = big_chat()
    view = ChatView(chat)
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
    for w in widgets_in(view):
        if isinstance(w, (ipywidgets.HTML, ActionCard)):
            assert len(w.value) < VIEW_BOUND
    assert len(card.arguments) < VIEW_BOUND
    assert card.editable is False  # a clipped preview cannot be edited into the arguments
    # The card: each argument on its row, the long ones folded (their start, then the rest
    # on a click, bounded), and the short one after them still there.
    assert "(2,000,000 characters)" in card.value and "50,000 keys" in card.value
    assert re.search(r"… 1,9\d\d,\d{3} more characters", card.value)
    assert 'nba-key">path</span><span class="nba-val">&quot;/etc/x&quot;' in card.value
    bundle = bundle_for(state_for(chat))
    assert len(bundle["text/html"]) < VIEW_BOUND + 10_000  # + the style sheet
    assert len(bundle["text/markdown"]) < VIEW_BOUND
    assert len(bundle["text/plain"]) < VIEW_BOUND
    for mime in ("text/markdown", "text/plain"):  # what the docs promise: every string's start
        assert '"text": "' + "a" * 2_000 + '"… 1,998,000 more characters' in bundle[mime], mime
        assert '"path": "/etc/x"' in bundle[mime], mime  # the argument after them, not dropped
    assert re.search(r"… 1,9\d\d,\d{3} more characters", bundle["text/html"])
    assert 'path</span><span class="nba-val">&quot;/etc/x&quot;' in bundle["text/html"]
    for mime in ("text/html", "text/markdown", "text/plain"):
        assert "more keys" in bundle[mime], mime
    printed: list[str] = []
    review(chat, input=lambda _p: "s", print=lambda *a, **_k: printed.append(" ".join(a)))
    out = "\n".join(printed)
    assert len(out) < VIEW_BOUND and "… 1,998,000 more characters" in out
    # The call keeps its arguments whole, and the tool gets them whole.
    call = chat.tool_calls[0]
    assert len(call.arguments["text"]) == BIG and len(call.arguments["data"]) == KEYS
    card.click("approve")
    assert view.continuation.wait(30)
    assert chat.status == "complete"
    assert len(put.seen[0]["text"]) == BIG and len(put.seen[0]["data"]) == KEYS
    assert len(bundle_for(state_for(chat))["text/plain"]) < 5_000  # decided: one line again
    for w in widgets_in(view):
        if isinstance(w, (ipywidgets.HTML, ActionCard)):
            assert len(w.value) < VIEW_BOUND
    view.close()


def test_small_arguments_are_shown_whole_and_stay_editable() -> None:
    args = {"text": "b" * 1_500, "data": {"x": 1}, "path": "/tmp/y"}
    provider = ScriptedProvider([call_tools(("put", args, "c_small")), reply("Stored.")])
    put = Put()
    chat = Chat(provider=provider, display=False).with_tools(put)
    view = ChatView(chat)
    chat.ask("Store it")
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
    assert card.editable is True
    assert json.loads(card.arguments) == args
    card.click("edit", arguments={**args, "path": "/tmp/z"})
    assert view.continuation.wait(30)
    assert put.seen[0]["path"] == "/tmp/z"


def test_json_preview_is_pretty_json_when_small_and_bounded_when_not() -> None:
    small: Any = {"a": [1, 2.5, None, True, {"b": 'é\n"q"'}], "c": {}, "d": [], 3: "int key"}
    assert json_preview(small) == (pretty_json(small), True)
    text, complete = json_preview({"s": "x" * 50, "t": list(range(100))}, limit=100, value_chars=10)
    assert not complete
    assert '"xxxxxxxxxx"… 40 more characters' in text
    assert re.search(r"… \d+ more items", text)
    deep: Any = []
    for _ in range(5_000):  # deeper than json.dumps can go
        deep = [deep]
    text, complete = json_preview({"deep": deep})
    assert not complete and len(text) < 30_000
    loop: dict[str, Any] = {}
    loop["self"] = loop
    text, complete = json_preview(loop)
    assert not complete and len(text) < 30_000
    text, complete = json_preview({"k" * 30_000: 1})  # keys are clipped too
    assert not complete and "… 28,000 more characters" in text
    assert json_preview({"k" * 10_000: 1}) == (pretty_json({"k" * 10_000: 1}), True)
