"""Two tools of one name in one ``with_tools`` call: one tool, or refused.

``with_tools(tool(requires_approval=True)(delete_rows), tool(delete_rows))`` kept the
ungated copy (the two were taken as one because their function matched) and ran its calls
without a decision; ``with_tools(Search("products"), Search("orders"))`` dropped the first
instance. Tools are one only when they are equal in everything (function or instance,
gate, options); any other pair is refused, naming both and what differs.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, Tool, ToolDefinitionError, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[str] = []


def delete_rows(table: str) -> str:
    """Delete every row of a table."""
    RAN.append(table)
    return "deleted"


def allow_small(call: Any) -> bool | None:
    return call.arguments.get("table") == "tmp" or None


class Search(Tool):
    """Search an index."""

    def __init__(self, index: str = "products") -> None:
        self.index = index

    def execute(self, q: str) -> str:
        return f"{self.index}: {q}"


@pytest.mark.parametrize("order", ["gated first", "gated last"])
def test_a_gated_and_an_ungated_copy_of_one_function_are_refused(order: str) -> None:
    gated, plain = tool(requires_approval=True)(delete_rows), tool(delete_rows)
    pair = (gated, plain) if order == "gated first" else (plain, gated)
    provider = ScriptedProvider([call_tools(("delete_rows", {"table": "users"})), reply("ok")])
    chat = Chat(provider=provider)
    RAN.clear()
    with pytest.raises(ToolDefinitionError) as info:
        chat.with_tools(*pair)
    message = str(info.value)
    assert "two different tools are named 'delete_rows'" in message
    assert "<tool delete_rows, requires_approval>" in message and "<tool delete_rows>" in message
    assert "requires_approval differs" in message
    assert chat.tools == ()  # nothing added
    chat.ask("clean up")  # the model's call finds no tool: it never runs
    assert RAN == [] and chat.tool_calls[0].status != "ok"


def test_two_configured_instances_of_one_class_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match=r"named 'search'.*their index differs"):
        Chat(model="demo").with_tools(Search("products"), Search("orders"))


def test_equal_tools_given_twice_are_one_tool() -> None:
    chat = Chat(model="demo")
    fn_tool = tool(requires_approval=allow_small, timeout=3)(delete_rows)
    chat.with_tools(
        fn_tool,
        fn_tool,
        tool(requires_approval=allow_small, timeout=3)(delete_rows),  # equal options
        Search,
        Search(),  # the class's default instance
        Search("products"),
    )
    assert [t.name for t in chat.tools] == ["delete_rows", "search"]
    assert chat.tools[0].resolver is allow_small and chat.tools[0].timeout == 3
    # a later call replaces a tool of the same name, as documented
    chat.with_tools(Search("orders"))
    assert [getattr(t, "index", None) for t in chat.tools] == [None, "orders"]


OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "requires_approval": st.sampled_from([True, False, allow_small]),
        "timeout": st.sampled_from([1.0, 2.0]),
        "idempotent": st.booleans(),
        "description": st.sampled_from(["Drop rows.", "Delete every row of a table."]),
        "external": st.booleans(),
    },
)


def _effective(options: dict[str, Any]) -> dict[str, Any]:
    """The options as the tool keeps them (``False`` is no gate, the docstring's summary the
    default description)."""
    return {
        "requires_approval": options.get("requires_approval", False),
        "timeout": options.get("timeout"),
        "idempotent": options.get("idempotent", False),
        "description": options.get("description", "Delete every row of a table."),
        "external": options.get("external", False),
    }


@settings(max_examples=150, deadline=None)
@given(OPTIONS, OPTIONS)
def test_two_tools_over_one_function_are_one_tool_exactly_when_their_options_are_equal(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    a, b = tool(**first)(delete_rows), tool(**second)(delete_rows)
    chat = Chat(model="demo")
    if _effective(first) == _effective(second):
        chat.with_tools(a, b)
        assert len(chat.tools) == 1 and chat.tools[0] in (a, b)
    else:
        with pytest.raises(ToolDefinitionError, match="two different tools are named"):
            chat.with_tools(a, b)
        assert chat.tools == ()
