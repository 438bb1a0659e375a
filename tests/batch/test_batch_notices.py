"""The line a batch says when rows await approval, and what a caller adds to it."""

from __future__ import annotations

import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refunds an order.

    Args:
        order: The order.
    """
    return f"refunded {order}"


def _gated() -> Chat:
    return Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order": "7"})), reply("ok")])
    ).with_tools(refund)


def test_a_caller_adds_its_own_way_to_decide_to_the_awaiting_approval_notice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``nbagent.evaluate`` passes its ``decide=`` hint through the batch (``_approval_hint``)."""
    result = nbagent.batch(
        ["a"], _gated, progress=False, _approval_hint="or pass decide= to nbagent.evaluate"
    )
    assert list(result["status"]) == ["awaiting_approval"]
    said = capsys.readouterr().err
    assert "1 row(s) await approval" in said
    assert said.rstrip().endswith("; or pass decide= to nbagent.evaluate"), said
