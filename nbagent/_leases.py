"""One object per key in a process, leased to whoever asks with it, closed with the last lease.

What a process should hold once, however many chats use it: a store's connection (one
per path or URL: ``store/_shared.py``) and an SDK client with its connection pool (one
per API, key and options, and per event loop for an async one: ``providers/_clients.py``).
Each chat or provider made its own: a connection, or a client whose construction alone
(an SSL context, an HTTP pool) cost 20 ms and whose pool held a socket, per chat. A
notebook keeping a few hundred chats ran out of file descriptors; a batch whose
``make_chat`` named a model spent 20 times the CPU of one sharing a provider.

``take(key, make)`` returns the object and its ``release``; ``release(later=True)``
comes from a garbage collector's finalizer, which may interrupt this very module on the
same thread: the lease is let go on a worker thread instead of taking the lock there (at
interpreter exit on the background loop's thread, waited for: :func:`nbagent._aio.let_go`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from ._aio import let_go

T = TypeVar("T")

Release = Callable[[bool], None]
"""Let go of a lease: ``release(later)`` (``later``: from a finalizer). Idempotent."""


class _Lease(Generic[T]):
    __slots__ = ("obj", "users")

    def __init__(self, obj: T):
        self.obj = obj
        self.users = 1


class Leases(Generic[T]):
    """The shared objects of one kind: ``close(obj)`` ends one when its last lease is let
    go; ``reusable(obj)`` says whether one may still be handed out (not closed, not stale)."""

    def __init__(self, close: Callable[[T], object], reusable: Callable[[T], bool]):
        self._close = close
        self._reusable = reusable
        self._lock = threading.Lock()
        self._shared: dict[str, _Lease[T]] = {}

    def take(self, key: str, make: Callable[[], T]) -> tuple[T, Release]:
        """The object of ``key`` (made with ``make`` if there is none that is reusable)."""
        with self._lock:
            lease = self._shared.get(key)
            if lease is not None and self._reusable(lease.obj):
                lease.users += 1
                return lease.obj, self._releaser(key, lease)
        made = make()  # outside the lock: it may take a while (a server far away)
        with self._lock:
            lease = self._shared.get(key)
            if lease is not None and self._reusable(lease.obj):  # another thread was first
                lease.users += 1
                spare: T | None = made
            else:
                lease = self._shared[key] = _Lease(made)
                spare = None
        if spare is not None:
            self._close(spare)
        return lease.obj, self._releaser(key, lease)

    def __len__(self) -> int:
        with self._lock:
            return len(self._shared)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._shared

    def _releaser(self, key: str, lease: _Lease[T]) -> Release:
        done = False

        def release(later: bool = False) -> None:
            nonlocal done
            if done:
                return
            done = True
            if later:  # off this thread, waited for at exit (``_aio.let_go``)
                let_go(lambda: self._let_go(key, lease))
            else:
                self._let_go(key, lease)

        return release

    def _let_go(self, key: str, lease: _Lease[T]) -> None:
        with self._lock:
            lease.users -= 1
            last = lease.users == 0
            if last and self._shared.get(key) is lease:
                del self._shared[key]
        if last:
            self._close(lease.obj)


__all__ = ["Leases", "Release"]
