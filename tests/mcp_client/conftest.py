"""Fixtures for the MCP client tests (helpers in _mcp_servers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _mcp_servers import PROTOCOL_SERVER, SERVER, TOKEN, http_server, notes_server

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
    with http_server(script, env) as (url, _):
        yield url
