"""Callbacks see the call as it runs: a person's edit at approval, not the model's ask.

A ``before_tool_call`` guard (the RubyLLM guide's "last line of defence") read
``call.arguments``, the model's: an approver who edited ``amount`` from 50 to 5,000 went
past a guard that skips anything over 100, and the tool ran with 5,000;
``after_tool_result`` reported 50 for a call that ran with 5,000. Every concurrency mode,
sync and async.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

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


DENIAL_USING_THE_LOOP = '''
import asyncio, time
from nbagent import Chat, tool
from nbagent._aio import run_sync, spawn
from nbagent.testing import ScriptedProvider, call_tools, reply

@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund.

    Args:
        order: The order.
    """
    time.sleep(0.3)
    return f"refunded {order}"

script = [call_tools(("refund", {"order": "A"}), ("refund", {"order": "B"})), reply("done")]
chat = Chat(provider=ScriptedProvider(script)).with_tools(refund)
chat.ask("refund A and B")
a, b = chat.pending_approvals
chat.approve(a)

async def tiny():
    return "ok"

def callback(result):
    if result.status == "denied":  # on the deciding thread, while A runs on the loop
        time.sleep(0.8)  # A finishes meanwhile: the driver records it
        print("callback", run_sync(tiny()), flush=True)  # e.g. a sub-agent's ask()

chat.after_tool_result(callback)

async def kernel():  # a loop runs on the deciding thread, as in a notebook
    running = spawn(chat.complete_async())  # continued in the background (the inbox's way)
    await asyncio.sleep(0.05)
    chat.deny(b, reason="no")
    return await asyncio.wrap_future(running)

print("result", asyncio.run(kernel()).content)
'''


def test_a_denials_callback_using_nbagents_loop_beside_a_driver_never_hangs() -> None:
    """A denial's ``after_tool_result`` on the deciding thread uses nbagent's background loop
    (a sub-agent's ``ask()``) while that loop drives the chat and records the approved call's
    end. Serialised with the chat's events, both waited for ever: callbacks are not."""
    done = subprocess.run(
        [sys.executable, "-c", DENIAL_USING_THE_LOOP], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["callback", "ok", "result", "done"]
