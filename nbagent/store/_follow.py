"""Following decisions made elsewhere: one :class:`Follower` per store object, for every consumer.

A decision recorded in a store by someone else (``store.approve`` in a script,
another process's inbox or card) reaches this process through the store's
follower. Every consumer subscribes the chats it cares about with a callback
and does only its reaction: a pending card refreshes its chat, a parked batch
row wakes, the Ray driver resends a chat, the inbox reads its rows again, a
:class:`~nbagent.store.DecisionWatch` wakes its waiter::

    sub = follow(store, [chat.id], lambda ids: chat.refresh())
    ...
    sub.close()

News arrives one way per store: PostgreSQL pushes it (its listener, another
task on the background loop, calls :meth:`Follower.push` at each NOTIFY),
SQLite is polled (the ``decisions`` table's increasing ids), another store
through its own ``watch()`` read without waiting, or, with none, its
``pending_approvals()`` compared between looks. The follower is one task on
nbagent's background loop while it has subscribers: it looks every
:data:`POLL_INTERVAL` s (at once on a push) and calls back those with news on
worker threads. Live chats in this
process need none of this: their ``ApprovalDecided`` events say it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from .._aio import in_worker, spawn

POLL_INTERVAL = 0.25
"""Seconds between two looks at a store that cannot push news (SQLite), while someone follows."""

BURST_GAP = 0.05
"""Seconds at least between two looks that called someone back (a burst of news)."""

RETRY_FIRST = 0.25
"""Seconds before a callback that raised is called again (doubling at each failure)."""

RETRY_MAX = 5.0
"""Seconds at most between two calls of a callback that keeps raising."""


class Subscription:
    """One consumer's chats and callback on a store's :class:`Follower` (thread-safe).

    ``callback(chat_ids)`` runs on a worker thread with the followed chats that
    got a decision (and, once, those just added: a decision may have come
    before). ``every_tick`` subscriptions are also called (with an empty set) at
    every look, and :meth:`nudge` asks for a call soon. A callback that raises is
    called again with the same chats after a backoff (:data:`RETRY_FIRST` s,
    doubling, at most :data:`RETRY_MAX`), at a look of the follower, until it
    returns: the news it could not act on (its chat's store could not be read) is
    not dropped, since no more news may ever come for it.
    """

    def __init__(
        self,
        follower: Follower,
        chat_ids: Iterable[str] | None,
        callback: Callable[[set[str]], Any],
        look: bool,
        every_tick: bool,
        on_close: Callable[[], Any] | None,
    ):
        self._follower = follower
        self._lock = threading.Lock()
        self._ids: set[str] | None = None if chat_ids is None else set(chat_ids)
        self._look: set[str] = set(self._ids or ()) if look else set()
        self._nudged = False
        self._callback = callback
        self._every_tick = every_tick
        self._on_close = on_close
        self.closed = False
        self.calls = 0
        self.last_error: BaseException | None = None
        self._failures = 0  # calls in a row that raised
        self._retry_ids: set[str] = set()  # what a call that raised had (called again)
        self._retry_at: float | None = None  # when (time.monotonic()); None: nothing to retry

    def add(self, chat_ids: Iterable[str]) -> None:
        """Follow these chats too (each is looked at once soon)."""
        with self._lock:
            ids = set(chat_ids)
            if self._ids is not None:
                self._ids |= ids
            self._look |= ids
        self._follower.wake()

    def discard(self, chat_ids: Iterable[str]) -> None:
        """Stop following these chats."""
        with self._lock:
            ids = set(chat_ids)
            if self._ids is not None:
                self._ids -= ids
            self._look -= ids

    def nudge(self) -> None:
        """Call the callback soon, even without news (a live chat changed, say)."""
        with self._lock:
            self._nudged = True
        self._follower.wake()

    def close(self) -> None:
        """Stop following (idempotent)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._follower.drop(self)
        if self._on_close is not None:
            self._on_close()

    def missed(self) -> None:
        """News may have been missed (the store's listener lost its connection): look at
        every followed chat once soon (a subscription to every chat is called once)."""
        with self._lock:
            if self._ids is None:
                self._nudged = True
            else:
                self._look |= self._ids
        self._follower.wake()

    def due(self, news: set[str]) -> set[str] | None:
        """The ids to call back with for this look (None: no call)."""
        with self._lock:
            if self.closed:
                return None
            mine = set(news) if self._ids is None else news & self._ids
            mine |= self._look
            retry = self._retry_at is not None and time.monotonic() >= self._retry_at
            if not (mine or retry or self._nudged or self._every_tick):
                return None
            # a call that goes ahead (its retry due, or news, a tick, a nudge before it)
            # carries the chats waiting for a retry: cleared unsent, that news was lost
            mine |= self._retry_ids
            self._look, self._nudged = set(), False
            self._retry_ids, self._retry_at = set(), None  # this call carries them
            return mine

    def call(self, ids: set[str]) -> None:
        """Run the callback, in a context of its own: none of the context vars of whoever
        started the follower (a notebook cell's, say: its outputs would go there). If it
        raises, it is called again with ``ids`` after a backoff (see the class)."""
        self.calls += 1
        try:
            contextvars.Context().run(self._callback, ids)
        except Exception as exc:  # a consumer's trouble never stops the follower
            self.last_error = exc
            with self._lock:
                self._failures += 1
                delay = min(RETRY_FIRST * 2 ** (self._failures - 1), RETRY_MAX)
                self._retry_ids |= ids
                at = time.monotonic() + delay
                self._retry_at = at if self._retry_at is None else min(self._retry_at, at)
        else:
            with self._lock:
                self._failures = 0


class Follower:
    """Follows one store's decisions for every subscriber in this process.

    Made by :func:`follow` (one per store object); never raises in the
    background: a store that cannot be read now is read again at the next look
    (``last_error`` says why).
    """

    def __init__(self, store: Any):
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._subs: list[Subscription] = []
        self._pushed: set[str] = set()
        self._running = False
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        self.last_error: BaseException | None = None
        self._poll = _source(store, self) if store is not None else None

    # -- the store's side ---------------------------------------------------------
    def push(self, chat_ids: Iterable[str]) -> None:
        """Decisions were recorded in these chats (a store that pushes news calls this)."""
        with self._lock:
            self._pushed.update(chat_ids)
        self.wake()

    def missed(self) -> None:
        """News may have been lost (the store's listener was not listening for a while):
        every subscription looks at its chats once (:meth:`Subscription.missed`)."""
        for sub in self.subscriptions:
            sub.missed()

    def wake(self) -> None:
        """Look now rather than at the next tick."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop is gone (interpreter exit)
                loop.call_soon_threadsafe(wake.set)

    def close(self) -> None:
        """The store closed: every subscription is closed (their waiters wake)."""
        with self._lock:
            self.closed = True
            subs, self._subs = list(self._subs), []
        for sub in subs:
            sub.close()

    # -- the consumers' side --------------------------------------------------------
    def add(self, sub: Subscription) -> Subscription:
        with self._lock:
            self._subs.append(sub)
            start = not self._running and not self.closed
            self._running = self._running or start
        if start:
            spawn(self._run())
        else:
            self.wake()
        return sub

    def drop(self, sub: Subscription) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._subs.remove(sub)

    @property
    def subscriptions(self) -> list[Subscription]:
        with self._lock:
            return list(self._subs)

    async def _run(self) -> None:
        """The one loop: look, call back whoever has news, wait for a push or the next tick."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        try:
            await self._follow()
        except BaseException:
            with self._lock:
                self._running = False
            raise

    async def _follow(self) -> None:
        assert self._wake is not None
        loop, called = asyncio.get_running_loop(), -BURST_GAP
        while True:
            self._wake.clear()
            looked = await in_worker(self._look)
            if looked is None:
                return
            news, subs = looked
            calls = [(s, ids) for s in subs if (ids := s.due(news)) is not None]
            if calls:
                await asyncio.gather(*(in_worker(s.call, ids) for s, ids in calls))
            called = loop.time() if calls else called
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_INTERVAL)
                await asyncio.sleep(called + BURST_GAP - loop.time())  # a burst: a few looks

    def _look(self) -> tuple[set[str], list[Subscription]] | None:
        """The news, and who to tell (those subscribed when it was taken); None: stop."""
        news: set[str] = set()
        if self._poll is not None:
            try:
                with self._poll_lock:
                    news.update(self._poll())
            except Exception as exc:  # the store cannot be read now: next look
                self.last_error = exc
        with self._lock:
            if not self._subs or self.closed:
                self._running, self._pushed = False, set()  # news for no one
                return None
            news |= self._pushed
            self._pushed = set()
            return news, list(self._subs)


def _source(store: Any, follower: Follower) -> Callable[[], Iterable[str]] | None:
    """How this store's news arrives: a poll function, or None (it pushes to ``follower``)."""
    feed = getattr(type(store), "_decision_feed", None)  # nbagent's own stores
    if feed is not None:
        return feed(store, follower)
    watch = getattr(store, "watch", None)
    if callable(watch):  # another store's own watch, read without waiting
        decisions = watch(None)
        return lambda: decisions.wait(0)
    ref = weakref.ref(store)  # none at all: compare the pending calls from look to look
    seen: dict[str, str] = {}

    def pending_gone() -> set[str]:
        held = ref()
        now = {c.id: c.chat_id for c in held.pending_approvals()} if held is not None else {}
        gone = {chat for call, chat in seen.items() if call not in now}
        seen.clear()
        seen.update(now)
        return gone

    pending_gone()
    return pending_gone


_followers: weakref.WeakKeyDictionary[Any, Follower] = weakref.WeakKeyDictionary()
_nowhere = Follower(None)  # for consumers with no store (live chats only): nudges and ticks
_registry_lock = threading.RLock()  # a store's watch() may follow another store


def follower_of(store: Any) -> Follower:
    """The store's follower in this process (made by the first call).

    Raises:
        StoreError: The store is closed or cannot be read.
    """
    if store is None:
        return _nowhere
    with _registry_lock:
        follower = _followers.get(store)
        if follower is None or follower.closed:
            follower = _followers[store] = Follower(store)
        return follower


def follow(
    store: Any,
    chat_ids: Iterable[str] | None,
    callback: Callable[[set[str]], Any],
    *,
    look: bool = True,
    every_tick: bool = False,
    on_close: Callable[[], Any] | None = None,
) -> Subscription:
    """Call ``callback(chat_ids)`` when decisions are recorded in these chats (None: every chat).

    Args:
        store: Any :class:`~nbagent.store.Store` (``None``: no store; only
            :meth:`Subscription.nudge` and ``every_tick`` call back).
        chat_ids: The chats to follow (more with :meth:`Subscription.add`).
        callback: Called on a worker thread, never twice at once, with the
            followed chats that got a decision; it must not block for long.
        look: Call back once soon for the chats given (a decision may have come
            before this subscription).
        every_tick: Also call back at every look (every :data:`POLL_INTERVAL` s).
        on_close: Called once when the subscription closes (or the store does).

    Raises:
        StoreError: The store is closed or cannot be read.
    """
    if isinstance(chat_ids, str):
        raise TypeError("chat_ids must be a collection of chat ids (or None), not one string")
    follower = follower_of(store)
    return follower.add(Subscription(follower, chat_ids, callback, look, every_tick, on_close))


def release(store: Any) -> None:
    """The store closed: close its follower (and with it every subscription)."""
    with _registry_lock:
        follower = _followers.pop(store, None)
    if follower is not None:
        follower.close()


__all__ = [
    "POLL_INTERVAL",
    "RETRY_FIRST",
    "RETRY_MAX",
    "Follower",
    "Subscription",
    "follow",
    "follower_of",
    "release",
]
