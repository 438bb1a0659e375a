"""A ``ChatMessage``'s role is one an API has a place for, and ``tools=None`` means no tools.

``ChatMessage("Assistant", ...)``, ``"bogus"`` or ``"tool"`` went to OpenAI as written (the
real API refuses them) and, on Anthropic, into the user's turn: the model read its own earlier
answer as the user's words. ``complete_with_tools`` now refuses them before sending, naming the
message and the roles allowed; the Anthropic wire refuses them for a ``ModelRequest`` built by
hand too. ``complete_with_tools(tools=None)`` failed with "tools must be a list" while
``system=None`` was fine. Through the real SDK clients against the loopback fake server.
"""

from __future__ import annotations

import asyncio

import pytest
from _provider_harness import KINDS, make_provider

from nbagent import ChatMessage
from nbagent.providers import ModelRequest
from nbagent.testing import FakeLLMServer

WRONG = ["Assistant", "USER", " user", "bogus", "tool", "developer", "", None]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("role", WRONG, ids=repr)
def test_a_role_no_api_has_is_refused_before_sending(
    server: FakeLLMServer, kind: str, role: object
) -> None:
    provider = make_provider(kind, server)
    messages = [
        ChatMessage("user", "hi"),
        ChatMessage(role, "I am the assistant's earlier answer"),  # type: ignore[arg-type]
        ChatMessage("user", "again"),
    ]
    with pytest.raises(TypeError) as info:
        provider.complete_with_tools(messages=messages)
    text = str(info.value)
    assert text.startswith("messages[1]: ChatMessage.role must be 'user', 'assistant' or 'system'")
    assert repr(role) in text
    if role == "tool":
        assert "ToolResultMessage" in text
    if isinstance(role, str) and role.strip().lower() in ("user", "assistant"):
        assert repr(role.strip().lower()) in text  # the spelling meant
    assert server.requests == []
    provider.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_three_roles_still_go_out(server: FakeLLMServer, kind: str) -> None:
    provider = make_provider(kind, server)
    server.script(["ok"])
    messages = [
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "hi"),
        ChatMessage("assistant", "hello"),
        ChatMessage("user", "again"),
    ]
    assert provider.complete_with_tools(messages=messages).text == "ok"
    provider.close()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("role", ["Assistant", "bogus", "tool"])
def test_the_anthropic_wire_refuses_a_wrong_role_in_a_request_built_by_hand(
    server: FakeLLMServer, role: str, stream: bool
) -> None:
    """It merged any role but ``assistant`` into the user's turn."""
    provider = make_provider("anthropic", server)
    request = ModelRequest(
        (ChatMessage("user", "hi"), ChatMessage(role, "earlier answer")),  # type: ignore[arg-type]
        stream=stream,
    )
    with pytest.raises(TypeError, match=r"ChatMessage\.role must be 'user', 'assistant'"):
        provider.complete(request)
    assert server.requests == []
    provider.close()


@pytest.mark.parametrize("kind", KINDS)
def test_tools_none_means_no_tools(server: FakeLLMServer, kind: str) -> None:
    provider = make_provider(kind, server)
    server.script(["ok", "ok again"])
    hi = [ChatMessage("user", "hi")]
    assert provider.complete_with_tools(messages=hi, system=None, tools=None).text == "ok"
    assert "tools" not in server.last_request.body

    async def go() -> str:
        response = await provider.complete_with_tools_async(messages=hi, tools=None)
        return response.text

    assert asyncio.run(go()) == "ok again"
    assert "tools" not in server.last_request.body
    with pytest.raises(TypeError, match="tools must be a list"):
        provider.complete_with_tools(messages=hi, tools="get_weather")  # type: ignore[arg-type]
    provider.close()
