"""suggest_policies learns from people only: the decisions machinery made (a rule, a
resolver, a policy, ``nbagent.evaluate``, the notebook's fallback denial of a call nobody
saw) teach nothing, however many there are."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.evaluation._policies import AUTOMATIC_DECIDERS, automatic


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


@pytest.mark.parametrize("by", [*sorted(AUTOMATIC_DECIDERS), "policy:refunds"])
def test_every_automatic_decider_is_machinery(by: str) -> None:
    assert automatic(by)


@pytest.mark.parametrize("by", ["user", "ops", "policy-team", "inbox", "store"])
def test_a_persons_names_are_not(by: str) -> None:
    assert not automatic(by)
