"""Structured answers on the wire: the real SDK clients against the strict fake server.

Chat Completions ``response_format``, Responses ``text.format``, Anthropic
``output_config.format``; JSON and streaming; after a tool round; the retry; and
the fake server rejecting what the real APIs reject in strict mode.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
from typing import Any

import anthropic
import openai
import pytest
from _provider_harness import KEY, Harness
from pydantic import BaseModel, Field

import nbagent
from nbagent import ChatMessage, OutputSchemaError, OutputValidationError
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn


class Forecast(BaseModel):
    city: str
    temp_c: float = Field(ge=-90, le=60)
    conditions: list[str]
    advice: str | None = None


@dataclasses.dataclass
class Reading:
    city: str
    temp_c: float


def sent_schema(h: Harness, body: dict[str, Any]) -> dict[str, Any]:
    """The strict schema a request carried, read where each API takes it."""
    if h.api == "chat":
        rf = body["response_format"]
        assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
        assert rf["json_schema"]["name"] == "Forecast"
        return dict(rf["json_schema"]["schema"])
    if h.api == "responses":
        fmt = body["text"]["format"]
        assert fmt["type"] == "json_schema" and fmt["strict"] is True
        assert fmt["name"] == "Forecast"
        return dict(fmt["schema"])
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema" and "name" not in fmt
    return dict(fmt["schema"])


def weather_chat(h: Harness) -> tuple[nbagent.Chat, list[str]]:
    ran: list[str] = []

    @nbagent.tool
    def get_weather(city: str) -> str:
        """Get the weather for a city.

        Args:
            city: City name.
        """
        ran.append(city)
        return "14C, light rain"

    chat = nbagent.Chat(provider=h.provider, stream=h.stream, display=False)
    return chat.with_tools(get_weather), ran


def test_structured_answer_after_a_tool_round(harness: Harness) -> None:
    chat, ran = weather_chat(harness)
    answer = '{"city": "Oslo", "temp_c": 14, "conditions": ["rain"], "advice": null}'
    harness.script(Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"})]), answer)
    reply = chat.ask("Weather in Oslo, as a forecast?", output=Forecast)
    assert isinstance(reply, ChatMessage)
    assert reply.parsed == Forecast(city="Oslo", temp_c=14, conditions=["rain"])
    assert reply.content == answer and ran == ["Oslo"] and chat.status == "complete"
    # both requests of the turn (tools, then the answer) asked for it natively, and the
    # strict fake accepted them: the strict schema is what strict mode wants
    requests = harness.server.requests
    assert len(requests) == 2 and harness.server.errors == []
    for request in requests:
        schema = sent_schema(harness, request.body)
        assert schema["additionalProperties"] is False
        assert schema["required"] == ["city", "temp_c", "conditions", "advice"]
        if harness.api == "anthropic":  # no numeric bounds there: in the description
            assert "minimum" not in schema["properties"]["temp_c"]
        else:
            assert schema["properties"]["temp_c"]["minimum"] == -90
    assert requests[0].body["tools"]  # the tools are still offered beside the format


def test_structured_answer_async(harness: Harness) -> None:
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    harness.script('{"city": "Lima", "temp_c": 19.5}')
    reply = asyncio.run(chat.ask_async("Lima?", output=Reading))
    assert reply.parsed == Reading("Lima", 19.5)  # type: ignore[union-attr]


def test_an_invalid_answer_is_retried_once_on_the_wire(harness: Harness) -> None:
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    harness.script(
        '{"city": "Oslo", "temp_c": 140, "conditions": []}',  # out of bounds: caught here
        '{"city": "Oslo", "temp_c": 14, "conditions": [], "advice": "umbrella"}',
    )
    reply = chat.ask("Oslo?", output=Forecast)
    assert reply.parsed.advice == "umbrella"  # type: ignore[union-attr]
    last = harness.wire_messages()[-1]
    text = json.dumps(last)
    assert (
        "not a valid Forecast" in text and "temp_c" in text and "less than or equal to 60" in text
    )


def test_invalid_twice_raises_and_keeps_both_answers(harness: Harness) -> None:
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    harness.script("Oslo is rainy.", "Still rainy, sorry.")
    with pytest.raises(OutputValidationError, match="not valid JSON") as info:
        chat.ask("Oslo?", output=Forecast)
    assert info.value.raw == "Still rainy, sorry."
    assert [m.content for m in chat.transcript if m.role == "assistant"] == [
        "Oslo is rainy.",
        "Still rainy, sorry.",
    ]
    assert len(harness.server.requests) == 2


class Scores(BaseModel):
    by_player: dict[str, int]


def test_a_schema_the_api_cannot_express_fails_before_any_request(harness: Harness) -> None:
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    with pytest.raises(OutputSchemaError, match="by_player") as info:
        chat.ask("scores?", output=Scores)
    assert "cannot be expressed" in str(info.value)
    assert harness.server.requests == [] and chat.transcript == ()


def test_preview_request_shows_the_native_field(harness: Harness) -> None:
    body = harness.provider.preview_request(messages=[], output=Forecast)
    assert sent_schema(harness, body)["type"] == "object"


# -- the strict fake rejects what the real APIs reject -----------------------------

LOOSE = {  # what strict mode refuses: a property missing from required, extras allowed
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
    "required": ["a"],
}
NO_EXTRA = {**LOOSE, "additionalProperties": False}


def test_chat_completions_strict_rejects_a_loose_schema(server: FakeLLMServer) -> None:
    client = openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0)
    server.script(["{}"] * 3)

    def ask(schema: dict[str, Any], strict: bool = True) -> Any:
        return client.chat.completions.create(
            model="gpt-4.1-mini",
            messages=[{"role": "user", "content": "hi"}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "X", "schema": schema, "strict": strict},
            },
        )

    with pytest.raises(openai.BadRequestError, match="additionalProperties"):
        ask(LOOSE)
    with pytest.raises(openai.BadRequestError, match="Missing 'b'"):
        ask(NO_EXTRA)
    with pytest.raises(openai.BadRequestError, match="'minLength' is not permitted"):
        ask(
            {
                "type": "object",
                "properties": {"a": {"type": "string", "minLength": 2}},
                "required": ["a"],
                "additionalProperties": False,
            }
        )
    with pytest.raises(
        openai.BadRequestError, match=r"must be a JSON Schema of 'type: .?.object.?.'"
    ):
        ask({"type": "array", "items": {"type": "string"}})
    ask(LOOSE, strict=False)  # not strict: accepted
    ask({**NO_EXTRA, "required": ["a", "b"]})  # strict and complete: accepted
    assert server.remaining == 1


def test_responses_strict_rejects_a_loose_schema(server: FakeLLMServer) -> None:
    client = openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0)
    server.script(["{}"])

    def ask(schema: dict[str, Any], name: str = "X") -> Any:
        return client.responses.create(
            model="gpt-4.1-mini",
            input="hi",
            text={
                "format": {"type": "json_schema", "name": name, "schema": schema, "strict": True}
            },
        )

    with pytest.raises(openai.BadRequestError, match="Missing 'b'") as info:
        ask(NO_EXTRA)
    assert info.value.body["param"] == "text.format"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="pattern"):
        ask({**NO_EXTRA, "required": ["a", "b"]}, name="has space")
    ask({**NO_EXTRA, "required": ["a", "b"]})


def test_anthropic_rejects_objects_without_additional_properties_false(
    server: FakeLLMServer,
) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    server.script(["{}"])

    def ask(schema: dict[str, Any]) -> Any:
        return client.messages.create(
            model="claude-test",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            output_config={"format": {"type": "json_schema", "schema": schema}},
        )

    with pytest.raises(anthropic.BadRequestError, match="additionalProperties"):
        ask(LOOSE)
    with pytest.raises(anthropic.BadRequestError, match="'minimum' is not permitted"):
        ask({**NO_EXTRA, "properties": {"a": {"type": "integer", "minimum": 1}}})
    reply = ask(NO_EXTRA)  # optional properties are fine on Anthropic
    assert reply.content[0].text == "{}"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Node(BaseModel):
    name: str
    color: Color
    seen: datetime.datetime | None = None
    children: list[Node] = []


def test_recursive_models_enums_and_dates_pass_the_strict_fake(harness: Harness) -> None:
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    answer = {
        "name": "root",
        "color": "red",
        "seen": None,
        "children": [{"name": "leaf", "color": "blue", "seen": "2026-01-15T09:30:00Z"}],
    }
    harness.script(json.dumps(answer))
    tree = chat.ask("a tree", output=Node).parsed  # type: ignore[union-attr]
    assert harness.server.errors == [] and len(harness.server.requests) == 1
    assert isinstance(tree, Node) and tree.color is Color.RED
    assert tree.children[0].seen == datetime.datetime(2026, 1, 15, 9, 30, tzinfo=datetime.UTC)
    assert tree.children[0].children == []  # the leaf's missing optional key: its default
