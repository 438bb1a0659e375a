"""Serve a test MCP server over streamable HTTP on a socket the test already bound.

``python server.py --http-fd FD`` serves on the listening socket inherited as
``FD`` (:func:`_mcp_servers.http_server` binds it): the port is the test's from the
start, so no other process (another test's server, a second worker) can take it
between choosing and serving, and the test never talks to a stranger on it.
``ready`` on stdout says the server accepts requests.
"""

from __future__ import annotations

import socket
from typing import Any


def serve_http_fd(server: Any, fd: int) -> None:
    """Serve ``server`` (the SDK's ``MCPServer``) on the inherited listening socket ``fd``."""
    import anyio
    import uvicorn

    sock = socket.socket(fileno=fd)
    web = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning"))

    async def main() -> None:
        async def announce() -> None:
            while not web.started:
                await anyio.sleep(0.01)
            print("ready", flush=True)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(announce)
            await web.serve(sockets=[sock])

    anyio.run(main)
