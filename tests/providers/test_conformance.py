"""One conformance suite, run against every provider, streaming and not (see conftest).

Each test drives the real SDK client through the adapter against the strict
fake server (malformed tool transcripts get the real APIs' 400s) and checks
both the neutral response and the exact wire request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _provider_harness import TIME, WEATHER, WEATHER_SCHEMA, Harness

from nbagent import AssistantToolCallMessage, ChatMessage, ToolCall, ToolResultMessage
from nbagent.testing import FakeToolCall, Turn

USER = ChatMessage("user", "What is the weather in Paris?")


def expected_tools(h: Harness) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for spec in (WEATHER, TIME):
        if h.api == "anthropic":
            out.append(spec.as_dict())
        elif h.api == "responses":
            out.append(
                {
                    "type": "function",
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.input_schema,
                    "strict": False,
                }
            )
        else:
            fn: dict[str, Any] = {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema,
            }
            if h.kind != "openai-compatible":
                fn["strict"] = False
            out.append({"type": "function", "function": fn})
    return out


def expected_choice(api: str, choice: str, calls: str) -> dict[str, Any]:
    """The wire fields each API takes for a tool choice and a calls value (``one``: no
    parallel calls)."""
    if api == "anthropic":
        wire: dict[str, Any] = {
            "auto": {"type": "auto"},
            "none": {"type": "none"},
            "required": {"type": "any"},
        }.get(choice, {"type": "tool", "name": choice})
        if calls == "one" and choice != "none":
            wire = {**wire, "disable_parallel_tool_use": True}
        return {"tool_choice": wire}
    if choice in ("auto", "none", "required"):
        fields: dict[str, Any] = {"tool_choice": choice}
    elif api == "responses":
        fields = {"tool_choice": {"type": "function", "name": choice}}
    else:
        fields = {"tool_choice": {"type": "function", "function": {"name": choice}}}
    if calls == "one":
        fields["parallel_tool_calls"] = False
    return fields


# -- answers -------------------------------------------------------------------


def test_text_answer(harness: Harness) -> None:
    harness.script("Sunny and 21 degrees in Paris.")
    r = harness.ask([USER])
    assert r.text == "Sunny and 21 degrees in Paris."
    assert r.tool_calls == ()
    assert r.stop_reason == "end"
    assert r.provider == harness.provider.name
    assert r.model == harness.provider.model
    if harness.stream:
        assert harness.text_deltas() == r.text
        assert len([d for d in harness.deltas if d.kind == "text"]) > 1
    else:
        assert harness.deltas == []
    assert bool(harness.body.get("stream")) is harness.stream


def test_one_call(harness: Harness) -> None:
    harness.script(Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris", "unit": "c"})]))
    r = harness.ask([USER], tools=[WEATHER])
    assert r.stop_reason == "tool_use"
    assert len(r.tool_calls) == 1
    call = r.tool_calls[0]
    assert call.name == "get_weather"
    assert call.arguments == {"city": "Paris", "unit": "c"}
    assert call.parse_error is None
    assert call.id == ("toolu_1" if harness.api == "anthropic" else "call_1")
    if harness.stream:
        fragments = [d for d in harness.deltas if d.kind == "tool_call"]
        assert len(fragments) > 2
        assert all(d.call_id == call.id and d.name == "get_weather" for d in fragments)
        assert json.loads(harness.argument_deltas(0)) == call.arguments


def test_parallel_calls(harness: Harness) -> None:
    cities = ["Paris", "Tokyo", "Lima"]
    harness.script(Turn(tool_calls=[FakeToolCall("get_weather", {"city": c}) for c in cities]))
    r = harness.ask([USER], tools=[WEATHER])
    assert [c.arguments["city"] for c in r.tool_calls] == cities
    assert len({c.id for c in r.tool_calls}) == 3
    if harness.stream:
        for n, city in enumerate(cities):
            assert json.loads(harness.argument_deltas(n)) == {"city": city}


def test_text_and_call_in_one_response(harness: Harness) -> None:
    harness.script(
        Turn(text="Let me check.", tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"})])
    )
    r = harness.ask([USER], tools=[WEATHER])
    assert r.text == "Let me check."
    assert r.tool_calls[0].arguments == {"city": "Oslo"}


# -- the request ---------------------------------------------------------------


def test_tool_definitions_on_the_wire(harness: Harness) -> None:
    harness.script("ok")
    harness.ask(
        [USER],
        tools=[
            WEATHER,
            {
                "name": "get_time",
                "description": TIME.description,
                "input_schema": TIME.input_schema,
            },
        ],
    )
    assert harness.body["tools"] == expected_tools(harness)


@pytest.mark.parametrize("calls", ["one", "many"])
@pytest.mark.parametrize("choice", ["auto", "required", "none", "get_time"])
def test_choice_and_calls_on_the_wire(harness: Harness, choice: str, calls: str) -> None:
    harness.script("ok")
    harness.ask([USER], tools=[WEATHER, TIME], tool_choice=choice, calls=calls)
    body = harness.body
    for key, value in expected_choice(harness.api, choice, calls).items():
        assert body[key] == value, key
    if calls == "many" and harness.api != "anthropic":
        assert "parallel_tool_calls" not in body
    if calls == "many" and harness.api == "anthropic":
        assert "disable_parallel_tool_use" not in body["tool_choice"]


def test_no_tools_sends_no_tool_fields(harness: Harness) -> None:
    harness.script("ok")
    harness.ask([USER], tool_choice="none", calls="one")
    for key in ("tools", "tool_choice", "parallel_tool_calls"):
        assert key not in harness.body


def test_system_prompt(harness: Harness) -> None:
    harness.script("ok")
    harness.ask([USER], system="Answer in French.")
    body = harness.body
    if harness.api == "anthropic":
        assert body["system"] == "Answer in French."
    elif harness.api == "responses":
        assert body["instructions"] == "Answer in French."
    else:
        assert body["messages"][0] == {"role": "system", "content": "Answer in French."}


def test_max_tokens(harness: Harness) -> None:
    harness.script("ok", "ok")
    harness.ask([USER], max_tokens=123)
    key = {
        "anthropic": "max_tokens",
        "responses": "max_output_tokens",
    }.get(
        harness.api,
        "max_tokens" if harness.kind == "openai-compatible" else "max_completion_tokens",
    )
    assert harness.body[key] == 123
    harness.ask([USER])
    if harness.api == "anthropic":
        assert harness.body["max_tokens"] == 4096  # the API requires one
    else:
        assert key not in harness.body


def test_model_on_the_wire(harness: Harness) -> None:
    harness.script("ok")
    harness.ask([USER])
    assert harness.body["model"] == harness.provider.model


# -- tool results --------------------------------------------------------------


def _round() -> tuple[Any, ...]:
    calls = (
        ToolCall("call_a", "get_weather", {"city": "Paris"}),
        ToolCall("call_b", "get_weather", {"city": "Tokyo"}),
    )
    return (
        USER,
        AssistantToolCallMessage("Checking both.", calls),
        ToolResultMessage("call_a", '{"temp":21}', name="get_weather"),
        ToolResultMessage("call_b", "Error: service down", True, "error", "get_weather"),
    )


def test_tool_result_round_trip(harness: Harness) -> None:
    harness.script("Paris is 21C; Tokyo is unavailable.")
    r = harness.ask(_round(), system="Be brief.", tools=[WEATHER])
    assert r.text == "Paris is 21C; Tokyo is unavailable."  # the strict server accepted it
    wire = harness.wire_messages()
    if harness.api == "anthropic":
        assert wire == [
            {"role": "user", "content": [{"type": "text", "text": USER.content}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking both."},
                    {
                        "type": "tool_use",
                        "id": "call_a",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_b",
                        "name": "get_weather",
                        "input": {"city": "Tokyo"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_a",
                        "content": '{"temp":21}',
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_b",
                        "content": "Error: service down",
                        "is_error": True,
                    },
                ],
            },
        ]
    elif harness.api == "responses":
        assert wire == [
            {"role": "user", "content": USER.content},
            {"role": "assistant", "content": "Checking both."},
            {
                "type": "function_call",
                "call_id": "call_a",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_b",
                "name": "get_weather",
                "arguments": '{"city":"Tokyo"}',
            },
            {"type": "function_call_output", "call_id": "call_a", "output": '{"temp":21}'},
            {"type": "function_call_output", "call_id": "call_b", "output": "Error: service down"},
        ]
    else:
        assert wire == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": USER.content},
            {
                "role": "assistant",
                "content": "Checking both.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Tokyo"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": '{"temp":21}'},
            {"role": "tool", "tool_call_id": "call_b", "content": "Error: service down"},
        ]


def test_call_ids_from_a_response_round_trip(harness: Harness) -> None:
    """The ids a provider returns are the ids its results must reference (Responses: call_id)."""
    harness.script(Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Rome"})]), "Warm.")
    first = harness.ask([USER], tools=[WEATHER])
    call = first.tool_calls[0]
    transcript = (
        USER,
        AssistantToolCallMessage(first.text or None, first.tool_calls),
        ToolResultMessage(call.id, "25C", name=call.name),
    )
    assert harness.ask(transcript, tools=[WEATHER]).text == "Warm."


def test_later_requests_reuse_cached_messages(harness: Harness) -> None:
    """Each message's wire JSON is built once; later requests send the same bytes."""
    harness.script("one", "two")
    transcript = list(_round())
    harness.ask(transcript, tools=[WEATHER])
    first = harness.wire_messages()
    transcript += [ChatMessage("assistant", "one"), ChatMessage("user", "And Rome?")]
    harness.ask(transcript, tools=[WEATHER])
    assert harness.wire_messages()[: len(first)] == first


# -- usage ---------------------------------------------------------------------


def test_usage_is_normalised(harness: Harness) -> None:
    usage = {
        "input_tokens": 1200,
        "output_tokens": 35,
        "cached_tokens": 1000,
        "cache_write_tokens": 100,
    }
    harness.script(Turn(text="ok", usage=usage))
    r = harness.ask([USER])
    # Everywhere input includes cached tokens: on the Anthropic wire input_tokens is 100
    # (cache reads and writes excluded) and the adapter adds the 1000 + 100 back in.
    if harness.api == "anthropic":
        assert harness.server.last_request.api == "anthropic"
    assert (r.input_tokens, r.output_tokens, r.cached_tokens) == (1200, 35, 1000)
    assert r.usage.input_tokens == 1200


def test_usage_with_tool_calls(harness: Harness) -> None:
    harness.script(
        Turn(
            tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})],
            usage={"input_tokens": 50, "output_tokens": 7},
        )
    )
    r = harness.ask([USER], tools=[WEATHER])
    assert (r.input_tokens, r.output_tokens, r.cached_tokens) == (50, 7, 0)


def test_streaming_asks_for_usage(harness: Harness) -> None:
    harness.script("ok")
    harness.ask([USER], stream=True)
    if harness.api == "chat":
        assert harness.body["stream_options"] == {"include_usage": True}


# -- async ---------------------------------------------------------------------


def test_async_text(harness: Harness) -> None:
    harness.script("Bonjour.")
    r = harness.ask_async([USER])
    assert r.text == "Bonjour."
    if harness.stream:
        assert harness.text_deltas() == "Bonjour."


def test_async_parallel_calls_and_round_trip(harness: Harness) -> None:
    harness.script(
        Turn(
            tool_calls=[
                FakeToolCall("get_weather", {"city": "Paris"}),
                FakeToolCall("get_time", {"city": "Paris"}),
            ]
        ),
        "Done.",
    )
    r = harness.ask_async([USER], tools=[WEATHER, TIME], tool_choice="required", calls="many")
    assert [c.name for c in r.tool_calls] == ["get_weather", "get_time"]
    transcript = (
        USER,
        AssistantToolCallMessage(None, r.tool_calls),
        *(ToolResultMessage(c.id, "ok", name=c.name) for c in r.tool_calls),
    )
    assert harness.ask_async(transcript, tools=[WEATHER, TIME]).text == "Done."
    assert (
        expected_choice(harness.api, "auto", "many")["tool_choice"] == harness.body["tool_choice"]
    )


def test_async_usage(harness: Harness) -> None:
    harness.script(Turn(text="ok", usage={"input_tokens": 9, "output_tokens": 3}))
    r = harness.ask_async([USER])
    assert (r.input_tokens, r.output_tokens) == (9, 3)


def test_schema_is_sent_unchanged(harness: Harness) -> None:
    harness.script("ok")
    harness.ask([USER], tools=[WEATHER])
    tool = harness.body["tools"][0]
    schema = (
        tool["input_schema"]
        if harness.api == "anthropic"
        else tool["parameters"]
        if harness.api == "responses"
        else tool["function"]["parameters"]
    )
    assert schema == WEATHER_SCHEMA
