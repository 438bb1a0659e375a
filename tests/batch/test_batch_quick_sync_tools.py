"""A batch row's sync tool that keeps returning in microseconds runs on the loop's thread.

A row's sync tool runs on a worker thread so that one that blocks holds up no other row
(``test_batch_sync_tools.py``). For a tool that returns at once (a dict lookup) the
hand-off to a thread and back cost more than the tool: about 10% of a batch's client CPU
with a store. A tool whose last ``QUICK_RUNS`` runs each took under ``QUICK_SECONDS`` runs
on the loop's thread; one run that is slow, raises or returns a coroutine sends it back to
worker threads until it has been quick that many times again. Its calls stay one at a time,
in call order, whatever thread runs them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _batch_setup import first_user_text, tool_messages

import nbagent
from nbagent import Chat, _runner, tool
from nbagent._aio import run_sync
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, RecordedRequest, Turn

KEY = "sk-test-batch-0000000000000000"
ROUNDS = 3
QUICK = _runner.QUICK_RUNS


def handler(request: RecordedRequest) -> Turn:
    prompt, done = first_user_text(request), tool_messages(request)
    if done < ROUNDS:
        return Turn(tool_calls=[FakeToolCall("look", {"item": f"{prompt}#{done}"})])
    return Turn(text=f"answer to {prompt}")


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    _runner._quick_runs.clear()  # what earlier tests' tools did in this process
    yield
    _runner._quick_runs.clear()


def run_batch(fn: Callable[[str], Any], rows: int) -> tuple[list[tuple[str, str]], Any]:
    """The calls' items and threads, in the order they ran (one row at a time)."""
    ran: list[tuple[str, str]] = []

    def look(item: str) -> str:
        """Look an item up.

        Args:
            item: The item.
        """
        ran.append((item, threading.current_thread().name))
        return fn(item)

    looked = tool(look)
    with FakeLLMServer(handler=handler) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
        try:
            result = nbagent.batch(
                [f"row{i}" for i in range(rows)],
                lambda: Chat(provider=provider).with_tools(looked),
                concurrency=1,
                progress=False,
            )
        finally:
            run_sync(provider.aclose())
    assert (result["status"] == "done").all(), result[["status", "error"]]
    assert [item for item, _ in ran] == [f"row{i}#{k}" for i in range(rows) for k in range(ROUNDS)]
    return ran, result


def on_loop(ran: list[tuple[str, str]]) -> list[bool]:
    here = threading.current_thread().name  # the batch's loop runs on the calling thread
    return [name == here for _, name in ran]


def test_a_quick_sync_tool_runs_on_the_loops_thread_after_its_quick_runs() -> None:
    ran, _ = run_batch(lambda item: f"{item}: found", rows=6)
    assert on_loop(ran) == [False] * QUICK + [True] * (6 * ROUNDS - QUICK)


@pytest.mark.parametrize("how", ["slow", "raises", "coroutine"])
def test_one_slow_failing_or_coroutine_run_sends_it_back_to_worker_threads(how: str) -> None:
    odd = "row3#2"  # the 12th call: after 8 quick runs, on the loop's thread
    assert QUICK == 8

    async def later(item: str) -> str:
        return f"{item}: found later"

    def fn(item: str) -> Any:
        if item != odd:
            return f"{item}: found"
        if how == "slow":
            time.sleep(0.02)
            return f"{item}: found slowly"
        if how == "raises":
            raise KeyError(item)
        return later(item)

    ran, result = run_batch(fn, rows=10)
    calls = 10 * ROUNDS
    odd_at = [item for item, _ in ran].index(odd)
    assert odd_at == 11
    # quick after 8 runs, so the odd run itself ran on the loop's thread (run_sync of a
    # coroutine there waits on the background loop); the next 8 went to worker threads
    expected = [False] * QUICK + [True] * (odd_at + 1 - QUICK)
    expected += [False] * QUICK + [True] * (calls - len(expected) - QUICK)
    assert on_loop(ran) == expected
    assert (result["calls"] == ROUNDS).all()


def test_a_blocking_tool_never_becomes_quick() -> None:
    def slow(item: str) -> str:
        time.sleep(0.002)
        return f"{item}: found"

    ran, _ = run_batch(slow, rows=6)
    assert not any(on_loop(ran))


def test_a_tool_made_per_row_from_one_function_counts_as_one() -> None:
    """``make_chat`` makes each row's tool anew (``tool(fn)`` inside it): the runs of one
    function's tools count together."""
    ran: list[str] = []

    def make_chat() -> Chat:
        def look(item: str) -> str:
            """Look an item up.

            Args:
                item: The item.
            """
            ran.append(threading.current_thread().name)
            return f"{item}: found"

        return Chat(provider=provider).with_tools(tool(look))

    with FakeLLMServer(handler=handler) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
        try:
            result = nbagent.batch(
                [f"row{i}" for i in range(5)], make_chat, concurrency=1, progress=False
            )
        finally:
            run_sync(provider.aclose())
    assert (result["status"] == "done").all()
    here = threading.current_thread().name
    assert [name == here for name in ran] == [False] * QUICK + [True] * (5 * ROUNDS - QUICK)


def test_on_a_plain_async_chat_nothing_changes() -> None:
    """Outside a batch (and off nbagent's background loop) a sequential round's sync tool
    ran on the driving thread already: quick or not, it still does."""
    ran: list[str] = []

    @tool
    def ping() -> str:
        """Ping."""
        ran.append(threading.current_thread().name)
        return "pong"

    def turn(request: RecordedRequest) -> Turn:
        if tool_messages(request) < 10:
            return Turn(tool_calls=[FakeToolCall("ping", {})])
        return Turn(text="done")

    with FakeLLMServer(handler=turn) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)

        async def main() -> str:
            chat = Chat(provider=provider, display=False).with_tools(ping)
            try:
                reply = await chat.ask_async("go")
                return threading.current_thread().name if reply else ""
            finally:
                await provider.aclose()

        driver = asyncio.run(main())
    assert ran == [driver] * 10
