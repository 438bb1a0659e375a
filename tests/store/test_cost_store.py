"""The store keeps a chat's cost totals and its cost/token budgets across ``Chat.load``
(on SQLite and PostgreSQL: the totals are summed from the stored events by each dialect)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from _pricing import registered

from nbagent import Chat, tool
from nbagent.providers import ModelInfo
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

MODEL = "store-budget-test-model"


@pytest.fixture(autouse=True)
def _priced_model() -> Iterator[None]:
    """A model priced at $1 per token, registered for these tests only."""
    with registered(ModelInfo(MODEL, "scripted", True, 1_000_000, 1e6, 1e6, 5e5, 2e6)):
        yield


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _priced(r: Any, i: int, o: int, **more: int) -> Any:
    return dataclasses.replace(r, model=MODEL, input_tokens=i, output_tokens=o, **more)


def test_totals_and_a_cost_stop_survive_a_reload(backend: Any) -> None:
    with backend.open() as store:
        first = ScriptedProvider(
            [
                _priced(call_tools(("lookup", {"key": "a"})), 30, 5, cached_tokens=10),
                _priced(reply("never sent"), 1, 1),
            ]
        )
        chat = Chat(provider=first, store=store, max_cost_usd=20.0, cache=True)
        chat.with_tools(lookup)
        chat.ask("go")
        assert chat.status == "budget_exhausted" and chat.exhausted_budget == "cost"
        # 20 uncached at $1 + 10 cached at $0.50 + 5 out at $1
        assert chat.cost_usd == 30.0 and len(first.requests) == 1
        chat.close()

        second = ScriptedProvider([_priced(reply("done"), 4, 2, cache_write_tokens=4)])
        loaded = Chat.load(chat.id, store=store, tools=[lookup], provider=second)
        assert loaded.status == "budget_exhausted" and loaded.exhausted_budget == "cost"
        assert loaded.max_cost_usd == 20.0 and loaded.cache is True
        assert loaded.usage == chat.usage and loaded.cost_usd == 30.0
        loaded.complete()  # no more budget: nothing is sent
        assert loaded.status == "budget_exhausted" and len(second.requests) == 0
        assert loaded.raise_budget() == 20.0 and loaded.max_cost_usd == 50.0
        loaded.complete()
        assert loaded.status == "complete" and len(second.requests) == 1
        assert loaded.usage.cache_write_tokens == 4
        assert loaded.cost_usd == 30.0 + 4 * 2 + 2  # cache writes at $2
        loaded.close()

        again = Chat.load(chat.id, store=store, tools=[lookup], provider=ScriptedProvider([]))
        assert again.cost_usd == loaded.cost_usd and again.usage == loaded.usage
        assert again.max_cost_usd == 50.0 and again.status == "complete"
        again.close()


def test_an_unpriced_request_stays_unpriced_after_a_reload(backend: Any) -> None:
    with backend.open() as store:
        chat = Chat(provider=ScriptedProvider([reply("hi")]), store=store, max_total_tokens=99)
        chat.ask("hi")
        assert chat.cost_usd is None
        chat.close()
        loaded = Chat.load(chat.id, store=store, provider=ScriptedProvider([]))
        assert loaded.cost_usd is None and loaded.max_total_tokens == 99
        assert loaded.usage.total_tokens == 15
        loaded.close()


def test_the_budget_that_stopped_the_chat_is_stored(backend: Any) -> None:
    with backend.open() as store:
        script = [_priced(call_tools(("lookup", {"key": "a"})), 30, 5), _priced(reply("x"), 1, 1)]
        chat = Chat(provider=ScriptedProvider(script), store=store, max_total_tokens=10)
        chat.with_tools(lookup).ask("go")
        assert chat.exhausted_budget == "tokens"
        chat.close()
        # loaded with a cost budget that is spent too: the stored stop still says tokens
        loaded = Chat.load(
            chat.id, store=store, tools=[lookup], provider=ScriptedProvider([]), max_cost_usd=1.0
        )
        assert loaded.status == "budget_exhausted" and loaded.exhausted_budget == "tokens"
        loaded.close()
