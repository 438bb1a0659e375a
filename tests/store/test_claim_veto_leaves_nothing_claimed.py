"""An extension that vetoes a call's start (``Extension.claim`` returns ``False``: another
driver has it) leaves the store with nothing claimed.

The store's claim ran first and recorded the call ``running``; the veto after it kept the
tool from running, and the store went on saying it ran: loaded again, the call was in
doubt though it never started, and no driver could run it. A claim that commits (the
store's) is asked after every other extension's: a veto leaves the call as it was; under
the async driver (a batch's rows), whose store claims a round's calls ahead and together,
the vetoes are asked before that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nbagent import Chat, Extension, ToolCall, tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[int] = []


@tool
def refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order.
    """
    RAN.append(order_id)
    return f"refunded {order_id}"


class Elsewhere(Extension):
    """Says another driver runs every call (a lease held by another worker, say)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def claim(self, call: ToolCall) -> bool:
        self.asked.append(call.id)
        return False


def vetoed_chat(db: Path, order_id: int) -> tuple[Chat, Elsewhere]:
    """A chat on ``db`` that is asked to refund ``order_id`` (call ``r1``) and whose
    extension vetoes every call."""
    RAN.clear()
    veto = Elsewhere()
    script = [call_tools(("refund", {"order_id": order_id}, "r1")), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=db, display=False)
    return chat.with_tools(refund).extend(veto), veto


def stored_call(db: Path, chat_id: str) -> Any:
    with SQLiteStore(db) as store:
        (stored,) = store.load(chat_id).calls
    return stored


def test_a_vetoed_call_is_not_left_running_in_the_store(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    chat, veto = vetoed_chat(db, 7)
    chat.ask("refund 7")
    assert veto.asked == ["r1"] and RAN == []
    chat.close()
    stored = stored_call(db, chat.id)
    assert stored.status in ("requested", "approved"), stored.status  # runnable, not running
    assert stored.claimed_by is None
    # a driver without the veto runs it, once
    again = Chat.load(chat.id, store=db, tools=[refund], provider=ScriptedProvider([reply("ok")]))
    again.complete()
    assert RAN == [7]
    (call,) = again.tool_calls
    assert call.status == "ok"
    again.close()


def test_under_the_async_driver_too(tmp_path: Path) -> None:
    import asyncio

    db = tmp_path / "a.db"
    chat, veto = vetoed_chat(db, 8)
    asyncio.run(chat.ask_async("refund 8"))
    assert veto.asked == ["r1"] and RAN == []
    chat.close()
    stored = stored_call(db, chat.id)
    assert stored.status in ("requested", "approved"), stored.status


def test_in_a_batch_row_too(tmp_path: Path) -> None:
    """A batch's row: the store claims its rows' calls ahead of their start, together (one
    commit for many rows); the veto is asked before that."""
    import nbagent

    RAN.clear()
    db = tmp_path / "b.db"
    vetoes: list[Elsewhere] = []

    def make_chat() -> Chat:
        veto = Elsewhere()
        vetoes.append(veto)
        script = [call_tools(("refund", {"order_id": 9}, "r1")), reply("done")]
        return Chat(provider=ScriptedProvider(script)).with_tools(refund).extend(veto)

    result = nbagent.batch(["refund 9"], make_chat, store=db, progress=False)
    assert RAN == [] and [v.asked for v in vetoes] == [["r1"]]  # asked once
    stored = stored_call(db, result.loc[0, "chat_id"])
    assert stored.status in ("requested", "approved"), (stored.status, result.loc[0, "error"])
