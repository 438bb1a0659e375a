"""Chats given the same path or URL share one store object (``store/_shared.py``).

Each ``Chat(store="agent.db")`` used to open a connection of its own, held as long as
the chat lived: a notebook keeping a few hundred chats (a list of an evaluation's chats,
the live view of every cell run again) ran out of file descriptors (two per chat; macOS
allows 256 by default, and the error read "unable to open database file") or of
PostgreSQL connections (one per chat; 100 by default).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError
from nbagent.store import SQLiteStore, open_store
from nbagent.store._shared import shared_count


def _open(path: Path) -> int:
    """How many file descriptors of this process are open on ``path`` and its WAL files."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, gone
        n += target.startswith(str(path))
    return n


def test_chats_opened_by_path_share_one_connection(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    chats = []
    for i in range(200):
        chat = Chat(model="demo", store=db)
        chat.ask(f"Hello {i}")
        chats.append(chat)  # kept, as a notebook keeps them
    assert _open(db) <= 6  # two connections (the store's, its checkpointer's): was 2 per chat
    with SQLiteStore(db) as panel:  # everything reached the file
        assert len(panel.chats()) == 200
        assert {len(panel.load(c.id).messages) for c in chats} == {2}
    for chat in chats:
        chat.close()
    deadline = time.monotonic() + 10
    while _open(db):  # closed with the last chat (the checkpointer's on a worker)
        assert time.monotonic() < deadline, _open(db)
        time.sleep(0.02)


def test_the_store_closes_with_the_last_chat_closed_or_collected(tmp_path: Path) -> None:
    # each store counted by its own path: an earlier test's store, left to the collector,
    # may let go in the middle of this one (a count of every store then read one too few)
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    first = Chat(model="demo", store=a)
    second = Chat(model="demo", store=a)
    assert shared_count(a) == 1  # one store object for both
    Chat(model="demo", store=b).ask("Hi")  # collected at once
    first.close()
    assert shared_count(a) == 1  # the second still holds a.db's store
    second.ask("Still here")
    del second
    gc.collect()
    deadline = time.monotonic() + 10
    while shared_count(a) or shared_count(b):  # a collected chat lets go from a worker thread
        assert time.monotonic() < deadline, (shared_count(a), shared_count(b))
        time.sleep(0.02)


def test_a_store_object_given_is_never_shared_nor_closed(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "agent.db")
    chat = Chat(model="demo", store=store)
    chat.ask("Hi")
    chat.close()
    assert not store.closed  # the user's: they close it
    other = Chat(model="demo", store=tmp_path / "agent.db")
    assert not other.close() and not store.closed
    with open_store(tmp_path / "agent.db") as mine:  # the caller's own object, too
        assert mine is not store and len(mine.chats()) == 2
    store.close()


def test_a_file_replaced_under_the_shared_store_is_opened_anew_for_new_chats(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agent.db"
    old = Chat(model="demo", store=db)
    old.ask("Hi")
    SQLiteStore(tmp_path / "other.db").close()
    os.replace(tmp_path / "other.db", db)
    new = Chat(model="demo", store=db)  # not the store that still has the old file open
    new.ask("Hello")
    with SQLiteStore(db) as panel:
        assert new.id in [c.id for c in panel.chats()]
    with pytest.raises(StoreError, match="the file was replaced"):
        old.ask("Again")
    new.close()
    with pytest.raises(StoreError, match="the file was replaced"):
        old.close()  # what it could not write is said, not dropped


def test_hundreds_of_chats_fit_in_macos_default_descriptor_limit(tmp_path: Path) -> None:
    """A real limit (``RLIMIT_NOFILE`` 256, macOS's default), in a process of its own."""
    script = textwrap.dedent(
        f"""
        import resource
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        import nbagent
        from nbagent import Chat
        nbagent.configure(quiet=True, display=False)
        chats = []
        for i in range(300):
            chat = Chat(model="demo", store={str(tmp_path / "agent.db")!r})
            chat.ask("Refund order 42")
            chats.append(chat)
        print(len(chats), sum(c.status == "complete" for c in chats))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["300", "300"]  # every chat asked and answered


def test_chats_opened_by_url_share_one_postgresql_connection(
    postgres_dsn: str, postgres_server: Any
) -> None:
    dbname = postgres_dsn.rsplit("/", 1)[1]

    def connections() -> int:
        with postgres_server.admin() as admin:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)
            ).fetchone()
            return int(row[0])

    chats = []
    for i in range(120):  # more than PostgreSQL's default max_connections (100)
        chat = Chat(model="demo", store=postgres_dsn)
        chat.ask(f"Hello {i}")
        chats.append(chat)
    assert connections() <= 3  # was one per chat
    with open_store(postgres_dsn) as panel:
        assert len(panel.chats()) == 120
    for chat in chats:
        chat.close()
