"""``reasoning=`` on each wire, the strict fake's thinking rules, and bad values refused early."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from _setup import KEY, provider, server

import nbagent
from nbagent import AssistantToolCallMessage, ReasoningDelta, ToolOptionError
from nbagent.testing import FakeToolCall, Turn

PARIS = FakeToolCall("get_weather", {"city": "Paris"})


def _weather_chat(p: Any, **kwargs: Any) -> nbagent.Chat:
    @nbagent.tool
    def get_weather(city: str) -> str:
        """Weather.

        Args:
            city: City.
        """
        return "sunny"

    return nbagent.Chat(provider=p, **kwargs).with_tools(get_weather)


# -- the regression: reasoning set the only way main allowed (extra_body) ------------


@pytest.mark.parametrize("kind", ["anthropic", "responses"])
def test_reasoning_through_extra_body_survives_a_tool_round(kind: str) -> None:
    """On main the Responses adapter dropped reasoning items, so the second request of a
    stateless tool round was refused; Anthropic's thinking blocks were already kept."""
    extra = (
        {"thinking": {"type": "enabled", "budget_tokens": 1024}}
        if kind == "anthropic"
        else {"reasoning": {"effort": "low"}}
    )
    with server() as fake:
        fake.script([Turn(reasoning="Check the weather.", tool_calls=[PARIS]), "Sunny."])
        chat = _weather_chat(provider(kind, fake, extra_body=extra))
        assert chat.ask("Weather in Paris?").content == "Sunny."
        if kind == "responses":  # asked for, so the reasoning can come back statelessly
            assert fake.requests[0].body["include"] == ["reasoning.encrypted_content"]


# -- what each API gets ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "budget", "max_tokens"),
    [("low", 1024, 4096), ("medium", 4096, 8192), ("high", 16384, 20480), (2000, 2000, 4096)],
)
def test_anthropic_thinking_budget_and_room_for_the_answer(
    setting: Any, budget: int, max_tokens: int
) -> None:
    with server() as fake:
        fake.script(["Hi."])
        chat = nbagent.Chat(provider=provider("anthropic", fake), reasoning=setting)
        chat.ask("Hello")
        body = fake.last_request.body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens  # above the budget, as the API requires


@pytest.mark.parametrize("kind", ["anthropic", "responses", "chat", "compatible"])
def test_no_reasoning_sends_nothing(kind: str) -> None:
    """Not to a model that does not reason (a reasoning model on Responses is asked for its
    encrypted reasoning all the same: see test_wire_fidelity)."""
    plain = {"model": "gpt-4.1-mini"} if kind == "responses" else {}
    with server() as fake:
        fake.script(["Hi."])
        nbagent.Chat(provider=provider(kind, fake, **plain)).ask("Hello")
        body = fake.last_request.body
    assert not {"thinking", "reasoning", "reasoning_effort", "include"} & set(body)


def test_chat_completions_sends_reasoning_effort() -> None:
    with server() as fake:
        fake.script(["Hi."])
        nbagent.Chat(provider=provider("chat", fake), reasoning="medium").ask("Hello")
        assert fake.last_request.body["reasoning_effort"] == "medium"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_reasoning_content_of_a_compatible_server(stream: bool) -> None:
    """DeepSeek-style: kept, streamed, and sent back on the tool-call message (DeepSeek's
    thinking mode requires it there), never on plain answers."""
    with server() as fake:
        fake.script(
            [
                Turn(reasoning="Need the weather.", tool_calls=[PARIS], repeat_ids_in_stream=True),
                Turn(reasoning="It is sunny.", text="Sunny.", usage={"reasoning_tokens": 7}),
                Turn(reasoning="Greet back.", text="Hi."),
            ]
        )
        events: list[Any] = []
        chat = _weather_chat(provider("compatible", fake), stream=stream, reasoning="high")
        chat.on(ReasoningDelta, events.append)
        reply = chat.ask("Weather in Paris?")
        chat.ask("Thanks")
        bodies = [r.body for r in fake.requests]
    assert reply.reasoning[0].text == "It is sunny." and reply.reasoning[0].api == "chat"
    asked = next(m for m in chat.transcript if isinstance(m, AssistantToolCallMessage))
    assert asked.reasoning[0].text == "Need the weather."
    assert bodies[0]["reasoning_effort"] == "high"
    sent = [m for m in bodies[2]["messages"] if m["role"] == "assistant"]
    assert sent[0]["reasoning_content"] == "Need the weather." and "tool_calls" in sent[0]
    assert "reasoning_content" not in sent[1]
    assert chat.steps["reasoning_tokens"].tolist()[1] == 7
    text = "".join(e.text for e in events)
    assert text == ("Need the weather.It is sunny.Greet back." if stream else "")


def test_openai_itself_never_gets_reasoning_content_back() -> None:
    with server() as fake:
        fake.script([Turn(reasoning="Need the weather.", tool_calls=[PARIS]), "Sunny."])
        _weather_chat(provider("chat", fake)).ask("Weather in Paris?")
        sent = [m for m in fake.last_request.body["messages"] if m["role"] == "assistant"]
    assert "reasoning_content" not in sent[0]


def test_responses_reasoning_without_encrypted_content_is_kept_but_not_sent() -> None:
    """A model not known to reason is not asked for ``include`` (other models refuse it), so
    the first reasoning it sends cannot go back statelessly: the item stays in the transcript
    for the view, the request stays valid (and the next request asks)."""
    with server() as fake:
        fake.script([Turn(reasoning="Hmm.", tool_calls=[PARIS]), "Sunny."])
        chat = _weather_chat(provider("responses", fake, model="gpt-4.1-mini"))
        chat.ask("Weather in Paris?")
        asked = next(m for m in chat.transcript if isinstance(m, AssistantToolCallMessage))
        assert asked.reasoning[0].text == "Hmm." and not asked.reasoning[0].resend
        kinds = [i.get("type") for i in fake.last_request.body["input"]]
        assert "include" not in fake.requests[0].body
        assert fake.last_request.body["include"] == ["reasoning.encrypted_content"]
    assert "reasoning" not in kinds


# -- bad values fail before any request ------------------------------------------------


@pytest.mark.parametrize("value", ["extreme", "HIGH", 1023, 0, True, 1.5, {"effort": "low"}])
def test_invalid_reasoning_values(value: Any) -> None:
    with server() as fake, pytest.raises(ValueError, match="reasoning"):
        nbagent.Chat(provider=provider("anthropic", fake), reasoning=value)


@pytest.mark.parametrize("kind", ["responses", "chat"])
def test_openai_refuses_a_token_budget_when_the_chat_is_made(kind: str) -> None:
    with server() as fake:
        with pytest.raises(ValueError, match="effort"):
            nbagent.Chat(provider=provider(kind, fake), reasoning=4000)
        assert fake.requests == []


def test_anthropic_refuses_a_forced_tool_choice_with_thinking_before_sending() -> None:
    with server() as fake:
        chat = _weather_chat(provider("anthropic", fake), reasoning="low")
        chat.with_tool_options(choice="required")
        with pytest.raises(ToolOptionError, match="thinking"):
            chat.ask("Weather?")
        assert fake.requests == []


@pytest.mark.parametrize("extra", [{"temperature": 0}, {"top_k": 5}, {"top_p": 0.5}])
def test_anthropic_refuses_sampling_settings_with_thinking_before_sending(
    extra: dict[str, Any],
) -> None:
    with server() as fake:
        chat = nbagent.Chat(provider=provider("anthropic", fake, extra_body=extra), reasoning=2048)
        with pytest.raises(ValueError, match="thinking"):
            chat.ask("Hello")
        assert fake.requests == []


# -- the strict fake enforces the APIs' thinking rules ----------------------------------

QUESTION = {"role": "user", "content": "Weather in Paris?"}
TOOLS = [{"name": "get_weather", "description": "W.", "input_schema": {"type": "object"}}]


def _anthropic_round(fake: Any, alter: Any) -> Any:
    client = anthropic.Anthropic(api_key=KEY, base_url=fake.anthropic_base_url, max_retries=0)
    thinking = {"type": "enabled", "budget_tokens": 1024}
    first = client.messages.create(
        model="claude-test",
        max_tokens=2048,
        thinking=thinking,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        messages=[QUESTION],  # type: ignore[list-item]
    )
    content = alter([b.model_dump(exclude_none=True) for b in first.content])
    result = {"type": "tool_result", "tool_use_id": first.content[-1].id, "content": "sunny"}  # type: ignore[union-attr]
    return client.messages.create(
        model="claude-test",
        max_tokens=2048,
        thinking=thinking,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        messages=[
            QUESTION,
            {"role": "assistant", "content": content},
            {"role": "user", "content": [result]},
        ],  # type: ignore[list-item]
    )


def _resign(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**blocks[0], "thinking": blocks[0]["thinking"] + "!"}, *blocks[1:]]


@pytest.mark.parametrize(
    ("alter", "message"),
    [
        (lambda blocks: blocks, None),
        (lambda blocks: blocks[1:], "must start with a thinking block"),
        (lambda blocks: [*blocks[1:], blocks[0]], "must start with a thinking block"),
        (_resign, "Invalid `signature`"),
        (lambda b: [{**b[0], "signature": b[0]["signature"][:-2] + "AA"}, *b[1:]], "signature"),
    ],
    ids=["intact", "dropped", "moved", "edited", "forged"],
)
def test_strict_fake_checks_anthropic_thinking_blocks(alter: Any, message: str | None) -> None:
    with server() as fake:
        fake.script([Turn(reasoning="Look it up.", tool_calls=[PARIS]), "Sunny."])
        if message is None:
            assert _anthropic_round(fake, alter).content[0].type == "text"
        else:
            with pytest.raises(anthropic.BadRequestError, match=message):
                _anthropic_round(fake, alter)


def test_strict_fake_checks_redacted_thinking_data() -> None:
    def tamper(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**blocks[0], "data": "x" + blocks[0]["data"]}, *blocks[1:]]

    with server() as fake:
        fake.script([Turn(reasoning="secret", reasoning_redacted=True, tool_calls=[PARIS])])
        with pytest.raises(anthropic.BadRequestError, match="redacted_thinking"):
            _anthropic_round(fake, tamper)


def _responses_round(fake: Any, keep: Any) -> Any:
    client = openai.OpenAI(api_key=KEY, base_url=fake.openai_base_url, max_retries=0)
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    common: dict[str, Any] = {
        "model": "o4-mini",
        "tools": tools,
        "store": False,
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
    }
    first = client.responses.create(input="Weather in Paris?", **common)
    items = keep([i.model_dump(exclude_none=True) for i in first.output])
    call = next(i for i in items if i["type"] == "function_call")
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
    return client.responses.create(
        input=[{"role": "user", "content": "Weather in Paris?"}, *items, output], **common
    )


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        (lambda items: items, None),
        (lambda items: items[1:], "without its required 'reasoning' item"),
        (
            lambda items: [{**items[0], "encrypted_content": "tampered"}, *items[1:]],
            "not persisted",
        ),
        (
            lambda items: [
                {k: v for k, v in items[0].items() if k != "encrypted_content"},
                *items[1:],
            ],
            "not persisted",
        ),
    ],
    ids=["intact", "dropped", "altered", "not-encrypted"],
)
def test_strict_fake_checks_stateless_responses_reasoning(keep: Any, message: str | None) -> None:
    with server() as fake:
        fake.script([Turn(reasoning="Look it up.", tool_calls=[PARIS]), "Sunny."])
        if message is None:
            assert _responses_round(fake, keep).output_text == "Sunny."
        else:
            with pytest.raises(openai.BadRequestError, match=message):
                _responses_round(fake, keep)


def test_fake_leaves_encrypted_content_out_unless_asked() -> None:
    with server() as fake:
        fake.script([Turn(reasoning="Hmm.", text="Hi.")])
        client = openai.OpenAI(api_key=KEY, base_url=fake.openai_base_url, max_retries=0)
        out = client.responses.create(model="o4-mini", input="Hi")
    assert out.output[0].type == "reasoning" and out.output[0].encrypted_content is None
    assert json.loads(out.to_json())["output"][0]["summary"][0]["text"] == "Hmm."


@pytest.mark.parametrize("came_from", ["responses", "no reasoning"])
def test_anthropic_continues_a_round_it_did_not_think_for_without_thinking(
    came_from: str,
) -> None:
    """A tool round asked for by another provider (a fork or a chat given a Claude model
    mid-turn), or before ``reasoning=`` was on, has no thinking block, and Anthropic
    refuses to continue it with thinking on: the 400 "a final assistant message must start
    with a thinking block". The round goes on without thinking; the next turn thinks."""
    with server() as fake:
        thought = "Check the weather." if came_from == "responses" else None
        fake.script(
            [
                Turn(reasoning=thought, tool_calls=[PARIS]),
                "Sunny.",
                Turn(reasoning="Easy.", text="You're welcome."),
            ]
        )
        first = provider("responses" if came_from == "responses" else "anthropic", fake)
        reasoning = "low" if came_from == "responses" else None
        chat = _weather_chat(first, reasoning=reasoning)
        chat.ask_later("Weather in Paris?")
        chat.step()  # the round is asked for, not run yet
        chat.provider = provider("anthropic", fake)
        chat.reasoning = "low"
        assert chat.complete().content == "Sunny."
        continued = fake.requests[-1].body
        assert "thinking" not in continued and continued["max_tokens"] == 4096
        assert chat.ask("Thanks!").content == "You're welcome."
        assert fake.requests[-1].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
