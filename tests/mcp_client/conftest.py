"""Fixtures for the MCP client tests (helpers in _mcp_servers.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from _mcp_servers import PROTOCOL_SERVER, SERVER, TOKEN, free_port, notes_server

import nbagent


@pytest.fixture(scope="module")
def shared_notes() -> Iterator[nbagent.MCPServer]:
    """One server process for the tests of a module that do not break it."""
    server = notes_server(prefix="notes")
    yield server
    server.close()


@pytest.fixture
def notes() -> Iterator[nbagent.MCPServer]:
    server = notes_server(prefix="notes")
    yield server
    server.close()


@pytest.fixture(scope="module")
def http_notes_url() -> Iterator[str]:
    """The notes server over streamable HTTP on a free loopback port."""
    yield from _http(SERVER)


@pytest.fixture(scope="module")
def http_protocol_url() -> Iterator[str]:
    """protocol_server.py over streamable HTTP (its NOTES_TOKEN is :data:`TOKEN`)."""
    yield from _http(PROTOCOL_SERVER, {"NOTES_TOKEN": TOKEN})


def _http(script: str, env: dict[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, script, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"the HTTP server {script} exited") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()  # terminate() waits for open client streams (uvicorn's graceful stop)
        proc.wait(10)
