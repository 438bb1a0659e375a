"""Who decided, as a card says it: "by you" only for a decision a person made on a card or at
``review()``'s prompt. A try that recorded nothing (an edit the tool's schema refused, JSON that
does not parse, a skip, a quit, an answer review() does not know) leaves no mark, so a later
``chat.approve`` in a cell reads "decided in code"; and the refused edit's error leaves the card
once the call is decided."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _views import widgets_in

from nbagent import Chat, Tool
from nbagent.notebook import ChatView
from nbagent.notebook._continuation import continuation_for
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply


class IssueRefund(Tool):
    """Issues a refund."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        return f"refunded {order_id}"


def refund_chat(*ids: str) -> Chat:
    calls = [("issue_refund", {"order_id": n}, cid) for n, cid in enumerate(ids, 1)]
    provider = ScriptedProvider([call_tools(*calls), reply("done")])
    return Chat(provider=provider, display=False).with_tools(IssueRefund)


def card_for(view: ChatView, call_id: str) -> ActionCard:
    (card,) = [
        w
        for w in widgets_in(view)
        if isinstance(w, ActionCard) and w.kind == "approval" and w.call_id == call_id
    ]
    return card


def decided_lines(chat: Chat) -> list[str]:
    text = chat_mimebundle(chat)["text/plain"]
    return [line.strip() for line in text.splitlines() if line.strip().startswith("approved")]


@pytest.mark.parametrize(
    "edit",
    ['{"order_id": "abc"}', '{"order_id": ', "[1, 2]", '{"order_id": 1, "extra": true}'],
    ids=["schema", "not-json", "not-an-object", "unknown-key"],
)
def test_a_refused_edit_then_approve_in_code_says_decided_in_code_and_drops_the_error(
    edit: str,
) -> None:
    chat = refund_chat("c1")
    view = ChatView(chat)
    chat.ask("go")
    card = card_for(view, "c1")
    card.click("edit", arguments=edit)
    assert card.state == "pending" and card.error  # refused: the card says why, nothing decided
    assert chat.pending_approvals
    chat.approve("c1")  # in a cell
    chat.complete()
    assert card.summary == "Approved, decided in code"
    assert card.error == ""  # the refused edit's error is over once the call is decided
    assert decided_lines(chat) == ["approved, decided in code"]


def test_a_click_that_decides_still_says_by_you() -> None:
    chat = refund_chat("c1")
    view = ChatView(chat)
    chat.ask("go")
    card = card_for(view, "c1")
    card.click("edit", arguments='{"order_id": "abc"}')  # refused first
    card.click("edit", arguments='{"order_id": 7}')  # then accepted
    assert continuation_for(chat).wait(10)
    assert card.summary == "Approved by you with edited arguments" and card.error == ""
    assert decided_lines(chat) == ["approved by you with edited arguments"]


def test_approve_all_marks_only_the_calls_it_decided() -> None:
    chat = refund_chat("c1", "c2")
    view = ChatView(chat)
    chat.ask("go")
    (batch,) = [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.kind == "batch"]
    batch.click("approve_all")
    assert continuation_for(chat).wait(10)
    assert decided_lines(chat) == ["approved by you", "approved by you"]


def answers(*said: str) -> Iterator[str]:
    yield from said
    raise EOFError


@pytest.mark.parametrize(
    "said",
    [("s",), ("",), ("q",), ("what",), ("e", "not json"), ("e", '{"order_id": "x"}'), ()],
    ids=["skip", "empty", "quit", "unknown", "edit-not-json", "edit-refused", "no-input"],
)
def test_a_review_answer_that_decides_nothing_leaves_no_mark(said: tuple[str, ...]) -> None:
    chat = refund_chat("c1")
    ChatView(chat)  # a view follows the chat (one never shown cannot tell code from a person)
    chat.ask("go")
    feed = answers(*said)
    chat.review(input=lambda _prompt: next(feed), print=lambda *_: None)
    assert [c.id for c in chat.pending_approvals] == ["c1"]
    chat.approve("c1")  # decided in code
    chat.complete()
    assert decided_lines(chat) == ["approved, decided in code"]


def test_a_review_answer_that_decides_says_by_you() -> None:
    chat = refund_chat("c1")
    ChatView(chat)
    chat.ask("go")
    feed = answers("what", "a")
    chat.review(input=lambda _prompt: next(feed), print=lambda *_: None)
    assert decided_lines(chat) == ["approved by you"]
