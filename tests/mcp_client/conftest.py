"""Fixtures for the MCP client tests (helpers in _mcp_servers.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from _mcp_servers import SERVER, free_port, notes_server

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
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("the HTTP notes server exited") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()  # terminate() waits for open client streams (uvicorn's graceful stop)
        proc.wait(10)
