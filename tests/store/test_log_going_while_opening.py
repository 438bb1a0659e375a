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
