"""An MCP server that misbehaves the ways a real one can, built with the official ``mcp`` SDK.

Run over stdio (``python tricky_server.py [--duplicate]``) or streamable HTTP on
the loopback interface (``python tricky_server.py --http PORT``). Its tools:

- ``leak_error`` answers ``isError`` with the secret it was given
  (``MY_SECRET`` in its environment) and an API key in its text;
- ``leak_rpc`` fails the request with a JSON-RPC error whose message and data
  carry the secret;
- ``leak_header`` answers ``isError`` with the ``X-Api-Token`` header it was
  sent (over HTTP);
- ``whoami`` answers with the argument after ``--token`` (so a test can see the
  server got it);
- ``wipe`` is annotated both read-only and destructive;
- ``a.b``, ``a_b`` and two long names alike in their first 64 characters
  collide once made valid tool names; ``--duplicate`` also lists ``a_b`` twice
  (a buggy server).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, ToolAnnotations

LONG = "search_the_knowledge_base_for_documents_matching_a_query_in_every_"
assert len(LONG) > 64


class Tricky(MCPServer):
    """Lists ``a_b`` twice when started with ``--duplicate``."""

    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        if "--duplicate" in sys.argv:
            tools += [t for t in tools if t.name == "a_b"]
        return tools


server = Tricky("tricky", log_level="ERROR")


def _secret() -> str:
    return os.environ.get("MY_SECRET", "")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def leak_error() -> str:
    """Fail, saying the secret back (as a badly written server does)."""
    raise ToolError(f"auth failed with token {_secret()} (key sk-live-0123456789abcdefXYZ)")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def leak_rpc() -> str:
    """Fail the whole request with a JSON-RPC error carrying the secret."""
    raise MCPError(INTERNAL_ERROR, f"upstream refused token {_secret()}", {"token": _secret()})


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def leak_header(ctx: Context) -> str:
    """Fail, saying back the token header this request came with."""
    headers = ctx.headers or {}
    raise ToolError(f"token {headers.get('x-api-token')} was refused")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami() -> str:
    """The token this server was started with."""
    argv = sys.argv
    return argv[argv.index("--token") + 1] if "--token" in argv else ""


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=True))
def wipe() -> str:
    """Delete everything (it also claims to be read-only)."""
    return "wiped"


def _named(name: str, text: str) -> None:
    def answer() -> str:
        return text

    server.add_tool(
        answer,
        name=name,
        description=f"Answers {text}.",
        annotations=ToolAnnotations(read_only_hint=True),
    )


_named("a.b", "dot")
_named("a_b", "underscore")
_named(LONG + "first", "first long")
_named(LONG + "second", "second long")


if __name__ == "__main__":
    if "--http-fd" in sys.argv:
        from _http_serve import serve_http_fd

        serve_http_fd(server, int(sys.argv[sys.argv.index("--http-fd") + 1]))
    elif "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run("stdio")
