"""MCP: the cost of calling a tool on an MCP server over stdio, against the same function local.

Target (issue 15): under 2 ms of overhead per call on this machine, measured in a
chat round (20 sequential calls of ``echo``, MCP tool vs a local ``@tool`` doing the
same), interleaved in the same run. Also reported: one direct ``server.call`` against a
plain function call, and the raw SDK call awaited on the MCP loop itself, so the
overhead splits into the SDK plus the server process and nbagent's own hops.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks._common import Result, interleaved
from nbagent import Chat, MCPServer, configure, tool
from nbagent.mcp import _connection
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

SERVER = str(Path(__file__).with_name("_mcp_echo_server.py"))
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
    ]
