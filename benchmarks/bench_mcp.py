"""MCP: the cost of calling a tool on an MCP server over stdio, against the same function local.

Target (issue 15): under 2 ms of overhead per call on this machine, measured in a
chat round (20 sequential calls of ``echo``, MCP tool vs a local ``@tool`` doing the
same), interleaved in the same run. Also reported: one direct ``server.call`` against a
plain function call, and the raw SDK call awaited on the MCP loop itself, so the
overhead splits into the SDK plus the server process and nbagent's own hops.

Issue 23 (N8, N12), as ratios: reading a 32 MB answer against a 4 MB one, per byte
(linear: about 1x; the SDK's own reader was quadratic, 8x); and the quiet server's
chat round while another server floods ``notifications/tools/list_changed`` (2000
per call, without pause) against the same round alone (target: under 3x).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from benchmarks._common import Result, interleaved
from nbagent import Chat, MCPServer, configure, tool
from nbagent.mcp import _connection
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

SERVER = str(Path(__file__).with_name("_mcp_echo_server.py"))
NOISY = str(Path(__file__).with_name("_mcp_noisy_server.py"))
CALLS = 20


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def _round(tools: object, name: str) -> None:
    script = [call_tools(*[(name, {"text": f"hello {i}"}) for i in range(CALLS)]), reply("")]
    chat = Chat(provider=ScriptedProvider(script), stream=False).with_tools(tools)
    chat.ask("go")
    assert chat.tool_calls[-1].status == "ok", chat.tool_calls[-1]


def _large_and_noisy(server: MCPServer, repeat: int) -> list[Result]:
    noisy = MCPServer.stdio(sys.executable, [NOISY], max_result_bytes=64 * 1024 * 1024)
    try:
        t = interleaved(
            {
                "4 MB": lambda: noisy.call("big", {"size": 4_000_000}),
                "32 MB": lambda: noisy.call("big", {"size": 32_000_000}),
            },
            repeat=max(3, repeat // 4),
            warmup=1,
        )
        per_byte = (t["32 MB"][0] / 32) / (t["4 MB"][0] / 4)
        alone = interleaved({"alone": lambda: _round(server, "mcp_echo")}, repeat=repeat)
        stop = threading.Event()
        floods = [0]

        def flood() -> None:
            while not stop.is_set():
                noisy.call("flood", {"n": 2000})
                floods[0] += 1

        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        while floods[0] < 2:
            time.sleep(0.01)
        try:
            noisy_t = interleaved({"noisy": lambda: _round(server, "mcp_echo")}, repeat=repeat)
        finally:
            stop.set()
            flooder.join(30)
    finally:
        noisy.close()
    slowdown = noisy_t["noisy"][0] / alone["alone"][0]
    return [
        Result(
            "reading a stdio answer: 32 MB vs 4 MB, time per byte",
            per_byte,
            "x",
            "< 2x",
            per_byte < 2.0,
            f"{t['4 MB'][0]:.3f} s for 4 MB, {t['32 MB'][0]:.3f} s for 32 MB",
        ),
        Result(
            "a chat round while another server floods list_changed",
            slowdown,
            "x",
            "< 3x",
            slowdown < 3.0,
            f"{noisy_t['noisy'][0] * 1000:.1f} ms vs {alone['alone'][0] * 1000:.1f} ms alone; "
            f"{floods[0]} floods of 2000",
        ),
    ]


def run(quick: bool = False) -> list[Result]:
    configure(quiet=True, display=False)
    server = MCPServer.stdio(sys.executable, [SERVER], prefix="mcp")
    server.connect()
    repeat = 5 if quick else 20
    try:
        conn = server._connection

        async def raw() -> None:
            client = await conn.ensure()
            await client.call_tool("echo", {"text": "hello"})

        t = interleaved(
            {
                "local round": lambda: _round(echo, "echo"),
                "mcp round": lambda: _round(server, "mcp_echo"),
                "local call": lambda: echo("hello"),
                "mcp call": lambda: server.call("echo", {"text": "hello"}),
                "sdk call": lambda: _connection.wait(raw()),
            },
            repeat=repeat * 5,
        )
        extra = _large_and_noisy(server, repeat)
    finally:
        server.close()
    per_local = t["local round"][0] / CALLS * 1000
    per_mcp = t["mcp round"][0] / CALLS * 1000
    overhead = per_mcp - per_local
    call_overhead = (t["mcp call"][0] - t["local call"][0]) * 1000
    sdk = t["sdk call"][0] * 1000
    return [
        Result(
            "MCP tool over stdio in a chat round: overhead per call",
            overhead,
            "ms",
            "< 2 ms",
            overhead < 2.0,
            f"{per_mcp:.3f} ms per MCP call vs {per_local:.3f} ms local, "
            f"{per_mcp / per_local:.1f}x; {CALLS} sequential calls a round",
        ),
        Result(
            "server.call() over stdio: overhead per call",
            call_overhead,
            "ms",
            detail=f"vs a plain function call ({t['local call'][0] * 1e6:.2f} us)",
        ),
        Result(
            "of which the SDK and the server process (raw call_tool)",
            sdk,
            "ms",
            detail=f"nbagent's hops: {t['mcp call'][0] * 1000 - sdk:.3f} ms",
        ),
        *extra,
    ]
