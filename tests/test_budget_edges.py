"""Budgets as a person meets them: the numbers they may be given as, and raise_budget()'s
way out of each stop (a replayed chat's, the step budget's)."""

from __future__ import annotations

import dataclasses
import decimal
import fractions
from typing import Any

import numpy as np
import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


def _priced(response: Any) -> Any:
    # a million gpt-4.1 input tokens: $2.00 a request
    return dataclasses.replace(response, model="gpt-4.1", input_tokens=1_000_000, output_tokens=0)


@pytest.mark.parametrize(
    "given",
    [
        np.int64(2),
        np.float32(0.5),
        np.float64(0.5),
        decimal.Decimal("0.5"),
        fractions.Fraction(1, 2),
    ],
    ids=["np.int64", "np.float32", "np.float64", "Decimal", "Fraction"],
)
def test_a_cost_budget_may_be_any_real_number_and_is_kept_as_float(given: Any) -> None:
    chat = Chat(model="demo", max_cost_usd=given, display=False)
    assert type(chat.max_cost_usd) is float and chat.max_cost_usd == float(given)
    try:
        assert nbagent.configure(max_cost_usd=given).max_cost_usd == float(given)
    finally:
        nbagent.configure(max_cost_usd=None)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (10**400, "finite number of dollars"),
        (decimal.Decimal("Infinity"), "finite number of dollars"),
        (-(10**400), "positive number of dollars"),
        (float("nan"), "positive number of dollars"),
        (decimal.Decimal("NaN"), "positive number of dollars"),
        (0, "positive number of dollars"),
        (True, "positive number of dollars"),
        ("1", "positive number of dollars"),
    ],
    ids=["10**400", "Decimal-inf", "-10**400", "nan", "Decimal-nan", "0", "True", "str"],
)
def test_a_cost_budget_that_is_no_amount_of_dollars_is_a_one_line_value_error(
    given: Any, says: str
) -> None:
    with pytest.raises(ValueError, match=says) as info:
        Chat(model="demo", max_cost_usd=given, display=False)
    assert "\n" not in str(info.value) and len(str(info.value)) < 200  # 10**400 is shortened
    with pytest.raises(ValueError, match=says):
        nbagent.configure(max_cost_usd=given)
    chat = Chat(model="demo", display=False)
    with pytest.raises(ValueError, match=says):
        chat.complete(max_cost_usd=given)


def test_raise_budget_lets_a_replayed_chat_continue() -> None:
    """The replayed requests' recorded cost counts for the budget, so the raised cap must
    count it too: before, each raise_budget() set the cap from $0 (nothing spent now) and
    the chat stopped again where it was, forever."""

    def script() -> list[Any]:
        calls = [_priced(call_tools(("weather", {"city": c}))) for c in "ABC"]
        return [*calls, _priced(reply("done"))]

    recorded = Chat(
        provider=ScriptedProvider(script(), model="gpt-4.1"), replay="auto", display=False
    ).with_tools(weather)
    recorded.ask("go")
    replayed = Chat(
        provider=ScriptedProvider(script(), model="gpt-4.1"),
        replay="auto",
        max_cost_usd=0.5,
        display=False,
    ).with_tools(weather)
    replayed.ask("go")
    assert (replayed.status, replayed.exhausted_budget, len(replayed.steps)) == (
        "budget_exhausted",
        "cost",
        1,
    )
    for steps in (2, 3):
        assert replayed.raise_budget() == 0.5
        replayed.complete()
        assert len(replayed.steps) == steps  # one more request each time, as the $0.50 allows
    replayed.raise_budget()
    replayed.complete()
    assert replayed.status == "complete"
    assert replayed.last_assistant_message is not None
    assert replayed.last_assistant_message.content == "done"


def test_raise_budget_after_the_step_budget_says_complete_resumes_it() -> None:
    chat = Chat(
        provider=ScriptedProvider([call_tools(("weather", {"city": "a"}))], repeat_last=True),
        max_steps=1,
        display=False,
    ).with_tools(weather)
    chat.ask("go")
    assert chat.exhausted_budget == "steps"
    with pytest.raises(ValueError, match=r"step budget stopped this chat.*complete\(\) resumes"):
        chat.raise_budget()
    with pytest.raises(ValueError, match=r"complete\(\) again"):
        chat.raise_budget("steps")
    with pytest.raises(ValueError, match=r"which must be 'cost' or 'tokens', got 'bogus'"):
        chat.raise_budget("bogus")
    chat.complete(max_steps=3)  # what the message says works: the chat goes on
    assert len(chat.steps) > 1


def test_raise_budget_with_nothing_spent_says_to_name_one() -> None:
    chat = Chat(model="demo", max_cost_usd=1.0, display=False)
    with pytest.raises(
        ValueError, match=r"no cost or token budget is spent.*raise_budget\('cost'\)"
    ):
        chat.raise_budget()


@pytest.mark.parametrize(
    ("name", "bad", "good", "kept"),
    [
        ("max_cost_usd", "0.5", decimal.Decimal("0.5"), 0.5),
        ("max_total_tokens", -3, np.int64(1000), 1000),
        ("max_steps", "3", 3, 3),
    ],
)
def test_a_budget_set_on_the_chat_is_checked_as_at_chat(
    name: str, bad: Any, good: Any, kept: Any
) -> None:
    chat = Chat(model="demo", display=False)
    with pytest.raises(ValueError, match=name):
        setattr(chat, name, bad)  # before: accepted, then a TypeError deep in the next ask
    assert getattr(chat, name) is None  # the bad value replaced nothing
    setattr(chat, name, good)
    assert getattr(chat, name) == kept and type(getattr(chat, name)) is type(kept)
    chat.ask("What is 2 + 2?")
    assert chat.status == "complete"


def test_a_warning_from_inside_the_loop_points_at_the_line_that_asked() -> None:
    import asyncio
    import warnings

    from nbagent.providers import UnknownModelWarning

    def chat() -> Chat:
        unpriced = dataclasses.replace(reply("hi"), model="mystery-model-x")
        return Chat(provider=ScriptedProvider([unpriced]), max_cost_usd=1.0, display=False)

    async def asks() -> None:
        await chat().ask_async("hello")

    for ask in (lambda: chat().ask("hello"), lambda: asyncio.run(asks())):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            ask()
        (w,) = [w for w in said if issubclass(w.category, UnknownModelWarning)]
        assert w.filename == __file__  # not nbagent/_base_chat.py, where it was raised from
