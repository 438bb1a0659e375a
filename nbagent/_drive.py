"""One driver at a time: who drives a chat now, and how a second driver waits its turn.

``complete()``, ``ask()``, ``ask_later()``, ``step()`` and the async twins
drive a chat. One called while another driver is at work (a thread, a click's
continuation, a batch, the inbox) waits until that driver stops, then works
from where the chat stands then: a sync caller waits on a condition, an async
one awaits a future that the leaving thread wakes, so its loop runs on. Nobody
is turned away, so nobody returns a reply from before the other driver finished.

Waiting is refused with :class:`~nbagent.DriverError`, at once, where it could
never end: the caller is inside the driver (a tool or callback of the running
loop: the driver's context, its thread, or a running call of the same chat), or
it would block the thread of the loop an async driver runs on. ``chat.cancel()``
sends the waiting callers back (:meth:`Drive.cancel`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

from . import _aio
from ._errors import ChatCancelled, DriverError

if TYPE_CHECKING:
    import asyncio

_inside: ContextVar[tuple[Drive, ...]] = ContextVar("nbagent_driving", default=())


class WaitCancelled(ChatCancelled):
    """``chat.cancel()`` came while this caller waited for its turn: nothing of it ran."""

    def __init__(self) -> None:
        super().__init__(
            "the chat was cancelled while this call waited for another driver to stop; "
            "nothing of this call ran"
        )


class Drive:
    """The driving turn of one chat (thread-safe)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._thread: int | None = None  # the driver's thread (an async driver's loop thread)
        self._loop: asyncio.AbstractEventLoop | None = None  # an async driver's loop
        self._wakers: list[Callable[[], None]] = []
        self._cancels = 0  # cancel() calls so far: a waiter that sees it change gives up
        self._passes = 0  # turns passed on so far: a waiter for the driver's end sees it change
        self.waiting = 0  # callers waiting for their turn (tests synchronise on it)

    @property
    def held(self) -> bool:
        return self._thread is not None

    def enter(self, *, own_call: bool) -> bool:
        """Take the turn, blocking until it comes; False if ``cancel()`` came first.

        ``own_call``: the caller runs inside a running tool call of this chat.
        """
        me = threading.get_ident()
        with self._cond:
            cancels = self._cancels
            if self._thread is not None:
                self._refuse(own_call, me)
                self.waiting += 1
                try:
                    with _aio.blocking():  # a tool bound to this thread's loop fails, not hangs
                        while self._thread is not None and self._cancels == cancels:
                            self._cond.wait()
                finally:
                    self.waiting -= 1
                if self._cancels != cancels:
                    return False
            self._thread = me
            return True

    async def enter_async(self, *, own_call: bool) -> bool:
        """Take the turn, awaiting it without blocking the loop; False if cancelled first."""
        import asyncio

        loop = asyncio.get_running_loop()
        cancels: int | None = None
        while True:
            with self._cond:
                cancels = self._cancels if cancels is None else cancels
                if self._cancels != cancels:
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
        if not (own_call or same_thread or self in _inside.get()):
            return
        if same_thread and self._loop is not None and not own_call:
            raise DriverError(
                "this chat is being driven by a task on this thread's event loop, which "
                "cannot go on while a blocking call waits here: use "
                "`await chat.complete_async()` (or ask_async, step_async) instead; "
                "ask_later() has no async twin: await that task first, then call it (or "
                "ask with `await chat.ask_async(...)`, which waits for its turn)"
            )
        raise DriverError(
            "this chat's own tool or callback tried to drive it (complete, ask or step) "
            "while the chat is running that very tool or callback: it would wait for "
            "itself; return instead, and the running loop goes on"
        )

    @contextlib.contextmanager
    def held_here(self) -> Iterator[None]:
        """The turn taken by ``enter``: mark this context as the driver's (its tools and
        callbacks inherit it), and pass the turn on at the end."""
        token = _inside.set((*_inside.get(), self))
        try:
            yield
        finally:
            _inside.reset(token)
            with self._cond:
                self._thread, self._loop = None, None
                self._passes += 1
            self._wake_all()

    def driving_here(self) -> bool:
        """Whether this thread (a blocking call on the driver's loop too) or this context (a
        tool or callback of the run) is the driver's: waiting for the turn would never end."""
        return self._thread == threading.get_ident() or self in _inside.get()

    def wait_idle(self) -> None:
        """Block until no one drives the chat (the running driver passed its turn on)."""
        with self._cond, _aio.blocking():
            while self._thread is not None:
                self._cond.wait()

    def wait_stopped(self) -> None:
        """Block until the driver at work now (if any) has passed its turn on.

        For a caller ``cancel()`` sent back (:class:`WaitCancelled`): it reads the chat
        once the driver that held it stopped (``cancel()`` stops it too), never a round
        still in flight. A driver that takes the turn after that one is not waited for.
        """
        with self._cond:
            passes = self._passes
            if self._thread is None:
                return
            with _aio.blocking():
                while self._thread is not None and self._passes == passes:
                    self._cond.wait()

    async def wait_stopped_async(self) -> None:
        """:meth:`wait_stopped`, awaited (the loop runs on)."""
        import asyncio

        loop = asyncio.get_running_loop()
        passes: int | None = None
        while True:
            with self._cond:
                passes = self._passes if passes is None else passes
                if self._thread is None or self._passes != passes:
                    return
                woken = loop.create_future()
                self._wakers.append(functools.partial(_wake, loop, woken))
            await woken

    def cancel(self) -> None:
        """Send every caller waiting for its turn back (``chat.cancel()``)."""
        with self._cond:
            self._cancels += 1
        self._wake_all()

    def _wake_all(self) -> None:
        with self._cond:
            wakers, self._wakers = self._wakers, []
            self._cond.notify_all()
        for wake in wakers:
            wake()


def _wake(loop: asyncio.AbstractEventLoop, woken: asyncio.Future[None]) -> None:
    def settle() -> None:
        if not woken.done():
            woken.set_result(None)

    with contextlib.suppress(RuntimeError):  # the waiter's loop is closed: nobody waits
        loop.call_soon_threadsafe(settle)
