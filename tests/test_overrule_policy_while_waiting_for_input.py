"""A person may overrule a policy's approval before the call starts (``Approvals`` in the
docs). A gated external call a policy approved waits for its result (``awaiting_input``):
its request is out (``store.pending_inputs()`` lists it, whoever does the work may have
answered it already). Overruling it there dropped an answer the store held and told the
model nothing ran; ``chat.deny`` is refused, saying to decline the request, which the
first-answer-wins store settles against an answer given meanwhile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, DecisionError, ModelRequest, tool
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
def test_a_waiting_external_calls_policy_approval_is_declined_not_denied(
    tmp_path: Path, stored: bool
) -> None:
    path = str(tmp_path / "s.db") if stored else None
    chat = Chat(provider=model(), display=False, store=path).with_tools(wire_money)
    chat.always_allow(wire_money)
    chat.ask("pay")
    call = chat.get_call("w")
    assert call.status == "awaiting_input" and call.decision is not None
    assert call.decision.automatic
    with pytest.raises(DecisionError, match=r"chat\.decline\(\.\.\.\) refuses it"):
        chat.deny("w", reason="a person says no")
    chat.decline("w", reason="a person says no")
    final = chat.complete()
    assert final is not None and final.content.startswith("denied:")
    assert RAN == []
    if stored:
        chat.close()


def test_an_answer_already_in_the_store_is_never_dropped(tmp_path: Path) -> None:
    """The bank answered through the store; a person who had not refreshed denies: refused,
    and the answer stands (it was dropped, and the model told the wire was not sent)."""
    path = str(tmp_path / "s.db")
    chat = Chat(provider=model(), display=False, store=path).with_tools(wire_money)
    chat.always_allow(wire_money)
    chat.ask("pay")
    store = open_store(path)
    try:
        store.answer("w", "sent: wire #991", chat_id=chat.id)
    finally:
        store.close()
    with pytest.raises(DecisionError):
        chat.deny("w")
    final = chat.complete()
    assert final is not None and "sent: wire #991" in final.content


def test_a_persons_own_approval_still_cannot_be_changed() -> None:
    chat = Chat(provider=model(), display=False).with_tools(wire_money)
    chat.ask("pay")
    chat.approve("w")
    assert chat.get_call("w").status == "awaiting_input"
    with pytest.raises(DecisionError, match="cannot be changed"):
        chat.deny("w")
    assert [p.id for p in chat.pending_inputs] == ["w"]
