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

A fork made into its parent's store (``chat.fork()``) takes a lease of its own on the
parent's shared object (:func:`lease_again`): closing the parent leaves the fork's store open.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

from .._leases import Leases, Release
from ._protocol import Store


def _reusable(store: Any) -> bool:
    if getattr(store, "closed", False):
        return False
    current = getattr(store, "names_its_file", None)  # SQLite: not deleted nor replaced
    return current is None or bool(current())


def _close(store: Store) -> None:
    _KEYS.pop(id(store), None)
    store.close()


_STORES: Leases[Store] = Leases(_close, _reusable)
_KEYS: dict[int, str] = {}  # id of a shared store object -> its key (while it is shared)


class _Gone(Exception):
    """The key's shared object is gone or stale: no lease is made for it."""


def _gone() -> Store:
    raise _Gone


def _key(kind: str, where: str) -> str:
    """A path by its real location; a URL by its digest (it may hold a password)."""
    if kind == "sqlite":
        return "sqlite:" + os.path.realpath(where)
    return "postgres:" + hashlib.sha256(where.encode()).hexdigest()


def leased(kind: str, where: str, make: Callable[[], Store]) -> tuple[Store, Release]:
    """The shared store of ``where`` (made with ``make`` if there is none), and the function
    that lets go of this lease (``release(later)``, see :mod:`nbagent._leases`)."""
    key = _key(kind, where)
    store, release = _STORES.take(key, make)
    _KEYS[id(store)] = key
    return store, release


def lease_again(store: Store) -> Release | None:
    """Another lease on ``store``, a shared store object still open (a fork made into its
    parent's store holds its own: closing the parent leaves the fork's store open), or
    ``None`` if ``store`` is not shared here (the user's object) or no longer handed out
    (closed, or its file deleted or replaced)."""
    key = _KEYS.get(id(store))
    if key is None:
        return None
    try:
        obj, release = _STORES.take(key, _gone)
    except _Gone:
        return None
    if obj is not store:  # the key's object now is another (an id reused): not this one
        release(False)
        return None
    return release


def shared_count(where: str | None = None) -> int:
    """How many shared store objects are open (for tests); with ``where`` (a path or a
    ``postgresql://`` URL), whether that one is (1 or 0): a test counting every store of its
    process saw an earlier test's store, left to the collector, let go in the middle of it."""
    if where is None:
        return len(_STORES)
    kind = "postgres" if where.startswith(("postgresql://", "postgres://")) else "sqlite"
    return int(_key(kind, where) in _STORES)


__all__ = ["lease_again", "leased", "shared_count"]
