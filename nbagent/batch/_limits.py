"""Adaptive concurrency for a batch: AIMD over a ceiling, shared by every row.

The SDKs already retry a request that got a 429 (``max_retries``, 2 by
default, waiting what ``retry-after`` says). A
:class:`~nbagent.RateLimitError` that reaches the batch means those retries
were not enough: the provider wants fewer requests at once. So the batch
halves how many chats may run at once (multiplicative decrease, at most once
per ``cooldown`` so a burst of failures of requests sent together counts once),
and every ``limit`` successes add one slot back (additive increase), up to the
``concurrency`` the user asked for. A 429 that says ``retry-after`` also
pauses every row's next start until then: the provider spoke to the whole
client, not to one request. Rows waiting for a slot wait in order.
"""

from __future__ import annotations

import asyncio
import collections
import random
import time


class AdaptiveLimit:
    """A semaphore whose size moves between 1 and ``ceiling`` (AIMD).

    :meth:`acquire` a slot for the work of one row and :meth:`release` it; call
    :meth:`succeeded` after a request went through and :meth:`rate_limited`
    when one was refused. Bound to the event loop it is first awaited on.
    """

    def __init__(self, ceiling: int, *, cooldown: float = 1.0) -> None:
        if ceiling < 1:
            raise ValueError(f"concurrency must be at least 1, got {ceiling}")
        self.ceiling = ceiling
        self.limit = ceiling
        self.active = 0
        self.cooldown = cooldown
        self.decreases = 0
        self._credit = 0
        self._last_decrease = -float("inf")
        self._paused_until = 0.0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self) -> None:
        while (wait := self._paused_until - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        if self.active < self.limit and not self._waiters:
            self.active += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # woken and cancelled at once: pass it on
                self.active -= 1
                self._wake()
            else:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        self.active -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.active < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self.active += 1
                fut.set_result(None)

    def succeeded(self) -> None:
        """A request went through: every ``limit`` of them add a slot (up to the ceiling)."""
        if self.limit >= self.ceiling:
            return
        self._credit += 1
        if self._credit >= self.limit:
            self._credit = 0
            self.limit += 1
            self._wake()

    def rate_limited(self, retry_after: float | None = None) -> None:
        """A request was refused with a 429: halve the limit (once per cooldown), and
        hold every new start for ``retry_after`` seconds when the provider said."""
        now = time.monotonic()
        if retry_after is not None and retry_after > 0:
            self._paused_until = max(self._paused_until, now + min(retry_after, 60.0))
        if now - self._last_decrease < self.cooldown:
            return
        self._last_decrease = now
        self._credit = 0
        self.limit = max(1, self.limit // 2)
        self.decreases += 1


def backoff(attempt: int, retry_after: float | None, *, cap: float = 30.0) -> float:
    """Seconds to wait before continuing a rate-limited chat.

    The provider's ``retry-after`` when it said one, else exponential
    (0.5 s, 1 s, 2 s... up to ``cap``) with full jitter, so rows refused
    together do not come back together.
    """
    if retry_after is not None and retry_after >= 0:
        return min(float(retry_after), 60.0)
    return random.uniform(0, min(cap, 0.5 * 2 ** max(0, attempt - 1)))


__all__ = ["AdaptiveLimit", "backoff"]
