"""Store work that must not wait: done on the thread that drives chats, or not at all.

The async driver (a batch's loop, ``await chat.complete_async()``) hands a
store's writes and claims to a worker thread so that its loop never waits on
the database (``StoreExtension.catch_up``). For a SQLite store in WAL mode
with ``synchronous`` ``NORMAL`` (the default) a commit waits for nothing but
the CPU: it appends to the WAL in the page cache, and checkpoints (the only
fsyncs) run on the checkpointer's own thread. There the handoff is the cost:
one loop-to-thread-and-back per write, on every chat's every step. Measured
on a 1,000-chat batch at 50 ms model latency while the VM was busy, doing the
store's work inline saved about 5 s of the client's 25 s of CPU; on a quieter
machine the medians of seven interleaved runs were 13.8 s against 15.3 s (0 ms)
and 16.9 s against 17.4 s (50 ms).

So the driver does such a store's work on its own thread, inside
:func:`no_wait`. Whatever would wait raises :class:`WouldWait` before anything
is written: another thread holds the store's connection (past a few
milliseconds: :data:`LOCK_WAIT`), another connection
(a second process, a DB browser) holds the file's write lock, or the WAL has
run away and must be truncated. The driver then does the same work on a
worker thread, where waiting harms nothing. Nothing is written twice: a write
either committed before the next one began, or never began.

A PostgreSQL store's writes always wait (a round trip), so under the async driver
they never run here: they are jobs its loop's sender awaits on an async connection
(:mod:`nbagent.store._pg_sender`), or, when that cannot take them, work for a worker
thread. Its step hook runs inside :func:`no_wait` too, and most steps send nothing (the
rules unchanged by the listener's token, no round open): the store raises
:class:`WouldWait` before its connection's lock when one would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class WouldWait(BaseException):
    """Store work inside :func:`no_wait` would have waited; nothing of it was written.

    A ``BaseException``: every handler for a failed write (``except Exception``:
    keep the entries, mark the failure, retry) lets it through, since nothing
    failed. It never leaves nbagent: :func:`here_or_later` catches it.
    """


_state = threading.local()


@contextmanager
def _refusing(on: bool) -> Iterator[None]:
    before = getattr(_state, "on", False)
    _state.on = on
    try:
        yield
    finally:
        _state.on = before


def no_wait() -> AbstractContextManager[None]:
    """Store work on this thread raises :class:`WouldWait` instead of waiting."""
    return _refusing(True)


def may_wait_here() -> AbstractContextManager[None]:
    """Undo :func:`no_wait` for a while: around what hands control to others' code (the
    chat's events reach subscribers, a user's callback among them, which may use a store and
    must not meet :class:`WouldWait`: it would end the event's delivery half-way)."""
    return _refusing(False)


LATER = object()
"""What :func:`here_or_later` returns when the work would have waited."""


def here_or_later(fn: Callable[..., T], *args: Any) -> T | object:
    """``fn(*args)`` on this thread inside :func:`no_wait`, or :data:`LATER` if it would have
    waited (the one place :class:`WouldWait` is caught: the caller does the rest where it
    may wait). What ``fn`` wrote before that stays written."""
    try:
        with no_wait():
            return fn(*args)
    except WouldWait:
        return LATER


def may_wait() -> bool:
    """Whether store work on this thread may wait (outside :func:`no_wait`)."""
    return not getattr(_state, "on", False)


LOCK_WAIT = 0.005
"""Seconds :func:`held` waits inside :func:`no_wait` for another thread of this process to let
go of a store's connection. What it does with it is a transaction of CPU work (about a
millisecond; the waiting thread gives it the GIL), unless it waits itself (another
connection's write lock, the disk): so wait this long for the work, never for the wait.
Measured on a 300-chat SQLite batch, not waiting at all sent a third of the writes to worker
threads (the batch's chats are created on threads), which is the handoff this module avoids."""


@contextmanager
def held(lock: Any) -> Iterator[None]:
    """``with lock``; inside :func:`no_wait`, :class:`WouldWait` once another thread has held
    it for :data:`LOCK_WAIT` seconds."""
    if not (lock.acquire() if may_wait() else lock.acquire(timeout=LOCK_WAIT)):
        raise WouldWait("another thread holds the store's connection")
    try:
        yield
    finally:
        lock.release()


__all__ = [
    "LATER",
    "LOCK_WAIT",
    "WouldWait",
    "held",
    "here_or_later",
    "may_wait",
    "may_wait_here",
    "no_wait",
]
