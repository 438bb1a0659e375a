"""MCP tools work from every driver: ``chat.ask()`` and ``await chat.ask_async()``, in a
script and inside a running event loop (as in a Jupyter kernel), in every concurrency mode.

The session lives on nbagent's MCP loop thread, so it does not matter which loop drives
the chat, nor that ``chat.ask()`` inside a running loop blocks that loop.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from nbagent import Chat, MCPServer
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

MODES = ["sequential", "threads", "async"]


def chat_for(server: MCPServer, mode: str) -> Chat:
    provider = ScriptedProvider(
        [
            call_tools(("notes_echo", {"text": "one"}), ("notes_slow", {"seconds": 0.05})),
            reply("done"),
        ]
    )
    chat = Chat(provider=provider).with_tools(server)
    return chat.with_tool_options(concurrency={"sequential": False}.get(mode, mode))


def check(chat: Chat) -> None:
    assert chat.status == "complete"
    assert [c.status for c in chat.tool_calls] == ["ok", "ok"]
    assert [c.result.content for c in chat.tool_calls] == ["one", "slept 0.05"]  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
def test_sync_api_in_a_script(shared_notes: MCPServer, mode: str) -> None:
    chat = chat_for(shared_notes, mode)
    chat.ask("go")
    check(chat)


@pytest.mark.parametrize("mode", MODES)
def test_sync_api_inside_a_running_loop(shared_notes: MCPServer, mode: str) -> None:
    async def cell() -> None:  # what a notebook cell calling chat.ask() is
        chat = chat_for(shared_notes, mode)
        chat.ask("go")
        check(chat)

    asyncio.run(asyncio.wait_for(cell(), 60))


@pytest.mark.parametrize("mode", MODES)
def test_async_api_inside_a_running_loop(shared_notes: MCPServer, mode: str) -> None:
    async def cell() -> None:
        chat = chat_for(shared_notes, mode)
        await chat.ask_async("go")
        check(chat)

    asyncio.run(asyncio.wait_for(cell(), 60))


def test_the_first_connection_can_be_made_from_inside_a_running_loop() -> None:
    from _mcp_servers import notes_server

    server = notes_server(prefix="notes")
    try:

        async def cell() -> None:
            chat = chat_for(server, "async")
            chat.ask("go")  # connects here, on the MCP loop, while this loop is blocked
            check(chat)

        asyncio.run(asyncio.wait_for(cell(), 60))
    finally:
        server.close()


def test_two_chats_on_two_threads_share_one_server(shared_notes: MCPServer) -> None:
    errors: list[BaseException] = []

    def run(mode: str) -> None:
        try:
            chat = chat_for(shared_notes, mode)
            chat.ask("go")
            check(chat)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in MODES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_direct_calls_from_a_running_loop(shared_notes: MCPServer) -> None:
    async def cell() -> None:
        assert await shared_notes.call_async("notes_echo", {"text": "direct"}) == "direct"
        assert shared_notes.call("echo", {"text": "blocking"}) == "blocking"

    asyncio.run(cell())


def test_await_ask_async_keeps_the_loop_responsive_while_the_server_starts() -> None:
    """Starting a stdio server takes seconds; ``ask_async`` connects off the caller's loop."""
    from _mcp_servers import notes_server

    server = notes_server(prefix="notes")
    try:

        async def cell() -> int:
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            t = asyncio.ensure_future(ticker())
            chat = Chat(provider=ScriptedProvider([reply("hi")])).with_tools(server)
            t0 = time.perf_counter()
            await chat.ask_async("hello")
            elapsed = time.perf_counter() - t0
            t.cancel()
            assert server.connected
            return ticks if elapsed > 0.5 else 10**6  # too fast to tell: nothing to check

        ticks = asyncio.run(asyncio.wait_for(cell(), 60))
        assert ticks >= 10, f"the loop ticked {ticks} times while the server started"
    finally:
        server.close()
