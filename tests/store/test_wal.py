"""The WAL file stays bounded, whoever writes: short-lived chats next to a store kept open,
several processes writing at full speed (issue 13, item 8).

Each test runs a few seconds and samples the WAL file's size as it goes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nbagent import Chat
from nbagent.store import SQLiteStore
from nbagent.store import _checkpointer as checkpointer

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund  # noqa: E402

BOUND = 2 * checkpointer.WAL_LIMIT
"""The most the WAL file may reach (docs/store.md: about 8 MB, twice that under several writers)."""


def _wal(db: Path) -> int:
    try:
        return os.stat(f"{db}-wal").st_size
    except FileNotFoundError:
        return 0


def test_short_lived_chats_next_to_an_open_store_keep_the_wal_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook keeps one store open (its decision panel) and makes many short-lived
    ``Chat(store=path)``: each opens and closes its own connection, so none ever
    checkpointed, and the panel's open connection kept SQLite from doing it at close (the
    WAL grew by every chat's writes: 143 MB after 1,060 chats)."""
    db = tmp_path / "agent.db"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(tmp_path / "runs.txt"))
    sizes = []
    with SQLiteStore(db) as panel:
        deadline = time.monotonic() + 3.0
        n = 0
        while time.monotonic() < deadline or n < 300:
            chat = Chat(model="demo", store=db).with_tools(Refund)
            chat.ask("Refund order 42")
            chat.approve(chat.pending_approvals[0])
            chat.complete()
            chat.close()
            n += 1
            sizes.append(_wal(db))
        assert len(panel.chats()) == n
    assert max(sizes) < BOUND, (n, max(sizes) // 1_000_000)


WRITER = """
import os, sys, time
sys.path.insert(0, {here!r})
import nbagent
from nbagent import Chat
from _agent import Refund
nbagent.configure(quiet=True, display=False)
db, until = sys.argv[1], float(sys.argv[2])
worst = 0
n = 0
while time.time() < until:
    chat = Chat(model="demo", store=db).with_tools(Refund)  # its own connection each time
    chat.ask("Refund order 42")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    chat.close()
    n += 1
    try:
        worst = max(worst, os.stat(db + "-wal").st_size)
    except FileNotFoundError:
        pass
print(n, worst)
"""


def test_several_writer_processes_keep_the_wal_bounded(tmp_path: Path) -> None:
    """Four processes writing chats as fast as they can, each chat with its own connection
    (the WAL reached 194 MB in these 4 s, 813 MB in 30 s): each process's writes count
    towards the WAL's size, and a writer that finds it past its bound checkpoints it back
    itself when the background checkpoints cannot catch up."""
    db = tmp_path / "agent.db"
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(here=str(HERE)))
    with SQLiteStore(db) as panel:  # created, and kept open as a decision panel would be
        env = {**os.environ, "NBAGENT_TEST_COUNTER": str(tmp_path / "runs.txt")}
        until = time.time() + 4.0
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), str(db), str(until)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        sizes = []
        while any(p.poll() is None for p in procs):
            sizes.append(_wal(db))
            time.sleep(0.02)
        outs = []
        for p in procs:
            stdout, stderr = p.communicate(timeout=120)
            assert p.returncode == 0, stderr
            outs.append([int(x) for x in stdout.split()])
        chats = sum(n for n, _ in outs)
        assert len(panel.chats()) == chats
    worst = max([*sizes, *(w for _, w in outs)])
    assert worst < BOUND, (chats, worst // 1_000_000)


def test_a_writer_past_the_hard_limit_waits_for_the_background_pass_then_truncates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A starved checkpointer thread must not let a writer run away: when the writer's
    synchronous TRUNCATE finds this process's background pass holding the checkpoint, it
    waits for that pass (not more than HARD_WAIT) and truncates then, instead of going on
    and growing the WAL past HARD_LIMIT (once seen at 30 MB on a loaded CI machine)."""
    import sqlite3
    import threading

    db = tmp_path / "starved.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    for _ in range(50):
        conn.execute("INSERT INTO t VALUES (randomblob(4000))")
    assert _wal(db) > 0
    cp = checkpointer.Checkpointer(str(db), "NORMAL")
    steps: list[str] = []
    cp._idle.clear()  # the background pass is copying the WAL back

    def background_pass_ends() -> None:
        time.sleep(0.2)
        steps.append("background pass done")
        cp._idle.set()

    real = checkpointer.Checkpointer._truncate_once

    def truncate_once(c: sqlite3.Connection) -> int:
        steps.append("truncate")
        return 1 if len(steps) == 1 else real(c)  # the first finds the checkpoint lock held

    monkeypatch.setattr(cp, "_truncate_once", truncate_once)
    threading.Thread(target=background_pass_ends).start()
    cp._truncate(conn)
    assert steps == ["truncate", "background pass done", "truncate"]
    assert _wal(db) == 0  # the second truncate emptied the file
    assert cp._hard_after == 0.0  # no back-off: it succeeded
    conn.close()


@pytest.mark.parametrize("held", ["the shared lock", "the checkpointer's lock"])
def test_a_store_collected_while_its_thread_holds_a_checkpointer_lock_does_not_deadlock(
    tmp_path: Path, held: str
) -> None:
    """Garbage collection runs a dropped store's finalizer inside whatever its thread is
    doing. It once did so inside ``checkpointer_for`` (which holds the checkpointers' lock
    while it builds one) and the thread waited on itself forever (a hang seen in
    tests/providers/test_hosted.py); likewise inside a ``poke`` of the file's last
    checkpointer. A finalizer now hands the release to a worker."""
    import gc
    import threading

    store = SQLiteStore(tmp_path / "gc.db")
    cp = store._checkpointer
    lock = checkpointer._SHARED_LOCK if held == "the shared lock" else cp._lock
    done = threading.Event()

    def drop_the_store_while_holding_the_lock() -> None:
        nonlocal store
        with lock:
            del store
            gc.collect()  # runs the finalizer here, on this thread, inside the lock
        done.set()

    worker = threading.Thread(target=drop_the_store_while_holding_the_lock, daemon=True)
    worker.start()
    assert done.wait(20), f"the thread deadlocked on {held} in a store's finalizer"
    deadline = time.monotonic() + 20
    while cp.path in checkpointer._SHARED and time.monotonic() < deadline:
        time.sleep(0.01)  # the worker's release lands once the lock is free
    assert cp.users == 0 and cp.path not in checkpointer._SHARED and cp._conn is None


def test_a_file_replaced_under_an_open_store_is_the_one_checkpointed_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpointer is shared by every store on a path and keeps its own connection:
    after ``mv other.db agent.db`` under a store kept open, it went on checkpointing the
    old file, and the WAL of the file now at the path was copied back by nothing (a store
    turns SQLite's own checkpoints off) until it reached the hard limit."""
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(tmp_path / "runs.txt"))
    db = tmp_path / "agent.db"

    def chats(store: SQLiteStore, n: int) -> None:
        for _ in range(n):
            chat = Chat(model="demo", store=store).with_tools(Refund)
            chat.ask("Refund order 42")
            chat.approve(chat.pending_approvals[0])
            chat.complete()
            chat.close()
        assert store._checkpointer._idle.wait(10)

    with SQLiteStore(db) as old:
        chats(old, 20)  # past CHECKPOINT_EVERY commits: its connection is open on this file
        assert old._checkpointer._conn is not None
        SQLiteStore(tmp_path / "other.db").close()
        os.replace(tmp_path / "other.db", db)
        before = os.stat(db).st_size
        with SQLiteStore(db) as new:
            assert new._checkpointer is old._checkpointer  # one per path in a process
            chats(new, 20)
            assert os.stat(db).st_size > before  # its pages were copied back into it
