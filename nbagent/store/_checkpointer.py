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

A connection holding a ``-wal`` or ``-shm`` that is no longer the one at the path (deleted
or replaced under an open store: a sync client, a half-done ``rm agent.db*``) must never
checkpoint: it copies the log back through its own index, and the last connection to close
deletes the log, which then is another's (:func:`close_connection`). The store refuses such
files at its next transaction (:meth:`~nbagent.store.SQLiteStore.names_its_file`); the
checkpointer looks before each pass and closes its connection instead. And since SQLite maps
one ``-shm`` per database file per process (the first connection's, while any is open),
:func:`hold_files` says whether a connection opened now would see the ``-shm`` at the path
or an old one this process still maps.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

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


FileId = tuple[int, int]
Files = tuple[FileId | None, FileId | None, FileId | None]
"""The database file, its ``-wal`` and its ``-shm`` (:func:`files_id`)."""
SUFFIXES = ("", "-wal", "-shm")


def file_id(path: str | os.PathLike[str]) -> FileId | None:
    """Which file ``path`` names now (device, inode), or ``None`` if none: a connection keeps
    the file it opened, deleted or replaced under it since."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def files_id(path: str) -> Files:
    """Which files the database ``path``, its ``-wal`` and its ``-shm`` name now (three
    ``stat``). SQLite keeps each file it opened; while a connection in WAL mode is open the
    ``-wal`` and ``-shm`` exist, and SQLite truncates them (a ``RESTART`` or ``TRUNCATE``
    checkpoint, ``journal_size_limit``), never deletes or replaces them: only the last
    connection to close deletes them."""
    return (file_id(path), file_id(path + "-wal"), file_id(path + "-shm"))


def changed(path: str, opened: Files) -> tuple[str, str] | None:
    """The first of the files a connection opened at ``path`` that the path no longer names,
    as (its suffix: ``""``, ``"-wal"`` or ``"-shm"``, ``"deleted"`` or ``"replaced by another
    file"``); ``None`` if none. A ``-wal`` or ``-shm`` there was none of (not in WAL mode) is
    not looked at."""
    now = files_id(path)
    if now == opened:
        return None
    for suffix, was, is_ in zip(SUFFIXES, opened, now, strict=True):
        if was is not None and was != is_:
            return suffix, "deleted" if is_ is None else "replaced by another file"
    return None


# SQLite maps one -shm per database file per process: the first connection's, kept while any
# connection of the process is open on the file. A database file (device, inode) -> the -shm
# its first connection here found, and how many of nbagent's connections are open on it.
_MAPPED: dict[FileId, tuple[FileId | None, int]] = {}
_MAPPED_LOCK = threading.RLock()  # reentrant: a finalizer may run inside hold_files


def hold_files(files: Files) -> bool:
    """Count a connection just opened on ``files`` (:func:`files_id` after it read); ``False``
    (nothing counted) if this process maps another ``-shm`` for that database file, which the
    connection then uses too: one deleted or replaced since it was mapped."""
    db, _, shm = files
    if db is None:
        return True
    with _MAPPED_LOCK:
        mapped, n = _MAPPED.get(db, (shm, 0))
        if mapped != shm:
            return False
        _MAPPED[db] = (shm, n + 1)
        return True


def close_held(
    conn: sqlite3.Connection, path: str, files: Files, *, held: bool = True, stale: bool = False
) -> None:
    """Close ``conn`` (:func:`close_connection`) and, if ``held``, stop counting it
    (:func:`drop_files`), as one step for :func:`hold_files`.

    Closing the file's last connection deletes its ``-wal`` and ``-shm``: a store opened
    meanwhile on another thread (a cell run again while the chat it dropped is closed by its
    finalizer on a worker) makes new ones. Counted until the close was done, the old
    ``-shm`` was still the one this process maps, and the new store refused the new one as
    stale ("another store object ... is still open in this process")."""
    with _MAPPED_LOCK:
        try:
            close_connection(conn, path, files, stale=stale)
        finally:
            if held:
                drop_files(files)


def drop_files(files: Files) -> None:
    """A connection counted by :func:`hold_files` closed (:func:`close_held`)."""
    db = files[0]
    with _MAPPED_LOCK:
        if db is None or db not in _MAPPED:
            return
        shm, n = _MAPPED[db]
        if n > 1:
            _MAPPED[db] = (shm, n - 1)
        else:
            del _MAPPED[db]


def close_connection(
    conn: sqlite3.Connection, path: str, files: Files, *, stale: bool = False
) -> None:
    """Close ``conn``, opened on ``files`` at ``path``; if its ``-wal`` or ``-shm`` is no
    longer the one at the path (or ``stale``: it maps an old ``-shm``, :func:`hold_files`),
    without a checkpoint.

    The last connection to a file to close copies the log back into it and deletes the
    ``-wal`` and ``-shm``: through an old ``-shm``, the pages its stale index names (another
    process's commits, made through the new one, lost; the file damaged if the log had
    started over), and from an old ``-wal``, old pages over newer ones, while the path's log,
    another's, is deleted. Python 3.12's ``setconfig`` turns that checkpoint off; on any
    version a read-only connection holding the file's shared lock while ``conn`` closes makes
    it not the last (SQLite checks that lock), and a read-only one never checkpoints. A
    database file itself deleted or replaced SQLite checks at close (its
    ``SQLITE_FCNTL_HAS_MOVED``): no checkpoint either.
    """
    now = files_id(path)
    same = all(was is None or was == is_ for was, is_ in zip(files[1:], now[1:], strict=True))
    if same and not stale:
        conn.close()
        return
    setconfig = getattr(conn, "setconfig", None)
    no_checkpoint = getattr(sqlite3, "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE", None)
    if setconfig is not None and no_checkpoint is not None:
        with contextlib.suppress(sqlite3.Error):
            setconfig(no_checkpoint, True)
    guard = _reader(path)
    try:
        conn.close()
    finally:
        if guard is not None:
            guard.close()


def _reader(path: str) -> sqlite3.Connection | None:
    """A read-only connection to ``path`` that has read (a WAL connection then holds the
    file's shared lock until it closes), or ``None`` if it cannot be opened."""
    try:
        conn = sqlite3.connect(
            Path(path).absolute().as_uri() + "?mode=ro",
            uri=True,
            timeout=0.1,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error:
        return None
    with contextlib.suppress(sqlite3.Error):  # a log shorter than its index (SHORT_READ): held
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    return conn


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


def release_unclosed(
    cp: Checkpointer,
    conn: sqlite3.Connection | None = None,
    path: str = "",
    files: Files = (None, None, None),
) -> None:
    """The finalizer of a store nobody closed: :meth:`Checkpointer.release` and its
    connection closed (:func:`close_connection`), on a worker.

    Garbage collection runs a finalizer inside whatever this thread was doing,
    possibly :func:`checkpointer_for` or :meth:`Checkpointer.release` holding
    ``_SHARED_LOCK``, or :meth:`Checkpointer.poke` holding the checkpointer's own
    lock (the same checkpointer, when another store on the file is alive): taking
    them here would deadlock the thread on itself, so a worker does it (at interpreter exit
    the background loop's thread, waited for: :func:`~nbagent._aio.let_go`). Without a
    background loop it is released here.
    """

    def release() -> None:
        cp.release()
        if conn is not None:
            close_held(conn, path, files)

    let_go(release)


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
        self._files: Files = (None, None, None)  # the files it opened (files_id)
        self._lock = threading.Lock()

    def committed(
        self, conn: sqlite3.Connection, unchanged: Callable[[], bool] = lambda: True
    ) -> None:
        """``conn`` (a store's connection, out of any transaction) just committed;
        ``unchanged()``: whether the path still names the files ``conn`` opened (asked before
        ``conn`` itself truncates the log: through an old ``-shm`` that would empty another's)."""
        self._commits += 1  # unlocked: a lost increment only delays a checkpoint
        if self._commits % CHECK_EVERY == 0:
            try:
                size = os.stat(self.wal).st_size
            except OSError:
                size = 0
            owed = size > HARD_LIMIT and time.monotonic() >= self._hard_after
            if owed and may_wait() and unchanged():
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
        self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            close_held(conn, self.path, self._files)

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
        holds more than :data:`RESTART_FRAMES` (or when asked); an error waits for the next.

        The file, its ``-wal`` or its ``-shm`` deleted or replaced since the connection opened
        them: it is closed without a checkpoint (:func:`close_connection`), and the files at
        the path now are checkpointed, unless this process still maps an old ``-shm`` of the
        file (:func:`hold_files`: a store holding it is open): then none until it closes."""
        with contextlib.suppress(sqlite3.Error):
            if self._conn is not None and changed(self.path, self._files) is not None:
                self._close()
            if self._conn is None:
                conn = sqlite3.connect(
                    self.path, timeout=0.1, isolation_level=None, check_same_thread=False
                )
                try:
                    conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                    conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # its log open
                except BaseException:
                    close_connection(conn, self.path, files_id(self.path), stale=True)
                    raise
                files = files_id(self.path)
                if not hold_files(files):
                    close_connection(conn, self.path, files, stale=True)
                    return
                self._conn, self._files = conn, files
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
    "changed",
    "checkpointer_for",
    "close_connection",
    "close_held",
    "drop_files",
    "file_id",
    "files_id",
    "hold_files",
    "take_over",
]
