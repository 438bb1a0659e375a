"""The SQLite store's WAL checkpointer: the WAL copied back off the chat's path, kept bounded.

SQLite's automatic checkpoint runs inside the ``COMMIT`` that crosses its
threshold and fsyncs there: a stall of milliseconds in the middle of a chat's
step. The store turns it off on its connection (:func:`take_over`) and tells
the :class:`Checkpointer` of its file of every commit. There is one
checkpointer per database file per process (:func:`checkpointer_for`), shared
by every store open on that file: a notebook's short-lived ``Chat(store=path)``
objects, each with its own connection, count their commits together. SQLite
checkpoints at close only when the closing connection is the file's last one,
which a store kept open (a decision panel) or another process prevents.

What bounds the WAL file, from the cheapest to the last resort:

1. every :data:`CHECKPOINT_EVERY` commits, the checkpointer runs a
   ``PASSIVE`` checkpoint on its own connection (it never blocks readers or
   writers), followed by a ``RESTART`` once the WAL holds more than
   :data:`RESTART_FRAMES` (see :class:`Checkpointer`);
2. every :data:`CHECK_EVERY` commits the WAL file's size is looked at (a ``stat``): past
   :data:`WAL_LIMIT` (writes from other processes count too), the checkpointer
   checkpoints and restarts at once;
3. past :data:`HARD_LIMIT` (several processes writing at full speed, whose
   writers starve the checkpointer's restart), the committing connection itself
   runs a ``TRUNCATE`` checkpoint before its commit returns: it waits (at most
   :data:`HARD_WAIT` seconds) for the other writers, and the file starts over
   from zero. A reader that keeps a transaction open (a DB browser holding a
   snapshot) is the one thing that stops any checkpoint; the store then tries
   again a second later.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time

from .._aio import in_worker, let_go, spawn
from ._waiting import may_wait

CHECKPOINT_EVERY = 64
"""Commits between two background checkpoints (a few hundred WAL pages)."""
CHECK_EVERY = 4
"""Commits between two looks at the WAL file's size (a ``stat``, about 2 us)."""
RESTART_FRAMES = 1024
"""WAL frames (about 4 MB) above which a checkpoint also makes the WAL start over."""
WAL_LIMIT = 8 * 1024 * 1024
"""Bytes a WAL file is cut back to when it starts over (``journal_size_limit``); past
this size the checkpointer restarts the WAL at once."""
HARD_LIMIT = 12 * 1024 * 1024
"""WAL file size past which a committing writer checkpoints it back itself (synchronously)."""
HARD_WAIT = 2.0
"""Seconds a writer waits for others at that synchronous checkpoint."""


def file_id(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """Which file ``path`` names now (device, inode), or ``None`` if none: a connection keeps
    the file it opened, deleted or replaced under it since."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def take_over(conn: sqlite3.Connection) -> None:
    """Stop ``conn`` checkpointing inside its commits; a :class:`Checkpointer` does it instead."""
    conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
    conn.execute("PRAGMA wal_autocheckpoint = 0")


_SHARED: dict[str, Checkpointer] = {}
_SHARED_LOCK = threading.Lock()


def checkpointer_for(path: str, synchronous: str) -> Checkpointer:
    """The checkpointer of the database file at ``path`` in this process (one more user).

    Every store open on a file shares it; :meth:`Checkpointer.release` once per call.
    """
    key = os.path.realpath(path)
    with _SHARED_LOCK:
        cp = _SHARED.get(key)
        if cp is None:
            cp = _SHARED[key] = Checkpointer(key, synchronous)
        elif synchronous in ("FULL", "EXTRA"):
            cp.synchronous = synchronous  # the strictest store's durability wins
        cp.users += 1
        return cp


def release_unclosed(cp: Checkpointer) -> None:
    """The finalizer of a store nobody closed: :meth:`Checkpointer.release`, on a worker.

    Garbage collection runs a finalizer inside whatever this thread was doing,
    possibly :func:`checkpointer_for` or :meth:`Checkpointer.release` holding
    ``_SHARED_LOCK``, or :meth:`Checkpointer.poke` holding the checkpointer's own
    lock (the same checkpointer, when another store on the file is alive): taking
    them here would deadlock the thread on itself, so a worker does it (at interpreter exit
    the background loop's thread, waited for: :func:`~nbagent._aio.let_go`). Without a
    background loop it is released here.
    """
    let_go(cp.release)


class Checkpointer:
    """Copies one file's WAL back into the database, on a worker thread and its own connection.

    A passive checkpoint alone does not bound the WAL file: the WAL starts over
    from its beginning only when a writer finds every frame copied back, and a
    process that commits continuously always adds frames while the checkpoint
    runs (the file grew to hundreds of MB in benchmarks). So once the WAL holds
    more than :data:`RESTART_FRAMES`, the passive pass (which copies the bulk
    without blocking anyone) is followed by a ``RESTART`` checkpoint: it holds
    writers back for the few frames written meanwhile and a sync, about a
    millisecond, and the next commit starts the WAL over, cut back to
    :data:`WAL_LIMIT` bytes.

    Passes run while pokes come (:meth:`poke`), one at a time; the file's last
    store in this process closing (:meth:`release`) ends them and closes the
    connection; a store opened again makes a new checkpointer.
    """

    def __init__(self, path: str, synchronous: str):
        self.path = path
        self.wal = f"{path}-wal"
        self.synchronous = synchronous
        self.users = 0
        self._commits = 0
        self._restart = False  # the next background checkpoint also restarts the WAL
        self._hard_after = 0.0  # no synchronous checkpoint before this time (one just failed)
        # past HARD_LIMIT with no_wait on: the next write that may wait truncates
        self.truncate_owed = False
        self._wanted = False  # a pass is asked for
        self._scheduled = False  # passes are scheduled or running (on a worker thread)
        self._idle = threading.Event()  # clear while a pass runs
        self._idle.set()
        self._stop = False
        self._conn: sqlite3.Connection | None = None  # the passes' own connection
        self._file: tuple[int, int] | None = None  # the file it opened (file_id)
        self._lock = threading.Lock()

    def committed(self, conn: sqlite3.Connection) -> None:
        """``conn`` (a store's connection, out of any transaction) just committed."""
        self._commits += 1  # unlocked: a lost increment only delays a checkpoint
        if self._commits % CHECK_EVERY == 0:
            try:
                size = os.stat(self.wal).st_size
            except OSError:
                size = 0
            owed = size > HARD_LIMIT and time.monotonic() >= self._hard_after
            if owed and may_wait():
                self.truncate_owed = False
                self._truncate(conn)
                return
            # A truncation waits: not on a driver's own thread (no_wait), where the store's
            # next writes raise WouldWait instead and are made on a worker thread, which does
            # it; the flag goes down once a look finds the WAL small again (or it was done).
            self.truncate_owed = owed
            if size > WAL_LIMIT:
                self.poke(restart=True)
                return
        if self._commits % CHECKPOINT_EVERY == 0:
            self.poke()

    def _truncate(self, conn: sqlite3.Connection) -> None:
        """Checkpoint the whole WAL back from ``conn`` and empty the file, waiting for writers.

        Busy at once because this process's checkpointer is copying the
        WAL back: wait for that pass (at most :data:`HARD_WAIT` seconds; a
        starved pass must not let the writer run away), then try once more.
        Busy at once otherwise: another process is checkpointing (the next
        commit tries again). Busy after waiting: a reader holds an old snapshot;
        commits go on without waiting for a second.
        """
        (timeout,) = conn.execute("PRAGMA busy_timeout").fetchone()
        t0 = time.monotonic()
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(HARD_WAIT * 1000)}")
            busy = self._truncate_once(conn)
            if busy and not self._idle.is_set():
                self._idle.wait(HARD_WAIT)
                busy = self._truncate_once(conn)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")
        now = time.monotonic()
        if busy and now - t0 > HARD_WAIT / 2:
            self._hard_after = now + 1.0

    @staticmethod
    def _truncate_once(conn: sqlite3.Connection) -> int:
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:
            return 1
        return int(busy)

    def poke(self, *, restart: bool = False) -> None:
        """Checkpoint soon, off the committing thread (``restart``: and start the WAL over).

        The passes run on a worker thread, scheduled by a task on nbagent's
        background loop (:func:`~nbagent._aio.spawn`): one at a time, as long as
        pokes keep coming.
        """
        with self._lock:
            if self._stop or self.users <= 0:
                return
            self._restart = self._restart or restart
            self._wanted = True
            if self._scheduled:
                return  # the passes under way take this poke too
            self._scheduled = True
        try:
            spawn(in_worker(self._passes))
        except RuntimeError:  # no thread can start (interpreter exit): the commits go on
            with self._lock:
                self._scheduled = False

    def release(self) -> None:
        """A store on this file closed; the last one ends the passes (after a restart still
        asked for) and closes the checkpointer's connection."""
        with _SHARED_LOCK:
            self.users -= 1
            if self.users > 0:
                return
            if _SHARED.get(self.path) is self:
                del _SHARED[self.path]
        with self._lock:
            self._stop = True
            restart = self._restart
        self._idle.wait()  # a pass under way ends (it never waits for this thread)
        if restart:
            self._checkpoint(True)
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    close = release

    def _passes(self) -> None:
        """Checkpoint while pokes keep coming (on a worker thread)."""
        while True:
            with self._lock:
                if self._stop or not self._wanted:
                    self._scheduled = False
                    return
                restart, self._restart, self._wanted = self._restart, False, False
                self._idle.clear()
            try:
                self._checkpoint(restart)
            finally:
                self._idle.set()

    def _checkpoint(self, restart: bool) -> None:
        """One pass on the checkpointer's own connection: passive, then a restart once the WAL
        holds more than :data:`RESTART_FRAMES` (or when asked); an error waits for the next."""
        with contextlib.suppress(sqlite3.Error):
            if self._conn is not None and file_id(self.path) != self._file:
                self._conn.close()  # the file was replaced: checkpoint the one there now
                self._conn = None
            if self._conn is None:
                self._conn = sqlite3.connect(
                    self.path, timeout=0.1, isolation_level=None, check_same_thread=False
                )
                self._file = file_id(self.path)
                self._conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn = self._conn
            busy, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if not busy and (restart or frames > RESTART_FRAMES):
                conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()


__all__ = [
    "CHECKPOINT_EVERY",
    "CHECK_EVERY",
    "HARD_LIMIT",
    "HARD_WAIT",
    "RESTART_FRAMES",
    "WAL_LIMIT",
    "Checkpointer",
    "checkpointer_for",
    "file_id",
    "take_over",
]
