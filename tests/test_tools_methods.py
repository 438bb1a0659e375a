"""Tools made from methods, and tools made from tools.

A method tool read from an instance and renamed (``tool(name=...)(south.stock)``, as the
refusal of two instances' tools of one name advises) or wrapped in a ``functools.partial``
ran with ``self`` among the model's parameters, so every call failed "self: Field
required"; a renamed tool lost its inner tool's gate; ``@classmethod`` over ``@tool``
asked the model for ``cls``; a ``Tool`` class's ``staticmethod`` ``execute`` lost its
first parameter and a ``classmethod`` one was refused.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import pytest

from nbagent import Chat, Tool, ToolDefinitionError, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


class Inventory:
    base = 10

    def __init__(self, store: str) -> None:
        self.store = store

    @tool
    def stock(self, sku: str, region: str = "eu") -> str:
        """Units in stock.

        Args:
            sku: The product.
        """
        return f"{sku}@{self.store}/{region}"

    @tool(requires_approval=True, timeout=5)
    def wipe(self, sku: str) -> str:
        """Wipe a product's stock."""
        return f"wiped {sku}@{self.store}"

    @classmethod
    @tool
    def offset(cls, x: int) -> int:
        """The class's base plus x."""
        return cls.base + x


def _run(t: Any, arguments: dict[str, Any]) -> tuple[str, Any]:
    provider = ScriptedProvider([call_tools((t.name, arguments)), reply("done")])
    chat = Chat(provider=provider).with_tools(t)
    chat.ask("go")
    [call] = chat.tool_calls
    return call.status, call.result.content if call.result else None


def _properties(t: Any) -> tuple[list[str], list[str]]:
    return list(t.input_schema["properties"]), t.input_schema["required"]


@pytest.mark.parametrize(
    ("make", "name", "expected"),
    [
        (lambda s: tool(name="south_stock")(s.stock), "south_stock", "A1@south/eu"),
        (lambda s: tool(functools.partial(s.stock, region="us")), "stock", "A1@south/us"),
        (
            lambda s: tool(name="us")(functools.partial(s.stock, region="us")),
            "us",
            "A1@south/us",
        ),
    ],
    ids=["renamed", "partial", "renamed-partial"],
)
def test_a_tool_made_from_a_bound_method_tool_runs_without_self(
    make: Any, name: str, expected: str
) -> None:
    t = make(Inventory("south"))
    assert t.name == name
    assert "self" not in t.input_schema["properties"]
    assert t.input_schema["required"] == ["sku"]
    assert t.input_schema["properties"]["sku"]["description"] == "The product."
    assert _run(t, {"sku": "A1"}) == ("ok", expected)


def test_two_instances_renamed_as_the_refusal_advises_both_run_on_their_own_instance() -> None:
    north, south = Inventory("north"), Inventory("south")
    with pytest.raises(ToolDefinitionError, match=r"named 'stock'.*two different instances"):
        Chat(model="demo").with_tools(north.stock, south.stock)
    provider = ScriptedProvider(
        [call_tools(("stock", {"sku": "A"}), ("south_stock", {"sku": "B"})), reply("done")]
    )
    chat = Chat(provider=provider).with_tools(north.stock, tool(name="south_stock")(south.stock))
    chat.ask("go")
    assert [(c.status, c.result.content) for c in chat.tool_calls if c.result] == [
        ("ok", "A@north/eu"),
        ("ok", "B@south/eu"),
    ]


def test_a_renamed_tool_keeps_its_inner_tools_gate_and_options() -> None:
    """Renaming a gated method tool must not make an ungated copy: a denied call never runs."""
    south = Inventory("south")
    for renamed in (
        tool(name="south_wipe")(south.wipe),
        tool(name="south_wipe")(functools.partial(south.wipe)),
    ):
        assert renamed.requires_approval is True and renamed.timeout == 5
        assert _run(renamed, {"sku": "A1"})[0] == "awaiting_approval"
    # what the outer tool gives again wins
    assert tool(name="w", requires_approval=False)(south.wipe).requires_approval is False
    assert tool(name="w", timeout=9)(south.wipe).timeout == 9
    # a resolver given as approval= stays the resolver
    ruled = tool(name="r", approval=lambda call: None)(lambda q: q)
    assert tool(name="ruled")(ruled).resolver is ruled.approval
    # a tool of a plain tool keeps its name and description unless given
    gated = tool(name="lookup", description="Find it.", requires_approval=True)(lambda q: q)
    again = tool(gated)
    assert (again.name, again.description, again.requires_approval) == ("lookup", "Find it.", True)


def test_a_renamed_method_tool_read_from_the_class_is_refused_as_the_method_is() -> None:
    with pytest.raises(ToolDefinitionError, match="read from an instance"):
        Chat(model="demo").with_tools(tool(name="any_stock")(Inventory.stock))


def test_classmethod_over_tool_is_bound_to_the_class() -> None:
    for t in (Inventory("x").offset, Inventory.offset):
        assert _properties(t) == (["x"], ["x"])
        assert _run(t, {"x": 3}) == ("ok", "13")


def test_classmethod_over_tool_where_classmethod_does_not_bind_the_tool() -> None:
    """Python 3.13 dropped classmethod's chaining: reading gives a bound method over the tool,
    which must still be the tool (its gate with it), bound to the class."""
    gated = tool(requires_approval=True)(Inventory.offset.fn.__func__)
    method = types.MethodType(gated, Inventory)
    provider = ScriptedProvider([call_tools(("offset", {"x": 1})), reply("done")])
    chat = Chat(provider=provider).with_tools(method)
    [t] = chat.tools
    assert t.requires_approval is True and _properties(t) == (["x"], ["x"])
    chat.ask("go")
    assert chat.tool_calls[0].status == "awaiting_approval"


def test_a_cls_parameter_outside_a_class_body_is_a_parameter() -> None:
    @tool
    def classify(cls: str) -> str:
        """Classify by a class label."""
        return cls

    assert _properties(classify) == (["cls"], ["cls"])
    assert _run(classify, {"cls": "a"}) == ("ok", "a")


class Add(Tool):
    """Add two numbers."""

    @staticmethod
    def execute(a: int, b: int) -> int:
        return a + b


class Mul(Tool):
    """Multiply two numbers."""

    factor = 1

    @classmethod
    def execute(cls, a: int, b: int) -> int:
        return a * b * cls.factor


class Mul2(Mul):
    """Multiply two numbers, twice.

    Args:
        a: The first.
    """

    factor = 2


@pytest.mark.parametrize(("cls", "expected"), [(Add, "5"), (Mul, "6"), (Mul2, "12")])
def test_static_and_class_method_execute_keep_every_parameter(cls: Any, expected: str) -> None:
    assert _properties(cls()) == (["a", "b"], ["a", "b"])
    assert _run(cls, {"a": 2, "b": 3}) == ("ok", expected)


def test_an_inherited_static_execute_described_again_keeps_every_parameter() -> None:
    class Add2(Add):
        """Add two numbers.

        Args:
            a: The first.
        """

    assert _properties(Add2()) == (["a", "b"], ["a", "b"])
    assert Add2().input_schema["properties"]["a"]["description"] == "The first."
    assert Mul2().input_schema["properties"]["a"]["description"] == "The first."
