"""A budget raised or a setting changed, then the chat closed with no step after: kept.

A controller loads a chat parked on its cost budget, raises it (``raise_budget()``, or
``chat.max_cost_usd = ...``, ``chat.max_steps = ...``) and closes it for a worker to
continue. Those emit no event, and the store wrote a chat's state only with an event's
write: the raise was lost and the loaded chat was stopped again. SQLite and PostgreSQL.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return city


def _priced(response: Any) -> Any:  # gpt-4.1 input at $2 per million tokens: $0.50
    return dataclasses.replace(response, model="gpt-4.1", input_tokens=250_000, output_tokens=0)


@pytest.mark.parametrize("change", ["raise_budget", "max_cost_usd", "max_steps"])
def test_a_setting_changed_then_closed_is_kept(backend: Any, change: str) -> None:
    script = [_priced(call_tools(("lookup", {"city": c}))) for c in "AB"] + [_priced(reply("ok"))]
    store = backend.open()
    chat = Chat(provider=ScriptedProvider(script, model="gpt-4.1"), store=store, max_cost_usd=0.9)
    chat.with_tools(lookup)
    chat.ask("go")
    assert chat.exhausted_budget == "cost"
    if change == "raise_budget":
        chat.raise_budget()
    elif change == "max_cost_usd":
        chat.max_cost_usd = 3.0
    else:
        chat.max_steps = 7
    want = (chat.max_cost_usd, chat.max_steps)
    chat.close()  # no step after the change
    store.close()
    store = backend.open()
    loaded = Chat.load(
        chat.id, store=store, tools=[lookup], provider=ScriptedProvider([], model="gpt-4.1")
    )
    assert (loaded.max_cost_usd, loaded.max_steps) == want
    loaded.close()
    store.close()
