"""The providers' edge cases, against every provider where they apply.

Malformed, empty, non-object and truncated tool arguments; stream quirks (ids
sent once or repeated, usage in a last chunk with no choices, a stream that
ends early); Responses call ids versus item ids; refusals and content filters;
Anthropic's pause_turn, context-window stop and message ordering; unknown
message types.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from _provider_harness import WEATHER, Harness, make_provider

from nbagent import (
    AssistantToolCallMessage,
    ChatMessage,
    ProviderConnectionError,
    ToolCall,
    ToolResultMessage,
)
from nbagent.providers import ModelRequest
from nbagent.providers._anthropic_wire import MessageStream, messages_json, piece
from nbagent.providers._openai_wire import ChatStream, ResponsesStream, parse_chat, parse_responses
from nbagent.providers._sdk import make_call
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

USER = ChatMessage("user", "Weather in Paris?")
MakeHarness = Callable[[str, bool], Harness]


# -- arguments -----------------------------------------------------------------


def test_empty_arguments_mean_an_empty_object(harness: Harness) -> None:
    harness.script(Turn(tool_calls=[FakeToolCall("get_weather", raw_arguments="")]))
    call = harness.ask([USER], tools=[WEATHER]).tool_calls[0]
    assert call.arguments == {}
    assert call.parse_error is None


def test_invalid_json_arguments_become_a_parse_error_not_a_crash(harness: Harness) -> None:
    harness.script(Turn(tool_calls=[FakeToolCall("get_weather", raw_arguments='{"city": Paris}')]))
    r = harness.ask([USER], tools=[WEATHER])
    call = r.tool_calls[0]
    assert call.arguments == {}
    if harness.api == "anthropic" and not harness.stream:
        # Anthropic's non-streaming `input` is always an object: the fake sends {}.
        assert call.parse_error is None
    else:
        assert call.raw_arguments == '{"city": Paris}'
        assert call.parse_error is not None and "invalid JSON" in call.parse_error
    assert r.stop_reason == "tool_use"


def test_arguments_that_are_not_an_object_are_a_parse_error() -> None:
    call = make_call("c1", "f", "[1, 2]")
    assert call.arguments == {} and call.raw_arguments == "[1, 2]"
    assert call.parse_error == "expected a JSON object, got list"
    assert make_call("c2", "f", None).arguments == {}
    assert make_call("c3", "f", {"a": 1}).arguments == {"a": 1}
    assert make_call("c4", "f", "  ").arguments == {}


def test_invalid_arguments_are_sent_back_as_received(harness: Harness) -> None:
    call = ToolCall("call_x", "get_weather", {}, raw_arguments='{"city": Par', parse_error="bad")
    transcript = (
        USER,
        AssistantToolCallMessage(None, (call,)),
        ToolResultMessage("call_x", "Error: invalid JSON", True, "error"),
    )
    harness.script("Sorry.")
    assert harness.ask(transcript, tools=[WEATHER]).text == "Sorry."
    wire = harness.wire_messages()
    if harness.api == "chat":
        assert wire[1]["tool_calls"][0]["function"]["arguments"] == '{"city": Par'
    elif harness.api == "responses":
        assert wire[1]["arguments"] == '{"city": Par'
    else:
        assert wire[1]["content"][0]["input"] == {}


# -- truncation ------------------------------------------------------------------


@pytest.mark.parametrize("stop", ["max_tokens", "context_window"])
def test_a_call_cut_by_the_token_limit_is_marked_truncated(harness: Harness, stop: str) -> None:
    harness.script(
        Turn(
            tool_calls=[
                FakeToolCall("get_weather", {"city": "Paris"}),
                FakeToolCall("get_weather", raw_arguments='{"city": "Tok'),
            ],
            stop=stop,  # type: ignore[arg-type]
        )
    )
    r = harness.ask([USER], tools=[WEATHER])
    expected = (
        "context_window"
        if harness.api == "anthropic" and stop == "context_window"
        else "max_tokens"
    )
    assert r.stop_reason == expected  # the chat never executes calls of such a response
    assert len(r.tool_calls) == 2
    if not (harness.api == "anthropic" and not harness.stream):
        assert r.tool_calls[1].parse_error is not None
    if harness.api == "responses":  # a streamed one ends in response.incomplete
        assert r.raw_stop_reason == "max_output_tokens"


def test_text_cut_by_the_token_limit(harness: Harness) -> None:
    harness.script(Turn(text="The weather in Paris is", stop="max_tokens"))
    r = harness.ask([USER])
    assert (r.text, r.stop_reason, r.tool_calls) == ("The weather in Paris is", "max_tokens", ())


# -- streams -------------------------------------------------------------------


@pytest.mark.parametrize("repeat", [False, True])
@pytest.mark.parametrize("kind", ["openai-chat", "openai-compatible"])
def test_openai_stream_ids_once_or_repeated(
    make_harness: MakeHarness, kind: str, repeat: bool
) -> None:
    harness = make_harness(kind, True)
    harness.server.script(
        [
            Turn(
                tool_calls=[
                    FakeToolCall("get_weather", {"city": "Paris"}),
                    FakeToolCall("get_weather", {"city": "Tokyo"}),
                ],
                repeat_ids_in_stream=repeat,
            )
        ]
    )
    r = harness.ask([USER], tools=[WEATHER])
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_2", "get_weather", {"city": "Tokyo"}),
    ]
    fragments = [d for d in harness.deltas if d.kind == "tool_call"]
    assert {d.call_id for d in fragments} == {"call_1", "call_2"}
    assert all(d.name == "get_weather" for d in fragments)


def test_chat_stream_accumulator_tolerates_server_quirks() -> None:
    seen = []
    acc = ChatStream(seen.append, model="m", provider="p")
    acc.feed({"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]})
    # no "index" on the fragments, id and name repeated, arguments split
    for piece_ in ['{"ci', 'ty": ', '"Oslo"}']:
        acc.feed(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "id": "c9",
                                    "type": "function",
                                    "function": {"name": "get_weather", "arguments": piece_},
                                }
                            ]
                        },
                    }
                ]
            }
        )
    acc.feed(
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }
    )
    r = acc.finish()
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [
        ("c9", "get_weather", {"city": "Oslo"})
    ]
    assert r.stop_reason == "tool_use"  # finish "stop" with calls (some local servers)
    assert (r.input_tokens, r.output_tokens) == (5, 2)
    assert "".join(d.text for d in seen) == '{"city": "Oslo"}'


def test_chat_usage_arrives_in_a_last_chunk_with_no_choices() -> None:
    acc = ChatStream(None, model="m", provider="p")
    acc.feed(
        {
            "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": None,
        }
    )
    acc.feed(
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 11,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 8},
            },
        }
    )
    r = acc.finish()
    assert (r.text, r.input_tokens, r.output_tokens, r.cached_tokens) == ("hi", 11, 1, 8)


@pytest.mark.parametrize(
    "acc",
    [
        ChatStream(None, model="m", provider="p"),
        ResponsesStream(None, model="m", provider="p"),
        MessageStream(None, model="m", provider="p"),
    ],
)
def test_a_stream_that_ends_early_is_an_error(
    acc: ChatStream | ResponsesStream | MessageStream,
) -> None:
    with pytest.raises(ProviderConnectionError, match="ended before"):
        acc.finish()


def test_responses_results_reference_call_id_not_item_id(harness: Harness) -> None:
    harness.script(
        Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Rome"}, id="call_rome")]), "Warm."
    )
    r = harness.ask([USER], tools=[WEATHER])
    call = r.tool_calls[0]
    assert call.id == "call_rome"
    harness.ask(
        (USER, AssistantToolCallMessage(None, (call,)), ToolResultMessage(call.id, "25C")),
        tools=[WEATHER],
    )
    if harness.api == "responses":
        outputs = [i for i in harness.body["input"] if i.get("type") == "function_call_output"]
        assert outputs == [
            {"type": "function_call_output", "call_id": "call_rome", "output": "25C"}
        ]


def test_parse_responses_reads_call_id_and_incomplete() -> None:
    data = {
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_7",
                "name": "f",
                "arguments": '{"a": ',
            }
        ],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 4,
            "input_tokens_details": {"cached_tokens": 6},
        },
    }
    r = parse_responses(data, model="m", provider="openai")
    assert r.tool_calls[0].id == "call_7"
    assert r.stop_reason == "max_tokens"
    assert (r.input_tokens, r.output_tokens, r.cached_tokens) == (10, 4, 6)


def test_parse_chat_tolerates_missing_ids_and_object_arguments() -> None:
    data = {
        "choices": [
            {
                "message": {
                    "content": [{"type": "text", "text": "hi"}],
                    "tool_calls": [
                        {"function": {"name": "f", "arguments": {"x": 1}}},
                        {"function": {"name": "f", "arguments": {"x": 2}}},
                    ],
                },
                "finish_reason": "stop",
            }
        ]
    }
    r = parse_chat(data, model="m", provider="p")
    assert r.text == "hi"
    assert [c.arguments for c in r.tool_calls] == [{"x": 1}, {"x": 2}]
    assert len({c.id for c in r.tool_calls}) == 2  # generated, unique
    assert r.stop_reason == "tool_use"
    assert r.model == "m"


# -- refusals and special stops ------------------------------------------------------


def test_refusal_surfaces_as_such(harness: Harness) -> None:
    harness.script(Turn(refusal="I can't help with that request."))
    r = harness.ask([USER])
    assert r.stop_reason == "refusal"
    assert r.refusal == "I can't help with that request."
    assert r.tool_calls == ()


def test_content_filter_is_a_refusal(harness: Harness) -> None:
    harness.script(Turn(text="", stop="content_filter"))
    r = harness.ask([USER])
    assert r.stop_reason == "refusal"
    assert r.refusal


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_pause_turn_and_continuation(make_harness: MakeHarness, stream: bool) -> None:
    harness = make_harness("anthropic", stream)
    harness.script(Turn(text="Searching the web... ", stop="pause_turn"), "Found it: sunny.")
    first = harness.ask([USER])
    assert first.stop_reason == "pause_turn"
    assert first.raw_stop_reason == "pause_turn"
    paused = ChatMessage("assistant", first.text, stop_reason="pause_turn")
    second = harness.ask([USER, paused])
    assert second.text == "Found it: sunny."
    # the paused turn goes back as the final assistant message, trailing whitespace removed
    assert harness.body["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Searching the web..."}],
    }


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_context_window_stop(make_harness: MakeHarness, stream: bool) -> None:
    harness = make_harness("anthropic", stream)
    harness.script(Turn(text="partial", stop="context_window"))
    r = harness.ask([USER])
    assert (r.stop_reason, r.raw_stop_reason) == ("context_window", "model_context_window_exceeded")


# -- Anthropic transcript rules ---------------------------------------------------------


def _calls() -> tuple[ToolCall, ...]:
    return (
        ToolCall("t1", "get_weather", {"city": "Paris"}),
        ToolCall("t2", "get_weather", {"city": "Oslo"}),
    )


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_results_in_one_next_user_message_before_text(
    make_harness: MakeHarness, stream: bool
) -> None:
    harness = make_harness("anthropic", stream)
    transcript = (
        USER,
        AssistantToolCallMessage(None, _calls()),
        ToolResultMessage("t1", "21C"),
        ToolResultMessage("t2", "denied by the user", True, "denied"),
        ChatMessage("user", "Also, what about Rome?"),
    )
    harness.script("Rome is 25C.")
    assert harness.ask(transcript, tools=[WEATHER]).text == "Rome is 25C."  # strict server: no 400
    messages = harness.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "21C", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "content": "denied by the user",
            "is_error": True,
        },
        {"type": "text", "text": "Also, what about Rome?"},
    ]


def test_anthropic_converter_orders_results_first_and_merges_roles() -> None:
    transcript = [
        ChatMessage("system", "Extra rules."),
        USER,
        AssistantToolCallMessage("Checking.", _calls()),
        ChatMessage("user", "hurry"),  # text that arrived before the results
        ToolResultMessage("t1", "21C"),
        ToolResultMessage("t2", ""),
        ChatMessage("assistant", ""),  # empty text is dropped
        ChatMessage("assistant", "First part. "),
        ChatMessage("assistant", "Second part.  "),
    ]
    body, systems = messages_json([piece(m) for m in transcript])
    messages = json.loads(body)
    assert systems == ["Extra rules."]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert messages[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "t2",
        "is_error": False,
    }
    assert messages[3]["content"] == [
        {"type": "text", "text": "First part. "},
        {"type": "text", "text": "Second part."},
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_system_messages_join_the_system_prompt(
    make_harness: MakeHarness, stream: bool
) -> None:
    harness = make_harness("anthropic", stream)
    harness.script("ok")
    harness.ask([ChatMessage("system", "Rule two."), USER], system="Rule one.")
    assert harness.body["system"] == "Rule one.\n\nRule two."
    assert harness.body["messages"][0]["role"] == "user"


def test_anthropic_stream_without_argument_fragments_uses_the_start_input() -> None:
    acc = MessageStream(None, model="m", provider="anthropic")
    acc.feed(
        {
            "type": "message_start",
            "message": {
                "model": "claude-x",
                "usage": {
                    "input_tokens": 3,
                    "cache_read_input_tokens": 4,
                    "cache_creation_input_tokens": 5,
                    "output_tokens": 1,
                },
            },
        }
    )
    acc.feed(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}},
        }
    )
    acc.feed({"type": "content_block_stop", "index": 0})
    acc.feed(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        }
    )
    acc.feed({"type": "message_stop"})
    r = acc.finish()
    assert [(c.id, c.arguments) for c in r.tool_calls] == [("toolu_9", {})]
    assert (r.input_tokens, r.output_tokens, r.cached_tokens, r.model) == (12, 9, 4, "claude-x")


def test_unknown_message_types_are_rejected() -> None:
    from nbagent.providers._openai_wire import chat_message, responses_items

    for convert in (chat_message, responses_items, piece):
        with pytest.raises(TypeError, match="cannot convert"):
            convert("not a message")  # type: ignore[arg-type]


def test_a_chat_stream_cut_after_its_answer_before_its_usage_is_incomplete(
    server: FakeLLMServer,
) -> None:
    """The stream ends cleanly after the chunk with the finish reason: no usage chunk, no
    ``[DONE]``. Read as whole, the request counted 0 tokens (the cost and the token budget
    blind to it). It is an incomplete stream, as a Responses or Anthropic stream missing its
    last event is; a server that sends no usage but ends with ``[DONE]`` is whole."""
    from nbagent.providers._sdk import SSEParser
    from nbagent.testing import render

    answer = {"text": "hi", "usage": {"input_tokens": 5000, "output_tokens": 500}}
    sent = render("chat", Turn(**answer), {"model": "m", "stream": True,  # type: ignore[arg-type]
                  "stream_options": {"include_usage": True}})  # fmt: skip
    finish = next(
        i for i, e in enumerate(sent) if e["choices"] and e["choices"][0]["finish_reason"]
    )
    assert finish < len(sent) - 1  # the usage comes in a chunk of its own, after it
    provider = make_provider("openai-chat", server)
    request = ModelRequest((USER,), stream=True)
    try:
        server.script([Turn(**answer)])  # type: ignore[arg-type]
        whole = provider.complete(request)
        assert (whole.text, whole.input_tokens) == ("hi", 5000)
        server.script([Turn(**answer, end_stream_after=finish + 1)])  # type: ignore[arg-type]
        with pytest.raises(ProviderConnectionError, match="ended before"):
            provider.complete(request)
    finally:
        provider.close()
    no_usage = ChatStream(None, model="m", provider="p")
    parser = SSEParser("p")
    for event in parser.feed(
        b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}'
        b"\n\ndata: [DONE]\n\n"
    ):
        no_usage.feed(event)
    assert parser.done and no_usage.finish(parser.done).text == "hi"  # a server without usage
