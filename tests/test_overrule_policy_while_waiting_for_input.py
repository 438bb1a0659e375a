"""A person may overrule a policy's approval before the call starts (``Approvals`` in the
docs). A gated external call a policy approved waits for its result (``awaiting_input``):
nothing of it ran, yet ``chat.deny`` was refused ("already approved by
policy:always_allow:...; a decision cannot be changed"). It is allowed now: the call is
denied, its input closed, and nothing runs, live and with a store (across a reload).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, DecisionError, InputError, ModelRequest, tool
from nbagent.store import open_store
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[int] = []


@tool(external=True, requires_approval=True)
def wire_money(amount: int) -> str:
    """Send money (done by the bank, outside nbagent).

    Args:
        amount: How much.
    """
    RAN.append(amount)
    return "ran"


def model() -> ScriptedProvider:
    def answer(request: ModelRequest) -> Any:
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if results:
            return reply(" | ".join(f"{m.status}:{m.content}" for m in results))
        return call_tools(("wire_money", {"amount": 5}, "w"))

    return ScriptedProvider([answer], repeat_last=True)


@pytest.mark.parametrize("stored", [False, True])
def test_a_person_overrules_a_policys_approval_of_a_waiting_external_call(
    tmp_path: Path, stored: bool
) -> None:
    path = str(tmp_path / "s.db") if stored else None
    chat = Chat(provider=model(), display=False, store=path).with_tools(wire_money)
    chat.always_allow(wire_money)
    chat.ask("pay")
    call = chat.get_call("w")
    assert call.status == "awaiting_input" and call.decision is not None
    assert call.decision.automatic
    chat.deny("w", reason="a person says no")
    assert call.status == "denied" and call.decision.by == "user"
    assert chat.pending_inputs == []
    with pytest.raises(InputError):
        chat.answer("w", "sent")
    final = chat.complete()
    assert final is not None and final.content.startswith("denied:")
    assert RAN == []
    if stored:
        chat_id = chat.id
        chat.close()
        store = open_store(path)
        try:
            assert store.pending_inputs() == []  # nothing to answer from another process
        finally:
            store.close()
        loaded = Chat.load(chat_id, store=path, provider=model(), tools=[wire_money])
        try:
            assert loaded.get_call("w").status == "denied"
            assert loaded.pending_inputs == []
        finally:
            loaded.close()


def test_a_persons_own_approval_still_cannot_be_changed() -> None:
    chat = Chat(provider=model(), display=False).with_tools(wire_money)
    chat.ask("pay")
    chat.approve("w")
    assert chat.get_call("w").status == "awaiting_input"
    with pytest.raises(DecisionError, match="cannot be changed"):
        chat.deny("w")
    assert [p.id for p in chat.pending_inputs] == ["w"]
