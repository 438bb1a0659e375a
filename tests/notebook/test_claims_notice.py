"""The view's notice under a final answer that claims an action its calls did not do.

The notice is read off the chat's record (nbagent._claims), so a view built later (a
display after the fact, a loaded chat) shows the same, and each turn's answer is read
against the calls made up to that turn only.
"""

from __future__ import annotations

from pathlib import Path

from nbagent import Chat, tool
from nbagent.notebook._fallback import bundle_for
from nbagent.notebook._render import CLAIMS_TITLE
from nbagent.notebook._state import ChatState, TextEntry, state_for
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order."""
    return f"refunded order {order_id}"


def _chat(*answers: str, store: str | None = None) -> Chat:
    script = []
    for i, answer in enumerate(answers):
        script += [call_tools(("issue_refund", {"order_id": 42 + i}, f"c{i}")), reply(answer)]
    return Chat(provider=ScriptedProvider(script), display=False, store=store).with_tools(
        issue_refund
    )


def _claims(state: ChatState) -> list[tuple[str, ...]]:
    return [e.claims for e in state.entries if isinstance(e, TextEntry) and e.text]


def test_a_false_claim_gets_a_notice_in_every_format(tmp_path: Path) -> None:
    chat = _chat("I have refunded order 42.", store=str(tmp_path / "s.db"))
    live = state_for(chat)
    chat.ask("Refund order 42")
    chat.deny(chat.tool_calls[0], reason="too large")
    chat.complete()
    expected = ("says 'refunded' but issue_refund was denied: 'I have refunded order 42.'",)
    assert _claims(live) == [expected]
    bundle = bundle_for(ChatState.from_chat(chat))
    assert CLAIMS_TITLE in bundle["text/html"] and "nba-claims" in bundle["text/html"]
    assert f"{CLAIMS_TITLE}: {expected[0]}" in bundle["text/plain"]
    assert CLAIMS_TITLE in bundle["text/markdown"]
    loaded = Chat.load(
        chat.id, store=str(tmp_path / "s.db"), tools=[issue_refund], provider=ScriptedProvider([])
    )
    assert _claims(ChatState.from_chat(loaded)) == [expected]


def test_an_honest_or_true_answer_has_none() -> None:
    chat = _chat("I could not refund order 42: you denied it.")
    chat.ask("Refund order 42")
    chat.deny(chat.tool_calls[0])
    chat.complete()
    assert _claims(ChatState.from_chat(chat)) == [()]
    approved = _chat("Order 42 has been refunded.")
    approved.ask("Refund order 42")
    approved.approve(approved.tool_calls[0])
    approved.complete()
    state = ChatState.from_chat(approved)
    assert _claims(state) == [()]
    assert CLAIMS_TITLE not in bundle_for(state)["text/html"]


def test_each_turn_is_read_against_the_calls_made_up_to_it() -> None:
    """Turn 1 claims refund 42 (denied); turn 2 refunds 43 for real. Turn 1's notice stays,
    live and rebuilt, and turn 2's answer has none."""
    chat = _chat("I refunded order 42.", "I refunded order 43.")
    live = state_for(chat)
    chat.ask("Refund order 42")
    chat.deny(chat.tool_calls[0])
    chat.complete()
    chat.ask("Refund order 43")
    chat.approve(chat.tool_calls[1])
    chat.complete()
    rebuilt = ChatState.from_chat(chat)
    assert _claims(live) == _claims(rebuilt)
    assert [bool(c) for c in _claims(rebuilt)] == [True, False]
