"""The inbox lists pending inputs beside approvals and answers them (live chats).

``inbox.inputs`` has one row per input of its chats (an external tool's result,
``ask_user``'s question), ``inbox.answer`` / ``inbox.decline`` settle one by the inbox
and continue the chat once nothing else waits; a bad answer changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

import nbagent
from nbagent import Chat, InputError, ModelRequest, ask_user, tool
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
