"""The shapes a tool can take and what the model is shown and gets for each.

A Tool class's own docstring ``Args:``, ``Annotated`` descriptions, ``@tool`` on a
method, ``functools.partial`` and callable objects, generators and coroutines,
the raw-JSON-Schema validator (tools' arguments and ``output=`` answers), the
problems reported inside unions, tool dicts for ``complete_with_tools``, results
holding NaN, and defaults that do not match their type.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Optional

import pydantic
import pytest

from nbagent import (
    Chat,
    OutputValidationError,
    Tool,
    tool,
)
from nbagent._schema import SchemaValidationError, validate_json_schema
from nbagent.testing import ScriptedProvider, call_tools, reply


def _results(provider: ScriptedProvider, request: int = 1) -> list[str]:
    """The tool results the model read in request ``request``."""
    return [
        str(m.content)
        for m in provider.requests[request].messages
        if type(m).__name__ == "ToolResultMessage"
    ]


def _run(*tools: Any, calls: list[tuple[str, dict[str, Any]]], **options: Any) -> list[str]:
    provider = ScriptedProvider([call_tools(*calls), reply("done")])
    chat = Chat(provider=provider).with_tools(*tools)
    if options:
        chat.with_tool_options(**options)
    chat.ask("go")
    return _results(provider)


# -- 1. a Tool class's own docstring Args ------------------------------------------------


CONSTRAINED: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["code", "n", "m", "e", "when", "tags"],
    "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "n": {"type": "integer", "multipleOf": 5},
        "m": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
        "e": {"type": "string", "format": "email"},
        "when": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
}
GOOD = {"code": "ABC", "n": 10, "m": 0.5, "e": "a@b.org", "when": "2024-02-03", "tags": ["a"]}
BAD = {"code": "abc", "n": 7, "m": 0, "e": "nope", "when": "yesterday", "tags": ["a", "a"]}
BAD_PROBLEMS = [
    "code: does not match the pattern '^[A-Z]{3}$'",
    "n: must be a multiple of 5",
    "m: must be > 0",
    "e: not a valid email ('nope')",
    "when: not a valid date ('yesterday')",
    "tags: items must be unique ([0] and [1] are equal)",
]


def test_the_validator_checks_the_constraint_keywords() -> None:
    assert validate_json_schema(GOOD, CONSTRAINED) == []
    assert validate_json_schema(BAD, CONSTRAINED) == BAD_PROBLEMS
    assert validate_json_schema(10, {"exclusiveMaximum": 10}) == ["(arguments): must be < 10"]
    assert validate_json_schema(0.3, {"multipleOf": 0.1}) == []  # decimal, not float, maths
    assert validate_json_schema([1, 1.0], {"uniqueItems": True})  # JSON: 1 == 1.0
    assert validate_json_schema([1, True], {"uniqueItems": True}) == []  # true is not 1
    assert validate_json_schema(True, {"enum": [1]})
    assert validate_json_schema([1, "x"], {"prefixItems": [{"type": "integer"}], "items": False})
    assert validate_json_schema("x", {"not": {"type": "string"}})
    assert validate_json_schema("x", {"pattern": r"\p{L}"}) == []  # not Python's: unchecked


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date", "2024-02-29", "2023-02-29"),
        ("date-time", "2024-01-01T10:00:00Z", "2024-01-01 at ten"),
        ("time", "10:00:00", "ten"),
        ("uuid", "12345678-1234-5678-1234-567812345678", "1234"),
        ("uri", "https://example.org/a", "example.org"),
        ("email", "x@y.z", "x at y"),
        ("ipv4", "10.0.0.1", "10.0.0.256"),
    ],
)
def test_the_validator_checks_formats(fmt: str, good: str, bad: str) -> None:
    assert validate_json_schema(good, {"type": "string", "format": fmt}) == []
    assert validate_json_schema(bad, {"type": "string", "format": fmt})
    assert validate_json_schema(bad, {"type": "string", "format": "hostname-ish"}) == []


def test_a_raw_schema_tool_is_not_run_with_arguments_its_schema_rejects() -> None:
    ran: list[dict[str, Any]] = []

    class Raw(Tool):
        """Raw-schema tool."""

        parameters: ClassVar[dict[str, Any]] = CONSTRAINED

        def execute(self, **kwargs: Any) -> str:
            ran.append(kwargs)
            return "ran"

    (bad,) = _run(Raw, calls=[("raw", BAD)])
    assert not ran and bad.startswith("Error: invalid arguments for raw: code: does not match")
    assert _run(Raw, calls=[("raw", GOOD)]) == ["ran"] and ran == [GOOD]


def test_a_structured_answer_is_checked_against_the_constraints() -> None:
    provider = ScriptedProvider([reply(json.dumps(BAD)), reply(json.dumps(BAD))])
    with pytest.raises(OutputValidationError) as info:
        Chat(provider=provider).ask("q", output=CONSTRAINED)
    assert info.value.errors == BAD_PROBLEMS
    provider = ScriptedProvider([reply(json.dumps(GOOD))])
    assert Chat(provider=provider).ask("q", output=CONSTRAINED).parsed == GOOD  # type: ignore[union-attr]


# -- 7. problems inside unions -------------------------------------------------------------


class Address(pydantic.BaseModel):
    street: str
    zip: int


@tool
def place(alt: Optional[Address] = None, many: list[Address] | None = None) -> str:  # noqa: UP045
    """Place an order."""
    return "ok"


def test_problems_inside_an_optional_are_named() -> None:
    with pytest.raises(SchemaValidationError) as info:
        place.validate_arguments({"alt": {"street": "a", "zip": "x"}, "many": [{"street": "a"}]})
    assert str(info.value) == "alt.zip: expected integer, got str; many[0].zip: Field required"
    with pytest.raises(SchemaValidationError, match="alt: matches none of the allowed shapes"):
        place.validate_arguments({"alt": 3})  # no shape of its type: nothing more to say
    two_objects = {"anyOf": [{"type": "object", "required": ["a"]}, {"required": ["b"]}]}
    assert validate_json_schema({}, two_objects) == [
        "(arguments): matches none of the allowed shapes"
    ]


# -- 8. tool dicts for complete_with_tools -------------------------------------------------
