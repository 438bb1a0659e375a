"""``complete_with_tools(tool_choice=<a name>)`` names one of its ``tools``, as the chat
requires: a name it was not given (the request went out forcing a tool the model does not
have) fails before sending. Through the real SDK clients against the strict fake server."""

from __future__ import annotations

import pytest
from _provider_harness import WEATHER, make_provider

from nbagent import ChatMessage, ToolOptionError
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

KINDS = ["openai-chat", "openai-responses", "anthropic", "openai-compatible"]

# -- complete_with_tools(tool_choice=...) -------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_tool_choice_naming_no_given_tool_fails_before_sending(
    server: FakeLLMServer, kind: str
) -> None:
    provider = make_provider(kind, server)
    hi = [ChatMessage(role="user", content="Weather in Paris?")]
    with pytest.raises(ToolOptionError, match="'nope' is not one of the tools given"):
        provider.complete_with_tools(messages=hi, tools=[WEATHER], tool_choice="nope")
    with pytest.raises(ToolOptionError, match="'required' needs tools"):
        provider.complete_with_tools(messages=hi, tool_choice="required")
    assert server.requests == []
    server.script([Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})])])
    response = provider.complete_with_tools(messages=hi, tools=[WEATHER], tool_choice="get_weather")
    assert [c.name for c in response.tool_calls] == ["get_weather"]
    provider.close()
