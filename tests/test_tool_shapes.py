"""The shapes a tool can take and what the model is shown and gets for each.

A Tool class's own docstring ``Args:``, ``Annotated`` descriptions, ``@tool`` on a
method, ``functools.partial`` and callable objects, generators and coroutines,
the raw-JSON-Schema validator (tools' arguments and ``output=`` answers), the
problems reported inside unions, tool dicts for ``complete_with_tools``, results
holding NaN, and defaults that do not match their type.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Annotated, Any, ClassVar, Optional

import pydantic
import pytest

from nbagent import (
    Chat,
    ChatMessage,
    OutputValidationError,
    Tool,
    ToolDefinitionError,
    current_tool_call,
    tool,
)
from nbagent._schema import SchemaValidationError, validate_json_schema
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, ScriptedProvider, Turn, call_tools, reply


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


class SearchTool(Tool):
    """Searches the knowledge base.

    Args:
        query: Search query
        limit: How many results
    """

    def execute(self, query: str, limit: int = 5) -> str:
        """Run the search.

        Args:
            limit: Most results to return
        """
        return f"{query}:{limit}"


def test_class_docstring_args_describe_the_parameters() -> None:
    spec = SearchTool().spec
    props = spec.input_schema["properties"]
    assert props["query"]["description"] == "Search query"
    assert props["limit"]["description"] == "Most results to return"  # execute's wins
    assert spec.description == "Searches the knowledge base."  # not the Args block


def test_class_docstring_args_reach_the_wire() -> None:
    provider = ScriptedProvider([reply("ok")])
    Chat(provider=provider).with_tools(SearchTool).ask("q")
    (sent,) = provider.requests[0].tools
    assert sent.input_schema["properties"]["query"]["description"] == "Search query"
    assert "Args" not in sent.description and "query" not in sent.description


def test_a_subclass_args_describe_an_inherited_execute() -> None:
    class ScopedSearch(SearchTool):
        """Searches one scope.

        Args:
            query: A query in the scope's syntax
        """

    props = ScopedSearch().input_schema["properties"]
    assert props["query"]["description"] == "A query in the scope's syntax"
    assert props["limit"]["description"] == "Most results to return"
    assert SearchTool().input_schema["properties"]["query"]["description"] == "Search query"


# -- 2. Annotated descriptions -------------------------------------------------------------


def test_annotated_field_description_is_kept() -> None:
    @tool
    def weather(
        city: Annotated[str, pydantic.Field(description="City name", min_length=2)],
        days: Annotated[int, pydantic.Field(ge=1)] = 1,
    ) -> str:
        """Forecast.

        Args:
            days: Days ahead
        """
        return city

    props = weather.input_schema["properties"]
    assert props["city"] == {"description": "City name", "minLength": 2, "type": "string"}
    assert props["days"]["description"] == "Days ahead" and props["days"]["minimum"] == 1


def test_annotated_description_wins_over_the_docstring() -> None:
    @tool
    def weather(city: Annotated[str, pydantic.Field(description="City name")]) -> str:
        """Forecast.

        Args:
            city: the city
        """
        return city

    assert weather.input_schema["properties"]["city"]["description"] == "City name"


# -- 3. @tool on a method ------------------------------------------------------------------


class Service:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    @tool
    def lookup(self, x: int) -> str:
        """Look up x."""
        return f"{self.prefix}:{x}"

    @tool(name="find", requires_approval=True)
    def search(self, q: str, tool_call: Any = None) -> str:
        """Search."""
        return f"{self.prefix}:{q}:{tool_call.id if tool_call else None}"


def test_a_method_tool_has_no_self_in_its_schema() -> None:
    assert Service.lookup.input_schema["properties"] == {"x": {"type": "integer"}}
    assert Service("a").lookup.input_schema["required"] == ["x"]


def test_a_method_tool_read_from_an_instance_runs_with_it() -> None:
    a, b = Service("a"), Service("b")
    assert a.lookup(3) == "a:3" and b.lookup(4) == "b:4"
    assert a.search.name == "find" and a.search.requires_approval is True
    assert _run(a.lookup, calls=[("lookup", {"x": 3})]) == ["a:3"]


def test_a_method_tool_read_from_the_class_is_refused_clearly() -> None:
    with pytest.raises(ToolDefinitionError, match=r"method of Service.*instance\.lookup"):
        Chat(model="demo").with_tools(Service.lookup)


# -- 4. functools.partial and callable objects ---------------------------------------------


def _add(a: int, b: int, scale: int = 1) -> int:
    """Add two numbers.

    Args:
        a: First.
        b: Second.
    """
    return (a + b) * scale


def test_a_partial_leaves_its_bound_arguments_out() -> None:
    add_two = tool(name="add_two")(functools.partial(_add, b=2))
    assert add_two.input_schema["properties"] == {
        "a": {"description": "First.", "type": "integer"},
        "scale": {"default": 1, "type": "integer"},
    }
    assert add_two.description == "Add two numbers."
    with pytest.raises(SchemaValidationError, match="b: unexpected argument"):
        add_two.validate_arguments({"a": 1, "b": 5})
    assert _run(add_two, calls=[("add_two", {"a": 1, "scale": 3})]) == ["9"]
    positional = tool(functools.partial(_add, 10))
    assert positional.name == "_add" and list(positional.input_schema["properties"]) == [
        "b",
        "scale",
    ]


class Multiplier:
    """Multiplies by a factor.

    Args:
        y: The number to multiply.
    """

    def __init__(self, factor: int) -> None:
        self.factor = factor
        self.name = "not the tool's name"

    def __call__(self, y: int) -> int:
        return y * self.factor


class AsyncEcho:
    async def __call__(self, text: str) -> str:
        """Echo text back."""
        await asyncio.sleep(0)
        return f"{text}:{current_tool_call().name}"  # type: ignore[union-attr]


def test_a_callable_object_is_described_by_its_call() -> None:
    t = tool(Multiplier(3))
    assert t.name == "multiplier" and t.description == "Multiplies by a factor."
    assert t.input_schema["properties"] == {
        "y": {"description": "The number to multiply.", "type": "integer"}
    }
    assert _run(t, calls=[("multiplier", {"y": 4})]) == ["12"]
    echo = tool(name="echo")(AsyncEcho())
    assert echo.is_async and echo.description == "Echo text back."
    assert _run(echo, calls=[("echo", {"text": "hi"})]) == ["hi:echo"]


def test_a_tool_made_from_a_tool_has_its_own_name() -> None:
    renamed = tool(name="sum_two")(tool(_add))
    assert renamed.name == "sum_two" and renamed.description == "Add two numbers."
    assert list(renamed.input_schema["properties"]) == ["a", "b", "scale"]
    assert renamed(1, 2) == 3


# -- 5. generators and coroutines ----------------------------------------------------------


def test_a_generator_is_refused_when_the_tool_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match=r"'count_up' is a generator.*return a list"):

        @tool
        def count_up(n: int) -> Any:
            """Count."""
            yield from range(n)

    with pytest.raises(ToolDefinitionError, match="generator"):

        @tool
        async def agen(n: int) -> Any:
            """Count."""
            yield n

    with pytest.raises(ToolDefinitionError, match=r"Counter\.execute is a generator"):

        class Counter(Tool):
            """Count."""

            def execute(self, n: int) -> Any:
                yield n


class CoroReturning(Tool):
    """A sync execute returning a coroutine."""

    def execute(self, x: int) -> Any:
        async def inner() -> str:
            await asyncio.sleep(0)
            return f"awaited {x} in {current_tool_call().name}"  # type: ignore[union-attr]

        return inner()


@tool
async def other() -> str:
    """Async."""
    return "other"


@pytest.mark.parametrize("concurrency", [False, "threads", "async"])
def test_a_coroutine_returned_by_a_sync_tool_is_awaited(concurrency: Any) -> None:
    calls = [("coro_returning", {"x": 1}), ("other", {})]
    results = _run(CoroReturning, other, calls=calls, concurrency=concurrency)
    assert results == ["awaited 1 in coro_returning", "other"]


def test_a_coroutine_returned_by_a_sync_tool_is_awaited_under_a_running_loop() -> None:
    provider = ScriptedProvider([call_tools(("coro_returning", {"x": 2})), reply("done")])

    async def main() -> None:
        await Chat(provider=provider).with_tools(CoroReturning).ask_async("go")

    asyncio.run(main())
    assert _results(provider) == ["awaited 2 in coro_returning"]


def test_a_returned_generator_is_an_error_result() -> None:
    @tool
    def names() -> Any:
        """Names."""
        return (n for n in ["a", "b"])

    (result,) = _run(names, calls=[("names", {})])
    assert result.startswith("Error: TypeError: tool 'names' returned a generator")


# -- 6. the raw JSON Schema validator ------------------------------------------------------

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
    assert str(info.value) == "alt.zip: expected integer, got string; many[0].zip: Field required"
    with pytest.raises(SchemaValidationError, match="alt: matches none of the allowed shapes"):
        place.validate_arguments({"alt": 3})  # no shape of its type: nothing more to say
    two_objects = {"anyOf": [{"type": "object", "required": ["a"]}, {"required": ["b"]}]}
    assert validate_json_schema({}, two_objects) == [
        "(arguments): matches none of the allowed shapes"
    ]


# -- 8. tool dicts for complete_with_tools -------------------------------------------------

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@pytest.mark.parametrize(
    "definition",
    [
        {"name": "get_weather", "description": "d", "parameters": WEATHER_SCHEMA},
        {"name": "get_weather", "description": "d", "inputSchema": WEATHER_SCHEMA},
        {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}},
    ],
)
def test_a_tool_dict_may_spell_its_schema_as_openai_or_mcp_do(definition: Any) -> None:
    with FakeLLMServer([Turn(text="31C")]) as server:
        llm = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-test")
        llm.complete_with_tools(
            messages=[ChatMessage(role="user", content="Weather in Lagos?")], tools=[definition]
        )
        (sent,) = server.requests[0].body["tools"]
    assert sent["function"]["parameters"] == WEATHER_SCHEMA


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        (
            {"name": "get weather", "input_schema": WEATHER_SCHEMA},
            "tool 'get weather': invalid name",
        ),
        (
            {"name": "w", "input_schema": {"type": "array"}},
            "'input_schema' must describe an object",
        ),
        ({"name": "w", "parameters": {"properties": {}}}, "'parameters' must describe an object"),
        ({"name": "w", "input_schema": "{}"}, "'input_schema' must be a JSON Schema dict"),
        ({"name": "w", "description": 3}, "'description' must be a string"),
        (
            {"name": "w", "input_schema": WEATHER_SCHEMA, "parameters": {"type": "object"}},
            "given twice",
        ),
    ],
)
def test_a_bad_tool_dict_is_refused_before_anything_is_sent(definition: Any, message: str) -> None:
    provider = ScriptedProvider([reply("never")])
    with pytest.raises(TypeError, match=message):
        provider.complete_with_tools(
            messages=[ChatMessage(role="user", content="x")], tools=[definition]
        )
    assert provider.requests == []


# -- 9. results holding NaN, defaults that do not fit ---------------------------------------


def test_a_result_holding_nan_or_infinity_is_valid_json() -> None:
    @tool
    def stats() -> dict[str, Any]:
        """Stats."""
        return {"mean": float("nan"), "max": float("inf"), "rows": [1.5, float("-inf")]}

    (result,) = _run(stats, calls=[("stats", {})])
    assert json.loads(result) == {"mean": None, "max": "Infinity", "rows": [1.5, "-Infinity"]}


def test_a_default_that_does_not_fit_its_type_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match=r"default of 'x' \('many'\).*expected integer"):

        @tool
        def bad(x: int = "many") -> str:  # type: ignore[assignment]
            """Bad."""
            return "x"

    @tool
    def fine(x: int = None, when: str = "now") -> str:  # type: ignore[assignment]  # noqa: RUF013
        """A None default means 'not given', on any type."""
        return "x"

    assert fine.input_schema["properties"]["x"]["default"] is None
