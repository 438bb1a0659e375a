"""The stdio transport against badly behaved servers (rogue_server.py, real processes):
servers that never answer, write bytes that are not UTF-8, answer with JSON-RPC errors,
flood list changes or send huge answers, a server behind a wrapper whose parent is killed,
and ``chat.cancel()`` freeing a chat that waits on a server."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import SERVER, alive, notes_server, wait_gone
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, ChatCancelled, MCPServer, MCPServerError, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

ROGUE = str(Path(__file__).with_name("rogue_server.py"))


def rogue(*flags: str, **kwargs: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [ROGUE, *flags], **kwargs)


def run_calls(server: MCPServer, *calls: tuple[str, dict[str, Any]]) -> list[nbagent.ToolCall]:
    steps = [call_tools(c) for c in calls]
    chat = Chat(provider=ScriptedProvider([*steps, reply("done")])).with_tools(server)
    chat.ask("go")
    return chat.tool_calls


def in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def until(check: Any, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


# --------------------------------------------------------------- N3: hung servers


@pytest.mark.parametrize(
    ("hang", "says"),
    [("initialize", "did not finish connecting within 1 s"), ("list", "did not list its tools")],
)
def test_a_server_that_never_answers_fails_after_connect_timeout(hang: str, says: str) -> None:
    server = rogue("--hang", hang, connect_timeout=1)
    try:
        with pytest.raises(MCPServerError, match=says):
            server.list_tools()
        chat = Chat(provider=ScriptedProvider([reply("hi")])).with_tools(server)
        with pytest.raises(MCPServerError, match="connect_timeout"):
            chat.ask("hello")
    finally:
        server.close()


def test_a_connect_timeout_does_not_wait_for_the_hung_server_to_stop_by_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The session task is stuck in the handshake and never reads its stop signal: it is
    cancelled at once (the transport still ends the process), not waited on for
    CLOSE_TIMEOUT (a 1 s connect_timeout used to raise after 11 s)."""
    from nbagent.mcp import _connection

    monkeypatch.setattr(_connection, "CLOSE_TIMEOUT", 600.0)  # waited on: the join below fails
    server = rogue("--hang", "initialize", connect_timeout=1)
    raised: list[BaseException] = []

    def connect() -> None:
        try:
            server.list_tools()
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    try:
        worker.join(60)
        assert not worker.is_alive(), "the timeout waited for the hung server to stop"
        assert isinstance(raised[0], MCPServerError) and "connect_timeout" in str(raised[0])
    finally:
        server.close()


def test_a_hung_server_stalls_nothing_else_on_the_shared_background_loop() -> None:
    """Sessions live on nbagent's background loop (with the store's follower, the rounds of
    chat.ask() in a notebook): a server that never answers is a pending await there, and
    the loop goes on running everything else meanwhile."""
    from nbagent._aio import _background_loop

    server = rogue("--hang", "initialize")  # connect_timeout: 30 s, past the checks below
    t, out = in_thread(server.list_tools)
    try:
        assert until(lambda: server._connection._task is not None)  # stuck in the handshake
        for n in range(20):
            ran = asyncio.run_coroutine_threadsafe(asyncio.sleep(0, n), _background_loop())
            assert ran.result(10) == n
        assert t.is_alive() and not out  # still waiting on the hung server
    finally:
        server.close()
        t.join(20)
    assert not t.is_alive()


def test_a_blocking_call_made_on_the_background_loop_says_to_await_instead() -> None:
    """Blocking the loop the sessions live on would wait for ever: a clear error instead."""
    from nbagent._aio import _background_loop

    server = notes_server(prefix="notes")
    try:

        async def on_the_loop() -> Any:
            return server.call("echo", {"text": "x"})

        blocked = asyncio.run_coroutine_threadsafe(on_the_loop(), _background_loop())
        with pytest.raises(RuntimeError, match=r"await call_async\(\.\.\.\) there instead"):
            blocked.result(60)

        async def awaited() -> Any:
            return await server.call_async("echo", {"text": "y"})

        assert asyncio.run_coroutine_threadsafe(awaited(), _background_loop()).result(60) == "y"
    finally:
        server.close()


@pytest.mark.parametrize("value", [0, -1, "30", True, float("inf"), float("nan")])
def test_connect_timeout_and_max_result_bytes_are_checked(value: Any) -> None:
    with pytest.raises(nbagent.ToolDefinitionError, match="connect_timeout must be a finite"):
        rogue(connect_timeout=value)
    with pytest.raises(nbagent.ToolDefinitionError, match="timeout must be a finite"):
        rogue(timeout=value)
    with pytest.raises(nbagent.ToolDefinitionError, match="max_result_bytes"):
        rogue(max_result_bytes=value)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_chat_cancel_frees_a_chat_waiting_for_a_server_to_connect(driver: str) -> None:
    server = rogue("--hang", "initialize")  # connect_timeout: 30 s, past the join below
    chat = Chat(provider=ScriptedProvider([reply("hi")])).with_tools(server)
    try:
        if driver == "sync":
            t, out = in_thread(lambda: chat.ask("hello"))
        else:
            t, out = in_thread(lambda: asyncio.run(chat.ask_async("hello")))
        time.sleep(0.5)  # let it start waiting (not an assertion of speed)
        chat.cancel()
        t.join(20)
        assert not t.is_alive(), "chat.cancel() did not free the chat"
        assert isinstance(out.get("error"), ChatCancelled), out
        assert "listing its tools" in str(out["error"])
    finally:
        server.close()


@pytest.mark.parametrize(
    ("mode", "driver"),
    [("sequential", "sync"), ("threads", "sync"), ("async", "sync"), ("async", "async")],
)
def test_chat_cancel_abandons_a_hung_tool_call_and_the_server_stays_usable(
    notes: MCPServer, mode: str, driver: str
) -> None:
    provider = ScriptedProvider([call_tools(("notes_slow", {"seconds": 600})), reply("done")])
    chat = Chat(provider=provider).with_tools(notes).with_tool_options(concurrency=mode)
    if driver == "sync":
        t, out = in_thread(lambda: chat.ask("sleep"))
    else:
        t, out = in_thread(lambda: asyncio.run(chat.ask_async("sleep")))
    assert until(lambda: bool(chat.tool_calls) and chat.tool_calls[0].status == "running")
    chat.cancel()
    t.join(20)
    assert not t.is_alive(), "chat.cancel() did not abandon the MCP call"
    assert isinstance(out.get("error"), ChatCancelled), out
    (call,) = chat.tool_calls
    assert call.status == "error" and call.result is not None
    assert "abandoned by chat.cancel()" in call.result.content
    assert "not retried" in call.result.content
    assert notes.call("echo", {"text": "still here"}) == "still here"


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_chat_cancel_abandons_call_async_while_the_server_lists_its_tools(driver: str) -> None:
    """A tool of the chat awaiting ``other.call_async(...)`` on a server that never lists its
    tools: ``chat.cancel()`` gives the listing up at once (it used to wait out the server's
    ``connect_timeout``, here 600 s); the call ends as an error saying why, and it never ran."""
    other = rogue("--hang", "list", connect_timeout=600)
    entered = threading.Event()

    @tool
    async def relay() -> str:
        """Ask the other server to count."""
        entered.set()
        return str(await other.call_async("count"))

    provider = ScriptedProvider([call_tools(("relay", {})), reply("done")])
    chat = Chat(provider=provider).with_tools(relay)
    finished = threading.Event()
    chat.on(nbagent.ToolCallFinished, lambda e: finished.set())
    try:
        if driver == "sync":
            t, out = in_thread(lambda: chat.ask("relay"))
        else:
            t, out = in_thread(lambda: asyncio.run(chat.ask_async("relay")))
        assert entered.wait(60)
        assert until(lambda: other._connection.usable())  # connected: now it lists, for ever
        chat.cancel()
        assert finished.wait(120), "chat.cancel() did not abandon the listing"
        t.join(60)
        assert not t.is_alive()
        assert isinstance(out.get("error"), ChatCancelled), out
        (call,) = chat.tool_calls
        assert call.status == "error" and call.result is not None
        assert "listing its tools" in call.result.content
        assert "was cancelled" in call.result.content
    finally:
        other.close()


def test_a_step_that_asks_no_model_does_not_wait_on_a_hung_server() -> None:
    """The server answers its first listing, announces a change, then never lists again:
    running an approved local call is a step that needs no listing."""
    server = rogue("--hang", "relist")

    @tool(requires_approval=True)
    def note(text: str) -> str:
        """Write a note."""
        return f"noted {text}"

    provider = ScriptedProvider([call_tools(("note", {"text": "x"})), reply("done")])
    chat = Chat(provider=provider).with_tools(server, note)
    try:
        chat.ask("note it")
        assert len(chat.pending_approvals) == 1
        assert until(lambda: server._connection.stale)  # the change was announced
        chat.approve(chat.pending_approvals[0])
        t, out = in_thread(chat.step)
        t.join(20)
        assert not t.is_alive(), "a step running a local call waited on the server's listing"
        assert out.get("value") is not None and out["value"].kind == "ran_tools", out
        assert chat.tool_calls[0].status == "ok"
    finally:
        chat.cancel()
        server.close()


# --------------------------------------------------------------- N4, N5: bad bytes, errors


def test_a_line_that_is_not_utf8_neither_kills_nor_hangs_the_connection() -> None:
    server = rogue(timeout=20)
    try:
        garbled, counted = run_calls(server, ("garble", {}), ("count", {}))
        assert garbled.status == "ok", garbled.result
        assert garbled.result is not None and garbled.result.content == "caf\ufffd"
        assert counted.status == "ok" and counted.result is not None
        assert counted.result.content == "1"  # the same process: nothing was restarted
        assert server.connected
    finally:
        server.close()


def test_a_dead_reader_fails_the_waiting_call_and_the_next_call_reconnects() -> None:
    """An over-long answer whose request cannot be told from its ends: the reader stops."""
    server = rogue(timeout=20, max_result_bytes=4096)
    try:
        assert server.call("count") == "1"
        pid = int(server.call("pid"))
        with pytest.raises(MCPServerError, match="could not be told") as info:
            server.call("unreadable", {"size": 400_000})
        assert "not retried" in str(info.value)
        assert not server.connected
        assert server.call("count") == "1"  # a new process
        assert int(server.call("pid")) != pid
        assert wait_gone(pid)
    finally:
        server.close()


def test_a_json_rpc_error_refuses_the_call_and_keeps_the_session() -> None:
    """-32000 starts the range servers use for their own errors: not a lost connection."""
    server = rogue()
    try:
        first, failed, after = run_calls(server, ("count", {}), ("fail", {}), ("count", {}))
        assert first.result is not None and first.result.content == "1"
        assert failed.status == "error" and failed.result is not None
        assert "refused calling 'fail': quota exceeded for this month" in failed.result.content
        assert "stopped or became unreachable" not in failed.result.content
        assert after.status == "ok" and after.result is not None
        assert after.result.content == "2"  # the same session, state kept
    finally:
        server.close()


# --------------------------------------------------------------- N8: list_changed floods


def test_a_flood_of_list_changes_is_coalesced_and_relisting_is_rate_limited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nbagent.mcp import _connection

    monkeypatch.setattr(_connection, "RELIST_EVERY", 3600.0, raising=False)  # no refill here
    burst = getattr(_connection, "RELIST_BURST", 3)
    server = rogue()
    try:
        calls = run_calls(server, *[("flood", {"n": 2000})] * 10)
        assert [c.status for c in calls] == ["ok"] * 10
        lists = int(server.call("lists"))
        # the first listing, then at most the burst: not one per step
        assert lists <= 1 + burst, lists
        assert lists >= 2  # a change is still seen at the next request
    finally:
        server.close()


def test_a_changed_list_is_seen_at_the_next_request_after_a_quiet_time() -> None:
    server = rogue()
    try:
        server.list_tools()
        before = int(server.call("lists"))
        server.call("flood", {"n": 3})
        assert until(lambda: server._connection.stale)
        server.list_tools()
        assert int(server.call("lists")) == before + 1
    finally:
        server.close()


# --------------------------------------------------------------- N12: large results


def test_an_answer_over_max_result_bytes_fails_its_call_and_the_session_stays() -> None:
    server = rogue(max_result_bytes=1_000_000)
    try:
        assert server.call("count") == "1"
        with pytest.raises(MCPServerError, match="more than max_result_bytes=1,000,000"):
            server.call("big", {"size": 5_000_000})
        assert len(server.call("big", {"size": 900_000})) == 900_000
        assert server.call("bignote", {"size": 3_000_000}) == "noted"
        assert server.call("count") == "2"  # the same process
    finally:
        server.close()


def test_a_large_answer_under_the_cap_is_read_whole() -> None:
    server = rogue(max_result_bytes=64 * 1024 * 1024)
    try:
        assert server.call("big", {"size": 30_000_000}) == "x" * 30_000_000
    finally:
        server.close()


_line = st.binary(max_size=300).map(lambda b: b.replace(b"\n", b""))


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_line, max_size=12), cuts=st.lists(st.integers(1, 97), max_size=40))
def test_the_line_splitter_keeps_lines_whole_and_bounds_long_ones(
    lines: list[bytes], cuts: list[int]
) -> None:
    from nbagent.mcp._stdio import _Lines, _Oversized

    limit = 100
    data = b"".join(line + b"\n" for line in lines)
    splitter = _Lines(limit)
    out: list[Any] = []
    pos = 0
    for n in [*cuts, len(data)]:
        out.extend(splitter.feed(data[pos : pos + n]))
        pos += n
    assert len(out) == len(lines)
    for got, line in zip(out, lines, strict=True):
        if len(line) <= limit:
            assert got == line
        else:
            assert isinstance(got, _Oversized)
            assert got.size == len(line)
            assert line.startswith(got.head) and line.endswith(got.tail)
            assert got.head and got.tail


# --------------------------------------------------------------- N11: wrappers


def test_a_server_behind_a_wrapper_dies_with_a_killed_parent() -> None:
    """``sh -c`` stays as the server's parent (a command follows); the server ignores EOF."""
    inner = f"{shlex.quote(sys.executable)} {shlex.quote(SERVER)} --linger; echo ended >&2"
    code = textwrap.dedent(
        f"""
        import time
        import nbagent
        server = nbagent.MCPServer.stdio("sh", ["-c", {inner!r}])
        print(server.call("pid"), flush=True)
        time.sleep(120)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        parent.kill()
        parent.wait(10)
        assert wait_gone(child, 20), "the server behind sh -c outlived its killed parent"
    finally:
        parent.kill()
        parent.wait(10)
        if parent.stdout is not None:
            parent.stdout.close()


def test_closing_ends_the_whole_process_group() -> None:
    inner = f"{shlex.quote(sys.executable)} {shlex.quote(SERVER)} --linger; echo ended >&2"
    server = MCPServer.stdio("sh", ["-c", inner])
    pid = int(server.call("pid"))
    server.close()
    assert wait_gone(pid, 20)


def test_notes_server_still_works_through_the_new_transport() -> None:
    server = notes_server()
    try:
        assert server.call("echo", {"text": "über"}) == "über"
    finally:
        server.close()
