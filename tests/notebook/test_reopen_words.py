"""What a waiting view's twin says to someone who reopens the notebook: the tools'
names as written (never capitalized) and a verb that agrees with how many calls wait."""

from __future__ import annotations

from nbagent import Chat, tool
from nbagent.notebook._fallback import twin_bundle
from nbagent.notebook._state import state_for
from nbagent.testing._scripted import ScriptedProvider, call_tools


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def _lead(*calls: tuple[str, dict[str, int], str]) -> str:
    chat = Chat(provider=ScriptedProvider([call_tools(*calls)]), display=False)
    chat.with_tools(issue_refund)
    chat.ask("Refund them")
    text = twin_bundle(chat, state_for(chat), None)["text/plain"]
    (line,) = [x for x in text.splitlines() if "kernel session that has ended" in x]
    return line


def test_one_waiting_call_keeps_its_name_as_written() -> None:
    line = _lead(("issue_refund", {"order_id": 1}, "c1"))
    assert line.startswith("The call issue_refund (c1) was waiting for a decision"), line
    assert "Issue_refund" not in line


def test_two_waiting_calls_are_listed_with_a_plural_verb() -> None:
    line = _lead(("issue_refund", {"order_id": 1}, "c1"), ("issue_refund", {"order_id": 2}, "c2"))
    assert line.startswith("The calls issue_refund (c1) and issue_refund (c2) were waiting"), line
