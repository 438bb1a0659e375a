"""A cancelled turn drops its calls still queued for a worker thread: they never run.

Every worker thread busy (stuck in timed-out calls, say), the calls of a round cancelled
(``asyncio.timeout`` around ``ask_async``) before a thread took them used to run anyway
once one came free, and the cancelled turn returned only when they had finished. Now each
is answered "cancelled before it ran" at once, and never runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any

import pytest

from nbagent import Chat, _runner, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

FREED_AFTER = 3.0  # the busy worker comes free then (so the old behaviour cannot hang)


@pytest.mark.parametrize(
    ("mode", "kind"),
    [("threads", "sync"), ("threads", "async"), ("async", "sync")],
)
@pytest.mark.parametrize("rep", range(3))
def test_calls_queued_for_a_worker_never_run_once_their_turn_is_cancelled(
    monkeypatch: pytest.MonkeyPatch, mode: str, kind: str, rep: int
) -> None:
    # The shared tool pool, one thread, held busy: the round's calls wait in its queue.
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="test-busy")
    release = threading.Event()
    busy = pool.submit(release.wait, 30)
    monkeypatch.setattr(_runner, "_pool", pool)
    freer = threading.Timer(FREED_AFTER, release.set)
    freer.start()
    ran: list[int] = []

    if kind == "sync":

        @tool
        def pay(n: int) -> str:
            """Pay."""
            ran.append(n)
            return f"paid {n}"
    else:

        @tool
        async def pay(n: int) -> str:
            """Pay."""
            ran.append(n)
            return f"paid {n}"

    script = [call_tools(("pay", {"n": 1}), ("pay", {"n": 2})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(pay)
    chat.with_tool_options(concurrency=mode)

    async def main() -> float:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await chat.ask_async("go")
        return time.monotonic() - t0

    try:
        took = asyncio.run(main())
    finally:
        release.set()
        freer.cancel()
        busy.result(10)
        pool.shutdown(wait=True)  # anything still queued has run by now
    assert took < FREED_AFTER - 1, f"the cancelled turn waited {took:.2f} s for queued calls"
    assert ran == []
    results: list[Any] = [(c.status, c.result.content) for c in chat.tool_calls]
    assert results == [("cancelled", "Not completed (cancelled): cancelled before it ran")] * 2
    # The turn goes on from there: the model reads what was cancelled.
    assert chat.complete().content == "done" and ran == []
