"""A policy's approval overruled in another process while the round runs, before the call is
claimed: the driving chat applies the denial and goes on, on SQLite and PostgreSQL.

Process A always allows ``refund``, then asks; the model asks for a slow ungated ``email``
and a ``refund`` (approved by the policy). While the email runs, process B loads the chat
and denies the refund (a person may overrule a chat's own automatic decision before the
call starts, in any process). A's claim of the refund then found it denied and took that
for another driver's claim: ``StoreConflictWarning`` "is being driven by another process
(refund(r1) is already denied)", A's record said ``approved`` while the store said
``denied``, ``refresh()`` did not mend it and every later ``complete()`` returned ``busy``;
the model heard of the denial only after a fresh ``Chat.load``. Now A applies the stored
denial as a decision made elsewhere (``ApprovalDecided(elsewhere=True)``), answers the call
with it without running it, and the round and the turn go on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import nbagent

sys.path.insert(0, str(Path(__file__).parent))
from _agent import count
from _overrule import Overrule, Overruled, overruled

# process B denies the refund and prints its status
DENY = Overrule('chat.deny("r1", "not this one")', 'print(chat.get_call("r1").status)')


def _check(run: Overruled, db: str) -> None:
    chat = run.chat
    assert run.said == "denied", run.said
    assert not run.conflicts(), run.conflicts()
    r1 = chat.get_call("r1")
    assert r1.status == "denied" and r1.decision is not None
    assert r1.decision.by == "user" and r1.decision.reason == "not this one"
    assert r1.result is not None and "not this one" in r1.result.content
    assert chat.status == "complete" and chat.last_step.kind == "complete"
    assert chat.last_assistant_message.content == "done"
    # the model was told of the denial in the request that got "done"
    told = run.told("r1")
    assert told and "not this one" in told[0]
    # applied as a decision made elsewhere, after the policy's own approval
    assert run.decided("r1") == [("policy:always_allow:refund", False), ("user", True)]
    assert count(run.counter) == 0  # the refund never ran
    with nbagent.open_store(db) as store:
        assert store.call("r1", chat_id=chat.id).status == "denied"
    again = run.reloaded(db)
    assert again.status == "complete" and again.get_call("r1").status == "denied"
    again.close()


@pytest.mark.parametrize("attempt", range(3))
def test_a_denial_made_elsewhere_before_the_claim_is_applied(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    run = overruled(backend.url, DENY, tmp_path, monkeypatch)
    _check(run, backend.url)
    run.chat.close()


@pytest.mark.parametrize("attempt", range(2))
def test_a_denial_made_elsewhere_before_the_claim_is_applied_async(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    # sequential (the default): the refund is claimed right before it starts, after the email
    run = overruled(backend.url, DENY, tmp_path, monkeypatch, use_async=True)
    _check(run, backend.url)
    run.chat.close()


@pytest.mark.parametrize("attempt", range(2))
def test_the_round_s_only_call_denied_elsewhere_before_its_claim(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    """Every call of the round refused by its claim used to end the step ``busy`` (the
    calls still runnable, claimed elsewhere): one answered by its stored decision is not
    claimed elsewhere, and the turn goes on to the model's answer."""
    run = overruled(backend.url, DENY, tmp_path, monkeypatch, before_step=True)
    chat = run.chat
    assert run.said == "denied", run.said
    assert not run.conflicts()
    assert chat.get_call("r1").status == "denied" and count(run.counter) == 0
    assert chat.last_step.kind == "complete" and chat.status == "complete"
    assert chat.last_assistant_message.content == "done"
    chat.close()
