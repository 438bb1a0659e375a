"""Across processes: a decision made in another process reaches a shown inbox, and a click on
the row it made stale records nothing (the store's first decision wins)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, Tool
from nbagent.inbox._sources import StoreSource
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

REPO = Path(__file__).resolve().parents[2]


class Deploy(Tool):
    """Deploy a service."""

    requires_approval = True

    def execute(self, service: str) -> str:
        raise AssertionError("never run in these tests")


def _stored_chats(path: Path, n: int) -> list[str]:
    ids = []
    for i in range(n):
        script = [call_tools(("deploy", {"service": f"svc-{i}"})), reply("done")]
        with Chat(provider=ScriptedProvider(script), store=path, display=False) as chat:
            chat.with_tools(Deploy).ask("deploy")
            ids.append(chat.id)
    return ids


def _in_another_process(code: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def _until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_decision_from_another_process_reaches_the_shown_inbox(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    ids = _stored_chats(path, 2)
    box = nbagent.inbox(path)
    w = box.widget  # shown: it polls the store
    try:
        assert len(w.rows) == 2
        stale = next(r for r in w.rows if r["chat_id"] == ids[0])
        call_id = box.pending.set_index("chat_id").loc[ids[0], "call_id"]
        _in_another_process(
            "from nbagent.store import SQLiteStore\n"
            f"s = SQLiteStore({str(path)!r})\n"
            f"s.deny({call_id!r}, chat_id={ids[0]!r}, reason='freeze', by='ops')\n"
            "s.close()\n"
        )
        _until(lambda: len(w.rows) == 1)  # no refresh asked: the poll saw it
        words = next(d["words"] for d in w.decided if d["key"] == stale["key"])
        assert words.startswith("denied elsewhere by ops at ") and words.endswith(": freeze")
        w.click("approve", keys=[stale["key"]])  # the row a browser may still show
        assert w.summary.startswith("Approved 0 calls; 1 had been decided elsewhere")
        store = SQLiteStore(path)
        decision = store.call(call_id, chat_id=ids[0]).decision
        assert decision is not None and (decision.verdict, decision.by) == ("denied", "ops")
        store.close()
    finally:
        box.close()


def test_the_store_refuses_a_decision_on_a_row_read_before_another_process_decided(
    tmp_path: Path,
) -> None:
    """The backstop under the inbox's fresh reads: a decision recorded by another process
    between the inbox's last read and its write; the store keeps the first decision (same
    verdict: returned unchanged; the other verdict: refused), and the inbox says so."""
    path = tmp_path / "chats.db"
    ids = _stored_chats(path, 1)
    store = SQLiteStore(path)
    source = StoreSource(store)
    (row,) = source.pending()
    real = source.decision
    stale: list[bool] = []  # each decide's first read: from before the other process decided

    def decision(r: Any) -> Any:
        return None if stale and stale.pop() else real(r)

    source.decision = decision  # type: ignore[method-assign]
    _in_another_process(
        "from nbagent.store import SQLiteStore\n"
        f"s = SQLiteStore({str(path)!r})\n"
        f"s.approve({row.call_id!r}, chat_id={ids[0]!r}, by='ops')\n"
        "s.close()\n"
    )
    for verdict in ("approved", "denied"):  # the same verdict, and a contradicting one
        stale.append(True)
        outcome = source.decide(row, verdict, None, "inbox")  # type: ignore[arg-type]
        assert not stale  # the stale read was the one used (the one after refusal is fresh)
        assert (outcome.outcome, outcome.verdict, outcome.by) == (
            "decided elsewhere",
            "approved",
            "ops",
        )
    decision = store.call(row.call_id, chat_id=ids[0]).decision
    assert decision is not None and decision.by == "ops"
    store.close()


class _Notified:
    """A store whose decisions are pushed (what PostgreSQL's LISTEN/NOTIFY gives through
    ``store.watch``): SQLite underneath, the notification sent by the test."""

    def __init__(self, store: SQLiteStore):
        self._store = store
        self.notify = threading.Event()
        self.watched: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def watch(self, chat_ids: Any = None) -> Any:
        outer = self
        outer.watched.append(chat_ids)

        class Watch:
            def wait(self, timeout: float | None = None) -> set[str]:
                if outer.notify.wait(timeout):
                    outer.notify.clear()
                    return {"some chat"}
                return set()

            def close(self) -> None:
                pass

        return Watch()


def test_a_store_that_pushes_decisions_reaches_the_inbox_without_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbagent.inbox import _inbox

    monkeypatch.setattr(_inbox, "POLL_SECONDS", 120.0)  # only the watch can bring news
    path = tmp_path / "chats.db"
    ids = _stored_chats(path, 2)
    store = _Notified(SQLiteStore(path))
    box = nbagent.inbox(store)
    w = box.widget
    try:
        _until(lambda: store.watched == [None])
        other = SQLiteStore(path)  # another writer (in real life: another process)
        other.approve(box.pending["call_id"].iloc[0], chat_id=ids[0], by="ops")
        other.close()
        time.sleep(0.3)
        assert len(w.rows) == 2  # not polled
        store.notify.set()  # the NOTIFY
        _until(lambda: len(w.rows) == 1, timeout=5)
        assert w.decided[0]["words"].startswith("approved elsewhere by ops")
    finally:
        box.close()
        store.close()


def test_shown_inboxes_and_pending_cards_follow_a_store_with_no_thread_of_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every consumer subscribes to the store's one follower: five shown inboxes and a
    displayed pending card start no thread each, and all of them see a decision made in
    another process."""
    from nbagent.notebook import ChatView

    path = tmp_path / "chats.db"
    ids = _stored_chats(path, 2)
    store = SQLiteStore(path)
    chat = Chat.load(ids[1], store=store, tools=[Deploy], provider=ScriptedProvider([reply("ok")]))
    before = {t.name for t in threading.enumerate()}
    boxes = [nbagent.inbox(store) for _ in range(5)]
    widgets = [b.widget for b in boxes]  # shown: they follow the store
    view = ChatView(chat)
    view._ipython_display_()  # outside a kernel: marks it shown, its card pending
    try:
        new = {t.name for t in threading.enumerate()} - before
        assert {n for n in new if n.startswith("nbagent-")} <= {"nbagent-loop"}
        _in_another_process(
            "from nbagent.store import SQLiteStore\n"
            f"s = SQLiteStore({str(path)!r})\n"
            "for c in s.pending_approvals():\n"
            "    s.deny(c, reason='freeze', by='ops')\n"
            "s.close()\n"
        )
        _until(lambda: all(len(w.rows) == 0 for w in widgets))
        _until(lambda: not chat.awaiting_approval)  # the card's chat applied it
    finally:
        for b in boxes:
            b.close()
        chat.close()
        store.close()
