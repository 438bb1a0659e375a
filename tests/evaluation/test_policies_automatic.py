"""suggest_policies learns from people only: the decisions machinery made (a rule, a
resolver, a policy, ``nbagent.evaluate``, the notebook's fallback denial of a call nobody
saw) teach nothing, however many there are."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbagent
from nbagent import Chat, tool


@tool(requires_approval=True)
def issue_refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order.
    """
    return "refunded"


def _decided(db: str, by: str, n: int = 4) -> None:
    for i in range(n):
        chat = Chat("demo", store=db, display=False).with_tools(issue_refund)
        chat.ask(f"Refund order {i + 1}")
        reason = "not approved: no front end showed the approval"
        chat.deny(chat.pending_approvals[0], reason=reason, by=by)
        chat.complete()


def test_the_notebooks_fallback_denials_teach_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "fallback.db")
    _decided(db, "fallback")  # what approval_fallback="deny" records (notebook/_continuation)
    assert nbagent.suggest_policies(db) == []


def test_a_persons_denials_still_teach(tmp_path: Path) -> None:
    db = str(tmp_path / "person.db")
    _decided(db, "user")
    (rule,) = nbagent.suggest_policies(db)
    assert rule.tool == "issue_refund" and rule.verdict == "denied"


MACHINERY = ["resolver", "rule", "fallback", "evaluate", "policy:refunds"]


@pytest.mark.parametrize("by", MACHINERY)
def test_every_machine_decider_teaches_nothing(tmp_path: Path, by: str) -> None:
    db = str(tmp_path / "machine.db")
    _decided(db, by)
    assert nbagent.suggest_policies(db) == []


@pytest.mark.parametrize("by", MACHINERY)
def test_a_person_cannot_decide_under_machinerys_name(tmp_path: Path, by: str) -> None:
    """A person's decision named "fallback" or "evaluate" would be skipped as machinery's
    by suggest_policies (and one named "resolver" or "policy:x" could be overruled): the
    store and the inbox refuse those names, and the call stays undecided."""
    db = str(tmp_path / "named.db")
    chat = Chat("demo", store=db, display=False).with_tools(issue_refund)
    chat.ask("Refund order 7")
    (call,) = chat.pending_approvals
    store = nbagent.SQLiteStore(db)
    with pytest.raises(nbagent.DecisionError, match="names nbagent's own decider"):
        store.approve(call.id, by=by)
    with pytest.raises(nbagent.DecisionError, match="names nbagent's own decider"):
        store.deny(call.id, reason="no", by=by)
    with pytest.raises(ValueError, match="names nbagent's own decider"):
        nbagent.inbox(store, by=by)
    assert [c.id for c in Chat.load(chat.id, store=db, tools=[issue_refund]).pending_approvals] == [
        call.id
    ]


@pytest.mark.parametrize("by", ["user", "ops", "policy-team", "inbox-ana", "evaluator"])
def test_a_persons_names_are_taken_and_teach(tmp_path: Path, by: str) -> None:
    db = str(tmp_path / "person.db")
    chat = Chat("demo", store=db, display=False).with_tools(issue_refund)
    chat.ask("Refund order 7")
    nbagent.SQLiteStore(db).deny(chat.pending_approvals[0].id, reason="no", by=by)
    loaded = Chat.load(chat.id, store=db, tools=[issue_refund], display=False)  # takes it
    assert loaded.log["decision"].tolist() == ["denied"]  # "policy-team" is no policy
    (rule,) = nbagent.suggest_policies(db, min_support=1)
    assert rule.verdict == "denied"
