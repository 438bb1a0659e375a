"""Callbacks see the call as it runs: a person's edit at approval, not the model's ask.

A ``before_tool_call`` guard (the RubyLLM guide's "last line of defence") read
``call.arguments``, the model's: an approver who edited ``amount`` from 50 to 5,000 went
past a guard that skips anything over 100, and the tool ran with 5,000;
``after_tool_result`` reported 50 for a call that ran with 5,000. Every concurrency mode,
sync and async.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from nbagent import Chat, SkipToolCall, ToolCall, ToolResult, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[int] = []


@tool(requires_approval=True)
def refund(order_id: int, amount: float) -> str:
    """Refund an order.

    Args:
        order_id: The order.
        amount: How much.
    """
    RAN.append(int(amount))
    return f"refunded {amount}"


def _parked(mode: str) -> Chat:
    script = [call_tools(("refund", {"order_id": 1, "amount": 50})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(refund)
    chat.with_tool_options(concurrency=mode)
    chat.ask("refund order 1")
    return chat


@pytest.mark.parametrize("drive", ["sync", "async"])
@pytest.mark.parametrize("mode", ["sequential", "threads", "async"])
def test_a_guard_sees_the_edited_arguments_and_stops_them(drive: str, mode: str) -> None:
    RAN.clear()
    chat = _parked(mode)
    seen: list[dict[str, object]] = []
    after: list[tuple[str, dict[str, object]]] = []

    def guard(call: ToolCall) -> None:
        seen.append(dict(call.arguments))
        if call.arguments["amount"] > 100:
            raise SkipToolCall("amount over 100 needs a manager")

    chat.before_tool_call(guard)
    chat.after_tool_result(lambda r: after.append((r.status, dict(r.call.arguments))))
    (call,) = chat.pending_approvals
    chat.approve(call, arguments={"order_id": 1, "amount": 5000})
    chat.complete() if drive == "sync" else asyncio.run(chat.complete_async())
    assert seen == [{"order_id": 1, "amount": 5000}]  # what would run, not the model's 50
    assert RAN == []  # the guard held
    assert after == [("skipped", {"order_id": 1, "amount": 5000})]
    assert call.arguments == {"order_id": 1, "amount": 50}  # the record keeps the model's ask


def test_an_unedited_call_is_given_as_itself() -> None:
    RAN.clear()
    chat = _parked("sequential")
    given: list[ToolCall] = []
    results: list[ToolResult] = []
    chat.before_tool_call(given.append)
    chat.after_tool_result(results.append)
    (call,) = chat.pending_approvals
    chat.approve(call)
    chat.complete()
    assert given[0] is call and results[0].call is call and RAN == [50]


@tool
def lookup(x: int) -> str:
    """Look x up.

    Args:
        x: The number.
    """
    return f"looked {x}"


def test_a_denials_callback_never_runs_beside_the_drivers() -> None:
    """A denial's ``after_tool_result`` runs on the deciding thread (a click's): it waited
    for nothing, and ran at the same time as the driver's own callback for another call,
    which the docs say never happens (a callback appending to a list or a frame broke)."""
    script = [call_tools(("refund", {"order_id": 1, "amount": 5}), ("lookup", {"x": 2}))]
    chat = Chat(provider=ScriptedProvider([*script, reply("done")])).with_tools(refund, lookup)
    denial_callback = threading.Event()
    overlapped: list[bool] = []

    def after(result: ToolResult) -> None:
        if result.call.name == "refund":  # the denial's, on the deciding thread
            denial_callback.set()
            return
        deciding.start()  # the driver is in its own callback: the person denies now
        overlapped.append(denial_callback.wait(2.0))  # did the denial's run meanwhile?

    deciding = threading.Thread(target=lambda: chat.deny(chat.pending_approvals[0], "no"))
    chat.after_tool_result(after)
    chat.ask("refund and look up")  # runs lookup, parks on refund: the callback denies
    deciding.join()
    assert overlapped == [False]  # it waited for the driver's callback to end
    assert denial_callback.is_set()  # and then ran
    chat.complete()
    assert chat.is_complete
