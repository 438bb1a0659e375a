"""A thinking model with tools, through the real SDKs against the strict fake server.

The issue's "done when": ten tool rounds with thinking on, on Anthropic and on
Responses, JSON and streaming. The strict fake refuses a request whose thinking
block is missing, moved or altered (Anthropic) or whose reasoning item is
dropped before its function call (Responses, stateless), so these runs prove the
adapters carry the reasoning across rounds exactly.
"""

from __future__ import annotations

from typing import Any

import pytest
from _setup import provider, server

import nbagent
from nbagent import (
    AssistantToolCallMessage,
    ChatMessage,
    ModelRequestFinished,
    Reasoning,
    ReasoningDelta,
)
from nbagent.testing import FakeToolCall, Turn

ROUNDS = 10


def _turns(redacted_at: int | None = None) -> list[Turn]:
    turns = [
        Turn(
            reasoning=f"Round {n}: I still need step {n}.",
            reasoning_redacted=n == redacted_at,
            tool_calls=[FakeToolCall("step", {"n": n})],
        )
        for n in range(ROUNDS)
    ]
    return [*turns, Turn(reasoning="All steps done.", text="Done: 45.")]


def _chat(kind: str, stream: bool, fake: Any, **kwargs: Any) -> tuple[nbagent.Chat, list[Any]]:
    @nbagent.tool
    def step(n: int) -> int:
        """Run one step.

        Args:
            n: The step number.
        """
        return n

    events: list[Any] = []
    chat = nbagent.Chat(provider=provider(kind, fake), stream=stream, reasoning="high", **kwargs)
    chat.with_tools(step).on(None, events.append)
    return chat, events


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["anthropic", "responses"])
def test_a_thinking_model_runs_ten_tool_rounds(kind: str, stream: bool) -> None:
    with server() as fake:
        fake.script(_turns(redacted_at=3))
        chat, events = _chat(kind, stream, fake)
        reply = chat.ask("Run ten steps.")
        requests = fake.requests

    assert isinstance(reply, ChatMessage) and reply.content == "Done: 45."
    assert len(requests) == ROUNDS + 1  # no request was refused
    asked = [m for m in chat.transcript if isinstance(m, AssistantToolCallMessage)]
    assert len(asked) == ROUNDS
    for n, message in enumerate(asked):
        (thought,) = message.reasoning
        assert isinstance(thought, Reasoning) and thought.api == (
            "anthropic" if kind == "anthropic" else "responses"
        )
        if n == 3:
            assert thought.redacted and thought.text == ""
        else:
            assert thought.text == f"Round {n}: I still need step {n}." and not thought.redacted
    assert reply.reasoning[0].text == "All steps done."

    last = requests[-1].body
    if kind == "anthropic":
        assert last["thinking"] == {"type": "enabled", "budget_tokens": 16384}
        assert last["max_tokens"] > 16384
        sent = [m["content"][0] for m in last["messages"] if m["role"] == "assistant"]
        assert [b["type"] for b in sent] == ["thinking"] * 3 + ["redacted_thinking"] + [
            "thinking"
        ] * 6
        assert sent[0]["thinking"] == "Round 0: I still need step 0."
        # exactly as received: the signature (and the redacted data) went back untouched
        assert [b for b in sent] == [m.reasoning[0].raw for m in asked]
    else:
        assert last["reasoning"] == {"effort": "high"}
        assert last["include"] == ["reasoning.encrypted_content"] and last["store"] is False
        kinds = [i.get("type", "message") for i in last["input"]]
        assert kinds[1:3] == ["reasoning", "function_call"]  # the reasoning first, its call next
        sent = [i for i in last["input"] if i.get("type") == "reasoning"]
        assert sent == [m.reasoning[0].raw for m in asked]
        assert all(i["encrypted_content"] for i in sent)

    finished = [e for e in events if isinstance(e, ModelRequestFinished)]
    assert all(e.usage.reasoning_tokens > 0 for e in finished)
    assert chat.usage.reasoning_tokens == sum(e.usage.reasoning_tokens for e in finished)
    steps = chat.steps
    assert list(steps["reasoning_tokens"]) == [e.usage.reasoning_tokens for e in finished]
    deltas = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    if stream:  # the thinking streamed as it came (the redacted one has nothing to show)
        assert deltas.startswith("Round 0: I still need step 0.Round 1:")
        assert "Round 3" not in deltas and deltas.endswith("All steps done.")
    else:
        assert deltas == ""


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_async_anthropic_thinking_rounds(stream: bool) -> None:
    import asyncio

    with server() as fake:
        fake.script([*_turns()[:3], _turns()[-1]])
        chat, _ = _chat("anthropic", stream, fake)
        reply = asyncio.run(chat.ask_async("Run three steps."))
        assert isinstance(reply, ChatMessage) and reply.content == "Done: 45."
        assert len(fake.requests) == 4
