"""A structured answer cut off by the output token limit is not sent back for a retry.

The model stopped writing at ``max_tokens``: the unfinished JSON is invalid because
it is unfinished, and a paid retry under the same limit is cut off again. The error
says the answer was cut off at the limit and names the setting. Over the three wire
formats (the real SDK clients against the loopback fake server) and in-process.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from nbagent import AnthropicProvider, Chat, OpenAIProvider, OutputValidationError
from nbagent.testing import FakeLLMServer, ScriptedProvider, Turn, reply


class Forecast(BaseModel):
    city: str
    temp_c: float


def _provider(kind: str, server: FakeLLMServer) -> Any:
    if kind == "anthropic":
        return AnthropicProvider(
            "claude-sonnet-4-5",
            base_url=server.anthropic_base_url,
            api_key="sk-test",
            max_tokens=16,
            max_retries=0,
        )
    return OpenAIProvider(
        "gpt-4.1-mini",
        api=kind,
        base_url=server.openai_base_url,
        api_key="sk-test",
        compatible=False,
        max_tokens=16,
        max_retries=0,
    )


@pytest.mark.parametrize("kind", ["chat", "responses", "anthropic"])
def test_an_answer_cut_off_at_max_tokens_is_not_retried_and_says_so(kind: str) -> None:
    turns = [
        Turn(text='{"city":"Os', stop="max_tokens"),
        Turn(text='{"city":"Oslo","te', stop="max_tokens"),
    ]
    with FakeLLMServer(turns=turns) as server:
        provider = _provider(kind, server)
        chat = Chat(provider=provider, display=False)
        with pytest.raises(OutputValidationError) as caught:
            chat.ask("weather?", output=Forecast)
        provider.close()
        assert len(server.requests) == 1  # no paid retry
    text = str(caught.value)
    assert "cut off at the output token limit (16 tokens)" in text
    assert "max_tokens" in text and "after one retry" not in text
    assert caught.value.raw == '{"city":"Os'
    assert any("not valid JSON" in e for e in caught.value.errors)
    assert [m.role for m in chat.transcript] == ["user", "assistant"]  # nothing sent back
    assert chat.last_error is caught.value


def test_a_retry_cut_off_says_so_too() -> None:
    provider = ScriptedProvider(
        [reply("not json"), reply('{"city": "Os', stop_reason="max_tokens")]
    )
    chat = Chat(provider=provider, display=False)
    with pytest.raises(OutputValidationError, match="cut off at the output token limit") as caught:
        chat.ask("weather?", output=Forecast)
    assert "both answers are kept" in str(caught.value)  # this one was the retry
    assert len(provider.requests) == 2  # the invalid answer retried once, then cut off
    assert [m.role for m in chat.transcript] == ["user", "assistant", "user", "assistant"]


def test_a_complete_answer_at_the_limit_is_read() -> None:
    provider = ScriptedProvider([reply('{"city": "Oslo", "temp_c": 3}', stop_reason="max_tokens")])
    chat = Chat(provider=provider, display=False)
    assert chat.ask("weather?", output=Forecast).parsed == Forecast(city="Oslo", temp_c=3)


def test_an_invalid_answer_that_ended_is_still_retried_once() -> None:
    provider = ScriptedProvider([reply("not json"), reply('{"city": "Oslo", "temp_c": 3}')])
    chat = Chat(provider=provider, display=False)
    assert chat.ask("weather?", output=Forecast).parsed == Forecast(city="Oslo", temp_c=3)
    assert len(provider.requests) == 2
