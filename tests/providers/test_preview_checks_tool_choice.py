"""``preview_request`` refuses a ``tool_choice`` the provider would refuse, as sending does.

``preview_request(tools=[get_weather], tool_choice="nope")`` returned a body naming a tool
the request does not carry (every API answers it with a 400), while
``complete_with_tools`` with the same fields raised ``ToolOptionError``: the preview showed
a request nbagent would never send.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _provider_harness import WEATHER

from nbagent import ChatMessage, ModelRequest, ToolOptionError
from nbagent.providers._sdk import SDKProvider

USER = ChatMessage("user", "What is the weather in Paris?")


def test_a_choice_naming_no_given_tool_is_refused_by_the_preview(
    kind: str, provider_factory: Callable[..., SDKProvider]
) -> None:
    provider = provider_factory(kind)
    for fields in ({"tools": [WEATHER], "tool_choice": "nope"}, {"tool_choice": "required"}):
        with pytest.raises(ToolOptionError) as sent:
            provider.complete_with_tools(messages=[USER], **fields)
        with pytest.raises(ToolOptionError) as previewed:
            provider.preview_request(messages=[USER], **fields)
        assert str(previewed.value) == str(sent.value)
        request = ModelRequest((USER,), tools=(WEATHER,))
        with pytest.raises(ToolOptionError):  # a request value, or one with fields replaced
            provider.preview_request(request, tool_choice="nope")
    assert provider.last_request is None


def test_the_choices_it_can_send_still_preview(
    kind: str, provider_factory: Callable[..., SDKProvider]
) -> None:
    provider = provider_factory(kind)
    for choice in ("auto", "none", "required", "get_weather"):
        body = provider.preview_request(messages=[USER], tools=[WEATHER], tool_choice=choice)
        assert body["tools"]
    assert "tool_choice" not in provider.preview_request(messages=[USER], tool_choice="none")
