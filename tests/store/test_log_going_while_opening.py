"""A store opened while another one on the same file closes opens.

Opening checks that this user can write the file, its ``-wal`` and ``-shm`` (a store it
cannot write is refused at once). A store on the same file closing meanwhile (the file's
last connection: SQLite deletes the log, possibly on a worker thread after ``close()``)
made the ``-wal`` vanish between "it exists" and "it is writable", and the open was
refused, saying this user (root) "cannot write ...-wal (cannot be read)": the clean
clone's run of ``test_read_only_reader.py`` failed on it. A file gone is no file this user
cannot write.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from nbagent import Chat
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, reply


def test_opening_while_another_store_on_the_file_closes_is_never_refused(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agent.db"
    Chat(provider=ScriptedProvider([reply("hi")]), store=db, display=False).ask("hello")
    stop = threading.Event()
    failures: list[BaseException] = []

    def closer() -> None:
        try:
            while not stop.is_set():
                with SQLiteStore(db) as store:  # makes the log, deletes it at close
                    store.pending_approvals()
        except BaseException as exc:  # reported below
            failures.append(exc)

    thread = threading.Thread(target=closer)
    thread.start()
    opened = 0
    try:
        for _ in range(300):
            with SQLiteStore(db) as store:
                store.pending_approvals()
            opened += 1
    finally:
        stop.set()
        thread.join()
    assert not failures, failures
    assert opened == 300


def test_opening_right_after_an_unclosed_chat_on_the_file_is_dropped_is_never_refused(
    tmp_path: Path,
) -> None:
    """A cell run again: ``chat = Chat(store=path)`` drops the previous chat, unclosed, whose
    store is closed by its finalizer on a worker thread while the new one opens. Between
    SQLite's close (the file's last connection: it deletes the ``-wal`` and ``-shm``) and
    the process forgetting the ``-shm`` it mapped, the new store found a new ``-shm`` and
    refused the file ("another store object or chat on it is still open in this process"):
    the clean clone's ``test_read_only_reader.py`` failed on it in ``_as_user._warm``."""
    db = tmp_path / "agent.db"
    for i in range(60):
        chat = Chat(provider=ScriptedProvider([reply("hi")]), store=db, display=False)
        chat.ask(f"hello {i}")
        del chat
        gc.collect()  # its store's finalizer: closed on a worker thread, while this opens
        with SQLiteStore(db) as store:
            assert len(store.chats()) == i + 1
