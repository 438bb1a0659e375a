"""A call whose claim cannot be written is not started and stays runnable: its approval is
never used up by a store's passing failure, and the round's other calls go on.

The store's file is locked by another connection (a DB browser, another process) while a
round's first call runs; the second call's claim waits out the store's busy timeout and
fails. Before, the runner answered that call, and the round's calls not started yet,
"cancelled before it ran": an approved refund never ran, though the error said it "runs
at the next step". Every driver and concurrency mode; then the next ``complete()`` runs it,
once. Also: the async driver's ``starting`` hook is a hook of its own (an extension written
for the documented ``catch_up(calls, *, stopping=)`` keeps working), and the stop button
pressed while a queued call's claim is made stops that call.
"""

from __future__ import annotations

import asyncio
import sqlite3
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, Extension, StoreError, ToolCall, tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[str] = []
LOCK: dict[str, Any] = {}


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order.
    """
    RAN.append(order)
    if order == "A" and "path" in LOCK:  # the file is locked before the next call's claim
        other = sqlite3.connect(LOCK.pop("path"), isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        LOCK["held"] = other
    return f"refunded {order}"


def _parked(db: Path, mode: str) -> Chat:
    orders = [("refund", {"order": o}) for o in "ABC"]
    script = [call_tools(*orders), reply("done")]
    store = SQLiteStore(db, timeout=0.2)
    chat = Chat(provider=ScriptedProvider(script), store=store).with_tools(refund)
    chat.with_tool_options(concurrency=mode, max_concurrency=1)
    chat.ask("refund A and B")
    for call in chat.pending_approvals:
        chat.approve(call)
    return chat


@pytest.mark.parametrize("drive", ["sync", "async"])
@pytest.mark.parametrize("mode", ["sequential", "threads"])
def test_a_call_whose_claim_fails_stays_approved_and_runs_once_later(
    tmp_path: Path, drive: str, mode: str
) -> None:
    RAN.clear()
    db = tmp_path / "agent.db"
    chat = _parked(db, mode)
    LOCK["path"] = str(db)
    with (
        warnings.catch_warnings(record=True),  # A's result waits for the lock too: said once
        pytest.raises(StoreError, match=r"refund\(call_\d+\) was not run, and runs at the next"),
    ):
        warnings.simplefilter("always")
        if drive == "sync":
            chat.complete()
        else:
            asyncio.run(chat.complete_async())
    LOCK.pop("held").execute("ROLLBACK")
    # B (its claim failed) and C (queued behind it) are not used up: approved, unanswered
    assert [c.status for c in chat.tool_calls] == ["ok", "approved", "approved"]
    assert all(c.result is None for c in chat.tool_calls[1:]) and RAN == ["A"]
    chat.complete()
    assert RAN == ["A", "B", "C"] and chat.is_complete  # each once, at the next step
    with SQLiteStore(db) as fresh:
        assert [c.status for c in fresh.load(chat.id).calls] == ["ok", "ok", "ok"]
    chat.close()


class _OldCatchUp(Extension):
    """An extension written for the documented ``catch_up(calls, *, stopping=)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []

    async def catch_up(self, calls: Sequence[ToolCall] = (), *, stopping: bool = False) -> None:
        self.seen.append(tuple(c.id for c in calls))


def test_an_extension_with_the_documented_catch_up_keeps_working_under_the_async_driver() -> None:
    RAN.clear()
    script = [call_tools(("refund", {"order": "A"}), ("refund", {"order": "B"})), reply("done")]
    ext = _OldCatchUp()
    chat = Chat(provider=ScriptedProvider(script)).with_tools(refund)
    chat.extend(ext)
    chat.with_tool_options(concurrency="sequential")
    asyncio.run(chat.ask_async("refund A and B"))
    for call in chat.pending_approvals:
        chat.approve(call)
    asyncio.run(chat.complete_async())  # its catch_up is never given an argument it lacks
    assert RAN == ["A", "B"] and chat.is_complete
    assert [c.id for c in chat.tool_calls] in [
        list(s) for s in ext.seen
    ]  # the round, as documented


class _SlowStart(Extension):
    """An extension whose ``starting`` takes a while (a claim's round trip): the stop
    button is pressed meanwhile."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    async def starting(self, call: ToolCall) -> None:
        if call.arguments["order"] == "B":
            self.chat.cancel()
            await asyncio.sleep(0.05)


def test_the_stop_pressed_while_a_queued_calls_start_is_prepared_stops_that_call() -> None:
    RAN.clear()
    script = [call_tools(("refund", {"order": "A"}), ("refund", {"order": "B"})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(refund)
    chat.extend(_SlowStart(chat))
    chat.with_tool_options(concurrency="sequential")
    asyncio.run(chat.ask_async("refund A and B"))
    for call in chat.pending_approvals:
        chat.approve(call)
    with pytest.raises(Exception, match="cancelled"):
        asyncio.run(chat.complete_async())
    assert RAN == ["A"]  # B was not started after the stop
    assert [c.status for c in chat.tool_calls] == ["ok", "cancelled"]
