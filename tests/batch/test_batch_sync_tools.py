"""A batch row's sync tool runs off the batch's event loop: a tool that blocks holds up its
own row only, the other rows' calls start and run beside it, and each chat's calls still run
one at a time, in call order (its rounds, its calls within a round)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from _batch_setup import first_user_text, tool_messages

import nbagent
from nbagent import Chat, tool
from nbagent._aio import run_sync
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn

KEY = "sk-test-batch-0000000000000000"
BLOCK = 0.4
ROWS = 4
CALLS = 2  # calls per round (two rounds): a chat's own calls never overlap


class Ran:
    """What each call did: its row and round, when it started and ended, on which thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[str, str, float, float, str]] = []

    def add(self, item: str, start: float, end: float) -> None:
        with self.lock:
            self.spans.append(
                (item.split("#")[0], item, start, end, threading.current_thread().name)
            )


RAN = Ran()


@tool
def work(item: str) -> str:
    """Work on an item, blocking (a sync database call, a sync HTTP client).

    Args:
        item: The item.
    """
    start = time.monotonic()
    time.sleep(BLOCK)
    RAN.add(item, start, time.monotonic())
    return f"{item}: worked"


def handler(request: RecordedRequest) -> Turn:
    prompt, done = first_user_text(request), tool_messages(request)
    if done < 2 * CALLS:  # two rounds of CALLS calls each
        return Turn(
            tool_calls=[
                FakeToolCall("work", {"item": f"{prompt}#{done + i}"}) for i in range(CALLS)
            ]
        )
    return Turn(text=f"answer to {prompt}")


@pytest.mark.parametrize("stored", [False, True])
def test_a_blocking_sync_tool_holds_up_only_its_own_row(tmp_path: Any, stored: bool) -> None:
    RAN.spans.clear()
    with FakeLLMServer(handler=handler) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
        try:
            result = nbagent.batch(
                [f"row{i}" for i in range(ROWS)],
                lambda: Chat(provider=provider).with_tools(work),
                concurrency=ROWS,
                store=tmp_path / "b.db" if stored else None,
                progress=False,
            )
        finally:
            run_sync(provider.aclose())
    assert (result["status"] == "done").all(), result[["status", "error"]]
    assert (result["calls"] == 2 * CALLS).all()
    assert len(RAN.spans) == ROWS * 2 * CALLS
    # each chat's calls one at a time, in call order (its rounds, and its calls in a round)
    for row in {s[0] for s in RAN.spans}:
        mine = sorted((s for s in RAN.spans if s[0] == row), key=lambda s: s[2])
        assert [s[1] for s in mine] == [f"{row}#{i}" for i in range(2 * CALLS)]
        assert all(a[3] <= b[2] for a, b in itertools.pairwise(mine)), mine
    # the rows' first calls ran at once (each began before any of them ended): one row's
    # blocking tool held up no other row (on the loop's thread they ran one after another)
    firsts = [min(s[2] for s in RAN.spans if s[0] == f"row{i}") for i in range(ROWS)]
    first_end = min(s[3] for s in RAN.spans)
    assert max(firsts) < first_end, (firsts, first_end)
    # on worker threads, not on the thread that ran the batch's loop
    assert not {s[4] for s in RAN.spans} & {threading.current_thread().name}
    # from the first call's start to the last one's end: about one row's calls, not four
    serial = ROWS * 2 * CALLS * BLOCK
    spent = max(s[3] for s in RAN.spans) - min(s[2] for s in RAN.spans)
    assert spent < serial / 2, (spent, serial)


def test_a_sync_tool_wrapping_async_code_works_on_every_call_of_a_batch() -> None:
    """A sync tool that wraps an async client with ``asyncio.run`` (a common way to call
    async code from a sync function) takes microseconds when the client answers from a
    cache. Run on the batch loop's own thread (an optimisation tried and reverted for
    this), ``asyncio.run`` raised "cannot be called from a running event loop" and the
    call failed; every call runs where no loop runs."""
    import asyncio

    async def fetch(item: str) -> str:
        return f"{item}: fetched"

    def look(item: str) -> str:
        """Look an item up.

        Args:
            item: The item.
        """
        return asyncio.run(fetch(item))

    def three_rounds(request: RecordedRequest) -> Turn:
        prompt, done = first_user_text(request), tool_messages(request)
        if done < 3:
            return Turn(tool_calls=[FakeToolCall("look", {"item": f"{prompt}#{done}"})])
        return Turn(text=f"answer to {prompt}")

    looked = tool(look)
    with FakeLLMServer(handler=three_rounds) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
        try:
            result = nbagent.batch(
                [f"row{i}" for i in range(12)],
                lambda: Chat(provider=provider).with_tools(looked),
                concurrency=2,
                progress=False,
            )
        finally:
            run_sync(provider.aclose())
        results = [
            m["content"]
            for r in server.requests
            for m in r.body["messages"]
            if m.get("role") == "tool"
        ]
    assert (result["status"] == "done").all(), result[["status", "error"]]
    assert all(text.endswith(": fetched") for text in results), {
        t for t in results if not t.endswith(": fetched")
    }
