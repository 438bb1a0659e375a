"""Two chats of an inbox may wait for inputs of one id (the demo model names its calls
``demo_call_1`` in every chat; a fork keeps its parent's call ids): ``inbox.answer`` of
such an id answered the first chat found, so the person answering chat B's row answered
chat A (with a fork: the what-if answer went to the parent) and B went on waiting.

Now an id several chats wait for is refused, naming the chats, and nothing is answered;
``chat_id=``, a row of ``inbox.inputs`` or a ``"chat_id/input_id"`` key chooses the chat,
live or stored (the store's own "in several chats" check is not bypassed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, InputError, ModelRequest, ask_user, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


def asking(question: str, call_id: str = "q") -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if results:
            return reply(" | ".join(f"{m.status}:{m.content}" for m in results))
        return call_tools(("ask_user", {"question": question}, call_id))

    return ScriptedProvider([answer], repeat_last=True)


def two_live_chats() -> tuple[Chat, Chat]:
    a = Chat(provider=asking("Colour?"), display=False).with_tools(ask_user)
    b = Chat(provider=asking("City?"), display=False).with_tools(ask_user)
    a.ask("go")
    b.ask("go")
    return a, b


def test_an_id_two_live_chats_wait_for_is_refused_naming_both_and_nothing_is_answered() -> None:
    a, b = two_live_chats()
    box = nbagent.inbox([a, b])
    try:
        with pytest.raises(InputError, match="several chats") as err:
            box.answer("q", "Oslo")
        assert a.id in str(err.value) and b.id in str(err.value)
        with pytest.raises(InputError, match="several chats"):
            box.decline("q", "no")
        assert [p.id for p in a.pending_inputs] == ["q"]
        assert [p.id for p in b.pending_inputs] == ["q"]
    finally:
        box.close()


@pytest.mark.parametrize("how", ["row", "chat_id", "key", "frame"])
def test_the_row_answered_is_the_chat_answered(how: str) -> None:
    a, b = two_live_chats()
    box = nbagent.inbox([a, b])
    try:
        rows = box.inputs
        row_b = rows[rows.chat_id == b.id]
        if how == "row":
            box.answer(row_b.iloc[0], "Oslo")
        elif how == "frame":
            box.answer(row_b, "Oslo")
        elif how == "chat_id":
            box.answer("q", "Oslo", chat_id=b.id)
        else:
            box.answer(f"{b.id}/q", "Oslo")
        assert box.wait(30)
        assert a.pending_inputs and a.record.inputs[0].status == "pending"
        assert b.status == "complete" and b.record.inputs[0].data == "Oslo"
        assert b.last_assistant_message.content == "ok:Oslo"
    finally:
        box.close()


def test_a_row_and_a_chat_id_that_disagree_are_refused() -> None:
    a, b = two_live_chats()
    box = nbagent.inbox([a, b])
    try:
        rows = box.inputs
        row_b = rows[rows.chat_id == b.id].iloc[0]
        with pytest.raises(InputError, match="but chat_id="):
            box.answer(row_b, "x", chat_id=a.id)
        assert a.pending_inputs and b.pending_inputs
    finally:
        box.close()


def test_a_forks_what_if_answer_never_reaches_its_stored_parent(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    parent = Chat(provider=asking("Refund how much?"), display=False, store=path)
    parent.with_tools(ask_user).ask("go")
    fork = parent.fork()
    parent_id, fork_id = parent.id, fork.id
    parent.close()
    fork.close()
    box = nbagent.inbox(path)
    try:
        rows = box.inputs
        assert sorted(rows.chat_id) == sorted([parent_id, fork_id])
        with pytest.raises(InputError, match="several chats"):
            box.answer("q", "5 EUR")
        box.answer(rows[rows.chat_id == fork_id].iloc[0], "5 EUR (what-if)")
    finally:
        box.close()
    store = nbagent.open_store(path)
    try:
        status = {si.chat_id: (si.status, si.data) for si in store.inputs()}
    finally:
        store.close()
    assert status[parent_id] == ("pending", None)
    assert status[fork_id] == ("accept", "5 EUR (what-if)")


def test_stored_chats_sharing_an_id_are_refused_then_chosen(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    ids = []
    for question in ("Colour?", "City?"):
        chat = Chat(provider=asking(question), display=False, store=path)
        chat.with_tools(ask_user).ask("go")
        ids.append(chat.id)
        chat.close()
    box = nbagent.inbox(path)
    try:
        with pytest.raises(InputError, match="several chats"):
            box.decline("q")
        box.decline("q", "not now", chat_id=ids[1])
        with pytest.raises(InputError, match="no chat of this inbox waits"):
            box.answer("q", "x", chat_id=ids[1])  # declined already
    finally:
        box.close()
    store = nbagent.open_store(path)
    try:
        status = {si.chat_id: si.status for si in store.inputs()}
    finally:
        store.close()
    assert status == {ids[0]: "pending", ids[1]: "decline"}


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refund.

    Args:
        amount: How much.
    """
    return f"refunded {amount}"


def test_approving_a_call_id_two_chats_share_is_refused_too() -> None:
    def gated(request: ModelRequest) -> Any:
        if any(getattr(m, "role", "") == "tool" for m in request.messages):
            return reply("done")
        return call_tools(("refund", {"amount": 5}, "c1"))

    chats = []
    for _ in range(2):
        chat = Chat(provider=ScriptedProvider([gated], repeat_last=True), display=False)
        chat.with_tools(refund).ask("go")
        chats.append(chat)
    box = nbagent.inbox(chats)
    try:
        with pytest.raises(ValueError, match="several chats"):
            box.approve("c1")
        pending = box.pending
        box.approve(pending[pending.chat_id == chats[1].id])
        assert box.wait(30)
        assert chats[0].get_call("c1").status == "awaiting_approval"
        assert chats[1].get_call("c1").status == "ok"
    finally:
        box.close()
