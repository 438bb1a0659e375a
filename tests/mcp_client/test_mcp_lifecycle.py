"""An MCP server's life: lazy connection, a crash during a call and while idle, a tool
list that changes, closing with the chat, timeouts, and a stdio server process that
never outlives the process that started it.

No assertion here is about speed (that is benchmarks/bench_mcp.py's): waits are for a state
(``until``), and a bound on a join only tells a hang (a wait many times longer than the
bound) from an answer."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import SERVER, alive, http_server, notes_server, wait_gone

import nbagent
from nbagent import Chat, MCPServer
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply


def until(check: Callable[[], bool], seconds: float = 60.0) -> bool:
    """Wait for a state (polled); ``False`` if it never came (a hang, not slowness)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def answered(fn: Callable[[], Any], hang: float = 120.0) -> dict[str, Any]:
    """``fn()`` on a thread: its value or error; fails only if it is still waiting after
    ``hang`` seconds (the waits it must not make are far longer)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(hang)
    assert not t.is_alive(), f"still waiting after {hang} s"
    return out


def run_one(server: MCPServer, name: str, args: dict[str, Any]) -> nbagent.ToolCall:
    chat = Chat(provider=ScriptedProvider([call_tools((name, args)), reply("")])).with_tools(server)
    chat.always_allow(name)
    chat.ask("go")
    return chat.tool_calls[0]


def test_a_crash_during_a_call_fails_that_call_and_the_next_call_restarts_the_server(
    notes: MCPServer,
) -> None:
    first_pid = int(notes.call("pid"))
    provider = ScriptedProvider(
        [call_tools(("notes_crash", {})), call_tools(("notes_pid", {})), reply("done")]
    )
    chat = Chat(provider=provider).with_tools(notes)
    chat.ask("crash it, then ask again")
    crashed, after = chat.tool_calls
    assert crashed.status == "error"
    assert crashed.result is not None
    assert "stopped or became unreachable while calling 'crash'" in crashed.result.content
    assert "was not retried" in crashed.result.content
    assert after.status == "ok"
    assert after.result is not None and int(after.result.content) != first_pid
    assert wait_gone(first_pid)
    assert chat.status == "complete"


def test_a_result_is_stored_though_its_server_is_gone_for_good_right_after(
    tmp_path: Any,
) -> None:
    """An approved call answers, then its server exits and cannot start again: the result
    is written to the store (a write never asks a server for its tools), ``close()`` loses
    nothing, and the chat loaded again finds the call done, not in doubt. Before, every
    write from then on failed with the server's error, the chat's last events were dropped
    at close, and a reload said the call's outcome was unknown (inviting the model to
    charge again)."""
    db, gone = tmp_path / "chat.db", tmp_path / "gone"
    provider = ScriptedProvider(
        [call_tools(("answer_then_exit", {"text": "charged 5"}, "c1")), reply("done")]
    )
    chat = Chat(provider=provider, store=db).with_tools(notes_server("--once", str(gone)))
    chat.ask("charge 5")
    chat.approve("c1")
    with contextlib.suppress(nbagent.MCPServerError):  # the next request needs its tool list
        chat.complete()
    assert gone.exists() and chat.tool_calls[0].status == "ok"
    chat.close()  # raised StoreError: its last events could not be written
    again = Chat.load(chat.id, store=db, provider=provider)
    (call,) = again.tool_calls
    assert (call.status, call.result.content if call.result else None) == ("ok", "charged 5")
    again.close()


def test_a_server_that_died_while_idle_is_restarted_before_the_next_call(
    notes: MCPServer,
) -> None:
    pid = int(notes.call("pid"))
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    assert until(lambda: not notes._connection.usable())  # the transport saw the pipe end
    call = run_one(notes, "notes_echo", {"text": "still here"})
    assert call.status == "ok" and call.result is not None
    assert call.result.content == "still here"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_a_changed_tool_list_reaches_the_model_at_the_next_step(
    notes: MCPServer, protocol: str
) -> None:
    """2026-07-28 servers announce it on a ``subscriptions/listen`` stream, older ones with
    ``notifications/tools/list_changed``; the SDK's client picks the protocol (``auto``)."""
    if protocol == "legacy":
        opener = notes._connection._open_client

        def legacy(handler: Any) -> Any:
            client = opener(handler)
            client.mode = "legacy"
            return client

        notes._connection._open_client = legacy
    provider = ScriptedProvider(
        [
            call_tools(("notes_grow", {"name": "weather"})),
            call_tools(("notes_weather", {})),
            reply(""),
        ]
    )
    chat = Chat(provider=provider).with_tools(notes)
    chat.ask("add a tool and use it")
    grow, weather = chat.tool_calls
    assert grow.status == "ok"
    assert "notes_weather" not in {s.name for s in provider.requests[0].tools}
    assert "notes_weather" in {s.name for s in provider.requests[1].tools}
    assert weather.status == "ok" and weather.result is not None
    assert weather.result.content == "I am weather"
    protocol_version = notes._connection.client.protocol_version
    assert (protocol_version == "2026-07-28") == (protocol == "auto"), protocol_version


def test_closing_the_chat_stops_the_server_and_a_later_use_reconnects() -> None:
    server = notes_server()
    with Chat(provider=ScriptedProvider([call_tools(("pid", {})), reply("")])) as chat:
        chat.with_tools(server).ask("pid?")
        pid = int(chat.tool_calls[0].result.content)  # type: ignore[union-attr]
        assert alive(pid)
    assert wait_gone(pid)
    assert not server.connected
    assert int(server.call("pid")) != pid  # used again: a new process
    server.close()


def test_a_timeout_abandons_the_call_and_the_connection_stays_usable() -> None:
    server = notes_server(timeout=0.3)
    try:
        call = run_one(server, "slow", {"seconds": 600})
        assert call.status == "timed_out"
        # the same connection answers while the abandoned call would still be sleeping
        assert answered(lambda: server.call("echo", {"text": "quick"})) == {"value": "quick"}
    finally:
        server.close()


def test_a_stdio_server_dies_with_the_process_that_started_it(tmp_path: Any) -> None:
    """Even a server that ignores the end of its input (--linger) goes when its parent is killed."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                import nbagent
                server = nbagent.MCPServer.stdio(sys.executable, [{SERVER!r}, "--linger"])
                print(server.call("pid"), flush=True)
                time.sleep(120)
                """
            ),
        ],
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
        assert wait_gone(child), "the MCP server outlived its parent"
    finally:
        parent.kill()
        parent.wait(10)
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_lingering_server_is_stopped_at_interpreter_exit() -> None:
    code = textwrap.dedent(
        f"""
        import sys
        import nbagent
        server = nbagent.MCPServer.stdio(sys.executable, [{SERVER!r}, "--linger"])
        print(server.call("pid"), flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,  # a hang bound: it takes seconds, longer only on a loaded machine
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert wait_gone(int(proc.stdout.strip()))


def test_an_http_server_that_went_away_fails_clearly_and_is_reached_again() -> None:
    with contextlib.ExitStack() as running:
        url, proc = running.enter_context(http_server(SERVER))
        # a connect_timeout far past the hang bound: the errors below come from the refused
        # connection, never from waiting it out
        server = running.enter_context(MCPServer.http(url, connect_timeout=600))
        first = int(server.call("pid"))
        proc.kill()
        proc.wait(10)
        for _ in range(2):  # while it is down: a clear error, not a wait, every time
            error = answered(lambda: server.call("pid")).get("error")
            assert isinstance(error, nbagent.MCPServerError), error
            assert "127.0.0.1" in str(error)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        running.enter_context(http_server(SERVER, port=port))  # back where it was
        call = run_one(server, "echo", {"text": "back"})
        assert call.status == "ok" and call.result is not None
        assert call.result.content == "back"
        assert int(server.call("pid")) != first


def test_stdio_takes_the_command_line_as_one_list_as_client_configurations_write_it() -> None:
    server = nbagent.MCPServer.stdio([sys.executable, SERVER], prefix="notes")
    try:
        assert "notes_add_note" in {t.name for t in server.list_tools()}
    finally:
        server.close()
    with pytest.raises(TypeError, match="not both"):
        nbagent.MCPServer.stdio([sys.executable, SERVER], ["--flag"])
    with pytest.raises(TypeError, match="empty list"):
        nbagent.MCPServer.stdio([])
    with pytest.raises(TypeError, match="a string or a list"):
        nbagent.MCPServer.stdio(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of strings"):
        nbagent.MCPServer.stdio(sys.executable, SERVER)  # type: ignore[arg-type]


def test_a_server_dying_while_listed_again_before_an_approved_call_says_nothing_ran(
    tmp_path: Any,
) -> None:
    """The tool list changed, so an approved call's tools are listed again before it is
    sent; the server died while listing. The call's error said "whether the tool did
    anything is unknown, so it was not retried", inviting a person to look for a payment
    that was never sent; it says no tool was called, and the call was not sent."""
    log = tmp_path / "pay.log"
    server = MCPServer.stdio(
        sys.executable,
        [str(Path(__file__).with_name("relist_crash_server.py"))],
        env={"PAY_LOG": str(log)},
    )
    provider = ScriptedProvider(
        [call_tools(("arm", {}), ("pay", {"amount": 5}, "p1")), reply("done")]
    )
    chat = Chat(provider=provider).with_tools(server)
    try:
        chat.ask("arm, then pay 5")  # arm runs (read-only); pay waits for a decision
        chat.approve("p1")
        chat.complete()
        pay = next(c for c in chat.tool_calls if c.id == "p1")
        assert pay.status == "error" and pay.result is not None
        assert "while listing its tools" in pay.result.content
        assert "no tool was called" in pay.result.content
        assert "unknown" not in pay.result.content
        assert not log.exists()  # pay never reached the server
    finally:
        server.close()
