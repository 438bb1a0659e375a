"""Waking parked chats: a decision reached one of them, so the batch can continue it.

A chat of a batch that parks on a gated call waits here, without a slot,
until it can run again. Decisions reach it two ways:

- made on the live chat in this process (``chat.approve``/``deny``: the inbox,
  a card, code): its ``ApprovalDecided`` event wakes it at once;
- made through the store from anywhere (``store.approve``, another process's
  inbox): the chat follows its decisions (``follow_decisions``: a subscription
  on the store's follower, shared by every chat of the batch and everything
  else following that store in this process), which ``refresh()``-es it
  (applying the decision: ``ApprovalDecided`` again) when one was recorded,
  and once as it parks (a decision may have come between its last write and
  now). A chat without a store can only be decided here.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .._events import ApprovalDecided, Event
from .._extension import overrides


class Parked:
    """One parked chat: an event set when something may have been decided."""

    def __init__(self, chat: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.chat = chat
        self.loop = loop
        self.woken = asyncio.Event()
        chat.on(ApprovalDecided, self._decided)
        hooks = [e for e in chat.extensions if overrides(e, "follow_decisions")]
        self.sub = hooks[0].follow_decisions(self._refresh) if hooks else None

    def _decided(self, event: Event | None = None) -> None:
        if self.loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            self.loop.call_soon_threadsafe(self.woken.set)  # from whichever thread decided

    def _refresh(self) -> None:
        """From the store's follower (a worker thread): apply what was decided elsewhere."""
        with contextlib.suppress(Exception):  # the chat's store is down: next news
            if self.chat.refresh() or not self.chat.awaiting_approval:
                self._decided()

    def close(self) -> None:
        self.chat.off(self._decided)
        if self.sub is not None:
            self.sub.close()


async def wait_for_decisions(chat: Any) -> None:
    """Return once ``chat`` no longer only waits for decisions (someone decided)."""
    parked = Parked(chat, asyncio.get_running_loop())
    try:
        while chat.awaiting_approval:
            parked.woken.clear()
            if not chat.awaiting_approval:
                break
            await parked.woken.wait()
    finally:
        parked.close()


__all__ = ["Parked", "wait_for_decisions"]
