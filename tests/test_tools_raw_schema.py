"""A ``Tool`` class's raw ``parameters`` schema is checked when the class is defined.

It was never checked: a pydantic model class was accepted and ``ask()`` failed with a raw
``TypeError`` (not JSON serializable), and a string, an array schema, a schema with no
type or with a type word that does not exist were sent as they were (the API refused
them, or the model was shown nonsense). A raw schema could also declare the reserved
``tool_call`` property: the model was shown it and its value was replaced by the
``ToolCall``.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pydantic
import pytest

from nbagent import Chat, Tool, ToolDefinitionError
from nbagent.providers import OpenAIProvider
from nbagent.testing import (
    FakeLLMServer,
    FakeToolCall,
    ScriptedProvider,
    Turn,
    call_tools,
    reply,
    stand_in,
)


def _define(parameters: Any) -> type[Tool]:
    def execute(self: Any, **kwargs: Any) -> str:
        return json.dumps(kwargs, default=str, sort_keys=True)

    return type(
        "Raw", (Tool,), {"__doc__": "A raw tool.", "parameters": parameters, "execute": execute}
    )


@pytest.mark.parametrize(
    ("parameters", "words"),
    [
        ("city: str", "must be a JSON Schema dict"),
        ({"type": "array", "items": {"type": "string"}}, "must describe an object"),
        ({"properties": {"city": {"type": "string"}}}, "got type None"),
        ({"type": "object", "properties": {"n": {"type": "integr"}}}, "'integr' is not a JSON"),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": ["string", "nul"]}]}}},
            "parameters.properties['a'].anyOf[0]: type 'nul'",
        ),
        ({"type": "object", "properties": {"a": "string"}}, "a schema is a dict, got str"),
        ({"type": "object", "properties": ["a"]}, "'properties' maps names to schemas"),
        ({"type": "object", "required": "a"}, "'required' is a list of property names"),
        (
            {"type": "object", "properties": {"a": {"type": "number", "maximum": float("inf")}}},
            "is not plain JSON at properties.a.maximum",
        ),
        (
            {"type": "object", "properties": {"a": {"default": datetime.date(2024, 1, 1)}}},
            "is not plain JSON",
        ),
        (
            {"type": "object", "properties": {"filter[id]": {"type": "string"}}},
            "parameter name 'filter[id]' is refused by Anthropic's API",
        ),
        (
            {"type": "object", "properties": {"$top": {"type": "integer"}}},
            "parameter name '$top' is refused",
        ),
        (
            {"type": "object", "properties": {"query": {"type": "string"}, "tool_call": {}}},
            "'tool_call' is reserved",
        ),
        ({"type": "object", "required": ["tool_call"]}, "'tool_call' is reserved"),
    ],
)
def test_a_bad_raw_schema_is_refused_when_the_class_is_defined(parameters: Any, words: str) -> None:
    with pytest.raises(ToolDefinitionError, match=r"Raw\.parameters") as info:
        _define(parameters)
    assert words in str(info.value)


def test_a_good_raw_schema_is_kept_as_it_is() -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": ["string", "null"]},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
            "type": {"type": "string"},  # a property named like a keyword
        },
        "$defs": {"tag": {"type": "string", "enum": ["a", "b"]}},
        "additionalProperties": False,
    }
    assert _define(schema).parameters is schema
    assert _define({"type": "object"})().input_schema == {"type": "object"}


class Args(pydantic.BaseModel):
    city: str
    when: datetime.date = datetime.date(2024, 1, 1)

    @pydantic.field_validator("city")
    @classmethod
    def _capital(cls, value: str) -> str:
        if not value[:1].isupper():
            raise ValueError("a city starts with a capital")
        return value


def test_a_pydantic_model_class_as_parameters_is_its_json_schema_and_its_validator() -> None:
    got: dict[str, Any] = {}

    class Weather(Tool):
        """Weather in a city."""

        parameters = Args

        def execute(self, city: str, when: datetime.date) -> str:
            got.update(city=city, when=when)
            return "sunny"

    assert Weather.parameters == Args.model_json_schema()
    with FakeLLMServer(
        turns=[
            Turn(tool_calls=[FakeToolCall("weather", {"city": "Oslo", "when": "2025-02-03"})]),
            Turn(text="done"),
        ],
        strict=True,
    ) as server:
        provider = OpenAIProvider(
            "gpt-4.1-mini", api="chat", api_key="sk-test", base_url=server.openai_base_url
        )
        chat = Chat(provider=provider).with_tools(Weather)
        assert chat.ask("weather?").content == "done"  # type: ignore[union-attr]
        chat.close()
    assert got == {"city": "Oslo", "when": datetime.date(2025, 2, 3)}
    [call] = chat.tool_calls
    assert call.status == "ok"
    # the model's arguments are checked against the model: a bad one never runs
    provider2 = ScriptedProvider([call_tools(("weather", {"city": 5})), reply("ok")])
    chat2 = Chat(provider=provider2).with_tools(Weather)
    chat2.ask("weather?")
    [bad] = chat2.tool_calls
    assert bad.status == "error" and "city" in str(bad.result.content)  # type: ignore[union-attr]
    # ... by the model's own validators too, which its JSON Schema cannot say
    provider3 = ScriptedProvider([call_tools(("weather", {"city": "oslo"})), reply("ok")])
    chat3 = Chat(provider=provider3).with_tools(Weather)
    chat3.ask("weather?")
    [lower] = chat3.tool_calls
    assert lower.status == "error" and "capital" in str(lower.result.content)  # type: ignore[union-attr]
    assert got["city"] == "Oslo"


def test_a_pydantic_model_with_a_tool_call_field_is_refused() -> None:
    class Spoof(pydantic.BaseModel):
        tool_call: str

    with pytest.raises(ToolDefinitionError, match="'tool_call' is reserved"):
        _define(Spoof)


def test_a_raw_schema_set_on_an_instance_is_checked_by_with_tools() -> None:
    class Configured(Tool):
        """Configured per instance."""

        parameters = {"type": "object"}  # noqa: RUF012

        def __init__(self, schema: Any) -> None:
            self.parameters = schema  # type: ignore[misc]

        def execute(self, **kwargs: Any) -> str:
            return "ran"

    chat = Chat(model="demo")
    with pytest.raises(ToolDefinitionError, match="'tool_call' is reserved"):
        chat.with_tools(Configured({"type": "object", "properties": {"tool_call": {}}}))
    with pytest.raises(ToolDefinitionError, match="pydantic model class set on an instance"):
        chat.with_tools(Configured(Args))
    with pytest.raises(ToolDefinitionError, match="must describe an object"):
        chat.with_tools(stand_in("s", "d", {"type": "array"}))
    chat.with_tools(Configured({"type": "object", "properties": {"q": {"type": "string"}}}))
    assert [t.name for t in chat.tools] == ["configured"]
