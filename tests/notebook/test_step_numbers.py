"""One meaning of "step" (issue 25, U6): a model request or a round of tool calls, as
``max_steps`` and ``step()`` count them. The view's "step N" is the chat's own step
number (the log's, fork's and compare's), and the status line says how many steps did
work, so a budget of N steps that ran out reads "N steps"."""

from __future__ import annotations

import re
from typing import Any

import ipywidgets
import pytest
from _views import widgets_in

from nbagent import Chat, ProviderError, tool
from nbagent.notebook import ChatView
from nbagent.notebook._fallback import bundle_for
from nbagent.notebook._state import ChatState, StepEntry, state_for
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _chat(*script: Any) -> Chat:
    return Chat(provider=ScriptedProvider(list(script)), display=False).with_tools(lookup)


def _steps_said(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\bstep (\d+)\b", text)]


def _count_said(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"(\d+) steps?\b", text)]


def test_steps_are_the_chats_and_counted_as_max_steps_counts() -> None:
    chat = _chat(
        call_tools(("lookup", {"key": "a"})),
        call_tools(("lookup", {"key": "b"})),
        reply("first answer"),
        call_tools(("lookup", {"key": "c"})),
        reply("second answer"),
    )
    state = state_for(chat)
    chat.ask("one")  # three model requests, two tool rounds: chat steps 1..5
    chat.ask("two")  # two model requests, one tool round: chat steps 6..8
    steps = [e for e in state.entries if isinstance(e, StepEntry)]
    assert [(e.turn, e.r.step) for e in steps] == [(1, 1), (1, 3), (1, 5), (2, 6), (2, 8)]
    assert chat.steps["step"].tolist() == [1, 3, 5, 6, 8]  # the log says the same numbers
    assert (chat.record.steps_taken(1), chat.record.steps_taken(2)) == (5, 3)
    for turn, said, n in ((1, [1, 3, 5], 5), (2, [6, 8], 3)):
        bundle = bundle_for(state, turn)
        for mime in ("text/plain", "text/markdown", "text/html"):
            assert _steps_said(bundle[mime]) == said, mime
            assert _count_said(bundle[mime]) == [n], mime
    whole = bundle_for(state)["text/plain"]
    assert _steps_said(whole) == [1, 3, 5, 6, 8] and _count_said(whole) == [8]


def test_a_spent_budget_reads_as_many_steps_as_it_allowed() -> None:
    chat = _chat(call_tools(("lookup", {"key": "a"})), call_tools(("lookup", {"key": "b"})))
    chat.ask("go", max_steps=3)  # request, round, request: the next round is over budget
    assert chat.status == "budget_exhausted"
    assert _count_said(bundle_for(state_for(chat), 1)["text/plain"]) == [3]


def test_the_live_view_says_the_same() -> None:
    chat = _chat(call_tools(("lookup", {"key": "a"})), reply("done"))
    view = ChatView(chat, turn=1)
    chat.ask("go")
    html = "".join(w.value for w in widgets_in(view) if isinstance(w, ipywidgets.HTML))
    assert _steps_said(html) == [1, 3] and _count_said(html) == [3]


def test_a_retried_request_keeps_its_number_and_is_counted_once() -> None:
    class Flaky(ScriptedProvider):
        failed = False

        def complete(self, request: Any) -> Any:
            if len(self.requests) == 1 and not self.failed:
                self.failed = True
                raise ProviderError("server hiccup", provider="scripted")
            return super().complete(request)

    chat = Chat(
        provider=Flaky([call_tools(("lookup", {"key": "a"})), reply("done")]), display=False
    ).with_tools(lookup)
    state = state_for(chat)
    with pytest.raises(ProviderError):
        chat.ask("go")
    text = bundle_for(state, 1)["text/plain"]
    # the request and the round did work; the failed request did not
    assert _steps_said(text) == [1, 3] and "failed" in text and _count_said(text) == [2]
    chat.complete()  # the retry is step 3 again, now answered
    text = bundle_for(state, 1)["text/plain"]
    assert _steps_said(text) == [1, 3] and "failed" not in text and _count_said(text) == [3]


def test_a_view_rebuilt_from_the_record_numbers_the_same() -> None:
    chat = _chat(call_tools(("lookup", {"key": "a"})), reply("one"), reply("two"))
    chat.ask("first")
    chat.ask("second")
    state = ChatState.from_chat(chat)
    text = bundle_for(state)["text/plain"]
    assert _steps_said(text) == [1, 3, 4] and _count_said(text) == [4]
    assert _count_said(bundle_for(state, 1)["text/plain"]) == [3]
    assert _count_said(bundle_for(state, 2)["text/plain"]) == [1]
