"""A store whose file is deleted or replaced while it is open writes nothing into the void.

SQLite keeps the file it opened: after ``rm agent.db`` (to start afresh while a kernel
still holds a chat) or ``mv other.db agent.db`` (a sync client, a ``git checkout``), its
writes went to a file nobody can open, and were gone when the store closed: a chat
approved, ran and answered with no error while nothing reached the path, and a panel
opening the path found another file. Now the first transaction after the change raises,
nothing is decided or run on the strength of a write that went nowhere, and the chat
(which holds everything) can be copied into a store that exists.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from nbagent import Chat, StoreError
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund, count


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


def _parked(db: Path) -> tuple[SQLiteStore, Chat]:
    store = SQLiteStore(db)
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 7})), reply("Refunded.")]),
        store=store,
    ).with_tools(Refund)
    chat.ask("Refund order 7")
    assert chat.status == "awaiting_approval"
    return store, chat


def _delete(db: Path) -> None:
    db.unlink()


def _replace(db: Path) -> None:
    other = db.with_name("other.db")
    SQLiteStore(other).close()  # an nbagent store too: only its identity differs
    os.replace(other, db)


@pytest.mark.parametrize(("change", "word"), [(_delete, "deleted"), (_replace, "replaced")])
def test_a_decision_after_the_file_changed_raises_and_nothing_runs(
    tmp_path: Path, counter: Path, change: object, word: str
) -> None:
    db = tmp_path / "agent.db"
    store, chat = _parked(db)
    call = chat.pending_approvals[0]
    change(db)  # type: ignore[operator]
    with pytest.raises(StoreError) as raised:
        chat.approve(call)
    text = str(raised.value)
    assert f"the file was {word}" in text and str(db) in text
    assert f"Nothing is decided: refund({call.id}) still awaits approval" in text
    assert "chat.fork(store=...)" in text  # what to do
    assert call.decision is None and chat.pending_approvals == [call]
    with pytest.raises(StoreError, match=f"the file was {word}"):
        chat.complete()  # a step reads decisions made elsewhere: not from a stale file
    assert count(counter) == 0 and chat.status == "awaiting_approval"
    with pytest.raises(StoreError, match=f"the file was {word}"):
        store.pending_approvals()  # a panel on this store object reads no stale file
    chat.close()
    store.close()


def test_the_chat_is_copied_whole_into_a_store_that_exists(tmp_path: Path, counter: Path) -> None:
    db = tmp_path / "agent.db"
    store, chat = _parked(db)
    transcript = chat.transcript
    db.unlink()
    copy = chat.fork(store=db)  # the path holds a new store: the chat is written there
    assert copy.transcript == transcript and copy.status == "awaiting_approval"
    with SQLiteStore(db) as panel:
        (pending,) = panel.pending_approvals()
        assert pending.chat_id == copy.id
        panel.approve(pending.id)
    copy.complete()
    assert copy.status == "complete" and count(counter) == 1
    copy.close()
    chat.close()
    store.close()
    with SQLiteStore(db) as fresh:
        loaded = Chat.load(copy.id, store=fresh, tools=[Refund], provider=ScriptedProvider([]))
        assert loaded.transcript == copy.transcript and loaded.status == "complete"
        loaded.close()


def test_a_turn_after_the_file_changed_is_not_lost_in_it(tmp_path: Path, counter: Path) -> None:
    """A turn whose writes fail is kept in the chat (and retried); it never counts as
    written to a file that is gone. Its question cannot be written, so the model is not
    asked it (``StoreError``): the question stays in the chat, and a fork keeps it."""
    db = tmp_path / "agent.db"
    store = SQLiteStore(db)
    chat = Chat(provider=ScriptedProvider([reply("One."), reply("Two.")]), store=store)
    chat.ask("First")
    backup = tmp_path / "backup.db"
    store.close()  # (a copy of the file as it was, closed so it is whole)
    shutil.copy(db, backup)
    store = SQLiteStore(db)
    loaded = Chat.load(chat.id, store=store, provider=ScriptedProvider([reply("Two.")]))
    os.replace(backup, db)  # the file is put back from the copy: another inode
    with pytest.raises(StoreError, match="the file was replaced"):
        loaded.ask("Second")
    assert [m.content for m in loaded.transcript] == ["First", "One.", "Second"]
    with pytest.raises(StoreError, match="the file was replaced"):
        loaded.close()  # what is queued cannot be written: said, not dropped
    copy = loaded.fork(store=tmp_path / "elsewhere.db")
    copy.close()
    with SQLiteStore(tmp_path / "elsewhere.db") as other:
        stored = Chat.load(copy.id, store=other, provider=ScriptedProvider([reply("Two.")]))
        assert [m.content for m in stored.transcript] == ["First", "One.", "Second"]
        stored.complete()  # the question is asked there
        assert [m.content for m in stored.transcript] == ["First", "One.", "Second", "Two."]
        stored.close()
    store.close()


def test_a_store_opened_by_a_relative_path_follows_its_file_not_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter: Path
) -> None:
    """``%cd`` in a notebook changes the directory, not the file a store has open."""
    monkeypatch.chdir(tmp_path)
    store, chat = _parked(Path("agent.db"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    assert chat.status == "complete" and count(counter) == 1
    assert store.pending_approvals() == []
    chat.close()
    store.close()
    assert not (elsewhere / "agent.db").exists()
