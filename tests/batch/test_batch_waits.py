"""A batch's wait for decisions running out, the line it says about its parked rows, and
the inbox of a store that cannot be read now (its static form, what a front end without
widgets shows)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

MARKS: list[str] = []


@tool(requires_approval=True)
async def slow_refund(order: str) -> str:
    """Refunds an order, slowly.

    Args:
        order: The order.
    """
    MARKS.append("start")
    await asyncio.sleep(3)
    MARKS.append("end")
    return f"refunded {order}"


@tool(external=True)
def sign(party: str) -> str:
    """Has the contract signed (answered from elsewhere).

    Args:
        party: Who signs.
    """


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refunds an order.

    Args:
        order: The order.
    """
    return f"refunded {order}"


def _slow() -> Chat:
    script = [call_tools(("slow_refund", {"order": "7"})), reply("done")]
    return Chat(provider=ScriptedProvider(script)).with_tools(slow_refund)


def _signing() -> Chat:
    script = [call_tools(("sign", {"party": "ACME"})), reply("signed")]
    return Chat(provider=ScriptedProvider(script)).with_tools(sign)


def _gated() -> Chat:
    script = [call_tools(("refund", {"order": "7"})), reply("ok")]
    return Chat(provider=ScriptedProvider(script)).with_tools(refund)


def _approve_when_pending(path: Path) -> threading.Thread:
    """Another store connection (as another process) approves the first pending call."""

    def go() -> None:
        store = SQLiteStore(path)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                calls = store.pending_approvals()
                if calls:
                    store.approve(calls[0], by="ops")
                    return
                time.sleep(0.05)
        finally:
            store.close()

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def test_the_wait_running_out_lets_an_approved_call_in_flight_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """wait_for_decisions=N ran out while the approved refund ran: the batch cancelled it
    (the store recorded the approved call cancelled) and the frame said awaiting_approval,
    pending=1."""
    MARKS.clear()
    db = tmp_path / "b.db"
    approving = _approve_when_pending(db)
    result = nbagent.batch(["a"], _slow, store=str(db), progress=False, wait_for_decisions=1.5)
    approving.join(5)
    assert MARKS == ["start", "end"], MARKS  # it ran, to its end, once
    assert list(result["status"]) == ["done"], result[["status", "pending", "error"]]
    assert result.loc[0, "pending"] == 0 and result.loc[0, "reply"] == "done"
    with SQLiteStore(db) as store:
        (call,) = store.calls(result.loc[0, "chat_id"])
        assert call.status == "ok", call.status
    assert "await approval" not in capsys.readouterr().err


def test_the_wait_running_out_before_a_decision_leaves_the_row_parked_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The line told a caller who passed wait_for_decisions= to pass it."""
    result = nbagent.batch(
        ["a"], _gated, store=str(tmp_path / "b.db"), progress=False, wait_for_decisions=0.3
    )
    assert list(result["status"]) == ["awaiting_approval"]
    said = capsys.readouterr().err
    assert "1 row(s) await approval" in said, said
    assert "or pass wait_for_decisions=seconds" not in said, said
    assert "wait_for_decisions=0.3 ran out" in said, said
    plain = nbagent.batch(["a"], _gated, progress=False)
    assert list(plain["status"]) == ["awaiting_approval"]
    assert "(or pass wait_for_decisions=seconds)" in capsys.readouterr().err


def test_a_row_waiting_for_an_input_is_not_said_to_await_approval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = nbagent.batch(["a"], _signing, store=str(tmp_path / "b.db"), progress=False)
    assert list(result["status"]) == ["awaiting_approval"]
    said = capsys.readouterr().err
    assert "1 row(s) await an input" in said, said
    assert "await approval" not in said, said
    assert "once answered" in said, said
    without_store = nbagent.batch(["a"], _signing, progress=False)
    assert list(without_store["status"]) == ["awaiting_approval"]
    said = capsys.readouterr().err
    assert "1 row(s) await an input" in said and "answer them" in said, said


def test_the_inbox_static_form_shows_the_rows_as_last_read_when_the_store_is_gone(
    tmp_path: Path,
) -> None:
    """Without a widget front end, displaying the inbox raised the store's StoreError."""
    db = tmp_path / "c.db"
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order": "7"}))]),
        store=str(db),
        display=False,
    ).with_tools(refund)
    chat.ask("refund order 7")
    chat.close()
    inbox = nbagent.inbox(str(db))
    try:
        assert "refund" in inbox._repr_mimebundle_()["text/plain"]
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{db}{suffix}"):
                os.remove(f"{db}{suffix}")
        shown: dict[str, Any] = inbox._repr_mimebundle_()
        assert "refund" in shown["text/plain"]  # the row as last read
        assert "cannot read its sources" in shown["text/plain"], shown["text/plain"]
        assert "cannot read its sources" in shown["text/html"]
    finally:
        inbox.close()
