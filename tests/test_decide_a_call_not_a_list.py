"""``approve``/``deny``/``get_call`` take one call (a ``ToolCall`` or its id): a list of
calls, ``None`` or a number is a ``TypeError`` saying so, not ``unhashable type: 'list'``
nor "no tool call None in this chat"; nothing is decided."""

from __future__ import annotations

import pytest

from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order."""
    return "refunded"


def _waiting() -> Chat:
    llm = ScriptedProvider([call_tools(("refund", {"order_id": 1}, "r1")), reply("done")])
    chat = Chat(provider=llm).with_tools(refund)
    chat.ask("refund order 1")
    assert [c.id for c in chat.pending_approvals] == ["r1"]
    return chat


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_a_list_of_calls_is_refused_saying_to_decide_each(verb: str) -> None:
    chat = _waiting()
    with pytest.raises(TypeError, match=r"ToolCall or its id, got list \(decide each call"):
        getattr(chat, verb)(chat.pending_approvals)
    with pytest.raises(TypeError, match="ToolCall or its id, got tuple"):
        getattr(chat, verb)(tuple(chat.pending_approvals))
    assert [c.id for c in chat.pending_approvals] == ["r1"]  # nothing decided


@pytest.mark.parametrize("value", [None, 3, {"id": "r1"}])
def test_other_values_are_refused(value: object) -> None:
    chat = _waiting()
    with pytest.raises(TypeError, match="ToolCall or its id"):
        chat.approve(value)  # type: ignore[arg-type]
    assert chat.get_call("r1").decision is None
