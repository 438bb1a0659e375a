"""Waking parked chats: a decision reached one of them, so the batch can continue it.

A chat of a batch that parks on a gated call waits here, without a slot,
until it can run again. Decisions reach it three ways:

- made on the live chat in this process (``chat.approve``/``deny``: the inbox,
  a card, code): its ``ApprovalDecided`` event wakes it at once;
- made through the store from anywhere (``store.approve``, another process's
  inbox): a store with the watch seam (``store.watch()``: a ``DecisionWatch``
  whose ``wait_async(timeout)`` returns the ids of chats that got a decision;
  pushed by PostgreSQL's LISTEN/NOTIFY) names the chats to ``refresh()``
  (which applies the decision: ``ApprovalDecided`` again); a store without it
  is asked ``pending_approvals()`` once every ``poll_interval`` seconds for all
  parked chats at once, and the chats whose calls are no longer pending
  refresh. A chat that parks looks once for itself (a decision may have come
  between its last write and now);
- a chat without a batch store (its own store, or none): ``chat.refresh()``
  every ``poll_interval`` (a no-op without a store).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .._events import ApprovalDecided, Event


class Parked:
    """One parked chat: an event set when something may have been decided."""

    def __init__(self, chat: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.chat = chat
        self.loop = loop
        self.woken = asyncio.Event()
        chat.on(ApprovalDecided, self._decided)

    def _decided(self, event: Event) -> None:
        if self.loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            self.loop.call_soon_threadsafe(self.woken.set)  # from whichever thread decided

    def waiting_calls(self) -> set[str]:
        return {c.id for c in self.chat.pending_approvals}

    def close(self) -> None:
        self.chat.off(self._decided)


class DecisionWatcher:
    """Watches the store (or each chat) for decisions on behalf of every parked chat."""

    def __init__(self, store: Any, poll_interval: float) -> None:
        self.store = store
        self.poll_interval = poll_interval
        self._parked: dict[str, Parked] = {}
        self._task: asyncio.Task[None] | None = None
        self.watching = False  # the store's watch seam is in use (else: polling)
        self._looks: set[asyncio.Task[None]] = set()  # held: the loop keeps tasks weakly

    async def wait(self, chat: Any) -> None:
        """Return once ``chat`` no longer only waits for decisions (or someone decided)."""
        parked = Parked(chat, asyncio.get_running_loop())
        self._parked[chat.id] = parked
        self._ensure_running()
        if self.store is not None:  # decided between its last write and now: look once
            look = asyncio.get_running_loop().create_task(
                asyncio.to_thread(self._refresh, [parked])
            )
            self._looks.add(look)
            look.add_done_callback(self._looks.discard)
        try:
            while chat.awaiting_approval:
                parked.woken.clear()
                if not chat.awaiting_approval:
                    break
                await parked.woken.wait()
        finally:
            parked.close()
            self._parked.pop(chat.id, None)

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="nbagent-batch-decisions"
            )

    async def _run(self) -> None:
        watch = None
        make = getattr(self.store, "watch", None) if self.store is not None else None
        if callable(make):  # the store tells us (PostgreSQL: LISTEN/NOTIFY)
            try:
                watch = await asyncio.to_thread(make, None)
            except Exception:
                watch = None
        self.watching = watch is not None
        try:
            while self._parked:
                if watch is not None:
                    await self._watched(watch)
                else:
                    await asyncio.sleep(self.poll_interval)
                    await self._polled()
        finally:
            self.watching = False
            if watch is not None:
                with contextlib.suppress(Exception):
                    watch.close()

    async def _watched(self, watch: Any) -> None:
        try:
            ids = await watch.wait_async(self.poll_interval)
        except Exception:  # the watch broke: one look the slow way
            await asyncio.sleep(self.poll_interval)
            await self._polled()
            return
        todo = [p for cid, p in list(self._parked.items()) if cid in ids]
        if todo:
            await asyncio.to_thread(self._refresh, todo)

    async def _polled(self) -> None:
        parked = list(self._parked.values())
        if parked:
            with contextlib.suppress(Exception):  # a store that cannot be read now: next time
                await asyncio.to_thread(self._look, parked)

    def _look(self, parked: list[Parked]) -> None:
        """On a worker thread: find the chats a decision may have reached, refresh them."""
        if self.store is not None:
            pending = {c.id for c in self.store.pending_approvals()}
            parked = [p for p in parked if p.waiting_calls() - pending]
        self._refresh(parked)

    @staticmethod
    def _refresh(parked: list[Parked]) -> None:
        for p in parked:
            with contextlib.suppress(Exception):  # the chat's store is down: next time
                if p.chat.refresh() or not p.chat.awaiting_approval:
                    p.loop.call_soon_threadsafe(p.woken.set)

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


__all__ = ["DecisionWatcher", "Parked"]
