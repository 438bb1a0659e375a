"""Prompt caching through the real SDKs against the strict fake server.

``Chat(cache=True)`` puts Anthropic ``cache_control`` breakpoints on the tools,
the system prompt and the last two user messages (never more than 4, never on
a thinking block); the fake simulates the cache, so later requests read what
earlier ones wrote; cached and written tokens are priced at their rates; the
totals equal the per-step sums over several turns. OpenAI caches by itself:
nothing is added to its requests, and its ``cached_tokens`` are priced cached.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from _provider_harness import KEY, make_provider

import nbagent
from nbagent.providers import lookup_model
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

SYSTEM = "You are a careful assistant. " * 40


@nbagent.tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key} " * 20


def _breakpoints(body: dict[str, Any]) -> list[str]:
    """Where a request puts ``cache_control``: ``tools.i``, ``system.i``, ``messages.i.type``."""
    out = [f"tools.{i}" for i, t in enumerate(body.get("tools") or []) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        out += [f"system.{i}" for i, b in enumerate(system) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        content = m["content"] if isinstance(m["content"], list) else []
        out += [f"messages.{i}.{b['type']}" for b in content if "cache_control" in b]
    return out


def _script(turns: int) -> list[Turn]:
    out: list[Turn] = []
    for t in range(turns):
        out += [
            Turn(
                reasoning=f"turn {t}: look it up",
                tool_calls=[FakeToolCall("lookup", {"key": f"k{t}"})],
            ),
            Turn(reasoning="answer", text=f"answer {t}"),
        ]
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_anthropic_breakpoints_cache_reads_and_cached_pricing(stream: bool) -> None:
    with FakeLLMServer(turns=_script(3)) as server:
        provider = make_provider("anthropic", server)
        chat = nbagent.Chat(
            provider=provider, system=SYSTEM, cache=True, stream=stream, reasoning=2048
        ).with_tools(lookup)
        for q in ("first?", "second?", "third?"):
            chat.ask(q)
            assert chat.status == "complete"
        bodies = [r.body for r in server.requests]
        provider.close()
    assert len(bodies) == 6
    for body in bodies:
        marks = _breakpoints(body)
        assert len(marks) <= 4  # and the strict fake accepted every one
        assert marks[:2] == ["tools.0", "system.0"]
        assert all(not m.endswith("thinking") for m in marks)
    # the first request marks its one user message; later ones the last two user messages
    assert _breakpoints(bodies[0])[2:] == ["messages.0.text"]
    assert _breakpoints(bodies[1])[2:] == ["messages.0.text", "messages.2.tool_result"]
    assert _breakpoints(bodies[2])[2:] == ["messages.2.tool_result", "messages.4.text"]
    steps = chat.steps
    # the first request writes the cache, each later one reads what the previous wrote
    assert int(steps["cached_tokens"].iloc[0]) == 0
    assert int(steps["cache_write_tokens"].iloc[0]) > 0
    assert (steps["cached_tokens"].iloc[1:] > 0).all()
    # totals over the three turns equal the per-step sums
    usage = chat.usage
    assert usage.input_tokens == int(steps["input_tokens"].sum())
    assert usage.output_tokens == int(steps["output_tokens"].sum())
    assert usage.cached_tokens == int(steps["cached_tokens"].sum())
    assert usage.cache_write_tokens == int(steps["cache_write_tokens"].sum())
    assert chat.cost_usd == pytest.approx(float(steps["cost_usd"].sum()))
    assert steps.groupby("turn").size().to_dict() == {1: 2, 2: 2, 3: 2}
    # priced at the published rates: reads 0.1x, writes 1.25x, the rest 1x input
    info = lookup_model("claude-sonnet-4-5")
    assert info is not None
    expected = sum(
        (
            (r.input_tokens - r.cached_tokens - r.cache_write_tokens) * 3.0
            + r.cached_tokens * 0.30
            + r.cache_write_tokens * 3.75
            + r.output_tokens * 15.0
        )
        / 1e6
        for r in steps.itertuples()
    )
    assert chat.cost_usd == pytest.approx(expected)
    uncached = sum(
        (r.input_tokens * 3.0 + r.output_tokens * 15.0) / 1e6 for r in steps.itertuples()
    )
    assert chat.cost_usd != pytest.approx(uncached)


def test_without_cache_nothing_is_marked() -> None:
    with FakeLLMServer(turns=_script(1)) as server:
        provider = make_provider("anthropic", server)
        chat = nbagent.Chat(provider=provider, system=SYSTEM).with_tools(lookup)
        chat.ask("go")
        bodies = [r.body for r in server.requests]
        provider.close()
    assert all(_breakpoints(b) == [] for b in bodies)
    assert all(isinstance(b["system"], str) for b in bodies)
    assert chat.usage.cached_tokens == 0 and chat.usage.cache_write_tokens == 0


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses"])
def test_openai_requests_are_unchanged_and_cached_tokens_priced_cached(kind: str) -> None:
    turns = [
        Turn(
            tool_calls=[FakeToolCall("lookup", {"key": "a"})],
            usage={"input_tokens": 2000, "output_tokens": 10, "cached_tokens": 1024},
        ),
        Turn(text="done", usage={"input_tokens": 2100, "output_tokens": 5, "cached_tokens": 1536}),
    ]
    with FakeLLMServer(turns=turns) as server:
        provider = make_provider(kind, server, model="gpt-4.1")
        chat = nbagent.Chat(provider=provider, system=SYSTEM, cache=True).with_tools(lookup)
        chat.ask("go")
        bodies = [r.body for r in server.requests]
        provider.close()
    assert "cache_control" not in repr(bodies)
    assert chat.usage.cached_tokens == 2560
    # gpt-4.1: $2 input, $0.50 cached input, $8 output per million
    expected = ((4100 - 2560) * 2.0 + 2560 * 0.50 + 15 * 8.0) / 1e6
    assert chat.cost_usd == pytest.approx(expected)


def _raw(server: FakeLLMServer, **body: Any) -> Any:
    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    try:
        return client.messages.create(model="fake-model", max_tokens=64, **body)
    finally:
        client.close()


def test_strict_fake_rejects_a_fifth_breakpoint_and_one_on_thinking() -> None:
    mark = {"type": "ephemeral"}
    text = {"type": "text", "text": "hi", "cache_control": mark}
    with FakeLLMServer(turns=[Turn(text="ok")] * 3) as server:
        with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
            _raw(server, messages=[{"role": "user", "content": [text] * 5}])
        thinking = {
            "type": "thinking",
            "thinking": "x",
            "signature": "sig",
            "cache_control": mark,
        }
        with pytest.raises(anthropic.BadRequestError, match="cache_control"):
            _raw(
                server,
                messages=[
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [thinking, {"type": "text", "text": "a"}]},
                    {"role": "user", "content": "more"},
                ],
            )
        with pytest.raises(anthropic.BadRequestError, match="empty text"):
            _raw(server, messages=[{"role": "user", "content": [{**text, "text": ""}]}])
        # four are fine
        assert _raw(server, messages=[{"role": "user", "content": [text] * 4}]).content
