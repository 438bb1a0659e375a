"""A policy's approval a person overrules with edited arguments from another process while
the round runs, before the call is claimed: the call runs once, with the person's arguments,
on SQLite and PostgreSQL, sync and async.

Process A always allows ``refund``, then asks; the model asks for a slow ungated ``email``
and ``refund(order_id=1)`` (approved by the policy). While the email runs, process B loads
the chat and approves the refund with ``order_id=999`` (a person may overrule a chat's own
automatic decision before the call starts, in any process). A's claim of the refund used to
succeed, as the row still said ``approved``: A refunded order 1, and the store then recorded
the person's approval of order 999 for a call that ran with order 1 (an approved call did
not run as approved). The claim is now granted only for the decision the claimant holds: A's
claim is refused, A applies the person's approval as one made elsewhere, claims again with it
and refunds order 999, once; the model is told of the edit as of any edit.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, Decision
from nbagent._result_text import edit_note
from nbagent.store import _codec as codec
from nbagent.testing import ScriptedProvider, call_tools

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund
from _overrule import Overrule, Overruled, overruled

# process B approves the refund with order 999 and prints its status and order
EDIT = Overrule(
    'chat.approve("r1", arguments={"order_id": 999})',
    'c = chat.get_call("r1")\nprint(c.status, c.effective_arguments["order_id"])',
)


def _runs(counter: Path) -> list[str]:
    """The order ids the refund ran with, one per run (in any process)."""
    lines = counter.read_text().splitlines() if counter.exists() else []
    return [line.split()[1] for line in lines]


def _check(run: Overruled, db: str) -> None:
    chat, counter = run.chat, run.counter
    assert run.said == "approved 999", run.said
    assert not run.conflicts(), run.conflicts()
    assert _runs(counter) == ["999"]  # once, with the person's arguments
    r1 = chat.get_call("r1")
    assert r1.status == "ok" and r1.decision is not None
    assert r1.decision.by == "user" and r1.decision.arguments == {"order_id": 999}
    assert r1.effective_arguments == {"order_id": 999}
    assert r1.result is not None and "refunded order 999" in r1.result.content
    assert chat.status == "complete" and chat.last_step.kind == "complete"
    assert chat.last_assistant_message.content == "done"
    # the model was told of the edit, as of any edit
    told = run.told("r1")
    assert told and told[0].startswith(edit_note({"order_id": 999}))
    assert "refunded order 999" in told[0]
    # applied as a decision made elsewhere, after the policy's own approval
    assert run.decided("r1") == [("policy:always_allow:refund", False), ("user", True)]
    with nbagent.open_store(db) as store:
        stored = store.call("r1", chat_id=chat.id)
        assert stored.status == "ok" and stored.started_at is not None
        assert stored.decision is not None and stored.decision.by == "user"
        assert stored.decision.arguments == {"order_id": 999}
        assert stored.result is not None and "refunded order 999" in stored.result.content
        log = nbagent.read_log(store, chat_id=chat.id).set_index("call_id")
        assert log.loc["r1", "status"] == "ok" and log.loc["r1", "decided_by"] == "user"
        assert log.loc["r1", "edited_arguments"] == {"order_id": 999}
        assert "refunded order 999" in str(log.loc["r1", "result_preview"])
    again = run.reloaded(db)
    try:
        assert again.status == "complete"
        back = again.get_call("r1")
        assert back.status == "ok" and back.effective_arguments == {"order_id": 999}
        assert back.decision is not None and back.decision.by == "user"
    finally:
        again.close()
    assert _runs(counter) == ["999"]


@pytest.mark.parametrize("attempt", range(3))
def test_an_edited_approval_made_elsewhere_before_the_claim_runs_as_edited(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    run = overruled(backend.url, EDIT, tmp_path, monkeypatch)
    _check(run, backend.url)
    run.chat.close()


@pytest.mark.parametrize("attempt", range(3))
def test_an_edited_approval_made_elsewhere_before_the_claim_runs_as_edited_async(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    # sequential (the default): the refund is claimed right before it starts, after the email
    # (on PostgreSQL by the loop's sender: the grouped claim)
    run = overruled(backend.url, EDIT, tmp_path, monkeypatch, use_async=True)
    _check(run, backend.url)
    run.chat.close()


@pytest.mark.parametrize("attempt", range(2))
def test_the_round_s_only_call_edited_elsewhere_before_its_claim(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    """Edited after the step read the decisions and before the round claims the call. (The
    async driver writes the response with the claim of the round's first call, in one
    transaction: there is no such moment; its later calls' claims are the async tests'
    above.)"""
    run = overruled(backend.url, EDIT, tmp_path, monkeypatch, before_step=True)
    _check(run, backend.url)
    run.chat.close()


def test_a_claim_is_granted_only_for_the_decision_the_claimant_holds(backend: Any) -> None:
    """The store's side: ``claim(decision=...)`` refuses a call whose stored decision is
    another (``ClaimResult.decision`` is the one stored), and grants the one held."""
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 1}, "r1"))]),
        store=backend.url,
        display=False,
    ).with_tools(Refund)
    chat.ask("go")  # parks on the approval
    chat.approve("r1")
    held = chat.get_call("r1").decision
    assert held is not None
    other = Decision("approved", "policy:x", held.at + timedelta(seconds=1), None, None)
    with backend.open() as store:
        if backend.kind == "postgres":  # the loop sender's grouped claim: one statement
            refused_job = store.write_job(
                chat.id, [], claims=["r1"], owner="s", decisions={"r1": other}
            )
            assert refused_job is not None
            assert asyncio.run(store.send_async(refused_job)) is False  # the group wrote nothing
            assert store.call("r1", chat_id=chat.id).status == "approved"
        refused = store.claim(chat.id, "r1", "someone", decision=other)
        assert not refused.claimed and refused.claimed_by is None
        assert refused.status == "approved" and refused.decision == held
        assert store.call("r1", chat_id=chat.id).status == "approved"
        # the same decision, its time in another zone (a row written in another form than
        # the claim's check reads): the careful path decides it is the one held
        elsewhere = held.at.astimezone(timezone(timedelta(hours=2)))
        same = Decision(held.verdict, held.by, elsewhere, held.reason, held.arguments)
        granted = store.claim(chat.id, "r1", "someone", decision=same)
        assert granted.claimed and store.call("r1", chat_id=chat.id).claimed_by == "someone"
    chat.close()


def test_the_loop_sender_s_grouped_claim_is_granted_for_the_decision_held(
    postgres_dsn: str,
) -> None:
    """PostgreSQL's grouped claim (``write_job``/``send_async``) checks the decision held in
    the claim's own statement: granted for the stored decision, in the group's one trip."""
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 1}, "r1"))]),
        store=postgres_dsn,
        display=False,
    ).with_tools(Refund)
    chat.ask("go")
    chat.approve("r1")
    held = chat.get_call("r1").decision
    assert held is not None
    with nbagent.open_store(postgres_dsn) as store:
        job = store.write_job(chat.id, [], claims=["r1"], owner="s", decisions={"r1": held})
        assert job is not None and asyncio.run(store.send_async(job)) is True
        assert store.call("r1", chat_id=chat.id).claimed_by == "s"
    chat.close()


_DECIDERS = st.sampled_from(["policy:always_allow:refund", "resolver", "user", "ops"])
_TIMES = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)
_ZONES = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7))])
_PARKED: dict[str, tuple[str, str]] = {}  # one store with an approved call, for every example


def _parked(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if not _PARKED:
        db = str(tmp_path_factory.mktemp("property") / "agent.db")
        provider = ScriptedProvider([call_tools(("refund", {"order_id": 1}, "r1"))])
        chat = Chat(provider=provider, store=db, display=False).with_tools(Refund)
        chat.ask("go")  # parks on the approval
        chat.approve("r1")
        _PARKED["one"] = (db, chat.id)
        chat.close()
    return _PARKED["one"]


@settings(max_examples=60, deadline=None)
@given(
    stored_by=_DECIDERS,
    stored_at=_TIMES,
    held_by=_DECIDERS,
    held_at=_TIMES | st.none(),
    zone=_ZONES,
    edit=st.sampled_from([None, {"order_id": 999}]),
)
def test_a_claim_is_granted_exactly_when_the_decision_held_is_the_one_stored(
    tmp_path_factory: pytest.TempPathFactory,
    stored_by: str,
    stored_at: datetime,
    held_by: str,
    held_at: datetime | None,
    zone: Any,
    edit: dict[str, int] | None,
) -> None:
    """Property (SQLite: the grouped statement, then the careful path): whatever the two
    decisions, a claim is granted iff the decision held is the stored one (its decider and
    instant, the time written in any zone), and a refused claim changes nothing and names
    the stored decision."""
    db, chat_id = _parked(tmp_path_factory)
    stored = Decision("approved", stored_by, stored_at, None, edit)
    instant = stored_at if held_at is None else held_at
    held = Decision("approved", held_by, instant.astimezone(zone), None, None)
    with sqlite3.connect(db) as conn:  # the call approved by ``stored``, claimed by nobody
        conn.execute(
            "UPDATE tool_calls SET status = 'approved', claimed_by = NULL, claimed_at = NULL, "
            "decision = ? WHERE chat_id = ? AND call_id = 'r1'",
            (codec.dumps(codec.decision_out(stored)), chat_id),
        )
    conn.close()
    with nbagent.open_store(db) as store:
        result = store.claim(chat_id, "r1", "me", decision=held)
        row = store.call("r1", chat_id=chat_id)
    same = held_by == stored_by and instant == stored_at
    assert result.claimed is same
    if same:
        assert (row.status, row.claimed_by) == ("running", "me")
    else:
        assert (row.status, row.claimed_by) == ("approved", None)
        assert result.claimed_by is None and result.decision == stored
