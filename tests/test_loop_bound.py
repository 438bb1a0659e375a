"""Async tools whose resources are bound to one event loop (``@tool(loop=...)``).

``Doubler`` is such a resource: its worker task runs on the loop that made it, so a
call only completes while that loop runs. Bound with ``loop=``, the tool's calls run
on that loop whichever loop drives the chat; when that loop is the one ``chat.ask()``
is blocking (a notebook cell), the call fails at once with ``ToolLoopError`` (an error
result naming ``ask_async``) instead of hanging.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from nbagent import Chat, ToolDefinitionError, ToolLoopError, tool
from nbagent._aio import run_on_loop
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

MODES = ["sequential", "threads", "async"]


class Doubler:
    """A resource bound to the loop that made it (like an aiohttp session or an SDK client)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[int, asyncio.Future[int]]] = asyncio.Queue()
        self.task = self.loop.create_task(self._serve())

    async def _serve(self) -> None:
        while True:
            x, fut = await self.queue.get()
            fut.set_result(2 * x)

    async def double(self, x: int) -> int:
        fut: asyncio.Future[int] = self.loop.create_future()
        self.queue.put_nowait((x, fut))
        return await fut


def chat_for(double_tool: Any, mode: str) -> Chat:
    provider = ScriptedProvider(
        [call_tools(("double", {"x": 2}), ("double", {"x": 5})), reply("done")]
    )
    chat = Chat(provider=provider).with_tools(double_tool)
    return chat.with_tool_options(concurrency={"sequential": False}.get(mode, mode))


def bound_tool(doubler: Doubler, loop: Any) -> Any:
    @tool(loop=loop)
    async def double(x: int) -> int:
        """Double a number with the loop-bound resource."""
        assert asyncio.get_running_loop() is doubler.loop
        return await doubler.double(x)

    return double


@pytest.mark.parametrize("mode", MODES)
def test_await_ask_async_runs_a_tool_bound_to_the_running_loop(mode: str) -> None:
    async def cell() -> None:
        doubler = Doubler()
        chat = chat_for(bound_tool(doubler, "current"), mode)
        await chat.ask_async("go")
        assert [c.result.content for c in chat.tool_calls] == ["4", "10"]  # type: ignore[union-attr]

    asyncio.run(asyncio.wait_for(cell(), 30))


@pytest.mark.parametrize("mode", MODES)
def test_sync_ask_inside_the_bound_loop_fails_clearly_instead_of_hanging(mode: str) -> None:
    async def cell() -> None:
        doubler = Doubler()
        chat = chat_for(bound_tool(doubler, "current"), mode)
        t0 = time.perf_counter()
        chat.ask("go")  # blocks this loop, which the tool needs
        assert time.perf_counter() - t0 < 5
        assert [c.status for c in chat.tool_calls] == ["error", "error"]
        text = chat.tool_calls[0].result.content  # type: ignore[union-attr]
        assert "ToolLoopError" in text and "ask_async" in text
        assert chat.status == "complete"  # the model got the errors and answered

    asyncio.run(asyncio.wait_for(cell(), 30))


@pytest.fixture
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    """A loop on its own thread, as a library's background loop would be."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop

    async def cancel_all() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("inside_a_loop", [False, True])
def test_a_tool_bound_to_another_threads_loop_works_from_the_sync_api(
    loop_thread: asyncio.AbstractEventLoop, mode: str, inside_a_loop: bool
) -> None:
    async def make() -> Doubler:
        return Doubler()

    doubler = asyncio.run_coroutine_threadsafe(make(), loop_thread).result(5)
    chat = chat_for(bound_tool(doubler, loop_thread), mode)

    def run() -> None:
        chat.ask("go")
        assert [c.result.content for c in chat.tool_calls] == ["4", "10"]  # type: ignore[union-attr]

    if inside_a_loop:

        async def cell() -> None:
            run()

        asyncio.run(asyncio.wait_for(cell(), 30))
    else:
        run()


def test_loop_option_is_checked_when_the_tool_is_defined() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ToolDefinitionError, match="async functions"):

            @tool(loop=loop)
            def sync_tool() -> None:
                """A sync tool cannot be bound."""

    finally:
        loop.close()

    with pytest.raises(ToolDefinitionError, match="needs a running event loop"):

        @tool(loop="current")
        async def no_loop_here() -> None:
            """Defined outside any loop."""

    with pytest.raises(ToolDefinitionError, match="takes an event loop"):

        @tool(loop="kernel")  # type: ignore[arg-type]
        async def typo() -> None:
            """Not a loop."""


def test_run_on_loop_refuses_a_closed_or_stopped_loop() -> None:
    stopped = asyncio.new_event_loop()

    async def nothing() -> int:
        return 1

    async def main() -> None:
        with pytest.raises(ToolLoopError, match="is not running"):
            await run_on_loop(nothing(), stopped, "tool 'x'")
        stopped.close()
        with pytest.raises(ToolLoopError, match="is closed"):
            await run_on_loop(nothing(), stopped, "tool 'x'")
        assert await run_on_loop(nothing(), asyncio.get_running_loop(), "tool 'x'") == 1

    asyncio.run(main())
