"""The inbox lists pending inputs beside approvals and answers them (live chats).

``inbox.inputs`` has one row per input of its chats (an external tool's result,
``ask_user``'s question), ``inbox.answer`` / ``inbox.decline`` settle one by the inbox
and continue the chat once nothing else waits; a bad answer changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, InputError, ModelRequest, SQLiteStore, ask_user, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(external=True)
def approve_invoice(number: int) -> str:
    """Approved by accounting, outside nbagent.

    Args:
        number: The invoice.
    """


def provider(*calls: tuple[str, dict[str, Any], str]) -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if results:
            return reply(" | ".join(f"{m.status}:{m.content}" for m in results))
        return call_tools(*calls)

    return ScriptedProvider([answer], repeat_last=True)


def test_the_inbox_lists_inputs_and_answers_them_by_the_inbox() -> None:
    a = Chat(provider=provider(("approve_invoice", {"number": 7}, "i7")), display=False)
    a.with_tools(approve_invoice).ask("invoice 7")
    b = Chat(
        provider=provider(("ask_user", {"question": "Which?", "choices": ["x", "y"]}, "q")),
        display=False,
    )
    b.with_tools(ask_user).ask("ask")
    box = nbagent.inbox([a, b])
    try:
        frame = box.inputs
        assert list(frame["input_id"]) == ["i7", "q"]
        assert list(frame["kind"]) == ["external", "ask_user"]
        assert frame.set_index("input_id").loc["q", "choices"] == ("x", "y")
        assert len(box.pending) == 0  # no approvals: the inputs are listed apart
        with pytest.raises(InputError, match="does not match"):
            box.answer("q", "z")
        assert list(box.inputs["input_id"]) == ["i7", "q"]  # nothing lost
        box.answer("q", "y")
        box.decline("i7", "not this month")
        assert box.wait(30)
        assert box.inputs.empty
        assert b.status == "complete" and b.last_assistant_message.content == "ok:y"
        assert a.status == "complete"
        assert a.last_assistant_message.content.startswith("denied:Declined by inbox")
        assert [r.answered_by for r in b.record.inputs] == ["inbox"]
        with pytest.raises(InputError, match="no chat of this inbox waits"):
            box.answer("q", "y")
    finally:
        box.close()


def test_the_inbox_lists_and_answers_a_stored_chats_inputs_through_the_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    calls = (("approve_invoice", {"number": 7}, "i7"), ("approve_invoice", {"number": 8}, "i8"))
    chat = Chat(provider=provider(*calls), display=False, store=str(path))
    chat.with_tools(approve_invoice).ask("invoices")
    chat_id = chat.id
    chat.close()  # nobody has it open: only the store knows its inputs
    box = nbagent.inbox(str(path))
    try:
        frame = box.inputs
        assert list(frame["input_id"]) == ["i7", "i8"]
        assert set(frame["source"]) == {"store"} and set(frame["chat_id"]) == {chat_id}
        assert set(frame["kind"]) == {"external"}
        box.answer("i7", {"paid": True})
        box.decline("i8", "duplicate")
        assert box.inputs.empty
        with pytest.raises(InputError, match="no chat of this inbox waits"):
            box.answer("i7", "again")
    finally:
        box.close()
    with SQLiteStore(path) as store:
        answers = {i.id: (i.status, i.answered_by, i.applied) for i in store.inputs(chat_id)}
        assert answers == {"i7": ("accept", "inbox", False), "i8": ("decline", "inbox", False)}
    with Chat.load(chat_id, store=str(path), provider=provider(*calls)) as loaded:
        final = loaded.complete()
        assert final is not None
        assert (
            final.content
            == 'ok:{"paid":true} | denied:Declined by inbox: no result was given: duplicate'
        )


def test_a_stored_chat_that_is_also_live_is_listed_once_and_answered_live(
    tmp_path: Path,
) -> None:
    chat = Chat(
        provider=provider(("approve_invoice", {"number": 9}, "i9")),
        display=False,
        store=str(tmp_path / "agent.db"),
    )
    chat.with_tools(approve_invoice).ask("invoice 9")
    box = nbagent.inbox([chat, str(tmp_path / "agent.db")])
    try:
        frame = box.inputs
        assert list(frame["input_id"]) == ["i9"] and list(frame["source"]) == ["live"]
        box.answer("i9", "paid")
        assert box.wait(30)
        assert chat.status == "complete" and chat.last_assistant_message.content == "ok:paid"
    finally:
        box.close()
        chat.close()
