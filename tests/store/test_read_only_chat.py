"""A chat loaded from a store opened ``read_only=True`` is for looking: its transcript, its
calls and ``chat.log`` are there; driving it (``complete``, ``ask``, ``step``) or deciding
on it (``approve``, ``deny``) is refused up front with a StoreError saying why, nothing is
asked or run; a decision made elsewhere and not taken yet is left to a writable copy (the
load does not fail on it); closing it writes nothing and raises nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbagent import Chat, NBAgentError, StoreError, tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[int] = []


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order."""
    RAN.append(order_id)
    return "refunded"


def _parked(db: Path) -> str:
    llm = ScriptedProvider([call_tools(("refund", {"order_id": 7}, "r1")), reply("done")])
    chat = Chat(provider=llm, store=db, display=False).with_tools(refund)
    chat.ask("refund order 7")
    assert chat.status == "awaiting_approval"
    chat.close()
    return chat.id


@pytest.mark.parametrize("decided_elsewhere", [False, True])
def test_a_read_only_chat_is_for_looking(tmp_path: Path, decided_elsewhere: bool) -> None:
    RAN.clear()
    db = tmp_path / "agent.db"
    chat_id = _parked(db)
    if decided_elsewhere:
        with SQLiteStore(db) as writer:
            writer.approve("r1", by="ops")
    reader = SQLiteStore(db, read_only=True)
    looked = Chat.load(chat_id, store=reader, provider=ScriptedProvider([reply("x")]),
                       tools=[refund], display=False)  # fmt: skip
    assert [m.role for m in looked.transcript][:2] == ["user", "assistant"]
    assert list(looked.log["tool"]) == ["refund"]
    for drive in (looked.complete, looked.step):
        with pytest.raises(StoreError, match="read_only"):
            drive()
    with pytest.raises(NBAgentError):  # its call waits: refused before any step
        looked.ask("more")
    if not decided_elsewhere:
        for decide in (lambda: looked.approve("r1"), lambda: looked.deny("r1")):
            with pytest.raises(StoreError, match="read_only"):
                decide()
    looked.close()  # writes nothing, raises nothing
    reader.close()
    assert RAN == []
    # a writable copy goes on: the call runs once (approved elsewhere, or here)
    with SQLiteStore(db) as writer:
        chat = Chat.load(chat_id, store=writer, provider=ScriptedProvider([reply("done")]),
                         tools=[refund], display=False)  # fmt: skip
        if not decided_elsewhere:
            chat.approve("r1")
        assert chat.complete().content == "done"
        chat.close()
    assert RAN == [7]


def test_asking_a_finished_read_only_chat_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    chat = Chat(provider=ScriptedProvider([reply("hello")]), store=db, display=False)
    chat.ask("hi")
    chat.close()
    with SQLiteStore(db, read_only=True) as reader:
        looked = Chat.load(chat.id, store=reader, provider=ScriptedProvider([reply("x")]),
                           display=False)  # fmt: skip
        with pytest.raises(StoreError, match="opened read_only"):
            looked.ask("more")
        looked.close()
    with SQLiteStore(db) as writer:  # the stored chat is as it was
        again = Chat.load(chat.id, store=writer, provider=ScriptedProvider([]), display=False)
        assert [m.content for m in again.transcript] == ["hi", "hello"]
        again.close()
