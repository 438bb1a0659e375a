"""Agents for the tests of rows that wait on Ray (test_ray_waits.py): importable by name on
the workers (see conftest). Chats on the offline demo model, which calls the tool a prompt
names ("Sign the contract with ACME", "Refund order 5", "check the status of order 1001")."""

from __future__ import annotations

import time

from nbagent import Chat, Extension, LLMToolResponse, tool
from nbagent.providers import ModelRequest
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(external=True)
def sign_contract(party: str) -> str:
    """Have the contract signed by the legal team (answered from elsewhere).

    Args:
        party: Who signs.
    """


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    return f"refunded order {order_id}"


@tool
def order_status(order_id: int) -> str:
    """Look up an order's status (one second for an order from 1000 on).

    Args:
        order_id: The order number.
    """
    if order_id >= 1000:
        time.sleep(1)
    return "delivered" if order_id % 2 else "lost in transit"


def make_chat() -> Chat:
    return Chat("demo").with_tools(sign_contract, order_status, issue_refund)


def _lookup_then_refund(request: ModelRequest) -> LLMToolResponse:
    """Looks order 1001 up (a second), then asks for the gated refund, then answers: read
    off the transcript, so a chat continued from the store goes on where it was."""
    results = sum(1 for m in request.messages if getattr(m, "role", None) == "tool")
    if results == 0:
        return call_tools(("order_status", {"order_id": 1001}))
    if results == 1:
        return call_tools(("issue_refund", {"order_id": 1}))
    return reply("refunded")


def slow_then_gated() -> Chat:
    """A chat that works a second in its first round, then parks on the gated refund."""
    provider = ScriptedProvider([_lookup_then_refund], repeat_last=True)
    return Chat(provider=provider).with_tools(order_status, issue_refund)


class _SlowToClose(Extension):
    """Closing takes three seconds (a tool source stopping: an MCP server's grace)."""

    def close(self) -> None:
        time.sleep(3)


def parks_and_closes_slowly() -> Chat:
    """Parks on the gated refund; its worker then spends three seconds closing the chat
    before it sends the row's result."""
    return Chat("demo").with_tools(issue_refund).extend(_SlowToClose())
