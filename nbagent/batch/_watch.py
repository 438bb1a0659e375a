"""Waking parked chats: a decision reached one of them, so the batch can continue it.

A chat of a batch that parks on a gated call waits here, without a slot,
until it can run again. Decisions reach it three ways:

- made on the live chat in this process (``chat.approve``/``deny``: the inbox,
  a card, code): its ``ApprovalDecided`` event wakes it at once;
- made through the store from anywhere (``store.approve``, another process's
  inbox): one look at ``store.pending_approvals()`` every ``poll_interval``
  seconds, for all parked chats at once, finds calls no longer pending; those
  chats ``refresh()`` (which applies the decision: ``ApprovalDecided``
  again). A store with a ``watch_decisions(callback)`` seam (PostgreSQL's
  LISTEN/NOTIFY) calls back instead, and the poll only backs it up;
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
        self._kick = asyncio.Event()
        self._unwatch: Any = None

    async def wait(self, chat: Any) -> None:
        """Return once ``chat`` no longer only waits for decisions (or someone decided)."""
        parked = Parked(chat, asyncio.get_running_loop())
        self._parked[chat.id] = parked
        self._ensure_running()
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
                self._poll(), name="nbagent-batch-decisions"
            )
            watch = getattr(self.store, "watch_decisions", None)
            if callable(watch) and self._unwatch is None:
                loop = asyncio.get_running_loop()
                with contextlib.suppress(Exception):
                    self._unwatch = watch(lambda *_: loop.call_soon_threadsafe(self._kick.set))

    async def _poll(self) -> None:
        while self._parked:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self.poll_interval)
            self._kick.clear()
            parked = list(self._parked.values())
            if not parked:
                break
            try:
                await asyncio.to_thread(self._look, parked)
            except Exception:  # a store that cannot be read now: look again next time
                continue
        if callable(self._unwatch):
            with contextlib.suppress(Exception):
                self._unwatch()
        self._unwatch = None

    def _look(self, parked: list[Parked]) -> None:
        """On a worker thread: refresh the chats a decision may have reached."""
        if self.store is not None:
            pending = {c.id for c in self.store.pending_approvals()}
            todo = [p for p in parked if p.waiting_calls() - pending]
        else:
            todo = parked
        for p in todo:
            with contextlib.suppress(Exception):  # the chat's store is down: next time
                if p.chat.refresh() or not p.chat.awaiting_approval:
                    p.loop.call_soon_threadsafe(p.woken.set)

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


__all__ = ["DecisionWatcher", "Parked"]
