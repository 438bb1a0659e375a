"""Gemini 3's thought signatures go back with the calls they came on.

Gemini's OpenAI-compatible endpoint sends each tool call with
``extra_content: {"google": {"thought_signature": ...}}`` and refuses (400, "Function call is
missing a thought_signature") a next request whose call lacks it: nbagent dropped the field,
so every Gemini 3 chat failed after its first tool call. The adapter now keeps it (an
unreadable ``Reasoning`` item of the response, for the Chat Completions wire only) and sends
it back on its call. Through the real SDK against the strict fake server with its
``thought_signatures`` quirk, which signs calls and refuses them back unsigned.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from _provider_harness import make_provider

from nbagent import (
    AssistantToolCallMessage,
    BadRequestError,
    Chat,
    ChatMessage,
    Reasoning,
    ToolResultMessage,
    tool,
)
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn
from nbagent.testing._wire_openai import thought_signature

ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the weather."""
    ran.append(city)
    return f"sunny in {city}"


def _script(server: FakeLLMServer, *turns: Turn | str) -> None:
    resolved = [Turn(text=t) if isinstance(t, str) else t for t in turns]
    server.script([dataclasses.replace(t, repeat_ids_in_stream=True) for t in resolved])


def _sent_calls(server: FakeLLMServer, n: int) -> list[dict]:
    return [c for m in server.requests[n].body["messages"] for c in (m.get("tool_calls") or ())]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_signatures_go_back_on_their_calls(server: FakeLLMServer, stream: bool) -> None:
    ran.clear()
    server.quirks = {"thought_signatures"}
    _script(
        server,
        Turn(
            tool_calls=[
                FakeToolCall("get_weather", {"city": "Paris"}, id="function-call-1"),
                FakeToolCall("get_weather", {"city": "Tokyo"}, id="function-call-2"),
            ]
        ),
        Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"}, id="function-call-3")]),
        "All sunny.",
    )
    provider = make_provider("openai-compatible", server, model="gemini-3-pro-preview")
    chat = Chat(provider=provider, stream=stream).with_tools(get_weather)
    assert chat.ask("Weather in Paris, Tokyo, then Oslo?").content == "All sunny."
    assert ran == ["Paris", "Tokyo", "Oslo"]
    calls = _sent_calls(server, 2)
    assert [c["id"] for c in calls] == ["function-call-1", "function-call-2", "function-call-3"]
    for call in calls:  # each its own signature, as it came
        assert call["extra_content"] == {
            "google": {"thought_signature": thought_signature(call["id"])}
        }
    # the record: the model thought (unreadably); no log row for it
    (first,) = [m for m in chat.transcript if isinstance(m, AssistantToolCallMessage)][:1]
    assert all(isinstance(i, Reasoning) and i.redacted for i in first.items)
    assert len(chat.log) == 3


def test_without_them_the_strict_server_refuses_as_gemini_does(server: FakeLLMServer) -> None:
    """The quirk's check: a signed call sent back bare is the 400 Gemini answers."""
    server.quirks = {"thought_signatures"}
    _script(server, Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]))
    provider = make_provider("openai-compatible", server, model="gemini-3-pro-preview")
    response = provider.complete_with_tools(
        messages=[ChatMessage(role="user", content="Weather?")], tools=[get_weather]
    )
    (call,) = response.tool_calls
    bare = dataclasses.replace(call)  # the call alone, without its response's items
    bare_message = AssistantToolCallMessage(content="", tool_calls=(bare,))
    _script(server, "never")
    with pytest.raises(BadRequestError, match="missing a thought_signature"):
        provider.complete_with_tools(
            messages=[
                ChatMessage(role="user", content="Weather?"),
                bare_message,
                ToolResultMessage(tool_call_id=call.id, content="sunny"),
            ],
            tools=[get_weather],
        )


def test_your_own_loop_sends_them_back_too(server: FakeLLMServer) -> None:
    server.quirks = {"thought_signatures"}
    _script(server, Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]), "Sunny.")
    provider = make_provider("openai-compatible", server, model="gemini-3-pro-preview")
    messages: list = [ChatMessage(role="user", content="Weather?")]
    response = provider.complete_with_tools(messages=messages, tools=[get_weather])
    messages.append(AssistantToolCallMessage(content="", tool_calls=response.tool_calls))
    messages += [ToolResultMessage(tool_call_id=c.id, content="sunny") for c in response.tool_calls]
    assert provider.complete_with_tools(messages=messages, tools=[get_weather]).text == "Sunny."


def test_they_go_to_no_other_api(server: FakeLLMServer) -> None:
    """A chat forked to OpenAI itself or to Anthropic sends no Gemini field there."""
    ran.clear()
    server.quirks = {"thought_signatures"}
    _script(server, Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]), "Sunny.")
    gemini = make_provider("openai-compatible", server, model="gemini-3-pro-preview")
    chat = Chat(provider=gemini).with_tools(get_weather)
    chat.ask("Weather?")
    server.quirks = set()  # the server is now OpenAI's or Anthropic's
    for kind in ("openai-chat", "openai-responses", "anthropic"):
        server.script(["Still sunny."])
        fork = chat.fork(model=make_provider(kind, server), step=2)
        assert fork.ask("And now?").content == "Still sunny."
        assert "thought_signature" not in json.dumps(server.last_request.body)
