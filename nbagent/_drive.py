"""One driver at a time: who drives a chat now, and how a second driver waits its turn.

``complete()``, ``ask()``, ``ask_later()``, ``step()`` and the async twins
drive a chat. Whoever calls one while another driver is at work (a thread, a
click's continuation, a batch, the inbox) waits until that driver has stopped,
then does its own work from where the chat stands then: a sync caller waits on
a condition, an async one awaits a future woken from the stopping thread, so
its event loop keeps running. Nobody is turned away, so no caller ever returns
a reply that was current before the other driver finished.

Waiting is refused with :class:`~nbagent.DriverError`, at once, when it could
never end: the caller runs inside the driver (a tool or callback of the running
loop: the driver's context, its thread, or a running call of the same chat), or
it would block the thread the driver's event loop runs on.

``chat.cancel()`` stops the running driver at its next step and sends the
waiting ones back (:meth:`Drive.cancel`); each says so as documented on the
chat's methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from . import _aio
from ._errors import ChatCancelled, DriverError

_inside: ContextVar[tuple[Drive, ...]] = ContextVar("nbagent_driving", default=())


class WaitCancelled(ChatCancelled):
    """``chat.cancel()`` came while this caller waited for its turn: it did nothing."""

    def __init__(self) -> None:
        super().__init__(
            "the chat was cancelled while this call waited for another driver to stop; "
            "nothing of this call ran"
        )


class Drive:
    """The driving gate of one chat (thread-safe; every chat has one)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._thread: int | None = None  # who drives: its thread (an async driver's loop thread)
        self._loop: asyncio.AbstractEventLoop | None = None  # an async driver's loop
        self._wakers: list[Callable[[], None]] = []
        self._cancels = 0  # cancel() calls so far: a waiter that sees it change gives up
        self.waiting = 0  # callers waiting for their turn (tests synchronise on it)

    @property
    def held(self) -> bool:
        """Whether someone drives the chat now."""
        return self._thread is not None

    def enter(self, *, own_call: bool) -> bool:
        """Wait for the turn to drive, blocking; False if ``cancel()`` came meanwhile.

        ``own_call``: the caller runs inside a running tool call of this chat.
        """
        me = threading.get_ident()
        with self._cond:
            cancels = self._cancels
            if self._thread is None:
                self._thread = me
                return True
            self._refuse(own_call, me)
            self.waiting += 1
            try:
                with _aio.blocking():  # an async tool bound to this loop fails, not hangs
                    while self._thread is not None and self._cancels == cancels:
                        self._cond.wait()
            finally:
                self.waiting -= 1
            if self._cancels != cancels:
                return False
            self._thread = me
            return True

    async def enter_async(self, *, own_call: bool) -> bool:
        """Await the turn to drive without blocking the loop; False if cancelled meanwhile."""
        loop = asyncio.get_running_loop()
        cancels: int | None = None
        while True:
            with self._cond:
                if cancels is None:
                    cancels = self._cancels
                elif self._cancels != cancels:
                    return False
                if self._thread is None:
                    self._thread, self._loop = threading.get_ident(), loop
                    return True
                self._refuse(own_call, None)
                woken = loop.create_future()
                self._wakers.append(functools.partial(_wake, loop, woken))
                self.waiting += 1
            try:
                await woken
            finally:
                with self._cond:
                    self.waiting -= 1

    def _refuse(self, own_call: bool, sync_thread: int | None) -> None:
        """Raise :class:`DriverError` where waiting could never end (under the condition)."""
        same_thread = sync_thread is not None and sync_thread == self._thread
        if own_call or same_thread or self in _inside.get():
            if same_thread and self._loop is not None and not own_call:
                raise DriverError(
                    "this chat is being driven by a task on this thread's event loop, which "
                    "cannot go on while a blocking call waits here: use "
                    "`await chat.complete_async()` (or ask_async, step_async) instead"
                )
            raise DriverError(
                "this chat's own tool or callback tried to drive it (complete, ask or step) "
                "while the chat is running that very tool or callback: it would wait for "
                "itself; return instead, and the running loop goes on"
            )

    def leave(self) -> None:
        """The driver stopped: the next waiter takes its turn."""
        with self._cond:
            self._thread, self._loop = None, None
            wakers, self._wakers = self._wakers, []
            self._cond.notify_all()
        for wake in wakers:
            wake()

    def cancel(self) -> None:
        """Send every caller waiting for its turn back (``chat.cancel()``)."""
        with self._cond:
            self._cancels += 1
            wakers, self._wakers = self._wakers, []
            self._cond.notify_all()
        for wake in wakers:
            wake()

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        """Mark the running context as this driver's (tools and callbacks inherit it)."""
        token = _inside.set((*_inside.get(), self))
        try:
            yield
        finally:
            _inside.reset(token)


def _wake(loop: asyncio.AbstractEventLoop, woken: asyncio.Future[None]) -> None:
    def settle() -> None:
        if not woken.done():
            woken.set_result(None)

    with contextlib.suppress(RuntimeError):  # the waiter's loop is closed: nobody waits
        loop.call_soon_threadsafe(settle)
