"""``PendingToolCallsError`` says how to go on for the calls it lists: a call still running
(another process drives the stored chat: a stale copy's ``ask()``) is not one
``complete()`` can run; it said "Run them with chat.complete()", which only returned
busy again (a probe)."""

from __future__ import annotations

import pytest

from nbagent import PendingToolCallsError, ToolCall


def _call(status: str) -> ToolCall:
    call = ToolCall("c1", "refund", {"order_id": 1})
    call.status = status  # type: ignore[misc]
    return call


@pytest.mark.parametrize(
    ("status", "said"),
    [
        ("awaiting_approval", "Decide them with chat.approve"),
        ("awaiting_input", "Answer them with chat.answer"),
        ("running", "Chat.load the chat again once it is done"),
        ("approved", "Run them with chat.complete()"),
    ],
)
def test_the_error_says_how_to_go_on(status: str, said: str) -> None:
    text = str(PendingToolCallsError([_call(status)]))
    assert said in text
    if status == "running":
        assert "Run them with chat.complete()" not in text
