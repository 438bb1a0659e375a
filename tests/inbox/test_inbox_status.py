"""What the inbox says about itself is true: its counts agree and name the filter they count
by, and a shown inbox whose store cannot be read says its rows are as last read (until a read
works again) instead of showing them as live."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, StoreError, Tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply


class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        raise AssertionError("never run in these tests")


def _park(store: Any, order_id: int) -> str:
    script = [call_tools(("refund", {"order_id": order_id})), reply("done")]
    with Chat(provider=ScriptedProvider(script), store=store, display=False) as chat:
        chat.with_tools(Refund).ask(f"refund {order_id}")
        return chat.id


def _until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# ------------------------------------------------------------------ counts
def test_the_counts_agree_and_name_the_filter(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    for order_id in (41, 42, 43):
        _park(path, order_id)
    with nbagent.inbox(path) as box:
        assert repr(box).startswith("Inbox(3 pending; store ")
        box.filter(where={"order_id": 42})
        said = "1 pending matching the filter order_id=42 (3 in all)"
        static = box._repr_mimebundle_()
        assert repr(box).startswith(f"Inbox({said}; store ")
        assert static["text/plain"].startswith(f"Approvals inbox: {said} (store ")
        assert f"Approvals inbox</b>: {said} (store " in static["text/html"]
        assert len(box) == len(box.pending) == 1
        box.filter(where={"order_id": 7})
        text = box._repr_mimebundle_()["text/plain"]
        assert "0 pending matching the filter order_id=7 (3 in all)" in text
        assert "no pending call matches the filter" in text and "nothing waits" not in text
        box.filter()
        assert box._repr_mimebundle_()["text/plain"].startswith("Approvals inbox: 3 pending (")


# --------------------------------------------------------- unreadable store
class OutageStore(SQLiteStore):
    """A real SQLite store whose reads fail while ``down`` is set (a database server that
    went away and came back)."""

    down = False

    def pending_approvals(self, chat_id: str | None = None) -> Any:
        if self.down:
            raise StoreError(
                f"store {self.location}: connection to postgresql://app:hunter2@db/agents refused"
            )
        return super().pending_approvals(chat_id)


def test_a_shown_inbox_says_when_its_store_cannot_be_read_and_when_it_can_again(
    tmp_path: Path,
) -> None:
    store = OutageStore(tmp_path / "chats.db")
    ids = [_park(store, i) for i in (1, 2)]
    box = nbagent.inbox(store)
    w = box.widget  # shown: it reads the store every 1.5 s
    try:
        assert len(w.rows) == 2 and w.stale == "" and box.read_problem == ""
        store.down = True
        _until(lambda: w.stale != "")
        assert w.stale.startswith("The inbox cannot read its sources since ")
        assert "refused" in w.stale and "the rows are as last read" in w.stale
        assert "hunter2" not in w.stale  # shown as any error is: redacted
        assert len(w.rows) == 2  # still shown, as last read
        assert "cannot read its sources" in box._static(refresh=False)["text/plain"]
        first = w.stale
        time.sleep(2)  # more failed reads: the marker keeps the first failure's time
        assert w.stale.split(" (")[0] == first.split(" (")[0]
        other = SQLiteStore(store.path)  # meanwhile, someone decides one of them
        other.deny(other.pending_approvals(ids[0])[0].id, chat_id=ids[0], by="ops")
        other.close()
        store.down = False
        _until(lambda: w.stale == "")
        _until(lambda: len(w.rows) == 1)
        assert box.read_problem == ""
    finally:
        box.close()
        store.close()


def test_a_deleted_store_file_marks_the_rows_stale(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    _park(path, 1)
    box = nbagent.inbox(path)
    w = box.widget
    try:
        assert len(w.rows) == 1 and w.stale == ""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        _until(lambda: "file was deleted" in w.stale)
        with pytest.raises(StoreError):
            box.refresh()  # asked for: raised, as ever
    finally:
        box.close()


def test_the_follower_stops_with_the_inbox(tmp_path: Path) -> None:
    """Reads that fail are retried while shown; after close() nothing reads the store."""
    store = OutageStore(tmp_path / "chats.db")
    _park(store, 1)
    box = nbagent.inbox(store)
    w = box.widget
    store.down = True
    _until(lambda: w.stale != "")
    box.close()
    reads = threading.Event()
    store.pending_approvals = lambda *a, **k: reads.set()  # type: ignore[method-assign]
    assert not reads.wait(2.0)
    store.close()
