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
from collections.abc import Callable
from typing import Any

from .._leases import Leases, Release
from ._protocol import Store


def _reusable(store: Any) -> bool:
    if getattr(store, "closed", False):
        return False
    current = getattr(store, "names_its_file", None)  # SQLite: not deleted nor replaced
    return current is None or bool(current())


_STORES: Leases[Store] = Leases(lambda store: store.close(), _reusable)


def _key(kind: str, where: str) -> str:
    """A path by its real location; a URL by its digest (it may hold a password)."""
    if kind == "sqlite":
        return "sqlite:" + os.path.realpath(where)
    return "postgres:" + hashlib.sha256(where.encode()).hexdigest()


def leased(kind: str, where: str, make: Callable[[], Store]) -> tuple[Store, Release]:
    """The shared store of ``where`` (made with ``make`` if there is none), and the function
    that lets go of this lease (``release(later)``, see :mod:`nbagent._leases`)."""
    return _STORES.take(_key(kind, where), make)


def shared_count() -> int:
    """How many shared store objects are open (for tests)."""
    return len(_STORES)


__all__ = ["leased", "shared_count"]
