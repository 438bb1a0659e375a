"""End to end: a full ``nbagent.Chat`` tool loop through every provider and the fake server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _provider_harness import Harness

import nbagent
from nbagent import (
    AssistantToolCallMessage,
    ChatMessage,
    ModelRequestFinished,
    TextDelta,
    ToolCallDelta,
    ToolResultMessage,
)
from nbagent.testing import FakeToolCall, Turn


def make_chat(h: Harness) -> tuple[nbagent.Chat, list[dict[str, Any]], list[Any]]:
    ran: list[dict[str, Any]] = []

    @nbagent.tool
    def get_weather(city: str, unit: str = "c") -> dict[str, Any]:
        """Get the weather for a city.

        Args:
            city: City name.
            unit: Temperature unit.
        """
        ran.append({"city": city, "unit": unit})
        return {"city": city, "temp": 21}

    events: list[Any] = []
    chat = nbagent.Chat(provider=h.provider, stream=h.stream, system="Be brief.")
    chat.with_tools(get_weather).on(None, events.append)
    return chat, ran, events


def test_tool_loop(harness: Harness) -> None:
    chat, ran, events = make_chat(harness)
    harness.script(
        Turn(
            tool_calls=[
                FakeToolCall("get_weather", {"city": "Paris"}),
                FakeToolCall("get_weather", {"city": "Tokyo", "unit": "f"}),
            ],
            usage={"input_tokens": 120, "output_tokens": 30, "cached_tokens": 20},
        ),
        Turn(text="Paris 21C, Tokyo 70F.", usage={"input_tokens": 180, "output_tokens": 12}),
    )
    reply = chat.ask("Weather in Paris and Tokyo?")
    assert isinstance(reply, ChatMessage) and reply.content == "Paris 21C, Tokyo 70F."
    assert chat.status == "complete"
    assert ran == [{"city": "Paris", "unit": "c"}, {"city": "Tokyo", "unit": "f"}]
    assert [type(m) for m in chat.transcript] == [
        ChatMessage,
        AssistantToolCallMessage,
        ToolResultMessage,
        ToolResultMessage,
        ChatMessage,
    ]
    finished = [e for e in events if isinstance(e, ModelRequestFinished)]
    assert [
        (e.usage.input_tokens, e.usage.output_tokens, e.usage.cached_tokens) for e in finished
    ] == [
        (120, 30, 20),
        (180, 12, 0),
    ]
    assert chat.usage.input_tokens == 300
    assert [e.stop_reason for e in finished] == ["tool_use", "end"]
    if harness.kind == "openai-compatible":
        assert all(e.cost_usd is None for e in finished)  # a local model has no price
    else:
        assert all(e.cost_usd is not None and e.cost_usd > 0 for e in finished)
    deltas = [e for e in events if isinstance(e, (TextDelta, ToolCallDelta))]
    if harness.stream:
        assert "".join(e.text for e in deltas if isinstance(e, TextDelta)) == reply.content
        assert {e.call_id for e in deltas if isinstance(e, ToolCallDelta)} == {
            c.id for c in chat.tool_calls
        }
    else:
        assert deltas == []
    # the second request carried both results, in call order
    results = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == [c.id for c in chat.tool_calls]


def test_async_tool_loop(harness: Harness) -> None:
    chat, ran, _ = make_chat(harness)
    harness.script(Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"})]), "Cold.")
    reply = asyncio.run(chat.ask_async("Weather in Oslo?"))
    assert isinstance(reply, ChatMessage) and reply.content == "Cold."
    assert ran == [{"city": "Oslo", "unit": "c"}]


def test_truncated_calls_are_never_executed(harness: Harness) -> None:
    chat, ran, _ = make_chat(harness)
    harness.script(
        Turn(
            tool_calls=[
                FakeToolCall("get_weather", {"city": "Paris"}),
                FakeToolCall("get_weather", raw_arguments='{"city": "Tok'),
            ],
            stop="max_tokens",
        ),
        "I ran out of room; ask again.",
    )
    chat.ask("Weather in Paris and Tokyo?")
    assert ran == []
    assert [c.status for c in chat.tool_calls] == ["skipped", "skipped"]
    assert chat.status == "complete"


def test_calls_one_is_sent_and_enforced(harness: Harness) -> None:
    chat, ran, _ = make_chat(harness)
    chat.with_tool_options(calls="one", choice="required")
    harness.script(
        Turn(
            tool_calls=[
                FakeToolCall("get_weather", {"city": "Paris"}),
                FakeToolCall("get_weather", {"city": "Rome"}),
            ]
        ),
        "Done.",
    )
    chat.ask("Weather in Paris and Rome?")
    first, second = (r.body for r in harness.server.requests)
    if harness.api == "anthropic":
        assert first["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
        assert second["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    else:
        assert (first["tool_choice"], first["parallel_tool_calls"]) == ("required", False)
        assert (second["tool_choice"], second["parallel_tool_calls"]) == ("auto", False)
    assert ran == [{"city": "Paris", "unit": "c"}]  # the extra call is answered as skipped
    assert [c.status for c in chat.tool_calls] == ["ok", "skipped"]


def test_refusal_ends_the_turn(harness: Harness) -> None:
    chat, _, _ = make_chat(harness)
    harness.script(Turn(refusal="I can't help with that."))
    reply = chat.ask("Something forbidden")
    assert isinstance(reply, ChatMessage)
    assert reply.stop_reason == "refusal"
    assert reply.content == "I can't help with that."


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_pause_turn_continues_the_turn(make_harness: Any, stream: bool) -> None:
    harness = make_harness("anthropic", stream)
    chat, _, _ = make_chat(harness)
    harness.script(Turn(text="Let me look that up. ", stop="pause_turn"), "It is sunny.")
    reply = chat.ask("Weather?")
    assert isinstance(reply, ChatMessage) and reply.content == "It is sunny."
    assert [m.role for m in chat.transcript] == ["user", "assistant", "assistant"]
    # the continuation sent the paused text back as the (merged, stripped) last message
    assert harness.body["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Let me look that up."}],
    }
