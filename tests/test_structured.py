"""Structured answers in the core: output types, the strict transform, parsing, the retry,
the demo model, the store and the view (the wire formats: tests/providers/test_structured_wire.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Literal, TypedDict

import ipywidgets
import pytest
from pydantic import BaseModel, Field

import nbagent
from nbagent import (
    Chat,
    ChatMessage,
    OutputSchemaError,
    OutputValidationError,
    tool,
)
from nbagent._output import as_output
from nbagent.notebook import ChatView
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.testing import ScriptedProvider, call_tools, reply


class Address(BaseModel):
    city: str
    zip: str | None = None


class Person(BaseModel):
    name: str = Field(min_length=1, description="Full name")
    age: int = Field(ge=0, le=150)
    email: str
    tags: list[str] = []
    address: Address
    kind: Literal["customer", "supplier"] = "customer"
    summary: str


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: str = "origin"


class Movie(TypedDict):
    title: str
    year: int


SCHEMA: dict[str, Any] = {
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "status": {"type": "string", "enum": ["open", "shipped"]},
        "note": {"type": "string"},
    },
    "required": ["id", "status"],
}


def chat_with(*script: Any, **kwargs: Any) -> tuple[Chat, ScriptedProvider]:
    provider = ScriptedProvider(list(script))
    return Chat(provider=provider, display=False, **kwargs), provider


# -- what output= takes, and what it gives back ---------------------------------


@pytest.mark.parametrize(
    ("output", "answer", "expected"),
    [
        (Point, '{"x": 1, "y": 2.5, "label": null}', Point(1.0, 2.5, "origin")),
        (Movie, '{"title": "Alien", "year": 1979}', {"title": "Alien", "year": 1979}),
        (SCHEMA, '{"id": 7, "status": "open", "note": null}', {"id": 7, "status": "open"}),
    ],
    ids=["dataclass", "typeddict", "json-schema"],
)
def test_each_kind_of_output_gives_its_value(output: Any, answer: str, expected: Any) -> None:
    chat, provider = chat_with(reply(answer))
    message = chat.ask("go", output=output)
    assert isinstance(message, ChatMessage)
    assert message.parsed == expected and type(message.parsed) is type(expected)
    assert message.content == answer  # the JSON as the model wrote it is kept
    assert provider.requests[0].output is not None


def test_pydantic_model_instance_with_defaults_for_the_nulls_strict_mode_forces() -> None:
    answer = {
        "name": "Ada",
        "age": 36,
        "email": "ada@example.com",
        "tags": None,  # optional: strict mode made the model send null; the default applies
        "address": {"city": "London", "zip": None},
        "kind": None,
        "summary": "ok",
    }
    chat, _ = chat_with(reply(json.dumps(answer)))
    parsed = chat.ask("who?", output=Person).parsed  # type: ignore[union-attr]
    assert isinstance(parsed, Person)
    assert parsed.tags == [] and parsed.kind == "customer" and parsed.address.zip is None


def test_a_question_without_output_has_no_parsed_value_and_asks_for_none() -> None:
    chat, provider = chat_with(reply('{"x": 1, "y": 2}'), reply('{"x": 1}'))
    chat.ask("a point", output=Point)
    plain = chat.ask("now talk")
    assert isinstance(plain, ChatMessage) and plain.parsed is None
    assert provider.requests[1].output is None


def test_anything_else_is_refused_before_the_turn_starts() -> None:
    chat, provider = chat_with(reply("x"))
    instance = Point(1, 2)
    for bad in (int, list[int], "Person", instance, {}):
        with pytest.raises(OutputSchemaError, match="output="):
            chat.ask("go", output=bad)
    assert chat.transcript == () and provider.requests == []


# -- the strict schema ----------------------------------------------------------


def test_strict_schema_requires_every_property_and_forbids_extra_keys() -> None:
    schema = as_output(Person).strict_schema("openai")
    assert schema["additionalProperties"] is False
    assert schema["required"] == list(schema["properties"])
    address = schema["$defs"]["Address"]
    assert address["additionalProperties"] is False and address["required"] == ["city", "zip"]
    # an optional field became nullable; a required one did not
    assert {"type": "null"} in schema["properties"]["tags"]["anyOf"]
    assert "anyOf" not in schema["properties"]["email"]
    # OpenAI enforces bounds itself; minLength it does not take: it moves into the description
    assert schema["properties"]["age"]["minimum"] == 0
    assert "minLength" not in schema["properties"]["name"]
    assert "Full name" in schema["properties"]["name"]["description"]
    assert "minLength: 1" in schema["properties"]["name"]["description"]


def test_anthropic_dialect_moves_bounds_into_the_description_and_still_enforces_them() -> None:
    schema = as_output(Person).strict_schema("anthropic")
    assert "minimum" not in schema["properties"]["age"]
    assert "minimum: 0" in schema["properties"]["age"]["description"]
    with pytest.raises(OutputValidationError, match="greater than or equal to 0"):
        as_output(Person).parse(
            '{"name":"a","age":-1,"email":"e","address":{"city":"c"},"summary":"s"}'
        )


class WithMapping(BaseModel):
    scores: dict[str, int]


class WithAny(BaseModel):
    anything: Any


class WithTuple(BaseModel):
    pair: tuple[int, str]


@pytest.mark.parametrize(
    ("output", "words"),
    [
        (WithMapping, "free keys"),
        (WithAny, "any type"),
        (WithTuple, "tuple"),
        ({"type": "array", "items": {"type": "string"}}, "not an object"),
        ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, "'not'"),
    ],
    ids=["mapping", "any", "tuple", "array-root", "not"],
)
def test_a_schema_strict_mode_cannot_express_fails_clearly_before_anything_is_sent(
    output: Any, words: str
) -> None:
    chat, provider = chat_with(reply("{}"))
    chat.provider.check_output = lambda o: o.strict_schema("openai")  # type: ignore[attr-defined]
    with pytest.raises(OutputSchemaError, match=words) as info:
        chat.ask("go", output=output)
    assert "Nothing was sent" in str(info.value)
    assert chat.transcript == () and provider.requests == []


def test_one_of_becomes_any_of_and_type_lists_become_variants() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "w": {"type": ["string", "null"], "description": "maybe"},
        },
        "required": ["v", "w"],
    }
    strict = as_output(schema).strict_schema("anthropic")
    assert strict["properties"]["v"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert strict["properties"]["w"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "description": "maybe",
    }


# -- invalid answers: one retry, then a clear error -----------------------------


def test_an_invalid_answer_is_retried_once_with_what_was_wrong() -> None:
    good = '{"x": 3, "y": 4}'
    chat, provider = chat_with(reply("Sure! The point is (3, 4)."), reply(good))
    message = chat.ask("a point", output=Point)
    assert isinstance(message, ChatMessage) and message.parsed == Point(3, 4)
    assert chat.status == "complete"
    retry = provider.requests[1].messages[-1]
    assert isinstance(retry, ChatMessage) and retry.role == "user"
    assert "not a valid Point" in retry.content and "not valid JSON" in retry.content
    # the invalid answer stays in the transcript, as written
    assert [m.content for m in chat.transcript if m.role == "assistant"] == [
        "Sure! The point is (3, 4).",
        good,
    ]


def test_invalid_twice_raises_with_the_raw_text_and_the_errors_and_loses_nothing() -> None:
    chat, provider = chat_with(reply('{"x": "far"}'), reply('{"x": 1}'), reply("Sorry."))
    with pytest.raises(OutputValidationError) as info:
        chat.ask("a point", output=Point)
    err = info.value
    assert err.raw == '{"x": 1}' and err.output == "Point"
    assert err.errors == ["y: Field required"]
    assert "after one retry" in str(err) and isinstance(err, nbagent.NBAgentError)
    assert chat.last_error is err
    assert len(provider.requests) == 2  # retried once, not more
    assistant = [m for m in chat.transcript if m.role == "assistant"]
    assert [m.content for m in assistant] == ['{"x": "far"}', '{"x": 1}']
    assert all(m.parsed is None for m in assistant)
    assert chat.status == "complete"
    # the chat carries on: the next question is a plain one
    assert chat.ask("never mind").content == "Sorry."  # type: ignore[union-attr]


def test_the_retry_is_once_per_turn_and_async_shares_it() -> None:
    chat, provider = chat_with(
        reply("nope"), reply('{"x": 1, "y": 2}'), reply("nope again"), reply('{"x": 5, "y": 6}')
    )
    first = asyncio.run(chat.ask_async("one", output=Point))
    second = asyncio.run(chat.ask_async("two", output=Point))  # a new turn: a new retry
    assert first.parsed == Point(1, 2) and second.parsed == Point(5, 6)  # type: ignore[union-attr]
    assert len(provider.requests) == 4


def test_a_refusal_is_not_validated_nor_retried() -> None:
    chat, provider = chat_with(reply("I can't help with that.", stop_reason="refusal"))
    message = chat.ask("a point", output=Point)
    assert isinstance(message, ChatMessage) and message.parsed is None
    assert message.stop_reason == "refusal" and len(provider.requests) == 1


def test_the_structured_answer_comes_after_tool_rounds() -> None:
    @tool
    def get_weather(city: str) -> str:
        """Weather in a city."""
        return "12C, rain"

    chat, provider = chat_with(
        call_tools(("get_weather", {"city": "Oslo"})),
        reply('{"x": 12, "y": 0, "label": "Oslo"}'),
    )
    chat.with_tools(get_weather)
    message = chat.ask("weather as a point", output=Point)
    assert message.parsed == Point(12, 0, "Oslo")  # type: ignore[union-attr]
    assert [c.status for c in chat.tool_calls] == ["ok"]
    # every request of the turn asks for the structured answer
    assert [r.output.name for r in provider.requests] == ["Point", "Point"]  # type: ignore[union-attr]


# -- the demo model (no key) ----------------------------------------------------


@pytest.mark.parametrize(
    "output", [Person, Point, Movie, SCHEMA], ids=["pydantic", "dataclass", "typeddict", "schema"]
)
def test_the_demo_model_fills_the_schema(output: Any) -> None:
    chat = Chat("demo", display=False)
    message = chat.ask("Tell me about a customer", output=output)
    assert isinstance(message, ChatMessage) and message.parsed is not None
    assert as_output(output).parse(message.content) == message.parsed


def test_the_demo_model_answers_in_the_schema_after_calling_a_tool() -> None:
    @tool
    def get_weather(city: str) -> str:
        """Get the weather in a city."""
        return "sunny, 21C"

    class Report(BaseModel):
        city: str
        summary: str
        when: str = Field(json_schema_extra={"format": "date"})

    chat = Chat("demo", display=False).with_tools(get_weather)
    report = chat.ask("weather in Paris", output=Report).parsed  # type: ignore[union-attr]
    assert isinstance(report, Report)
    assert report.city == "Paris" and "sunny, 21C" in report.summary
    assert report.when == "2026-01-15"
    assert [c.status for c in chat.tool_calls] == ["ok"]


# -- the store ------------------------------------------------------------------


def test_a_loaded_chat_gives_the_value_back_as_a_dict(tmp_path: Any) -> None:
    path = tmp_path / "chats.db"
    provider = ScriptedProvider([reply('{"x": 1, "y": 2}')])
    with Chat(provider=provider, store=path, display=False) as chat:
        assert chat.ask("a point", output=Point).parsed == Point(1, 2)  # type: ignore[union-attr]
        chat_id = chat.id
    with Chat.load(chat_id, store=path, provider=provider, display=False) as loaded:
        last = loaded.transcript[-1]
        assert isinstance(last, ChatMessage)
        assert last.parsed == {"x": 1.0, "y": 2.0, "label": "origin"}
        assert last.content == '{"x": 1, "y": 2}'
        assert loaded.transcript[0].parsed is None  # type: ignore[union-attr]


# -- the view -------------------------------------------------------------------

EVIL = "<script>alert(1)</script>"


def evil_chat() -> Chat:
    answer = {"x": 1, "y": 2, "label": f"{EVIL} | *bold*"}
    chat, _ = chat_with(reply(json.dumps(answer)))
    chat.ask("a point", output=Point)
    return chat


def test_the_static_view_shows_the_value_as_an_escaped_table() -> None:
    bundle = chat_mimebundle(evil_chat())
    html = bundle["text/html"]
    assert '<table class="nba-parsed"><caption>Point</caption>' in html
    assert '<th class="nba-key">label</th>' in html
    assert EVIL not in html and "&lt;script&gt;alert(1)&lt;/script&gt; | *bold*" in html
    assert "<summary>JSON</summary>" in html  # the JSON as written, folded
    markdown = bundle["text/markdown"]
    assert "| `label` | &lt;script&gt;alert(1)&lt;/script&gt; \\| \\*bold\\* |" in markdown
    assert EVIL not in markdown
    plain = bundle["text/plain"]
    assert "Assistant: Point\n" in plain and f"label  {EVIL} | *bold*" in plain


def test_the_live_view_shows_the_table_under_the_answer() -> None:
    view = ChatView(evil_chat())
    html = "".join(w.value for w in _widgets(view.widget) if isinstance(w, ipywidgets.HTML))
    assert '<table class="nba-parsed">' in html and EVIL not in html
    assert '<td class="nba-val">2.0</td>' in html


def _widgets(root: Any) -> list[Any]:
    out, stack = [], [root]
    while stack:
        w = stack.pop()
        out.append(w)
        stack.extend(getattr(w, "children", ()))
    return out


def test_a_turn_parked_on_an_approval_still_ends_with_the_structured_answer() -> None:
    @tool(requires_approval=True)
    def refund(order: int) -> str:
        """Refund an order."""
        return f"refunded {order}"

    chat, provider = chat_with(
        call_tools(("refund", {"order": 42})), reply('{"x": 42, "y": 1, "label": "refunded"}')
    )
    chat.with_tools(refund)
    chat.ask("refund 42, then report as a point", output=Point)
    assert chat.status == "awaiting_approval"
    chat.approve(chat.pending_approvals[0])
    message = chat.complete()
    assert isinstance(message, ChatMessage) and message.parsed == Point(42, 1, "refunded")
    assert provider.requests[1].output is provider.requests[0].output


def test_a_fenced_answer_from_a_compatible_server_is_read() -> None:
    chat, _ = chat_with(reply('```json\n{"x": 1, "y": 2}\n```'))
    assert chat.ask("a point", output=Point).parsed == Point(1, 2)  # type: ignore[union-attr]
