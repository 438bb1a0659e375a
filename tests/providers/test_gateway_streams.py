"""What gateways and OpenAI-compatible servers send that the APIs themselves do not, read
through the real SDK clients against the strict fake server (its ``quirks``): nothing the
model said or asked for is lost, and an answer that is not all there is an error.

- Responses: a final ``response.completed`` with ``output: []`` (new-api, LiteLLM, the Codex
  backend); the items are in the stream's ``response.output_item.done`` events.
- Chat Completions: parallel calls each whole in its own chunk, with no ``index`` (Gemini's
  OpenAI-compatible endpoint), all at ``index`` 0 with their own ids (some proxies), or with
  neither index nor id (some compatible servers).
- Anthropic: a stream with no ``message_delta`` (no stop reason) while it holds a call.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _provider_harness import make_provider

import nbagent
from nbagent import ProviderConnectionError, ProviderError
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

ran: list[str] = []


@nbagent.tool
def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: City name.
    """
    ran.append(city)
    return f"12C in {city}"


def _chat(server: FakeLLMServer, kind: str, stream: bool) -> nbagent.Chat:
    provider = make_provider(kind, server)
    return nbagent.Chat(provider=provider, stream=stream, display=False).with_tools(get_weather)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


# -- Responses: output [] in the final response ------------------------------------------


def test_a_streamed_answer_is_kept_when_the_final_response_lists_no_output(
    server: FakeLLMServer,
) -> None:
    server.quirks = {"empty_final_output"}
    server.script([Turn(text="It is sunny in Paris.")])
    heard: list[str] = []
    chat = _chat(server, "openai-responses", stream=True)
    chat.on(nbagent.TextDelta, lambda e: heard.append(e.text))
    reply = chat.ask("Weather?")
    assert "".join(heard) == "It is sunny in Paris."
    assert reply is not None and reply.content == "It is sunny in Paris."


def test_a_streamed_call_runs_once_when_the_final_response_lists_no_output(
    server: FakeLLMServer,
) -> None:
    server.quirks = {"empty_final_output"}
    server.script(
        [
            Turn(
                text="Checking.",
                tool_calls=[
                    FakeToolCall("get_weather", {"city": "Oslo"}),
                    FakeToolCall("get_weather", {"city": "Lima"}),
                ],
            ),
            Turn(text="Cold in Oslo, mild in Lima."),
        ]
    )
    chat = _chat(server, "openai-responses", stream=True)
    reply = chat.ask("Weather in Oslo and Lima?")
    assert reply is not None and reply.content == "Cold in Oslo, mild in Lima."
    assert ran == ["Oslo", "Lima"]  # each call ran, once
    assert list(chat.log["status"]) == ["ok", "ok"]
    assert list(chat.steps["stop_reason"]) == ["tool_use", "end"]
    # the next request sends back the calls and their results (the strict fake checks pairs)
    sent = server.requests[1].body["input"]
    assert [i["call_id"] for i in sent if i.get("type") == "function_call"] == [
        "call_1",
        "call_2",
    ]


def test_a_json_response_with_no_output_is_an_error_not_an_empty_answer(
    server: FakeLLMServer,
) -> None:
    server.quirks = {"empty_final_output"}
    server.script([Turn(text="It is sunny.")])
    chat = _chat(server, "openai-responses", stream=False)
    with pytest.raises(ProviderError, match=r"output: \[\]"):
        chat.ask("Weather?")
    assert ran == []


def test_quirks_are_checked_by_name() -> None:
    with pytest.raises(ValueError, match="unknown quirk"):
        FakeLLMServer(quirks={"no_such_quirk"}).close()


# -- Chat Completions: parallel calls without their own index ----------------------------


@pytest.mark.parametrize("quirk", ["calls_without_index", "calls_at_index_0"])
def test_parallel_calls_sent_whole_without_their_own_index_stay_apart(
    server: FakeLLMServer, quirk: str
) -> None:
    server.quirks = {quirk}
    server.script(
        [
            Turn(
                tool_calls=[
                    FakeToolCall("get_weather", {"city": "Paris"}),
                    FakeToolCall("get_weather", {"city": "Tokyo"}),
                ]
            ),
            Turn(text="Paris 12C, Tokyo 12C."),
        ]
    )
    chat = _chat(server, "openai-compatible", stream=True)
    reply = chat.ask("Weather in Paris and Tokyo?")
    assert reply is not None and reply.content == "Paris 12C, Tokyo 12C."
    assert ran == ["Paris", "Tokyo"]
    assert list(chat.log["call_id"]) == ["call_1", "call_2"]
    (sent,) = [m for m in server.requests[1].body["messages"] if m.get("tool_calls")]
    assert [json.loads(c["function"]["arguments"]) for c in sent["tool_calls"]] == [
        {"city": "Paris"},
        {"city": "Tokyo"},
    ]


@nbagent.tool
def get_time(city: str) -> str:
    """Get the time.

    Args:
        city: City name.
    """
    ran.append(f"time:{city}")
    return f"noon in {city}"


@pytest.mark.parametrize("second", ["get_weather", "get_time"])
def test_parallel_calls_sent_whole_without_index_or_id_stay_apart(
    server: FakeLLMServer, second: str
) -> None:
    """No id and no index to tell them apart (some compatible servers): the second call's
    name opens a call of its own, which was merged into the first, arguments and all
    (``{"city":"Paris"}{"city":"Tokyo"}``: not JSON, so neither ran)."""
    server.quirks = {"calls_without_ids"}
    server.script(
        [
            Turn(
                tool_calls=[
                    FakeToolCall("get_weather", {"city": "Paris"}),
                    FakeToolCall(second, {"city": "Tokyo"}),
                ]
            ),
            Turn(text="Done."),
        ]
    )
    chat = _chat(server, "openai-compatible", stream=True).with_tools(get_time)
    assert chat.ask("Weather in Paris, and Tokyo?").content == "Done."
    tokyo = "Tokyo" if second == "get_weather" else "time:Tokyo"
    assert ran == ["Paris", tokyo]
    assert list(chat.log["status"]) == ["ok", "ok"]
    assert len(set(chat.log["call_id"])) == 2  # ids made up here, one each
    (sent,) = [m for m in server.requests[1].body["messages"] if m.get("tool_calls")]
    assert [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in sent["tool_calls"]
    ] == [
        ("get_weather", {"city": "Paris"}),
        (second, {"city": "Tokyo"}),
    ]


def test_a_server_repeating_one_calls_id_in_every_fragment_still_makes_one_call(
    server: FakeLLMServer,
) -> None:
    # the tolerance the fix keeps: the same id again is the same call
    call = FakeToolCall("get_weather", {"city": "Paris, France"})
    server.script([Turn(tool_calls=[call], repeat_ids_in_stream=True), Turn(text="Sunny.")])
    chat = _chat(server, "openai-compatible", stream=True)
    chat.ask("Weather in Paris?")
    assert ran == ["Paris, France"]


# -- Anthropic: no message_delta -------------------------------------------------------


def test_an_anthropic_stream_without_its_stop_reason_is_incomplete_and_runs_nothing(
    server: FakeLLMServer,
) -> None:
    server.quirks = {"no_message_delta"}
    server.script([Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"})])])
    chat = _chat(server, "anthropic", stream=True)
    with pytest.raises(ProviderConnectionError, match="ended before the response was complete"):
        chat.ask("Weather in Oslo?")
    assert ran == []
    assert len(chat.log) == 0


def test_quirks_leave_other_apis_alone(server: FakeLLMServer) -> None:
    server.quirks = {"no_message_delta", "calls_without_index"}
    server.script([Turn(text="Fine.")])
    chat = _chat(server, "openai-responses", stream=True)
    reply: Any = chat.ask("How are you?")
    assert reply.content == "Fine."
