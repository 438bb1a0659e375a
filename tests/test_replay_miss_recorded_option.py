"""A replay miss by an option says what the recording held as well as what the request has now
(``tool_choice (recorded 'none', now 'auto')``), for every value of a shown option; an option
whose recorded value cannot be told (only its digest is kept) still names the value now."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, ReplayMissError, tool
from nbagent._replay import PROCESS
from nbagent.testing import ScriptedProvider, call_tools, reply


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


@tool
def lookup(order_id: int) -> str:
    """Look an order up.

    Args:
        order_id: The order.
    """
    return f"order {order_id}: paid"


@tool
def weather(city: str) -> str:
    """The weather.

    Args:
        city: The city.
    """
    return "sunny"


def _answer(request: Any) -> Any:
    if any(getattr(m, "role", "") == "tool" for m in request.messages):
        return reply("done")
    return call_tools(("lookup", {"order_id": 7}, "c1"))


def _miss(recorded: dict[str, Any], now: dict[str, Any]) -> str:
    run = Chat(provider=ScriptedProvider([_answer], repeat_last=True), display=False)
    run.with_tools(lookup, weather).with_tool_options(**recorded)
    run.ask("Is order 7 paid?")
    again = Chat(provider=ScriptedProvider([]), replay="only", display=False)
    again.with_tools(lookup, weather).with_tool_options(**now)
    with pytest.raises(ReplayMissError) as caught:
        again.ask("Is order 7 paid?")
    return str(caught.value)


def test_a_choice_miss_names_the_recorded_choice() -> None:
    text = _miss({"choice": "none"}, {"choice": "auto"})
    assert "differs in the options: tool_choice (recorded 'none', now 'auto')." in text, text


CHOICES = ["auto", "none", "required", "lookup", "weather"]


@settings(max_examples=20, deadline=None)
@given(
    st.sampled_from(CHOICES),
    st.sampled_from(CHOICES),
    st.sampled_from(["one", "many"]),
    st.sampled_from(["one", "many"]),
)
def test_each_differing_option_shows_both_values(
    choice_then: str, choice_now: str, calls_then: str, calls_now: str
) -> None:
    PROCESS.clear()
    if (choice_then, calls_then) == (choice_now, calls_now):
        return
    text = _miss(
        {"choice": choice_then, "calls": calls_then}, {"choice": choice_now, "calls": calls_now}
    )
    shown = []
    if calls_then != calls_now:
        shown.append(f"calls (recorded {calls_then!r}, now {calls_now!r})")
    if choice_then != choice_now:
        shown.append(f"tool_choice (recorded {choice_then!r}, now {choice_now!r})")
    assert "the options: " + ", ".join(shown) in text, text
