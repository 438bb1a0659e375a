"""Tools: schemas from hints and docstrings, names, injection, validation, results."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, ClassVar, Literal, Optional, TypedDict

import pydantic
import pytest

from nbagent import Chat, Tool, ToolCall, ToolDefinitionError, tool
from nbagent._result_text import to_content
from nbagent._schema import SchemaValidationError, parse_docstring, validate_json_schema
from nbagent.mcp import MCPTool


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(pydantic.BaseModel):
    street: str
    zip_code: str = pydantic.Field(description="Postal code")


class Item(TypedDict):
    sku: str
    qty: int


def test_schema_covers_the_common_types() -> None:
    @tool
    def everything(
        s: str,
        i: int,
        f: float,
        b: bool,
        lit: Literal["c", "f"],
        color: Color,
        maybe: Optional[int] = None,  # noqa: UP045 - the old spelling must work too
        tags: list[str] | None = None,
        meta: dict[str, int] | None = None,
        address: Address | None = None,
        items: list[Item] | None = None,
    ) -> None:
        """Do everything.

        Args:
            s: A string.
            i: An integer
                that wraps onto a second line.
            lit: A literal.
        """

    schema = everything.input_schema
    props = schema["properties"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["s", "i", "f", "b", "lit", "color"]
    assert props["s"] == {"type": "string", "description": "A string."}
    assert props["i"]["type"] == "integer"
    assert props["i"]["description"] == "An integer that wraps onto a second line."
    assert props["f"]["type"] == "number"
    assert props["b"]["type"] == "boolean"
    assert props["lit"]["enum"] == ["c", "f"]
    assert "title" not in props["s"]
    assert props["maybe"]["anyOf"][0] == {"type": "integer"}
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert props["meta"]["anyOf"][0]["additionalProperties"] == {"type": "integer"}
    assert "$defs" in schema and {"Address", "Color", "Item"} <= set(schema["$defs"])
    assert schema["$defs"]["Address"]["properties"]["zip_code"]["description"] == "Postal code"
    assert everything.description == "Do everything."


def test_validation_converts_nested_models_and_enums() -> None:
    seen: dict[str, Any] = {}

    @tool
    def ship(address: Address, color: Color, items: list[Item]) -> str:
        seen.update(address=address, color=color, items=items)
        return "ok"

    kwargs = ship.validate_arguments(
        {
            "address": {"street": "Main", "zip_code": "1"},
            "color": "red",
            "items": [{"sku": "a", "qty": 2}],
        }
    )
    ship.execute(**kwargs)
    assert isinstance(seen["address"], Address)
    assert seen["color"] is Color.RED
    assert seen["items"] == [{"sku": "a", "qty": 2}]


def test_validation_names_every_problem() -> None:
    @tool
    def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
        return city

    with pytest.raises(SchemaValidationError) as err:
        get_weather.validate_arguments({"unit": "kelvin", "extra": 1})
    text = str(err.value)
    assert "city: Field required" in text
    assert "unit:" in text and "'c' or 'f'" in text
    assert "extra: unexpected argument" in text


@pytest.mark.parametrize(
    "doc",
    [
        """Summary line.

        Args:
            city (str): The city.
            days: How many days.
        """,
        """Summary line.

        Parameters
        ----------
        city : str
            The city.
        days : int
            How many days.
        """,
        """Summary line.

        :param city: The city.
        :param int days: How many days.
        """,
    ],
    ids=["google", "numpy", "sphinx"],
)
def test_docstring_styles(doc: str) -> None:
    desc, params = parse_docstring(doc)
    assert desc == "Summary line."
    assert params == {"city": "The city.", "days": "How many days."}


@pytest.mark.parametrize("name", ["has space", "dotted.name", "", "x" * 65, "ünïcode"])
def test_bad_names_fail_at_declaration(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        tool(name=name)(lambda: None)


def test_bad_name_on_class_fails_at_declaration() -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):

        class Bad(Tool):
            name = "bad name"

            def execute(self) -> None: ...


def test_varargs_rejected() -> None:
    def f(*args: int) -> None: ...

    with pytest.raises(ToolDefinitionError, match=r"\*args"):
        tool(f)


def test_a_base_class_is_not_a_tool() -> None:
    """Before: ``with_tools(Tool)`` was taken as a tool named ``''``, which every provider
    refuses on the first request."""
    chat = Chat(model="demo", display=False)
    for base in (Tool, Tool(), MCPTool):
        with pytest.raises(ToolDefinitionError, match="is a base class, not a tool"):
            chat.with_tools(base)
    assert chat.tools == ()

    class Lookup(Tool):
        """Look an item up."""

        def execute(self, item: str) -> str:
            return item

    assert [t.name for t in chat.with_tools(Lookup).tools] == ["lookup"]


def test_tool_call_parameter_is_injected_and_hidden() -> None:
    @tool
    def whoami(x: int, tool_call: ToolCall | None = None) -> str:
        return f"{x}:{tool_call.id if tool_call else None}"

    assert list(whoami.input_schema["properties"]) == ["x"]
    call = ToolCall("c1", "whoami", {"x": 1})
    kwargs = whoami.bind(call, whoami.validate_arguments(call.arguments))
    assert whoami.execute(**kwargs) == "1:c1"


def test_tool_class_defaults_and_inheritance() -> None:
    class IssueRefund(Tool):
        """Issues a refund for an order.

        Args:
            order_id: The order.
        """

        requires_approval = True

        def execute(self, order_id: int) -> str:
            """Refund it.

            Args:
                order_id: The order.
            """
            return f"refunded {order_id}"

    class BigRefund(IssueRefund):
        """Refunds over 1000."""

    assert IssueRefund.name == "issue_refund"
    assert IssueRefund().spec.description == "Issues a refund for an order."
    assert IssueRefund().input_schema["properties"]["order_id"]["description"] == "The order."
    assert BigRefund.requires_approval is True
    assert BigRefund.name == "big_refund"
    assert BigRefund().input_schema["required"] == ["order_id"]


def test_decorated_function_stays_callable() -> None:
    @tool(requires_approval=True, timeout=3)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    assert add(2, 3) == 5
    assert add.requires_approval and add.timeout == 3
    assert add.__doc__ == "Add two numbers."


def test_raw_json_schema_tool() -> None:
    class Raw(Tool):
        """Raw schema."""

        parameters: ClassVar[dict[str, Any]] = {
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0}},
            "required": ["n"],
            "additionalProperties": False,
        }

        def execute(self, **kwargs: Any) -> Any:
            return kwargs

    r = Raw()
    assert r.validate_arguments({"n": 3}) == {"n": 3}
    with pytest.raises(SchemaValidationError, match="n: must be >= 0"):
        r.validate_arguments({"n": -1})
    with pytest.raises(SchemaValidationError, match="n: Field required"):
        r.validate_arguments({})


def test_json_schema_validator_subset() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "b": {"$ref": "#/$defs/B"},
            "c": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
        },
        "$defs": {"B": {"type": "string", "enum": ["x", "y"]}},
    }
    assert validate_json_schema({"a": None, "b": "x", "c": ["q"]}, schema) == []
    problems = validate_json_schema({"a": "s", "b": "z", "c": [1, "q"]}, schema)
    assert any(p.startswith("a:") for p in problems)
    assert any(p.startswith("b:") for p in problems)
    assert any(p.startswith("c[0]:") for p in problems)
    assert any("at most 1" in p for p in problems)
    assert validate_json_schema(True, {"type": "integer"})  # bools are not integers


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_results_serialise_sensibly() -> None:
    import pandas as pd

    assert to_content("plain") == "plain"
    assert to_content(None) == "null"
    assert to_content({"a": 1, "b": [1, 2]}) == '{"a":1,"b":[1,2]}'
    assert to_content(Point(1, 2)) == '{"x":1,"y":2}'
    assert to_content(Address(street="s", zip_code="z")) == '{"street":"s","zip_code":"z"}'
    assert to_content(Color.RED) == '"red"'
    small = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    assert "a" in to_content(small) and "not shown" not in to_content(small)
    big = pd.DataFrame({"n": range(100)})
    text = to_content(big, max_rows=10)
    assert "[90 of 100 rows not shown]" in text
    assert " 0" in text and "99" in text  # head and tail kept
    long = to_content("x" * 50, max_chars=10)
    assert long.startswith("x" * 10) and "truncated: 40 more characters" in long


def test_two_different_tools_of_one_name_in_one_call_are_refused() -> None:
    """The last silently replaced the first (two ``lookup`` functions from two modules)."""
    import nbagent
    from nbagent import Chat, Tool

    @nbagent.tool(name="lookup")
    def lookup_orders(order_id: int) -> str:
        """Look an order up."""
        return "order"

    @nbagent.tool(name="lookup")
    def lookup_customers(customer_id: int) -> str:
        """Look a customer up."""
        return "customer"

    class Refund(Tool):
        """Refund."""

        def execute(self, order_id: int) -> str:
            return "ok"

    chat = Chat(model="demo")
    with pytest.raises(nbagent.ToolDefinitionError, match="two different tools are named 'lookup'"):
        chat.with_tools(lookup_orders, lookup_customers)
    assert chat.tools == ()  # all or nothing

    class Svc:
        @nbagent.tool
        def stock(self, sku: str) -> int:
            """Stock of a product."""
            return 3

    svc, other = Svc(), Svc()
    chat.with_tools(svc.stock, svc.stock)  # one method of one instance, read twice
    with pytest.raises(nbagent.ToolDefinitionError, match="named 'stock'"):
        chat.with_tools(svc.stock, other.stock)  # two instances: two tools
    chat.with_tools(None)
    chat.with_tools(lookup_orders, lookup_orders, Refund, Refund())  # one tool each
    assert [t.name for t in chat.tools] == ["lookup", "refund"]
    chat.with_tools(lookup_customers)  # a later call replaces, as documented
    assert chat.tools[0].description == "Look a customer up."


def test_a_call_given_where_a_tool_is_named_says_to_pass_its_name() -> None:
    """``chat.always_allow(call)`` with the pending call at hand: the error says what to
    pass (the call's name), and shows nothing of the call's arguments."""
    from nbagent.testing import ScriptedProvider, reply

    call = ToolCall("c1", "connect", {"password": "hunter2-secret"})
    chat = Chat(provider=ScriptedProvider([reply("hi")]), display=False)
    with pytest.raises(ToolDefinitionError, match=r"pass 'connect' \(call\.name\)") as raised:
        chat.always_allow(call)
    assert "hunter2" not in str(raised.value)
    chat.always_allow(call.name)
    assert chat.always_allowed == ("connect",)
