"""What a tool's declaration makes of a Python signature, and what it refuses at once.

A ``pydantic.Field`` as a default, a ``None`` default, a default JSON cannot carry
(``math.inf``), tool and parameter names the providers refuse, types pydantic
cannot describe, and (Python 3.11) TypedDict requiredness and TypedDicts inside
dataclasses under ``from __future__ import annotations``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from typing import Annotated, Any, NotRequired, Optional, Required, TypedDict

import pydantic
import pytest

from nbagent import Chat, Tool, ToolDefinitionError, tool
from nbagent._schema import NAME_RE, check_property_keys, property_key_ok
from nbagent.testing import ScriptedProvider, call_tools, reply

# -- a pydantic Field as a default --------------------------------------------------------


def _search(
    q: str = pydantic.Field(description="What to look for"),
    limit: int = pydantic.Field(5, ge=1, le=50),
    tags: list[str] = pydantic.Field(default_factory=list),  # noqa: B008
) -> str:
    """Search.

    Args:
        limit: How many results.
    """
    return f"q={q!r} limit={limit!r} tags={tags!r}"


def test_a_field_default_is_the_parameter_field() -> None:
    search = tool(_search)
    props = search.input_schema["properties"]
    assert search.input_schema["required"] == ["q"]
    assert props["q"] == {"description": "What to look for", "type": "string"}
    assert props["limit"] == {
        "default": 5,
        "description": "How many results.",  # the docstring's: the Field gives none
        "maximum": 50,
        "minimum": 1,
        "type": "integer",
    }
    assert search.validate_arguments({"q": "x"}) == {"q": "x", "limit": 5, "tags": []}
    with pytest.raises(Exception, match="limit: must be <= 50"):
        search.validate_arguments({"q": "x", "limit": 500})
    with pytest.raises(Exception, match="q: Field required"):
        search.validate_arguments({})


def test_a_field_default_runs_the_tool_with_its_value() -> None:
    search = tool(_search)
    provider = ScriptedProvider([call_tools(("_search", {"q": "cats"})), reply("done")])
    chat = Chat(provider=provider).with_tools(search)
    chat.ask("go")
    assert chat.log["result_preview"].tolist()[0] == "q='cats' limit=5 tags=[]"


def test_a_field_default_that_does_not_fit_its_bounds_is_refused() -> None:
    def f(n: int = pydantic.Field(0, ge=1)) -> str:
        """f"""
        return ""

    with pytest.raises(ToolDefinitionError, match="the default of 'n'"):
        tool(f)


def test_a_field_description_wins_over_the_docstring() -> None:
    def f(n: int = pydantic.Field(1, description="from Field")) -> str:
        """f

        Args:
            n: from the docstring
        """
        return ""

    assert tool(f).input_schema["properties"]["n"]["description"] == "from Field"


# -- a None default -----------------------------------------------------------------------


def test_a_none_default_makes_the_type_nullable() -> None:
    @tool
    def search(
        q: str,
        limit: int = None,  # type: ignore[assignment]  # noqa: RUF013
        tags: list[str] = None,  # type: ignore[assignment]  # noqa: RUF013
        low: Annotated[int, pydantic.Field(ge=1)] = None,  # type: ignore[assignment]  # noqa: RUF013
        given: Optional[int] = None,  # noqa: UP045
    ) -> str:
        """Search."""
        return f"{q} {limit} {tags} {low}"

    props = search.input_schema["properties"]
    assert props["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["tags"]["anyOf"][1] == {"type": "null"}
    assert props["low"]["anyOf"][0] == {"minimum": 1, "type": "integer"}
    assert props["given"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    got = search.validate_arguments({"q": "x", "limit": None, "tags": None, "low": None})
    assert got == {"q": "x", "limit": None, "tags": None, "low": None, "given": None}
    assert search.validate_arguments({"q": "x", "limit": 3})["limit"] == 3
    with pytest.raises(Exception, match="low: must be >= 1"):
        search.validate_arguments({"q": "x", "low": 0})


def test_a_tool_class_none_default_is_nullable_too() -> None:
    class Lookup(Tool):
        """Look up."""

        def execute(self, key: str, limit: int = None) -> str:  # type: ignore[assignment]  # noqa: RUF013
            return f"{key} {limit}"

    assert Lookup().validate_arguments({"key": "k", "limit": None}) == {"key": "k", "limit": None}


# -- defaults JSON cannot carry -------------------------------------------------------------


class _Filter(pydantic.BaseModel):
    max_price: float = math.inf


def _inf(query: str, max_price: float = math.inf) -> str:
    """Search products up to a price."""
    return ""


def _nan(ratio: float = float("nan")) -> str:
    """Ratio."""
    return ""


def _nested(f: _Filter) -> str:
    """Find."""
    return ""


@pytest.mark.parametrize(
    ("fn", "where"),
    [
        (_inf, "properties.max_price.default"),
        (_nan, "properties.ratio.default"),
        (_nested, "$defs._Filter.properties.max_price.default"),
    ],
)
def test_a_non_finite_default_is_refused_at_declaration(fn: Any, where: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        tool(fn)
    assert f"not plain JSON at {where}" in str(info.value)
    assert "math.inf or nan" in str(info.value)


def test_every_declared_schema_is_strict_json() -> None:
    @tool
    def fine(x: float = 1.5, y: float = -0.0) -> str:
        """Fine."""
        return ""

    json.dumps(fine.input_schema, allow_nan=False)


# -- names --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["lookup\n", "a" * 64 + "\n", "a" * 65, "look up", "a.b", ""])
def test_a_tool_name_providers_refuse_is_refused(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        tool(name=name)(lambda: "")
    assert not NAME_RE.match(name)


def test_a_tool_class_name_with_a_newline_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):

        class Odd(Tool):
            """Odd."""

            name = "odd\n"

            def execute(self) -> str:
                return "x"


def test_a_parameter_name_anthropic_refuses_is_refused() -> None:
    def preis(größe: int) -> str:
        """Unicode parameter name."""
        return ""

    with pytest.raises(ToolDefinitionError, match="parameter name 'größe'"):
        tool(preis)
    long = "p" * 65
    ns: dict[str, Any] = {}
    exec(f"def longp({long}: int = 0) -> str:\n    return ''", ns)
    with pytest.raises(ToolDefinitionError, match="1 to 64 characters from"):
        tool(ns["longp"])
    ok = "p" * 64
    exec(f"def okp({ok}: int = 0) -> str:\n    return ''", ns)
    assert list(tool(ns["okp"]).input_schema["properties"]) == [ok]


@pytest.mark.parametrize("key", ["größe", "$top", "filter[id]", "a b", "x" * 65, "", "a\n"])
def test_property_keys_anthropic_refuses(key: str) -> None:
    assert not property_key_ok(key)
    with pytest.raises(ToolDefinitionError, match="refused by Anthropic"):
        check_property_keys("Graph.parameters", {"type": "object", "properties": {key: {}}})


@pytest.mark.parametrize("key", ["a", "filter.id", "top-n", "x_1", "x" * 64])
def test_property_keys_anthropic_takes(key: str) -> None:
    assert property_key_ok(key)
    check_property_keys("Graph.parameters", {"type": "object", "properties": {key: {}}})


# -- types pydantic cannot describe ---------------------------------------------------------


class _Point:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y


def test_an_unsupported_type_is_named_with_what_to_use_instead() -> None:
    def place(label: str, p: _Point) -> str:
        """Place."""
        return ""

    def call(cb: Callable[[int], int]) -> str:
        """Call."""
        return ""

    for fn, name, shown in [(place, "p", "_Point"), (call, "cb", "Callable[[int], int]")]:
        with pytest.raises(ToolDefinitionError) as info:
            tool(fn)
        message = str(info.value)
        assert f"parameter {name!r} has type {shown}" in message
        assert "a pydantic model, a dataclass or a TypedDict" in message
        assert "arbitrary_types_allowed" not in message


def test_a_local_class_under_string_annotations_says_to_move_it() -> None:
    def make() -> Any:
        class Local(pydantic.BaseModel):
            a: int

        def uses_local(x: Local) -> str:
            """Local."""
            return ""

        return uses_local

    with pytest.raises(ToolDefinitionError, match="define it at module level"):
        tool(make())


# -- TypedDicts (Python 3.11: typing.TypedDict is rebuilt for pydantic) ------------------


class _Booking(TypedDict, total=False):
    note: str
    guest: Required[str]


class _Line(TypedDict):
    sku: str
    qty: NotRequired[int]


@dataclasses.dataclass
class _Holder:
    inner: _Line
    count: int = 1


def test_required_in_a_partial_typeddict_is_kept_under_string_annotations() -> None:
    def book(b: _Booking) -> str:
        """Book."""
        return b["guest"]

    book_tool = tool(book)
    assert book_tool.input_schema["$defs"]["_Booking"]["required"] == ["guest"]
    with pytest.raises(Exception, match=r"b\.guest: Field required"):
        book_tool.validate_arguments({"b": {"note": "x"}})
    assert book_tool.validate_arguments({"b": {"guest": "Ann"}}) == {"b": {"guest": "Ann"}}


def test_not_required_in_a_typeddict_is_kept() -> None:
    def order(line: _Line) -> str:
        """Order."""
        return ""

    schema = tool(order).input_schema["$defs"]["_Line"]
    assert schema["required"] == ["sku"]


def test_a_typeddict_inside_a_dataclass_is_accepted_and_built_as_the_users_class() -> None:
    def hold(h: _Holder) -> str:
        """Hold."""
        return ""

    hold_tool = tool(hold)
    defs = hold_tool.input_schema["$defs"]
    assert defs["_Line"]["required"] == ["sku"]
    assert defs["_Holder"]["properties"]["count"]["default"] == 1
    got = hold_tool.validate_arguments({"h": {"inner": {"sku": "a"}}})["h"]
    assert isinstance(got, _Holder)
    assert (got.inner, got.count) == ({"sku": "a"}, 1)
    with pytest.raises(Exception, match=r"h.inner.sku: Field required"):
        hold_tool.validate_arguments({"h": {"inner": {"qty": 1}}})
