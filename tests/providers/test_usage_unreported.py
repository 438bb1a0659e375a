"""A server that reports no token usage (some OpenAI-compatible ones send none): the
response's cost is unknown, not $0, and a chat with a budget says, once, that it cannot
count it. Through the real SDK clients against the strict fake server."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from _provider_harness import Harness

from nbagent import Chat
from nbagent._recording import response_in, response_out
from nbagent.providers import UnknownModelWarning
from nbagent.testing import Turn
from nbagent.testing._wire_anthropic import render_messages

OPENAI_KINDS = ("openai-chat", "openai-responses", "openai-compatible")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", OPENAI_KINDS)
def test_no_usage_reported_is_an_unknown_cost_and_a_budget_warns_once(
    make_harness: Callable[[str, bool], Harness], kind: str, stream: bool
) -> None:
    h = make_harness(kind, stream)
    h.script(
        Turn(text="one", usage_reported=False),
        Turn(text="two", usage_reported=False),
        Turn(text="three", usage={"input_tokens": 100, "output_tokens": 7}),
    )
    chat = Chat(provider=h.provider, stream=stream, max_total_tokens=50_000, display=False)
    with pytest.warns(UnknownModelWarning, match="reported no token usage") as said:
        assert chat.ask("first").content == "one"
    assert len(said) == 1
    assert "max_total_tokens=50000 cannot count it" in str(said[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once a chat
        assert chat.ask("second").content == "two"
        assert chat.ask("third").content == "three"
    costs = chat.steps["cost_usd"].tolist()
    assert pd.isna(costs[0]) and pd.isna(costs[1])  # unknown, not $0
    assert chat.cost_usd is None  # a total with an unknown part is unknown
    assert chat.usage.input_tokens == 100 and chat.usage.output_tokens == 7


@pytest.mark.parametrize("kind", OPENAI_KINDS)
def test_without_a_budget_no_usage_says_nothing(
    make_harness: Callable[[str, bool], Harness], kind: str
) -> None:
    h = make_harness(kind, False)
    h.script(Turn(text="one", usage_reported=False))
    chat = Chat(provider=h.provider, stream=False, display=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert chat.ask("first").content == "one"
    assert chat.cost_usd is None


def test_a_priced_model_with_a_cost_budget_names_it(
    make_harness: Callable[[str, bool], Harness],
) -> None:
    h = make_harness("openai-chat", True)
    h.script(Turn(text="one", usage_reported=False))
    chat = Chat(provider=h.provider, max_cost_usd=0.25, display=False)
    with pytest.warns(UnknownModelWarning, match=r"max_cost_usd=0\.25 cannot count it"):
        chat.ask("first")


def test_a_recording_keeps_that_no_usage_was_reported(
    make_harness: Callable[[str, bool], Harness],
) -> None:
    h = make_harness("openai-responses", False)
    h.script(Turn(text="one", usage_reported=False), Turn(text="two"))
    unreported = h.provider.complete(_request())
    reported = h.provider.complete(_request())
    assert (unreported.usage_reported, reported.usage_reported) == (False, True)
    assert response_in(response_out(unreported)).usage_reported is False
    assert response_in(response_out(reported)).usage_reported is True
    assert response_in({"text": "an older recording"}).usage_reported is True


def test_the_fake_anthropic_api_refuses_a_turn_without_usage_as_the_real_one_always_sends_it() -> (
    None
):
    with pytest.raises(ValueError, match="always reports usage"):
        render_messages(
            Turn(text="one", usage_reported=False), {}, stream=False, seq=0, first_call=0
        )


def _request() -> Any:
    from nbagent import ModelRequest
    from nbagent._types import ChatMessage

    return ModelRequest((ChatMessage("user", "hi"),))
