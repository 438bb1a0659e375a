"""The fake LLM server, driven through the real openai and anthropic SDK clients.

Every payload the server sends is validated against the SDK's own pydantic
types (required fields, strict types, and no fields the SDK does not know),
so an SDK upgrade that changes the wire shapes fails here first.
"""

from __future__ import annotations

import ast
import asyncio
import json
import pathlib
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, get_args

import anthropic
import httpx2
import openai
import pydantic
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.shared import ErrorResponse
from openai.types import ErrorObject
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

import nbagent.testing
from nbagent._types import StopReason
from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn, render
from nbagent.testing._script import STOPS as FAKE_STOPS
from nbagent.testing._script import Stop

KEY = "test-key"
PARIS = FakeToolCall("get_weather", {"city": "Paris"})
ROME = FakeToolCall("get_weather", {"city": "Rome"})

# -- validating payloads against the SDK types ---------------------------------


class _OpenAIErrorBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    error: ErrorObject


_SCHEMAS: dict[tuple[str, str], pydantic.TypeAdapter[Any]] = {
    ("chat", "response"): pydantic.TypeAdapter(ChatCompletion),
    ("chat", "event"): pydantic.TypeAdapter(ChatCompletionChunk),
    ("responses", "response"): pydantic.TypeAdapter(Response),
    ("responses", "event"): pydantic.TypeAdapter(ResponseStreamEvent),
    ("anthropic", "response"): pydantic.TypeAdapter(Message),
    ("anthropic", "event"): pydantic.TypeAdapter(RawMessageStreamEvent),
    ("chat", "error"): pydantic.TypeAdapter(_OpenAIErrorBody),
    ("responses", "error"): pydantic.TypeAdapter(_OpenAIErrorBody),
    ("anthropic", "error"): pydantic.TypeAdapter(ErrorResponse),
}


def _unknown_fields(value: Any, path: str) -> list[str]:
    """Paths of fields the SDK model kept as extras, i.e. does not know."""
    if isinstance(value, pydantic.BaseModel):
        found = [f"{path}.{name}" for name in value.__pydantic_extra__ or {}]
        for name in type(value).model_fields:
            found += _unknown_fields(getattr(value, name), f"{path}.{name}")
        return found
    if isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in _unknown_fields(item, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for k, item in value.items() for p in _unknown_fields(item, f"{path}.{k}")]
    return []


def validate_payload(api: str, kind: str, payload: dict[str, Any]) -> None:
    """Strictly validate one payload; raises on missing, mistyped or unknown fields."""
    model = _SCHEMAS[(api, kind)].validate_python(payload, strict=True)
    unknown = _unknown_fields(model, "$")
    assert not unknown, f"{api} {kind} payload has fields the SDK does not know: {unknown}"
    if "type" in payload:
        assert model.type == payload["type"], f"validated as the wrong type: {model!r}"


@pytest.fixture
def fake() -> Iterator[Callable[..., FakeLLMServer]]:
    """Make validating servers; all are closed, and must have no errors, at teardown."""
    servers: list[FakeLLMServer] = []

    def make(turns: Any = None, **kwargs: Any) -> FakeLLMServer:
        kwargs.setdefault("validator", validate_payload)
        server = FakeLLMServer(turns, **kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()
    for server in servers:
        assert not server.errors, server.errors


def openai_client(server: FakeLLMServer, **kwargs: Any) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, **kwargs)


def anthropic_client(server: FakeLLMServer, **kwargs: Any) -> anthropic.Anthropic:
    kwargs.setdefault("max_retries", 0)
    return anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, **kwargs)


# -- one request per API and mode, normalised to what the SDK let us see --------

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}
]
RESPONSES_TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA, "strict": False}
]
ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_SCHEMA}
]
QUESTION = "Weather in Paris?"


def request_for(api: str, **extra: Any) -> dict[str, Any]:
    if api == "chat":
        base = {"messages": [{"role": "user", "content": QUESTION}], "tools": CHAT_TOOLS}
        return {"model": "gpt-test", **base, **extra}
    if api == "responses":
        return {"model": "gpt-test", "input": QUESTION, "tools": RESPONSES_TOOLS, **extra}
    messages = [{"role": "user", "content": QUESTION}]
    return {
        "model": "claude-test",
        "max_tokens": 256,
        "messages": messages,
        "tools": ANTHROPIC_TOOLS,
        **extra,
    }


@dataclass
class Seen:
    """What an SDK call surfaced, in a common shape."""

    text: str = ""
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # id, name, arguments
    stop: str | None = None
    refusal: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str | None = None


def _chat_json(server: FakeLLMServer, **extra: Any) -> Seen:
    with openai_client(server) as client:
        reply = client.chat.completions.create(**request_for("chat", **extra))
    message = reply.choices[0].message
    calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
    assert reply.usage is not None
    return Seen(
        message.content or "",
        calls,
        reply.choices[0].finish_reason,
        message.refusal,
        reply.usage.model_dump(),
        reply.model,
    )


def _chat_stream(server: FakeLLMServer, **extra: Any) -> Seen:
    seen = Seen()
    slots: dict[int, list[Any]] = {}
    refusal = ""
    with openai_client(server) as client:
        request = request_for("chat", stream=True, stream_options={"include_usage": True})
        for chunk in client.chat.completions.create(**request, **extra):
            seen.model = chunk.model
            if chunk.usage is not None:
                assert chunk.choices == []  # the usage chunk comes last, on its own
                seen.usage = chunk.usage.model_dump()
            for choice in chunk.choices:
                seen.text += choice.delta.content or ""
                refusal += choice.delta.refusal or ""
                for part in choice.delta.tool_calls or []:
                    slot = slots.setdefault(part.index, [None, None, ""])
                    slot[0] = slot[0] or part.id  # set once: some servers repeat them
                    if part.function is not None:
                        slot[1] = slot[1] or part.function.name
                        slot[2] += part.function.arguments or ""
                seen.stop = choice.finish_reason or seen.stop
    seen.calls = [tuple(slots[i]) for i in sorted(slots)]
    seen.refusal = refusal or None
    return seen


def _chat_helper(server: FakeLLMServer, **extra: Any) -> Seen:
    with openai_client(server) as client:
        request = request_for("chat", stream_options={"include_usage": True}, **extra)
        with client.chat.completions.stream(**request) as stream:
            reply = stream.get_final_completion()
    message = reply.choices[0].message
    calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
    assert reply.usage is not None
    return Seen(
        message.content or "",
        calls,
        reply.choices[0].finish_reason,
        message.refusal,
        reply.usage.model_dump(),
        reply.model,
    )


def _seen_response(response: Any) -> Seen:
    seen = Seen(stop=response.status, usage=response.usage.model_dump(), model=response.model)
    for item in response.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    seen.text += part.text
                else:
                    seen.refusal = part.refusal
        elif item.type == "function_call":
            seen.calls.append((item.call_id, item.name, item.arguments))
    return seen


def _responses_json(server: FakeLLMServer, **extra: Any) -> Seen:
    with openai_client(server) as client:
        return _seen_response(client.responses.create(**request_for("responses", **extra)))


def _responses_stream(server: FakeLLMServer, **extra: Any) -> Seen:
    text, refusal, calls, final = "", "", {}, None
    with openai_client(server) as client:
        for event in client.responses.create(**request_for("responses", stream=True, **extra)):
            if event.type == "response.output_text.delta":
                text += event.delta
            elif event.type == "response.refusal.delta":
                refusal += event.delta
            elif event.type == "response.output_item.added" and event.item.type == "function_call":
                calls[event.output_index] = [event.item.call_id, event.item.name, ""]
            elif event.type == "response.function_call_arguments.delta":
                calls[event.output_index][2] += event.delta
            elif event.type in ("response.completed", "response.incomplete"):
                final = event.response
    seen = _seen_response(final)
    assert (seen.text, seen.refusal) == (text, refusal or None)  # deltas add up to the final
    assert seen.calls == [tuple(calls[i]) for i in sorted(calls)]
    return seen


def _responses_helper(server: FakeLLMServer, **extra: Any) -> Seen:
    with (
        openai_client(server) as client,
        client.responses.stream(**request_for("responses", **extra)) as stream,
    ):
        return _seen_response(stream.get_final_response())


def _seen_message(message: Any) -> Seen:
    seen = Seen(stop=message.stop_reason, usage=message.usage.model_dump(), model=message.model)
    for block in message.content:
        if block.type == "text":
            seen.text += block.text
        elif block.type == "tool_use":
            arguments = json.dumps(block.input, separators=(",", ":"))
            seen.calls.append((block.id, block.name, arguments))
    if message.stop_details is not None:
        seen.refusal = message.stop_details.explanation
    return seen


def _anthropic_json(server: FakeLLMServer, **extra: Any) -> Seen:
    with anthropic_client(server) as client:
        return _seen_message(client.messages.create(**request_for("anthropic", **extra)))


def _anthropic_stream(server: FakeLLMServer, **extra: Any) -> Seen:
    seen = Seen()
    blocks: dict[int, list[Any]] = {}
    with anthropic_client(server) as client:
        for event in client.messages.create(**request_for("anthropic", stream=True, **extra)):
            if event.type == "message_start":
                seen.model = event.message.model
                seen.usage = event.message.usage.model_dump()
            elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                blocks[event.index] = [event.content_block.id, event.content_block.name, ""]
            elif event.type == "content_block_delta":
                if event.delta.type == "text_delta":
                    seen.text += event.delta.text
                elif event.delta.type == "input_json_delta":
                    blocks[event.index][2] += event.delta.partial_json
            elif event.type == "message_delta":
                seen.stop = event.delta.stop_reason
                seen.usage.update(event.usage.model_dump(exclude_none=True))
                if event.delta.stop_details is not None:
                    seen.refusal = event.delta.stop_details.explanation
    seen.calls = [tuple(blocks[i]) for i in sorted(blocks)]
    return seen


def _anthropic_helper(server: FakeLLMServer, **extra: Any) -> Seen:
    with (
        anthropic_client(server) as client,
        client.messages.stream(**request_for("anthropic", **extra)) as stream,
    ):
        return _seen_message(stream.get_final_message())


MODES: dict[str, Callable[..., Seen]] = {
    "chat-json": _chat_json,
    "chat-stream": _chat_stream,
    "chat-helper": _chat_helper,
    "responses-json": _responses_json,
    "responses-stream": _responses_stream,
    "responses-helper": _responses_helper,
    "anthropic-json": _anthropic_json,
    "anthropic-stream": _anthropic_stream,
    "anthropic-helper": _anthropic_helper,
}
RAW_MODES = [m for m in MODES if not m.endswith("-helper")]
STOPS = {
    "end": {"chat": "stop", "responses": "completed", "anthropic": "end_turn"},
    "tool_use": {"chat": "tool_calls", "responses": "completed", "anthropic": "tool_use"},
    "max_tokens": {"chat": "length", "responses": "incomplete", "anthropic": "max_tokens"},
    "refusal": {"chat": "stop", "responses": "completed", "anthropic": "refusal"},
}


def api_of(mode: str) -> str:
    return mode.split("-")[0]


def call_id(mode: str, n: int) -> str:
    return f"toolu_{n}" if api_of(mode) == "anthropic" else f"call_{n}"


# -- the conformance matrix ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_text_turn(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    server = fake([Turn(text="It is sunny in Paris today.")])
    seen = MODES[mode](server)
    assert seen.text == "It is sunny in Paris today."
    assert seen.calls == []
    assert seen.stop == STOPS["end"][api_of(mode)]
    assert seen.model in ("gpt-test", "claude-test")  # the request's model is echoed
    assert server.requests[0].stream == (not mode.endswith("-json"))


@pytest.mark.parametrize("mode", MODES)
def test_one_tool_call(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    seen = MODES[mode](fake([Turn(tool_calls=[PARIS])]))
    assert seen.calls == [(call_id(mode, 1), "get_weather", '{"city":"Paris"}')]
    assert seen.stop == STOPS["tool_use"][api_of(mode)]
    assert seen.text == ""


@pytest.mark.parametrize("mode", MODES)
def test_parallel_tool_calls_with_text(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    seen = MODES[mode](fake([Turn(text="Checking both.", tool_calls=[PARIS, ROME])]))
    assert seen.text == "Checking both."
    assert seen.calls == [
        (call_id(mode, 1), "get_weather", '{"city":"Paris"}'),
        (call_id(mode, 2), "get_weather", '{"city":"Rome"}'),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_call_ids_continue_across_turns_and_can_be_given(
    fake: Callable[..., FakeLLMServer], mode: str
) -> None:
    server = fake([Turn(tool_calls=[PARIS]), Turn(tool_calls=[FakeToolCall("x", id="mine")])])
    MODES[mode](server)
    assert MODES[mode](server).calls == [("mine", "x", "{}")]
    assert server.remaining == 0


@pytest.mark.parametrize("mode", MODES)
def test_empty_arguments(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    seen = MODES[mode](fake([Turn(tool_calls=[FakeToolCall("get_time", raw_arguments="")])]))
    # OpenAI sends the empty string; Anthropic's input is an object ({}), and its
    # stream sends only an empty partial_json.
    expected = {"anthropic-json": "{}", "anthropic-helper": "{}"}.get(mode, "")
    assert seen.calls == [(call_id(mode, 1), "get_time", expected)]


@pytest.mark.parametrize("mode", RAW_MODES)
def test_partial_arguments_on_max_tokens(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    cut = FakeToolCall("get_weather", raw_arguments='{"city": "Par')
    seen = MODES[mode](fake([Turn(text="Let me", tool_calls=[cut], stop="max_tokens")]))
    assert seen.stop == STOPS["max_tokens"][api_of(mode)]
    # JSON Anthropic cannot carry invalid JSON in `input`: the fake sends {} there.
    expected = "{}" if mode == "anthropic-json" else '{"city": "Par'
    assert seen.calls == [(call_id(mode, 1), "get_weather", expected)]


def test_responses_incomplete_details(fake: Callable[..., FakeLLMServer]) -> None:
    with openai_client(fake([Turn(text="cut", stop="max_tokens")] * 2)) as client:
        reply = client.responses.create(**request_for("responses"))
        assert reply.status == "incomplete"
        assert reply.incomplete_details is not None
        assert reply.incomplete_details.reason == "max_output_tokens"
        events = list(client.responses.create(**request_for("responses", stream=True)))
    assert events[-1].type == "response.incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))


@pytest.mark.parametrize("mode", MODES)
def test_refusal(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    seen = MODES[mode](fake([Turn(refusal="I can't share that.")]))
    assert seen.refusal == "I can't share that."
    assert seen.stop == STOPS["refusal"][api_of(mode)]
    assert seen.calls == []
    assert seen.text == ""


@pytest.mark.parametrize("mode", MODES)
def test_usage(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    usage = {"input_tokens": 100, "output_tokens": 20, "cached_tokens": 30, "reasoning_tokens": 5}
    seen = MODES[mode](fake([Turn(text="ok", usage=usage)]))
    api = api_of(mode)
    if api == "chat":  # prompt_tokens includes the cached ones
        assert seen.usage["prompt_tokens"] == 100
        assert seen.usage["prompt_tokens_details"]["cached_tokens"] == 30
        assert seen.usage["completion_tokens"] == 20
        assert seen.usage["completion_tokens_details"]["reasoning_tokens"] == 5
        assert seen.usage["total_tokens"] == 120
    elif api == "responses":  # input_tokens includes the cached ones
        assert seen.usage["input_tokens"] == 100
        assert seen.usage["input_tokens_details"]["cached_tokens"] == 30
        assert seen.usage["output_tokens"] == 20
        assert seen.usage["output_tokens_details"]["reasoning_tokens"] == 5
        assert seen.usage["total_tokens"] == 120
    else:  # input_tokens excludes cache reads
        assert seen.usage["input_tokens"] == 70
        assert seen.usage["cache_read_input_tokens"] == 30
        assert seen.usage["output_tokens"] == 20


@pytest.mark.parametrize("mode", MODES)
def test_default_usage_is_deterministic(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    server = fake([Turn(text="same")], cycle=True)
    first, second = MODES[mode](server), MODES[mode](server)
    assert first.usage == second.usage
    key = "prompt_tokens" if api_of(mode) == "chat" else "input_tokens"
    assert first.usage[key] > 0


@pytest.mark.parametrize("mode", ["chat-stream", "responses-stream", "anthropic-stream"])
def test_chunk_delay_streams_event_by_event(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    seen = MODES[mode](fake([Turn(text="slow text", tool_calls=[PARIS], chunk_delay=0.001)]))
    assert seen.text == "slow text"
    assert seen.calls[0][2] == '{"city":"Paris"}'


def test_repeat_ids_in_stream(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake([Turn(tool_calls=[PARIS], repeat_ids_in_stream=True)] * 2)
    seen = _chat_stream(server)  # accumulates by index and sets id/name once
    assert seen.calls == [("call_1", "get_weather", '{"city":"Paris"}')]
    with openai_client(server) as client:
        chunks = list(client.chat.completions.create(**request_for("chat", stream=True)))
    parts = [p for c in chunks for p in c.choices[0].delta.tool_calls or []]
    assert len(parts) > 2
    assert all(p.id == "call_2" and p.function and p.function.name == "get_weather" for p in parts)


def test_text_and_arguments_arrive_in_fragments(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake([Turn(text="Several words of text.", tool_calls=[PARIS])])
    with openai_client(server) as client:
        chunks = list(client.chat.completions.create(**request_for("chat", stream=True)))
    texts = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    arguments = [
        p.function.arguments
        for c in chunks
        for p in c.choices[0].delta.tool_calls or []
        if p.function and p.function.arguments
    ]
    assert len(texts) >= 2
    assert len(arguments) >= 3
    assert chunks[-1].choices[0].finish_reason == "tool_calls"  # no usage chunk unless asked


def test_async_clients(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake([Turn(text="hi", tool_calls=[PARIS])], cycle=True)

    async def main() -> None:
        async with openai.AsyncOpenAI(
            api_key=KEY, base_url=server.openai_base_url, max_retries=0
        ) as client:
            reply = await client.chat.completions.create(**request_for("chat"))
            assert reply.choices[0].message.tool_calls
            stream = await client.chat.completions.create(**request_for("chat", stream=True))
            assert [c async for c in stream][-1].choices[0].finish_reason == "tool_calls"
            events = await client.responses.create(**request_for("responses", stream=True))
            assert [e.type async for e in events][-1] == "response.completed"
        async with anthropic.AsyncAnthropic(
            api_key=KEY, base_url=server.anthropic_base_url, max_retries=0
        ) as aclient:
            async with aclient.messages.stream(**request_for("anthropic")) as astream:
                message = await astream.get_final_message()
            assert message.stop_reason == "tool_use"
            assert message.content[1].type == "tool_use"

    asyncio.run(main())


# -- strict mode ---------------------------------------------------------------

TOOL_CALL_1 = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}
TOOL_CALL_2 = {**TOOL_CALL_1, "id": "call_2"}
USER = {"role": "user", "content": QUESTION}


def _chat_messages(*tail: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL_1, TOOL_CALL_2]},
        *tail,
    ]


def _tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "sunny"}


CHAT_STRICT: dict[str, tuple[dict[str, Any], str, str]] = {
    "missing result": (
        {"messages": _chat_messages(_tool("call_1"), USER)},
        "did not have response messages: call_2",
        "messages.[1].role",
    ),
    "no result at the end": (
        {"messages": _chat_messages()},
        "did not have response messages: call_1, call_2",
        "messages.[1].role",
    ),
    "unknown tool_call_id": (
        {"messages": _chat_messages(_tool("call_1"), _tool("call_9"))},
        "'tool_call_id' of 'call_9' not found in 'tool_calls' of previous message",
        "messages.[3].tool_call_id",
    ),
    "tool message without tool_calls": (
        {"messages": [USER, _tool("call_1")]},
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
        "messages.[1].role",
    ),
    "tool_choice without tools": (
        {"tools": None, "tool_choice": "auto"},
        "'tool_choice' is only allowed when 'tools' are specified",
        "tool_choice",
    ),
    "parallel_tool_calls without tools": (
        {"tools": None, "parallel_tool_calls": False},
        "'parallel_tool_calls' is only allowed when 'tools' are specified",
        "parallel_tool_calls",
    ),
    "one id twice in a message": (
        {
            "messages": [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL_1, TOOL_CALL_1]},
                _tool("call_1"),
            ]
        },
        "Duplicate value for 'id' of 'call_1' in 'tool_calls' of messages[1]",
        "messages.[1].tool_calls",
    ),
    "one call answered twice": (
        {"messages": _chat_messages(_tool("call_1"), _tool("call_2"), _tool("call_1"))},
        "Duplicate value for 'tool_call_id' of 'call_1'",
        "messages.[4].tool_call_id",
    ),
}


@pytest.mark.parametrize("case", CHAT_STRICT)
def test_strict_chat(fake: Callable[..., FakeLLMServer], case: str) -> None:
    overrides, message, param = CHAT_STRICT[case]
    request = {k: v for k, v in {**request_for("chat"), **overrides}.items() if v is not None}
    server = fake([Turn(text="never sent")])
    with openai_client(server) as client, pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**request)
    assert message in caught.value.message
    assert caught.value.type == "invalid_request_error"
    assert caught.value.param == param
    assert server.remaining == 1  # a rejected request does not use up a turn


def test_strict_chat_accepts_a_valid_round(fake: Callable[..., FakeLLMServer]) -> None:
    messages = _chat_messages(_tool("call_2"), _tool("call_1"))
    assert _chat_json(fake(["done"]), messages=messages).text == "done"


def _fc(call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }


def _fco(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "sunny"}


RESPONSES_STRICT = {
    "missing output": ([USER, _fc("call_1"), _fc("call_2"), _fco("call_1")], "call_2"),
    "unknown output": ([USER, _fc("call_1"), _fco("call_1"), _fco("call_9")], "call_9"),
    "one call_id twice": ([USER, _fc("call_1"), _fc("call_1"), _fco("call_1")], "call_1"),
    "one call answered twice": ([USER, _fc("call_1"), _fco("call_1"), _fco("call_1")], "call_1"),
}


@pytest.mark.parametrize("case", RESPONSES_STRICT)
def test_strict_responses(fake: Callable[..., FakeLLMServer], case: str) -> None:
    items, bad_id = RESPONSES_STRICT[case]
    with openai_client(fake()) as client, pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**request_for("responses", input=items))
    expected = {
        "missing output": f"No tool output found for function call {bad_id}.",
        "unknown output": f"No tool call found for function call output with call_id {bad_id}.",
        "one call_id twice": f"Duplicate value for 'call_id' of '{bad_id}' in 'function_call'",
        "one call answered twice": f"Duplicate value for 'call_id' of '{bad_id}' in "
        "'function_call_output'",
    }[case]
    assert expected in caught.value.message
    assert caught.value.param == "input"


def test_strict_responses_accepts_valid_input(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake(["a", "b"])
    items = [USER, _fc("call_1"), _fc("call_2"), _fco("call_2"), _fco("call_1")]
    assert _responses_json(server, input=items).text == "a"
    chained = [_fco("call_1")]  # the call lives in the previous response
    assert _responses_json(server, input=chained, previous_response_id="resp_fake1").text == "b"


def _use(use_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": "get_weather", "input": {"city": "Paris"}}


def _result(use_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": "sunny"}


ASSISTANT_2 = {"role": "assistant", "content": [_use("toolu_1"), _use("toolu_2")]}
TEXT = {"type": "text", "text": "here you go"}

ANTHROPIC_STRICT = {
    "missing result": (
        [USER, ASSISTANT_2, {"role": "user", "content": [_result("toolu_1"), TEXT]}],
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately "
        "after: toolu_2",
    ),
    "results split over two messages": (
        [
            USER,
            ASSISTANT_2,
            {"role": "user", "content": [_result("toolu_1")]},
            {"role": "user", "content": [_result("toolu_2")]},
        ],
        "ids were found without `tool_result` blocks immediately after: toolu_2",
    ),
    "text before results": (
        [
            USER,
            ASSISTANT_2,
            {"role": "user", "content": [TEXT, _result("toolu_1"), _result("toolu_2")]},
        ],
        "messages.2.content.1: `tool_result` blocks must come first",
    ),
    "unknown tool_use_id": (
        [
            USER,
            ASSISTANT_2,
            {
                "role": "user",
                "content": [_result("toolu_1"), _result("toolu_2"), _result("toolu_9")],
            },
        ],
        "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9",
    ),
    "result with no tool_use before": (
        [{"role": "user", "content": [_result("toolu_1")]}],
        "messages.0.content.0: unexpected `tool_use_id`",
    ),
    "tool_use answered later": (
        [USER, ASSISTANT_2],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
        "after: toolu_1, toolu_2",
    ),
    "one id twice in a message": (
        [
            USER,
            {"role": "assistant", "content": [_use("toolu_1"), _use("toolu_1")]},
            {"role": "user", "content": [_result("toolu_1")]},
        ],
        "messages.1.content.1: `tool_use` ids must be unique",
    ),
    "one id again in a later turn": (
        [
            USER,
            {"role": "assistant", "content": [_use("toolu_1")]},
            {"role": "user", "content": [_result("toolu_1")]},
            {"role": "assistant", "content": [_use("toolu_1")]},
            {"role": "user", "content": [_result("toolu_1")]},
        ],
        "messages.3.content.0: `tool_use` ids must be unique",
    ),
    "one call answered twice": (
        [
            USER,
            ASSISTANT_2,
            {
                "role": "user",
                "content": [_result("toolu_1"), _result("toolu_2"), _result("toolu_1")],
            },
        ],
        "messages.2.content.2: each tool_use must have a single result. Found multiple "
        "`tool_result` blocks with id: toolu_1",
    ),
    "an id outside the pattern": (
        [
            USER,
            {"role": "assistant", "content": [_use("call.1")]},
            {"role": "user", "content": [_result("call.1")]},
        ],
        "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
    ),
    "a result id outside the pattern": (
        [USER, ASSISTANT_2, {"role": "user", "content": [_result("toolu 1")]}],
        "messages.2.content.0.tool_result.tool_use_id: String should match pattern",
    ),
}


@pytest.mark.parametrize("case", ANTHROPIC_STRICT)
def test_strict_anthropic_transcripts(fake: Callable[..., FakeLLMServer], case: str) -> None:
    messages, expected = ANTHROPIC_STRICT[case]
    with anthropic_client(fake()) as client, pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**request_for("anthropic", messages=messages))
    assert expected in caught.value.message
    assert caught.value.type == "invalid_request_error"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"tools": None, "tool_choice": {"type": "auto"}}, "tool_choice may only be specified"),
        (
            {"tool_choice": {"type": "none", "disable_parallel_tool_use": True}},
            "tool_choice.none.disable_parallel_tool_use: Extra inputs are not permitted",
        ),
    ],
)
def test_strict_anthropic_options(
    fake: Callable[..., FakeLLMServer], overrides: dict[str, Any], expected: str
) -> None:
    request = {k: v for k, v in {**request_for("anthropic"), **overrides}.items() if v is not None}
    with anthropic_client(fake()) as client, pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**request)
    assert expected in caught.value.message


def test_strict_anthropic_accepts_a_valid_round(fake: Callable[..., FakeLLMServer]) -> None:
    answer = {"role": "user", "content": [_result("toolu_2"), _result("toolu_1"), TEXT]}
    choice = {"type": "auto", "disable_parallel_tool_use": True}
    seen = _anthropic_json(fake(["done"]), messages=[USER, ASSISTANT_2, answer], tool_choice=choice)
    assert seen.text == "done"


BAD_BODIES = {
    "NaN": (b'{"model": "m", "x": NaN}', "NaN is not valid JSON"),
    "Infinity": (b'{"model": "m", "x": [1, -Infinity]}', "-Infinity is not valid JSON"),
    "not UTF-8": (b'{"model": "m", "x": "\xff"}', "the body is not valid UTF-8"),
    "encoded surrogate": (b'{"model": "m", "x": "\xed\xa0\x80"}', "not valid UTF-8"),
    "lone surrogate escape": (b'{"model": "m", "x": "a\\ud800"}', "a lone surrogate escape"),
}


@pytest.mark.parametrize("case", BAD_BODIES)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
def test_strict_refuses_bodies_the_apis_cannot_parse(
    fake: Callable[..., FakeLLMServer], case: str, path: str
) -> None:
    body, problem = BAD_BODIES[case]
    server = fake(["never sent", "lenient"])
    reply = httpx2.post(server.base_url + path, content=body)
    assert reply.status_code == 400
    assert problem in reply.json()["error"]["message"]
    assert server.remaining == 2
    if case != "not UTF-8":  # Python's json reads the rest; so does a lenient server
        lenient = fake(["anything goes"], strict=False)
        assert httpx2.post(lenient.base_url + path, content=body).status_code == 200


def test_strict_accepts_a_surrogate_pair_escape(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake(["ok"])
    body = json.dumps(request_for("chat", user="\U0001f600 \\ud800"), ensure_ascii=True)
    assert "\\ud83d\\ude00" in body  # a pair, and an escaped backslash: both fine
    assert httpx2.post(server.openai_base_url + "/chat/completions", content=body).is_success


def test_strict_false_lets_anything_through(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake(["chat", "anthropic"], strict=False)
    assert _chat_json(server, messages=_chat_messages()).text == "chat"
    assert _anthropic_json(server, messages=[USER, ASSISTANT_2]).text == "anthropic"


# -- HTTP errors ---------------------------------------------------------------

ERRORS = [
    (400, openai.BadRequestError, anthropic.BadRequestError),
    (401, openai.AuthenticationError, anthropic.AuthenticationError),
    (403, openai.PermissionDeniedError, anthropic.PermissionDeniedError),
    (404, openai.NotFoundError, anthropic.NotFoundError),
    (429, openai.RateLimitError, anthropic.RateLimitError),
    (500, openai.InternalServerError, anthropic.InternalServerError),
    (503, openai.InternalServerError, anthropic.ServiceUnavailableError),
    (529, openai.InternalServerError, anthropic.OverloadedError),
]


@pytest.mark.parametrize(("status", "openai_error", "anthropic_error"), ERRORS)
@pytest.mark.parametrize("stream", [False, True])
def test_http_errors_map_to_sdk_exceptions(
    fake: Callable[..., FakeLLMServer],
    status: int,
    openai_error: type[Exception],
    anthropic_error: type[Exception],
    stream: bool,
) -> None:
    server = fake([Turn(status=status)] * 3)
    with openai_client(server) as client:
        with pytest.raises(openai_error) as chat_error:
            client.chat.completions.create(**request_for("chat", stream=stream))
        with pytest.raises(openai_error):
            client.responses.create(**request_for("responses", stream=stream))
    with anthropic_client(server) as aclient, pytest.raises(anthropic_error) as message_error:
        aclient.messages.create(**request_for("anthropic", stream=stream))
    assert isinstance(chat_error.value, openai.APIStatusError)
    assert chat_error.value.status_code == status
    assert isinstance(message_error.value, anthropic.APIStatusError)
    assert message_error.value.request_id == "req_fake3"


def test_error_overrides(fake: Callable[..., FakeLLMServer]) -> None:
    error = {
        "message": "maximum context length exceeded",
        "code": "context_length_exceeded",
        "param": "messages",
    }
    server = fake([Turn(status=400, error=error), Turn(status=429, error={"message": "slow"})])
    with openai_client(server) as client, pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**request_for("chat"))
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.param == "messages"
    assert "maximum context length exceeded" in caught.value.message
    with anthropic_client(server) as aclient, pytest.raises(anthropic.RateLimitError) as limited:
        aclient.messages.create(**request_for("anthropic"))
    assert limited.value.type == "rate_limit_error"
    assert limited.value.api_message == "slow"


def test_sdk_retries_scripted_rate_limit_quickly(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake([Turn(status=429), Turn(text="ok"), Turn(status=529), Turn(text="ok")])
    with openai_client(server, max_retries=1) as client:
        assert client.chat.completions.create(**request_for("chat")).choices[0].message.content
    with anthropic_client(server, max_retries=1) as aclient:
        assert aclient.messages.create(**request_for("anthropic")).content[0].type == "text"
    retries = [r.headers["x-stainless-retry-count"] for r in server.requests]
    assert retries == ["0", "1", "0", "1"]


def test_script_exhausted(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake(["only one"])
    _chat_json(server)
    with (
        openai_client(server, max_retries=2) as client,
        pytest.raises(openai.InternalServerError, match="script exhausted"),
    ):
        client.chat.completions.create(**request_for("chat"))
    assert len(server.requests) == 2  # x-should-retry: false stops the SDK retrying


def test_unknown_route_names_the_right_base_urls(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake()
    with openai_client(server) as client, pytest.raises(openai.NotFoundError) as caught:
        client.models.list()
    assert "no route for GET /v1/models" in caught.value.message
    assert server.openai_base_url in caught.value.message
    assert server.requests == []


@pytest.mark.parametrize("mode", ["chat-json", "chat-stream", "responses-stream"])
def test_fail_mid_stream_openai(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    server = fake([Turn(text="a long enough answer", tool_calls=[PARIS], fail_mid_stream=True)])
    with pytest.raises(openai.APIConnectionError):
        MODES[mode](server)


@pytest.mark.parametrize("mode", ["anthropic-json", "anthropic-stream", "anthropic-helper"])
def test_fail_mid_stream_anthropic(fake: Callable[..., FakeLLMServer], mode: str) -> None:
    server = fake([Turn(text="a long enough answer", tool_calls=[PARIS], fail_mid_stream=True)])
    # The anthropic SDK wraps a dropped JSON response; a dropped stream it wraps from 2.17
    # on (before, the transport's RemoteProtocolError reached the caller unwrapped). Either
    # way the caller sees the connection fail, never a short answer.
    expected: Any = anthropic.APIConnectionError
    if mode != "anthropic-json":
        expected = (anthropic.APIConnectionError, httpx2.HTTPError)
    with pytest.raises(expected) as caught:
        MODES[mode](server)
    sdk = tuple(int(part) for part in anthropic.__version__.split(".")[:2])
    if mode != "anthropic-json" and sdk >= (2, 17):
        assert isinstance(caught.value, anthropic.APIConnectionError)


# -- scripting, recording, lifecycle -------------------------------------------


def test_requests_are_recorded_and_keys_redacted(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake(["a", "b", "c", "d"])
    _chat_json(server)
    _responses_stream(server)
    _anthropic_json(server)
    chat, responses, messages = server.requests[:3]
    assert isinstance(chat, RecordedRequest)
    assert [r.api for r in server.requests] == ["chat", "responses", "anthropic"]
    assert [r.path for r in server.requests] == [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
    ]
    assert chat.body["messages"] == [{"role": "user", "content": QUESTION}]
    assert responses.stream and not chat.stream
    assert messages.model == "claude-test"
    assert chat.headers["authorization"] == "REDACTED"
    # anthropic 2.14 sends api_key as "Authorization: Bearer", not x-api-key
    assert messages.headers["authorization"] == "REDACTED"
    assert messages.headers["anthropic-version"]
    assert server.last_request is messages
    with anthropic_client(server, default_headers={"x-api-key": KEY, "api-key": KEY}) as client:
        client.messages.create(**request_for("anthropic"))
    assert server.last_request.headers["x-api-key"] == "REDACTED"
    assert server.last_request.headers["api-key"] == "REDACTED"
    for request in server.requests:
        assert KEY not in json.dumps(request.headers)


def test_handler_and_cycle(fake: Callable[..., FakeLLMServer]) -> None:
    def echo(request: RecordedRequest) -> Turn:
        return Turn(text=f"{request.api}: {request.body['messages'][-1]['content']}")

    server = fake(handler=echo)
    assert _chat_json(server).text == f"chat: {QUESTION}"
    assert _anthropic_stream(server).text == f"anthropic: {QUESTION}"
    assert server.remaining is None

    server.script(["one", Turn(text="two")], cycle=True)
    assert [_chat_json(server).text for _ in range(5)] == ["one", "two", "one", "two", "one"]
    server.script([Turn(tool_calls=[PARIS])])
    assert server.remaining == 1
    assert _responses_json(server).calls[0][1] == "get_weather"
    assert server.remaining == 0

    with pytest.raises(TypeError):
        server.script(["x"], handler=echo)
    with pytest.raises(ValueError, match="cycle"):
        server.script([], cycle=True)


def test_keep_alive_reuses_one_connection(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake([Turn(text="hi", tool_calls=[PARIS])], cycle=True)
    with openai_client(server) as client:
        for _ in range(3):
            client.chat.completions.create(**request_for("chat"))
            list(client.responses.create(**request_for("responses", stream=True)))
    with anthropic_client(server) as aclient:
        for _ in range(3):
            list(aclient.messages.create(**request_for("anthropic", stream=True)))
    assert server.connections == 2


def test_concurrent_requests(fake: Callable[..., FakeLLMServer]) -> None:
    server = fake([Turn(tool_calls=[PARIS, ROME], delay=0.01)], cycle=True)
    with openai_client(server) as client, ThreadPoolExecutor(max_workers=16) as pool:
        replies = list(
            pool.map(lambda _: client.chat.completions.create(**request_for("chat")), range(32))
        )
    ids = [c.id for r in replies for c in r.choices[0].message.tool_calls or []]
    assert len(ids) == len(set(ids)) == 64  # ids stay unique across concurrent answers
    assert len({r.id for r in replies}) == 32
    assert len(server.requests) == 32


def test_handler_failure_is_reported(fake: Callable[..., FakeLLMServer]) -> None:
    def broken(request: RecordedRequest) -> Turn:
        raise KeyError("boom")

    server = FakeLLMServer(handler=broken)
    with (
        pytest.raises(RuntimeError, match="1 error"),
        server,
        openai_client(server) as client,
        pytest.raises(openai.InternalServerError, match="KeyError"),
    ):
        client.chat.completions.create(**request_for("chat"))
    assert isinstance(server.errors[0], KeyError)


def test_validator_failure_is_reported(fake: Callable[..., FakeLLMServer]) -> None:
    def reject(api: str, kind: str, payload: dict[str, Any]) -> None:
        if kind != "error":
            raise AssertionError("not today")

    server = fake(["x"], validator=reject)
    with pytest.raises(openai.InternalServerError, match="not today"):
        _chat_json(server)
    assert len(server.errors) == 1
    server.errors.clear()


def test_close_is_idempotent_and_drops_connections() -> None:
    server = FakeLLMServer(["a"])
    client = openai_client(server)
    try:
        client.chat.completions.create(**request_for("chat"))
        server.close()
        server.close()
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(**request_for("chat"))
    finally:
        client.close()
    assert "FakeLLMServer(http://127.0.0.1:" in repr(server)


def test_turn_validation() -> None:
    with pytest.raises(ValueError, match="stop"):
        Turn(stop="done")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="usage"):
        Turn(usage={"prompt_tokens": 1})
    with pytest.raises(ValueError, match="status"):
        Turn(error={"message": "x"})
    with pytest.raises(ValueError, match="status 200"):
        Turn(status=500, inline_error={"message": "x"})
    with pytest.raises(ValueError, match="status 200"):
        Turn(status=502, raw_body="<html>")
    with pytest.raises(TypeError):
        Turn(tool_calls=["get_weather"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        FakeToolCall("f", [1, 2])  # type: ignore[arg-type]
    assert Turn(refusal="no").resolved_stop == "refusal"
    assert Turn(stop="refusal").refusal_text


# -- render(): the whole matrix against the SDK types ---------------------------

RENDER_TURNS = {
    "text": Turn(text="Hello there, how are you?"),
    "empty": Turn(),
    "tools": Turn(text="Sure.", tool_calls=[PARIS, ROME]),
    "empty arguments": Turn(tool_calls=[FakeToolCall("now", raw_arguments="")]),
    "invalid arguments": Turn(tool_calls=[FakeToolCall("f", raw_arguments="{nope")]),
    "max_tokens": Turn(tool_calls=[FakeToolCall("f", raw_arguments='{"a": "b')], stop="max_tokens"),
    "refusal": Turn(refusal="No."),
    "text and refusal": Turn(text="Well,", refusal="no."),
    "content_filter": Turn(text="x", stop="content_filter"),
    "pause_turn": Turn(text="x", stop="pause_turn"),
    "context_window": Turn(text="x", stop="context_window"),
    "usage": Turn(text="x", usage={"input_tokens": 9, "cached_tokens": 4, "cache_write_tokens": 2}),
    "repeat ids": Turn(tool_calls=[PARIS], repeat_ids_in_stream=True),
    "repeated call ids": Turn(
        tool_calls=[FakeToolCall("f", {"a": 1}, id="dup"), FakeToolCall("f", {"a": 2}, id="dup")]
    ),
    "lone surrogates": Turn(text="a\ud800b", tool_calls=[FakeToolCall("f", {"t": "\udc80"})]),
    "error in a 200": Turn(text="Partial", inline_error={"message": "boom", "type": "api_error"}),
    "401": Turn(status=401),
    "429": Turn(status=429),
    "500": Turn(status=500),
    "529": Turn(status=529),
}


def test_the_fake_stops_are_nbagents_stop_reasons() -> None:
    # every StopReason but "other" (an unknown wire stop), plus OpenAI's content filter
    expected = set(get_args(StopReason)) - {"other"} | {"content_filter"}
    assert set(get_args(Stop)) == set(FAKE_STOPS) == expected


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("stop", sorted(FAKE_STOPS))
def test_every_stop_renders_on_every_api(api: str, stream: bool, stop: str) -> None:
    turn = Turn(text="x", stop=stop)  # type: ignore[arg-type]
    extra = {"stream_options": {"include_usage": True}} if api == "chat" else {}
    for payload in render(api, turn, request_for(api, **extra), stream=stream):  # type: ignore[arg-type]
        if payload.get("type") != "ping":
            validate_payload(api, "event" if stream else "response", payload)


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name", RENDER_TURNS)
def test_render_matches_sdk_types(api: str, stream: bool, name: str) -> None:
    turn = RENDER_TURNS[name]
    request = (
        request_for(api, stream_options={"include_usage": True})
        if api == "chat"
        else (request_for(api))
    )
    payloads = render(api, turn, request, stream=stream)  # type: ignore[arg-type]
    for payload in payloads:
        # an error inside a 200: Chat's error body, Anthropic's error event or body
        error = ("error" in payload and api == "chat") or payload.get("type") == "error"
        kind = "error" if turn.is_error or (error and api != "responses") else None
        if payload.get("type") != "ping":
            validate_payload(api, kind or ("event" if stream else "response"), payload)
    assert len(payloads) > 1 if stream and not turn.is_error else len(payloads) == 1


def test_unknown_fields_are_caught() -> None:
    (payload,) = render("anthropic", "x", request_for("anthropic"))
    with pytest.raises(AssertionError, match="does not know"):
        validate_payload("anthropic", "response", {**payload, "surprise": 1})
    with pytest.raises(pydantic.ValidationError):
        validate_payload("anthropic", "response", {k: v for k, v in payload.items() if k != "id"})


# -- SDK behaviour adapter authors must know (fails here first if it changes) ----

STRICT_EMPTY = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def test_sdk_fact_helpers_json_parse_strict_tool_arguments(
    fake: Callable[..., FakeLLMServer],
) -> None:
    """With strict tools, .stream()/.parse() json.loads the arguments: "" raises."""
    server = fake([Turn(tool_calls=[FakeToolCall("now", raw_arguments="")])], cycle=True)
    chat_tools = [
        {
            "type": "function",
            "function": {"name": "now", "strict": True, "parameters": STRICT_EMPTY},
        }
    ]
    responses_tools = [
        {"type": "function", "name": "now", "strict": True, "parameters": STRICT_EMPTY}
    ]
    with openai_client(server) as client:
        with pytest.raises(json.JSONDecodeError):
            client.chat.completions.parse(**request_for("chat", tools=chat_tools))
        with pytest.raises(json.JSONDecodeError):
            _responses_helper(server, tools=responses_tools)
        # the plain create() calls hand back the raw "" for the adapter to decide
        assert _chat_json(server, tools=chat_tools).calls[0][2] == ""
        assert _responses_stream(server, tools=responses_tools).calls[0][2] == ""


def test_sdk_fact_helpers_raise_on_truncation(fake: Callable[..., FakeLLMServer]) -> None:
    """chat .stream() raises on finish_reason=length; responses .stream() on incomplete."""
    server = fake([Turn(text="cut", stop="max_tokens")], cycle=True)
    with pytest.raises(openai.LengthFinishReasonError):
        _chat_helper(server)
    with pytest.raises(RuntimeError, match=r"response\.completed"):
        _responses_helper(server)
    assert _anthropic_helper(server).stop == "max_tokens"


def test_sdk_fact_anthropic_stream_helper_parses_arguments(
    fake: Callable[..., FakeLLMServer],
) -> None:
    """messages.stream() parses input_json as it goes: invalid JSON raises ValueError."""
    server = fake([Turn(tool_calls=[FakeToolCall("f", raw_arguments='{"a": nope}')])], cycle=True)
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
        _anthropic_helper(server)
    assert _anthropic_stream(server).calls[0][2] == '{"a": nope}'  # raw events are fine


# -- the package surface -------------------------------------------------------


def test_public_surface() -> None:
    assert nbagent.testing.__all__ == sorted(nbagent.testing.__all__)
    assert set(nbagent.testing.__all__) == {
        "FakeHostedItem",
        "FakeLLMServer",
        "FakeToolCall",
        "OfflineProvider",
        "RecordedRequest",
        "ScriptedProvider",
        "ScriptedRequest",
        "Turn",
        "call_tools",
        "mcp_approval_request",
        "mcp_call",
        "mcp_list_tools",
        "raw_item",
        "reasoning_item",
        "render",
        "replay_turns",
        "reply",
        "stand_in",
        "to_pytest",
    }
    for name in nbagent.testing.__all__:
        assert getattr(nbagent.testing, name) is not None


def test_testing_package_imports_only_the_standard_library() -> None:
    package = pathlib.Path(nbagent.testing.__file__).parent
    mine = ["__init__.py", "_fake_server.py", "_script.py", "_wire_openai.py", "_wire_anthropic.py"]
    for path in (package / name for name in mine):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top == "__future__", (path.name, name)
