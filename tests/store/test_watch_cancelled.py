"""A cancelled ``watch.wait_async()`` loses nothing: the next wait reports the decision.

An app waits with its own short timeout (``asyncio.wait_for(watch.wait_async(), 0.01)``) and
waits again. ``wait_async`` waited on a worker thread that went on waiting after the
cancellation and took a decision recorded then into a result nobody read: the next wait missed
it (4 times in 10).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

from nbagent import Chat

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund


def test_a_decision_right_after_a_cancelled_wait_async_is_reported_by_the_next(
    store: Any, backend: Any
) -> None:
    async def once(other: Any) -> set[str]:
        chat = Chat(model="demo", store=store).with_tools(Refund)
        await chat.ask_async("Refund order 42")
        call_id = chat.pending_approvals[0].id
        with store.watch([chat.id]) as watch:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch.wait_async(), 0.01)  # the app's own timeout
            other.approve(call_id, chat_id=chat.id)  # decided elsewhere right after
            got = await watch.wait_async(timeout=30)
        chat.close()
        assert got == {chat.id}, "the decision was missed"
        return got

    async def main() -> None:
        with backend.open() as other:  # as another process would
            for _ in range(10):
                await once(other)

    asyncio.run(main())


def test_a_cancelled_wait_async_leaves_news_already_there_for_the_next(store: Any) -> None:
    async def main() -> None:
        with store.watch(["a", "b"]) as watch:
            waiting = asyncio.ensure_future(watch.wait_async(30))
            await asyncio.sleep(0.05)
            waiting.cancel()
            watch.push(["a"])  # before the cancelled wait resumes
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
            await asyncio.sleep(0.3)
            watch.push(["b"])
            assert await watch.wait_async(0) == {"a", "b"}
            assert await watch.wait_async(0.05) == set()

    asyncio.run(main())
