"""The budget card for a spent cost or token budget: it says which, Continue raises it and resumes.

In process: a real ``ChatView`` with ``ActionCard.click`` (no kernel), a
scripted provider priced at $1 per token by a registered test model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from _pricing import registered
from _views import widgets_in

from nbagent import Chat, tool
from nbagent.notebook import ChatView
from nbagent.notebook._render import conversation_text, entry_html
from nbagent.notebook._widgets import ActionCard
from nbagent.providers import ModelInfo
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

MODEL = "card-budget-test-model"


@pytest.fixture(autouse=True)
def _priced_model() -> Iterator[None]:
    """A model priced at $1 per token, registered for these tests only."""
    with registered(ModelInfo(MODEL, "scripted", True, 1_000_000, 1e6, 1e6, None)):
        yield


ran: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append(key)
    return f"value of {key}"


def _priced(r: Any, i: int, o: int) -> Any:
    return dataclasses.replace(r, model=MODEL, input_tokens=i, output_tokens=o)


def _chat(**budget: Any) -> Chat:
    ran.clear()
    script = [
        _priced(call_tools(("lookup", {"key": "a"})), 8, 2),
        _priced(call_tools(("lookup", {"key": "b"})), 8, 2),
        _priced(reply("all done"), 8, 2),
    ]
    return Chat(provider=ScriptedProvider(script), **budget).with_tools(lookup)


def _cards(view: ChatView) -> list[ActionCard]:
    return [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.kind == "budget"]


@pytest.mark.parametrize(
    ("budget", "which", "label", "words"),
    [
        ({"max_cost_usd": 10.0}, "cost", "+$10.00", "cost budget"),
        ({"max_total_tokens": 10}, "tokens", "+10 tokens", "token budget"),
    ],
)
def test_continue_raises_the_spent_budget_and_resumes(
    budget: dict[str, Any], which: str, label: str, words: str
) -> None:
    chat = _chat(**budget)
    view = ChatView(chat)
    chat.ask("go")
    # the first request reached the budget; its call still ran; no second request
    assert chat.status == "budget_exhausted" and chat.exhausted_budget == which
    assert ran == ["a"] and len(chat.provider.requests) == 1
    (card,) = _cards(view)
    assert (card.state, card.budget, card.increment) == ("pending", which, label)
    assert f"The {words} ran out" in "".join(entry_html(e) for e in view.state.entries)
    card.click("continue")
    assert view.continuation.wait(10)
    assert card.state == "continued"
    # one more budget's worth: one more request and its call, then the budget again
    assert chat.status == "budget_exhausted" and len(chat.provider.requests) == 2
    assert ran == ["a", "b"]
    cards = _cards(view)
    assert len(cards) == 2 and cards[-1].state == "pending" and cards[-1].budget == which
    cards[-1].click("continue")
    assert view.continuation.wait(10)
    assert chat.status == "complete" and chat.last_assistant_message.content == "all done"
    assert chat.usage.total_tokens == 30 and chat.cost_usd == 30.0


def test_stop_stays_stopped() -> None:
    chat = _chat(max_cost_usd=10.0)
    view = ChatView(chat)
    chat.ask("go")
    (card,) = _cards(view)
    card.click("stop")
    assert view.continuation.wait(10)
    assert card.state == "stopped" and chat.status == "budget_exhausted"
    assert chat.max_cost_usd == 10.0 and len(chat.provider.requests) == 1
    assert "cost budget exhausted" in conversation_text(
        view.state.entries, view.state.totals_for(None)
    )


def test_a_view_opened_on_a_stopped_chat_names_the_budget() -> None:
    chat = _chat(max_total_tokens=10)
    chat.ask("go")
    view = ChatView(chat)  # built from the chat, not from its events
    (card,) = _cards(view)
    assert (card.budget, card.increment, card.state) == ("tokens", "+10 tokens", "pending")
    assert "$10.00" in view._status.value  # the chat's cost so far, on the status line
