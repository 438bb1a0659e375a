"""Following decisions as they are recorded: ``store.watch(chat_ids)``, one :class:`DecisionWatch`.

A decision made anywhere (``store.approve`` in another process, a click in
another kernel, a copy of the chat) reaches a chat only when the chat looks
(its next step, ``chat.refresh()``). A watch says *when to look*::

    with store.watch([chat.id]) as watch:      # follows decisions from now on
        while chat.awaiting_approval:
            if watch.wait(timeout=60):         # the ids of chats that got a decision
                chat.refresh()                 # applies it (the chat's own rules)
        chat.complete()

News comes from the store's :class:`~nbagent.store._follow.Follower` (one
per store object in a process, shared with every other consumer): PostgreSQL
pushes it (a trigger on the ``decisions`` table sends a ``NOTIFY``), SQLite is
polled (the ``decisions`` table's increasing ids, a few times a second, only
while someone follows). A decision recorded after
:meth:`~nbagent.store.SQLiteStore.watch` returned is never missed; look once
after making the watch for one recorded before.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ._follow import POLL_INTERVAL

if TYPE_CHECKING:
    import asyncio


class DecisionWatch:
    """The decisions recorded in a store since this watch was made: which chats got one.

    Made by ``store.watch(chat_ids=None)`` (``None``: every chat). Thread-safe;
    close it (or use ``with``) when done: a PostgreSQL store stops listening
    once its last watch is closed.
    """

    def __init__(
        self,
        chat_ids: Iterable[str] | None = None,
        *,
        on_close: Callable[[DecisionWatch], None] | None = None,
    ):
        if isinstance(chat_ids, str):
            raise TypeError("chat_ids must be a collection of chat ids (or None), not one string")
        self.chat_ids: frozenset[str] | None = None if chat_ids is None else frozenset(chat_ids)
        self._on_close = on_close
        self._cond = threading.Condition()
        self._news: set[str] = set()
        self._closed = False
        # the futures ``wait_async`` awaits, each with its loop: news (or closing) resolves
        # them there; the news itself stays in ``_news`` until a waiter takes it
        self._woken: dict[asyncio.Future[None], asyncio.AbstractEventLoop] = {}

    # -- the store's side ---------------------------------------------------------
    def push(self, chat_ids: Iterable[str]) -> None:
        """Decisions were recorded in these chats (those this watch follows are kept)."""
        mine = [c for c in chat_ids if self.chat_ids is None or c in self.chat_ids]
        if not mine:
            return
        with self._cond:
            self._news.update(mine)
            self._cond.notify_all()
            self._wake_async()

    def _wake_async(self) -> None:
        """Resolve every ``wait_async``'s future, on its own loop (under ``_cond``)."""
        for woken, loop in self._woken.items():
            with contextlib.suppress(RuntimeError):  # its loop was closed: nobody waits
                loop.call_soon_threadsafe(_resolve, woken)

    # -- the waiter's side --------------------------------------------------------
    def wait(self, timeout: float | None = None) -> set[str]:
        """Block until a decision is recorded in a followed chat, or ``timeout`` seconds pass.

        Returns:
            The ids of the chats that got a decision since the last ``wait``
            (empty after a timeout, or once the watch is closed).
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._cond:
            while not (self._news or self._closed):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return set()
                self._cond.wait(left)
            news, self._news = self._news, set()
            return news

    async def wait_async(self, timeout: float | None = None) -> set[str]:
        """Async twin of :meth:`wait`: it awaits a future the news resolves (no thread).

        Cancelled (a timeout around it), it takes nothing: the news it would have returned
        is the next wait's. (It waited on a worker thread, which went on waiting after the
        cancellation and took news arriving then into a result nobody read: the next wait
        missed the decision.)
        """
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            with self._cond:  # taken here, on the waiter's own thread, or left for the next
                if self._news or self._closed:
                    news, self._news = self._news, set()
                    return news
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return set()
                woken: asyncio.Future[None] = loop.create_future()
                self._woken[woken] = loop
            try:
                await asyncio.wait([woken], timeout=left)
            finally:
                with self._cond:
                    self._woken.pop(woken, None)

    def close(self) -> None:
        """Stop following (a waiter returns at once). Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            self._wake_async()
        if self._on_close is not None:
            self._on_close(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> DecisionWatch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        which = "every chat" if self.chat_ids is None else f"{len(self.chat_ids)} chat(s)"
        state = ", closed" if self._closed else ""
        return f"DecisionWatch({which}{state})"


def _resolve(woken: asyncio.Future[None]) -> None:
    if not woken.done():  # (cancelled with its waiter, or resolved by an earlier push)
        woken.set_result(None)


__all__ = ["POLL_INTERVAL", "DecisionWatch"]
