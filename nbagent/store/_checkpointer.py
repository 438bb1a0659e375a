"""The SQLite store's WAL checkpointer: the WAL copied back on a background thread, kept bounded.

SQLite's automatic checkpoint runs inside the ``COMMIT`` that crosses its
threshold and fsyncs there: a stall of milliseconds in the middle of a chat's
step. The store turns it off on its connection (:func:`take_over`) and tells
a :class:`Checkpointer` of every commit; every :data:`CHECKPOINT_EVERY`
commits, the checkpointer's thread runs a ``PASSIVE`` checkpoint on its own
connection, which never blocks readers or writers. The last connection to
close checkpoints what is left.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading

CHECKPOINT_EVERY = 64
"""Commits between two background checkpoints (a few hundred WAL pages)."""
RESTART_FRAMES = 2048
"""WAL frames (about 8 MB) above which a checkpoint also makes the WAL start over."""
WAL_LIMIT = 8 * 1024 * 1024
"""Bytes a WAL file is cut back to when it starts over (``journal_size_limit``)."""


def take_over(conn: sqlite3.Connection) -> None:
    """Stop ``conn`` checkpointing inside its commits; a :class:`Checkpointer` does it instead."""
    conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
    conn.execute("PRAGMA wal_autocheckpoint = 0")


class Checkpointer:
    """Copies the WAL back into the database on its own thread and connection.

    A passive checkpoint alone does not bound the WAL file: the WAL starts over
    from its beginning only when a writer finds every frame copied back, and a
    process that commits continuously always adds frames while the checkpoint
    runs (the file grew to hundreds of MB in benchmarks). So once the WAL holds
    more than :data:`RESTART_FRAMES`, the passive pass (which copies the bulk
    without blocking anyone) is followed by a ``RESTART`` checkpoint: it holds
    writers back for the few frames written meanwhile and a sync, about a
    millisecond, and the next commit starts the WAL over, cut back to
    :data:`WAL_LIMIT` bytes.

    The thread starts with the first checkpoint, and stops at :meth:`close`.
    """

    def __init__(self, path: str, synchronous: str):
        self._path = path
        self._synchronous = synchronous
        self._commits = 0
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def committed(self) -> None:
        """A write transaction committed (called under the store's write lock)."""
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0:
            self.poke()

    def poke(self) -> None:
        """Checkpoint now, on the background thread."""
        with self._lock:
            if self._stop:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="nbagent-store-checkpoint", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def close(self) -> None:
        with self._lock:
            self._stop = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                self._path, timeout=0.1, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stop:
                    return
                with contextlib.suppress(sqlite3.Error):
                    busy, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if not busy and frames > RESTART_FRAMES:
                        conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
        except sqlite3.Error:
            return  # checkpoints resume when the store is opened again
        finally:
            if conn is not None:
                conn.close()


__all__ = ["CHECKPOINT_EVERY", "RESTART_FRAMES", "WAL_LIMIT", "Checkpointer", "take_over"]
