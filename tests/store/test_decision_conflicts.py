"""Decisions made in two places at once: the first one recorded in the store wins (issue 13,
item 3).

Process B decides through ``store.approve``/``store.deny``; process A, which has the chat
open and did not refresh, decides the other way (``chat.deny()``, or a click). A's decision
used to return normally, A's log and view said one thing, and the store (and whichever
process completed the chat next) did the other: a denied call ran. Now a chat's decision
is checked against the store and written there in one transaction before the chat records
it: on a conflict A gets ``DecisionError`` naming who decided and how, and A's chat shows
that decision (with its events, in its log and view). Both orders, both verdicts, with a
second store connection in this process and with real processes, on SQLite and on
PostgreSQL (``db`` is the file's path or the database's DSN; a lock held on the SQLite
file is SQLite's own).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from nbagent import ApprovalDecided, Chat, DecisionError, Event, StoreError
from nbagent.store import SQLiteStore, open_store

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402
from test_processes import _env, run_agent  # noqa: E402


@pytest.fixture
def db(backend: Any) -> str:
    return str(backend.url)


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


def parked(db: str, seen: list[Event]) -> Chat:
    """Process A's chat, parked on a refund, watched by ``seen`` (what its log and view get)."""
    chat = Chat(model="demo", store=db).with_tools(Refund)
    chat.on(ApprovalDecided, seen.append)
    chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    return chat


def complete_elsewhere(db: str, chat_id: str, counter: Path) -> None:
    """Whoever completes the chat next (here: a fresh process) does what the store says."""
    done = run_agent("complete", str(db), chat_id, env=_env(counter))
    assert done["status"] == "complete", done


# ---------------------------------------------------- another connection, this process
def test_a_deny_after_an_approval_elsewhere_is_refused_and_shows_the_approval(
    db: str, counter: Path
) -> None:
    seen: list[Event] = []
    a = parked(db, seen)
    call = a.pending_approvals[0]
    with open_store(db) as b:
        b.approve(call.id, by="manager")
        with pytest.raises(DecisionError, match=r"already approved by manager"):
            a.deny(call, reason="too much")
    assert call.status == "approved" and call.decision.by == "manager"
    assert [(e.decision.verdict, e.decision.by) for e in seen] == [("approved", "manager")]
    assert a.log.set_index("call_id").loc[call.id, "decided_by"] == "manager"
    a.complete()  # B's approval stands: the tool runs, once
    assert a.status == "complete" and count(counter) == 1
    with open_store(db) as b:
        stored = b.call(call.id)
        assert stored.status == "ok" and stored.decision.by == "manager"
    a.close()


def test_a_denial_here_first_refuses_the_approval_elsewhere(db: str, counter: Path) -> None:
    seen: list[Event] = []
    a = parked(db, seen)
    call = a.pending_approvals[0]
    a.deny(call, reason="too much")
    with open_store(db) as b:
        with pytest.raises(DecisionError, match=r"already denied by user"):
            b.approve(call.id, by="manager")
        assert b.call(call.id).status == "denied"
    a.complete()
    a.close()
    complete_elsewhere(db, a.id, counter)
    assert count(counter) == 0  # denied: it never runs, anywhere


def test_an_approval_after_a_denial_elsewhere_is_refused_and_shows_the_denial(
    db: str, counter: Path
) -> None:
    seen: list[Event] = []
    a = parked(db, seen)
    call = a.pending_approvals[0]
    with open_store(db) as b:
        b.deny(call.id, reason="over the limit", by="manager")
    with pytest.raises(DecisionError, match=r"already denied by manager"):
        a.approve(call)
    assert call.status == "denied" and "over the limit" in call.result.content
    assert [(e.decision.verdict, e.decision.by) for e in seen] == [("denied", "manager")]
    a.complete()
    a.close()
    complete_elsewhere(db, a.id, counter)
    assert count(counter) == 0


def test_the_same_verdict_twice_is_no_conflict(db: str, counter: Path) -> None:
    """Approving a call already approved elsewhere is a no-op, as approving twice is: the
    chat shows the first approval (who made it, when)."""
    seen: list[Event] = []
    a = parked(db, seen)
    call = a.pending_approvals[0]
    with open_store(db) as b:
        first = b.approve(call.id, by="manager").decision
    a.approve(call)
    assert call.decision == first
    a.complete()
    assert count(counter) == 1
    a.close()


def test_a_decision_that_cannot_be_written_is_not_made(tmp_path: Path, counter: Path) -> None:
    """The store cannot be written (locked past the busy timeout): the decision raises
    StoreError and is not recorded anywhere; made again once the file is free, it holds."""
    import sqlite3
    import warnings

    db = tmp_path / "agent.db"
    with SQLiteStore(db, timeout=0.2) as store:
        seen: list[Event] = []
        a = Chat(model="demo", store=store).with_tools(Refund)
        a.on(ApprovalDecided, seen.append)
        a.ask("Refund order 42")
        call = a.pending_approvals[0]
        lock = sqlite3.connect(db, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError, match="is locked"):
            a.deny(call)
        assert call.status == "awaiting_approval" and seen == []
        lock.execute("ROLLBACK")
        lock.close()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            a.deny(call)
        assert call.status == "denied" and store.call(call.id).status == "denied"
        a.complete()
        assert count(counter) == 0
        a.close()


def test_a_decision_on_a_closed_chat_is_not_made(db: str, counter: Path) -> None:
    """After ``chat.close()`` the store is let go: a decision was recorded in the chat only,
    the store still said pending and took the opposite decision from another process, and
    both "won". It now raises ``StoreError`` and is not made; the store's decides."""
    seen: list[Event] = []
    a = parked(db, seen)
    call = a.pending_approvals[0]
    a.close()
    for decide in (a.approve, a.deny):
        with pytest.raises(StoreError, match=r"was closed: the (approval|denial) of refund"):
            decide(call)
    assert call.status == "awaiting_approval" and call.decision is None and seen == []
    with open_store(db) as store:
        assert store.call(call.id).status == "awaiting_approval"
        store.deny(call.id, by="ops")
    b = Chat.load(a.id, store=db, tools=[Refund])
    assert b.tool_calls[0].status == "denied"
    b.complete()
    b.close()
    assert count(counter) == 0


def test_a_click_on_deny_after_an_approval_elsewhere_shows_it(db: str, counter: Path) -> None:
    """The notebook view: the Deny click is refused, the card says why and shows the
    approval made elsewhere."""
    pytest.importorskip("ipywidgets")
    from nbagent.notebook import ChatView
    from nbagent.notebook._widgets import ActionCard

    a = Chat(model="demo", store=db).with_tools(Refund)
    view = ChatView(a)
    a.ask("Refund order 42")
    call = a.pending_approvals[0]
    with open_store(db) as b:
        b.approve(call.id, by="manager")

    widgets: list[Any] = []
    stack = [view.widget]
    while stack:
        w = stack.pop()
        widgets.append(w)
        stack.extend(getattr(w, "children", ()))
    (card,) = [w for w in widgets if isinstance(w, ActionCard) and w.call_id == call.id]
    card.click("deny")
    assert "already approved by manager" in card.error
    assert card.state == "approved"
    assert call.status == "approved" and call.decision.by == "manager"
    html = "".join(w.value for w in widgets if hasattr(w, "value") and isinstance(w.value, str))
    assert "approved elsewhere by manager at " in html  # who decided, and when
    a.close()


# --------------------------------------------------------------------- real processes
def test_a_deny_after_an_approval_in_another_process(db: str, counter: Path) -> None:
    seen: list[Event] = []
    a = parked(db, seen)
    call = a.pending_approvals[0]
    assert run_agent("approve", str(db), call.id, env=_env(counter))["status"] == "approved"
    with pytest.raises(DecisionError, match=r"already approved by script"):
        a.deny(call)
    assert call.status == "approved" and [e.decision.by for e in seen] == ["script"]
    a.close()
    complete_elsewhere(db, a.id, counter)
    assert count(counter) == 1  # the approval that won runs, once


def test_a_denial_here_refuses_the_approval_of_another_process(db: str, counter: Path) -> None:
    seen: list[Event] = []
    a = parked(db, seen)
    call = a.pending_approvals[0]
    a.deny(call, reason="no")
    refused = run_agent("approve", str(db), call.id, env=_env(counter), check=False)
    assert refused["returncode"] != 0  # store.approve raised DecisionError there
    a.close()
    complete_elsewhere(db, a.id, counter)
    assert count(counter) == 0


def test_an_approval_after_a_denial_in_another_process(db: str, counter: Path) -> None:
    seen: list[Event] = []
    a = parked(db, seen)
    call = a.pending_approvals[0]
    run_agent("approve", str(db), call.id, "--deny", "over the limit", env=_env(counter))
    with pytest.raises(DecisionError, match=r"already denied by script"):
        a.approve(call)
    assert call.status == "denied"
    a.complete()
    assert a.status == "complete"
    a.close()
    complete_elsewhere(db, a.id, counter)
    assert count(counter) == 0


def test_a_denial_whose_result_was_not_written_is_applied_again_on_load(
    db: str, counter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The denial is in the store before the chat records it; its result follows with its
    event. If the process dies in between (here: that write fails, and another process
    loads the chat), the loading chat applies the stored denial again: the model is told,
    the tool does not run."""
    import warnings

    store = open_store(db)
    a = Chat(model="demo", store=store).with_tools(Refund)
    a.ask("Refund order 42")
    call = a.pending_approvals[0]
    write = store.write

    def failing(chat_id: str, entries: Any, *args: Any, **kwargs: Any) -> Any:
        if any(e.type == "tool_call_finished" for e in entries):
            raise StoreError("disk I/O error")
        return write(chat_id, entries, *args, **kwargs)

    monkeypatch.setattr(store, "write", failing)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        a.deny(call, reason="over the limit")
    with open_store(db) as other:
        stored = other.call(call.id)
        assert stored.status == "denied" and stored.result is None  # as if A died here
        b = Chat.load(a.id, store=other, tools=[Refund])
        again = b.get_call(call.id)
        assert again.status == "denied" and again.decision == call.decision
        assert again.result is not None and "over the limit" in again.result.content
        b.complete()
        assert b.status == "complete" and count(counter) == 0
        assert other.call(call.id).result is not None
        b.close()
    monkeypatch.setattr(store, "write", write)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        a.close()  # its own writes now conflict with B's: A stops, nothing runs
    store.close()
    assert count(counter) == 0
