"""Cost and token budgets: whole-chat totals, a budget checked before each model request.

Each scripted response is priced at $1 per token (a registered test model), so
cost and token budgets are integers and the arithmetic is exact.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from _pricing import registered
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, ModelRequestStarted, StepFinished, tool
from nbagent.notebook._state import BudgetEntry, state_for
from nbagent.providers import ModelInfo
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

MODEL = "budget-test-model"


@pytest.fixture(autouse=True)
def _priced_model() -> Iterator[None]:
    """A model priced at $1 per token, registered for these tests only."""
    with registered(ModelInfo(MODEL, "scripted", True, 1_000_000, 1e6, 1e6, 5e5, 2e6)):
        yield


ran: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append(key)
    return f"value of {key}"


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Send money."""
    ran.append(f"wire {amount}")
    return "sent"


def _priced(r: Any, i: int, o: int) -> Any:
    return dataclasses.replace(r, model=MODEL, input_tokens=i, output_tokens=o)


def _script(usages: list[tuple[int, int]]) -> list[Any]:
    """``len(usages) - 1`` tool rounds, then an answer; request k reports ``usages[k]``."""
    out = [
        _priced(call_tools(("lookup", {"key": f"k{k}"})), i, o)
        for k, (i, o) in enumerate(usages[:-1])
    ]
    return [*out, _priced(reply("done"), *usages[-1])]


def _chat(script: list[Any], **budgets: Any) -> tuple[Chat, list[Any]]:
    chat = Chat(provider=ScriptedProvider(script), display=False, **budgets)
    chat.with_tools(lookup, wire)
    events: list[Any] = []
    chat.on(None, events.append)
    return chat, events


def test_totals_add_up_over_turns_and_match_the_steps() -> None:
    script = _script([(10, 2), (12, 3)]) + _script([(20, 4)]) + _script([(7, 1), (9, 5), (11, 6)])
    chat, _ = _chat(script)
    for q in ("one", "two", "three"):
        chat.ask(q)
    steps = chat.steps
    assert chat.usage.input_tokens == int(steps["input_tokens"].sum()) == 69
    assert chat.usage.output_tokens == int(steps["output_tokens"].sum()) == 21
    assert chat.usage.total_tokens == 90
    assert chat.cost_usd == pytest.approx(float(steps["cost_usd"].sum())) == 90.0
    per_turn = steps.groupby("turn")["cost_usd"].sum()  # the documented per-turn total
    assert per_turn.to_dict() == {1: 27.0, 2: 24.0, 3: 39.0}


def test_an_unpriced_request_makes_the_total_unknown() -> None:
    chat, _ = _chat([reply("hi")])  # model "scripted": no price
    chat.ask("hi")
    assert chat.usage.total_tokens == 15
    assert chat.cost_usd is None
    assert chat.steps["cost_usd"].isna().all()


def test_cached_and_written_tokens_are_priced_at_their_rates() -> None:
    info = nbagent.providers.lookup_model("claude-sonnet-4-5")
    assert info is not None and info.cache_write_price == pytest.approx(3.75)
    usage = nbagent.Usage(
        input_tokens=1_000_000, output_tokens=0, cached_tokens=600_000, cache_write_tokens=300_000
    )
    # 100k uncached at $3, 600k read at $0.30, 300k written at $3.75
    assert info.cost(usage) == pytest.approx(0.3 + 0.18 + 1.125)
    gpt = nbagent.providers.lookup_model("gpt-4.1")
    assert gpt is not None and gpt.cache_write_price is None
    assert gpt.cost(nbagent.Usage(1_000_000, 0, 1_000_000)) == pytest.approx(0.50)


def _expected_requests(usages: list[tuple[int, int]], budget: int) -> int:
    """Requests made when a request starts only while the total spent is below ``budget``."""
    spent = made = 0
    for i, o in usages:
        if spent >= budget:
            break
        made += 1
        spent += i + o
    return made


@settings(max_examples=60, deadline=None)
@given(
    usages=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=5),
    budget=st.integers(1, 150),
    which=st.sampled_from(["cost", "tokens"]),
    use_async=st.booleans(),
)
def test_budget_parks_iff_a_request_was_left(
    usages: list[tuple[int, int]], budget: int, which: str, use_async: bool
) -> None:
    """A turn whose last request reaches the budget is complete; no request starts past it."""
    ran.clear()
    kw = {"max_cost_usd": float(budget)} if which == "cost" else {"max_total_tokens": budget}
    chat, events = _chat(_script(usages), **kw)
    state = state_for(chat)  # the display state follows the chat's record from the start
    spent_at_start: list[float] = []
    chat.on(ModelRequestStarted, lambda e: spent_at_start.append(chat.usage.total_tokens))
    if use_async:
        asyncio.run(chat.ask_async("go"))
    else:
        chat.ask("go")
    made = _expected_requests(usages, budget)
    needed = len(usages)
    cut_off = made < needed
    assert len(spent_at_start) == made
    assert all(s < budget for s in spent_at_start)  # no request started with the budget spent
    assert chat.status == ("budget_exhausted" if cut_off else "complete")
    assert chat.exhausted_budget == (which if cut_off else None)
    assert len(ran) == min(made, needed - 1)  # a requested call still runs
    kinds = [e.kind for e in events if isinstance(e, StepFinished)]
    assert kinds.count("budget_exhausted") == (1 if cut_off else 0)
    cards = [e for e in state.entries if isinstance(e, BudgetEntry)]
    assert len(cards) == (1 if cut_off else 0)
    rounds = 0
    while chat.status == "budget_exhausted":  # Continue: +the budget, until the turn ends
        assert chat.raise_budget() == budget
        assert chat.exhausted_budget == which  # what stopped it, until it runs again
        chat.complete()
        rounds += 1
        assert rounds <= needed  # each Continue allows at least one more request
    assert chat.status == "complete" and len(ran) == needed - 1
    total = sum(i + o for i, o in usages)
    assert chat.usage.total_tokens == total
    assert chat.cost_usd == float(total)


def test_a_pending_approval_survives_a_budget_stop() -> None:
    ran.clear()
    script = [
        _priced(call_tools(("lookup", {"key": "a"}), ("wire", {"amount": 5})), 50, 10),
        _priced(reply("done"), 5, 5),
    ]
    chat, _ = _chat(script, max_cost_usd=40.0)
    chat.ask("go")
    # the ungated call ran, the gated one waits: the chat parks for the approval first
    assert ran == ["a"]
    assert chat.status == "awaiting_approval"
    assert [c.name for c in chat.pending_approvals] == ["wire"]
    chat.approve(chat.pending_approvals[0].id)
    chat.complete()
    assert ran == ["a", "wire 5"]  # the approved call ran exactly once
    assert chat.status == "budget_exhausted" and chat.exhausted_budget == "cost"
    chat.complete()  # without more budget: stays stopped, nothing is sent
    assert chat.status == "budget_exhausted" and len(chat.provider.requests) == 1
    assert chat.complete(max_cost_usd=100.0) is not None
    assert chat.status == "complete" and ran == ["a", "wire 5"] and chat.cost_usd == 70.0


def test_configure_sets_default_budgets_and_checks_them() -> None:
    try:
        nbagent.configure(max_total_tokens=10)
        chat, _ = _chat(_script([(10, 2), (1, 1)]))
        chat.ask("go")
        assert chat.exhausted_budget == "tokens"
        assert chat.raise_budget() == 10 and chat.max_total_tokens == 22  # 12 spent + 10
        chat.complete()
        assert chat.status == "complete"
    finally:
        nbagent.configure(max_total_tokens=None)
    assert nbagent.get_config().max_total_tokens is None
    for bad in ({"max_cost_usd": 0}, {"max_cost_usd": -1.0}, {"max_total_tokens": 0}):
        with pytest.raises(ValueError):
            Chat(provider=ScriptedProvider([]), display=False, **bad)
        with pytest.raises(ValueError):
            nbagent.configure(**bad)


def test_the_step_budget_is_named_when_no_cost_budget_is_spent() -> None:
    chat, _ = _chat(_script([(1, 1), (1, 1), (1, 1)]), max_cost_usd=100.0)
    chat.ask("go", max_steps=1)
    assert chat.status == "budget_exhausted" and chat.exhausted_budget == "steps"
    with pytest.raises(ValueError):
        chat.raise_budget()


class _NoWait(nbagent.Extension):
    """What the notebook view adds to a chat in a kernel: ``ask_async`` asks it whether to
    wait for a click (here: no)."""

    async def wait_for_decision(self, wait: bool | None) -> bool:
        return False


@pytest.mark.parametrize("waiter", [False, True])
def test_ask_async_stopped_by_a_budget_before_asking_returns_no_answer(waiter: bool) -> None:
    """The budget is spent by the first turn: the second stops before its request. Every
    ask returns None then (no answer to this question), never the first turn's answer (with
    the view's waiter, ``ask_async`` returned 'Paris' to the capital of Germany)."""
    script = [_priced(reply("Paris"), 2, 0), _priced(reply("Berlin"), 2, 0)]
    chat, _ = _chat(script, max_cost_usd=1.0)
    if waiter:
        chat.extend(_NoWait())
    assert chat.ask("capital of France?").content == "Paris"  # type: ignore[union-attr]
    assert asyncio.run(chat.ask_async("capital of Germany?")) is None
    assert chat.exhausted_budget == "cost"
