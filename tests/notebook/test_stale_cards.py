"""Cards that never lie about decisions made elsewhere (a store, another process, another
chat object): they refresh by themselves while pending, and a click on a card decided
elsewhere records nothing and says who decided and when."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ipywidgets
import pytest
from _views import widgets_in

from nbagent import Chat, Tool
from nbagent.notebook import ChatView
from nbagent.notebook import _continuation as cont
from nbagent.notebook._widgets import ActionCard
from nbagent.store import SQLiteStore, StoreConflictWarning

STORE_TESTS = Path(__file__).resolve().parent.parent / "store"
runs: list[int] = []
runs_lock = threading.Lock()


class Refund(Tool):
    """Refund an order."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order to refund.
        """
        with runs_lock:
            runs.append(order_id)
        return f"refunded order {order_id}"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    runs.clear()
    yield


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "chats.db"


def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def parked(db: Path, *, displayed: bool) -> tuple[Chat, ChatView, str]:
    chat = Chat(model="demo", store=str(db), display=False).with_tools(Refund)
    view = ChatView(chat)
    if displayed:
        view._ipython_display_()  # outside a kernel: prints the bundle, marks it shown
    chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    return chat, view, chat.pending_approvals[0].id


def card_of(view: ChatView, call_id: str) -> ActionCard:
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.call_id == call_id]
    return card


def shown(view: ChatView) -> str:
    """The HTML the view draws: entries, and the call card a decision card holds."""
    return "".join(
        w.value for w in widgets_in(view) if isinstance(w, (ipywidgets.HTML, ActionCard))
    )


def decision_rows(db: Path, call_id: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT verdict, decided_by, source FROM decisions WHERE call_id = ?", (call_id,)
        ).fetchall()


def test_a_pending_card_follows_a_decision_by_another_chat_object(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, view, call_id = parked(db, displayed=True)
    card = card_of(view, call_id)
    follows = cont.continuation_for(a)
    until(lambda: follows.following)  # a displayed pending card of a stored chat: following
    b = Chat.load(a.id, store=str(db), tools=[Refund], display=False)  # "another cell"
    b.approve(call_id)
    # No click here: the card closes, says who decided, and this kernel carries on.
    until(lambda: a.status == "complete" and not cont.continuation_for(a).busy)
    assert card.state == "approved"
    assert "approved elsewhere by a user at " in shown(view)
    assert '<span class="nba-phase-complete">complete</span>' in shown(view)
    assert runs == [42]  # once, here
    assert decision_rows(db, call_id) == [("approved", "user", "chat")]  # b's, nothing new
    until(lambda: not follows.following)  # no pending card left: it stopped following
    b.close()
    a.close()


def test_a_pending_card_follows_a_decision_from_another_process(
    db: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, view, call_id = parked(db, displayed=True)
    env = dict(os.environ, NBAGENT_TEST_COUNTER=str(tmp_path / "runs.txt"))
    env["PYTHONPATH"] = os.pathsep.join([str(STORE_TESTS), env.get("PYTHONPATH", "")])
    subprocess.run(
        [sys.executable, str(STORE_TESTS / "_agent.py"), "approve", str(db), call_id],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    until(lambda: a.status == "complete" and not cont.continuation_for(a).busy)
    assert card_of(view, call_id).state == "approved"
    assert "approved elsewhere by script at " in shown(view)
    assert runs == [42]
    a.close()


def test_no_poll_without_a_displayed_view_or_a_store(db: Path) -> None:
    a, _view, _ = parked(db, displayed=False)
    assert not cont.continuation_for(a).following
    plain = Chat(model="demo", display=False).with_tools(Refund)
    view = ChatView(plain)
    view._displayed = True  # shown, but nothing to refresh from
    plain.ask("Refund order 1")
    assert not cont.can_refresh(plain) and not cont.continuation_for(plain).following
    a.close()


def test_a_click_on_a_card_decided_and_run_elsewhere_records_nothing(db: Path) -> None:
    a, view, call_id = parked(db, displayed=False)  # no poll: the card is stale
    with SQLiteStore(db) as store:
        store.approve(call_id, by="ops")
    b = Chat.load(a.id, store=str(db), tools=[Refund], display=False)
    b.complete()  # another copy ran it
    assert runs == [42] and b.status == "complete"
    before = decision_rows(db, call_id)
    card = card_of(view, call_id)
    assert card.state == "pending"  # stale
    with pytest.warns(StoreConflictWarning, match="driven by another process"):
        card.click("approve")
        until(lambda: not cont.continuation_for(a).busy and not a.is_running)
    assert runs == [42]  # not again
    assert decision_rows(db, call_id) == before == [("approved", "ops", "store")]
    html = shown(view)
    assert "approved elsewhere by ops at " in html and "approved by you" not in html
    assert card.state == "approved"
    assert '<span class="nba-phase-awaiting">driven elsewhere</span>' in html
    b.close()
    a.close()


@pytest.mark.parametrize("elsewhere, click", [("approve", "deny"), ("deny", "approve")])
def test_a_click_that_loses_to_a_decision_elsewhere_still_carries_the_turn_on(
    db: Path, elsewhere: str, click: str
) -> None:
    """Decided in another process, not run: the click (the other verdict) reaches the
    kernel before its follower saw the decision. The click records nothing, the card says
    who decided, and this kernel carries the turn on with that decision, as it would have
    after seeing it. Before, the turn stopped there: an approved refund never ran (and a
    denial never reached the model) until someone ran ``chat.complete()`` by hand."""
    a, view, call_id = parked(db, displayed=False)  # no follower: the click comes first
    with SQLiteStore(db) as store:
        getattr(store, elsewhere)(call_id, by="bob")
    card = card_of(view, call_id)
    assert card.state == "pending"
    card.click(click)
    until(lambda: a.status == "complete" and not cont.continuation_for(a).busy)
    verdict = "approved" if elsewhere == "approve" else "denied"
    assert card.state == verdict and "already" in card.error
    assert runs == ([42] if elsewhere == "approve" else [])
    assert decision_rows(db, call_id) == [(verdict, "bob", "store")]
    assert f"{verdict} elsewhere by bob at " in shown(view)
    a.close()


def test_decision_words_say_who_decided_elsewhere_and_when() -> None:
    from datetime import datetime, timedelta, timezone

    from nbagent import Decision
    from nbagent._record import CallRecord
    from nbagent.notebook._render import decision_words
    from nbagent.notebook._state import CallEntry

    at = datetime(2026, 12, 1, 7, 3, 4, tzinfo=timezone(timedelta(hours=1)))

    def decided(verdict: str, by: str, reason: str | None = None) -> None:
        r.decided = Decision(verdict, by, at, reason)  # type: ignore[arg-type]
        r.decided_by, r.reason, r.decided_at = by, reason, at

    r = CallRecord("c1", "refund")
    e = CallEntry("c:1", 1, r=r)
    decided("approved", "ops")
    assert decision_words(e) == "approved by ops"  # decided here
    e.decided_elsewhere = True
    assert decision_words(e) == "approved elsewhere by ops at 2026-12-01 06:03:04 UTC"
    decided("denied", "user", "too much")
    assert decision_words(e) == "denied elsewhere by a user at 2026-12-01 06:03:04 UTC: too much"
    decided("approved", "policy:always_allow:refund")
    r.edited_arguments = {"order_id": 1}
    assert decision_words(e) == (
        "approved elsewhere by an always-allow rule at 2026-12-01 06:03:04 UTC"
        " with edited arguments"
    )


def test_the_status_line_leaves_awaiting_approval_once_every_call_is_decided() -> None:
    from nbagent.notebook._state import state_for
    from nbagent.testing._scripted import ScriptedProvider, call_tools

    provider = ScriptedProvider(
        [call_tools(("refund", {"order_id": 1}, "c1"), ("refund", {"order_id": 2}, "c2"))]
    )
    chat = Chat(provider=provider, display=False).with_tools(Refund)
    state = state_for(chat)
    chat.ask("refund both")
    assert state.totals_for(1).phase == "awaiting approval"
    chat.approve("c1")
    assert state.totals_for(1).phase == "awaiting approval"  # c2 still waits
    chat.deny("c2")
    assert state.totals_for(1).phase == "ready"  # decided, not run yet
