"""A decision made through the store (``store.approve``, the inbox, another process) is in
``read_log(store)`` as soon as it is made, not only once its chat runs on: the inbox's
decisions on parked chats counted as "pending" in the log and taught ``suggest_policies``
nothing until every chat was loaded again."""

from __future__ import annotations

from typing import Any

import nbagent
from nbagent import Chat, tool

RAN: list[int] = []


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order.
    """
    RAN.append(order_id)
    return "refunded"


def _parked(url: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        chat = Chat("demo", store=url, display=False).with_tools(issue_refund)
        chat.ask(f"Refund order {i + 1}")
        assert chat.status == "awaiting_approval"
        ids.append(chat.id)
        chat.close()
    return ids


def test_store_decisions_are_in_the_log_before_the_chats_run_on(backend: Any) -> None:
    RAN.clear()
    ids = _parked(backend.url, 3)
    store = backend.open()
    try:
        calls = {c.chat_id: c for c in store.pending_approvals()}
        store.approve(calls[ids[0]].id, chat_id=ids[0], by="ops")
        store.deny(calls[ids[1]].id, chat_id=ids[1], reason="too much", by="ops")
        store.approve(calls[ids[2]].id, chat_id=ids[2], arguments={"order_id": 99}, by="ana")
        log = nbagent.read_log(store).set_index("chat_id").loc[ids]
        assert log["status"].tolist() == ["approved", "denied", "approved"]
        assert log["decision"].tolist() == ["approved", "denied", "approved"]
        assert log["decided_by"].tolist() == ["ops", "ops", "ana"]
        assert log["reason"].tolist()[1] == "too much"
        assert log["edited_arguments"].tolist()[2] == {"order_id": 99}
        assert RAN == []  # made, not run: nothing ran for the log to say so
        # what the chats themselves recorded, when asked for only that
        own = nbagent.read_log(store, untaken=False)
        assert own["decision"].tolist() == ["pending"] * 3

        # the chats take them; the log says the same, once per call
        for cid in ids:
            Chat.load(cid, store=backend.url, tools=[issue_refund], display=False).complete()
        assert sorted(RAN) == [1, 99]
        log = nbagent.read_log(store).set_index("chat_id").loc[ids]
        assert len(log) == 3
        assert log["status"].tolist() == ["ok", "denied", "ok"]
        assert log["decided_by"].tolist() == ["ops", "ops", "ana"]
    finally:
        store.close()


def test_suggest_policies_learns_from_the_inboxs_decisions_at_once(backend: Any) -> None:
    RAN.clear()
    _parked(backend.url, 3)
    store = backend.open()
    try:
        inbox = nbagent.inbox(store, by="inbox-ana", continue_chats=False)
        inbox.deny("all", reason="refunds go through finance")
        (rule,) = nbagent.suggest_policies(store)
        assert (rule.tool, rule.verdict, rule.support) == ("issue_refund", "denied", 3)
        assert RAN == []
    finally:
        store.close()
