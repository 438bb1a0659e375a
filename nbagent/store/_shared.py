"""One store object per path or URL in a process, shared by the chats opened with it.

``Chat(store="agent.db")`` and ``Chat.load(id, store=url)`` used to open a store object
each: a connection and its file descriptors (two for SQLite), or a PostgreSQL connection,
per chat, held as long as the chat lives. A notebook keeps chats alive (its variables, a
list of an evaluation's chats, the live view of every cell run again): a few hundred of
them ran out of file descriptors (macOS allows 256 by default; the error read "unable to
open database file") or of PostgreSQL connections (the server's ``max_connections``,
100 by default). Now the chats given the same path or URL share one store object, as a
batch's chats share the batch's: it is thread-safe, and it groups their commits. Each
chat holds a lease; the store closes when the last lease is let go (``chat.close()``,
or the chat collected).

A store object passed by the user is theirs: never shared here, never closed. Nor is
:func:`~nbagent.store.open_store`'s: the caller closes it. A shared SQLite store whose
file was deleted or replaced is not handed to new chats: they open the file now at the
path.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._aio import in_worker, spawn
from ._protocol import Store


@dataclass
class _Lease:
    store: Store
    users: int = 0


_LOCK = threading.Lock()
_SHARED: dict[str, _Lease] = {}


def _key(kind: str, where: str) -> str:
    """A path by its real location; a URL by its digest (it may hold a password)."""
    if kind == "sqlite":
        return "sqlite:" + os.path.realpath(where)
    return "postgres:" + hashlib.sha256(where.encode()).hexdigest()


def _reusable(store: Any) -> bool:
    if getattr(store, "closed", False):
        return False
    current = getattr(store, "names_its_file", None)  # SQLite: not deleted nor replaced
    return current is None or bool(current())


def leased(
    kind: str, where: str, make: Callable[[], Store]
) -> tuple[Store, Callable[[bool], None]]:
    """The shared store of ``where`` (made with ``make`` if there is none), and the
    function that lets go of this lease (``release(later)``: ``later=True`` from a
    garbage collector's finalizer, which must not take this module's lock on the thread
    it interrupted)."""
    key = _key(kind, where)
    with _LOCK:
        lease = _SHARED.get(key)
        if lease is not None and _reusable(lease.store):
            lease.users += 1
            return lease.store, _releaser(key, lease)
    store = make()  # outside the lock: connecting may take a while (a server far away)
    with _LOCK:
        lease = _SHARED.get(key)
        if lease is not None and _reusable(lease.store):  # another thread made one first
            lease.users += 1
            extra: Store | None = store
        else:
            lease = _SHARED[key] = _Lease(store, 1)
            extra = None
    if extra is not None:
        extra.close()
    return lease.store, _releaser(key, lease)


def _releaser(key: str, lease: _Lease) -> Callable[[bool], None]:
    done = False

    def release(later: bool = False) -> None:
        nonlocal done
        if done:
            return
        done = True
        if later:
            try:
                spawn(in_worker(_let_go, key, lease))
                return
            except RuntimeError:  # no background loop (interpreter exit)
                pass
        _let_go(key, lease)

    return release


def _let_go(key: str, lease: _Lease) -> None:
    with _LOCK:
        lease.users -= 1
        last = lease.users == 0
        if last and _SHARED.get(key) is lease:
            del _SHARED[key]
    if last:
        lease.store.close()


def shared_count() -> int:
    """How many shared store objects are open (for tests)."""
    with _LOCK:
        return len(_SHARED)


__all__ = ["leased", "shared_count"]
