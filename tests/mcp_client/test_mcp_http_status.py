"""An HTTP error status from a streamable-HTTP MCP endpoint is said in nbagent's error.

The mcp SDK replaces a 4xx/5xx answer to a request with a fixed text (``Server returned
an error response``), so a refused token read like a server that could not be reached.
nbagent's own HTTP client remembers the status of the last such answer, and its error
says it with what it means (``HTTP 401 Unauthorized: the server refused the
credentials...``), never quoting the answer's headers or body (a ``WWW-Authenticate``
may echo the token).

Servers: ``auth_server.py`` (the official SDK's bearer-token auth: 401 for a refused
token, 403 for one without the scope, a token revoked mid-session), and for 5xx a bare
endpoint standing for a gateway in front of a server (it echoes the credentials it was
sent in a header and the body).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import http_server

from nbagent import Chat, MCPServer, MCPServerError
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

AUTH_SERVER = str(Path(__file__).with_name("auth_server.py"))
GOOD = "tok-good-7f3e9a1b2c4d5e6fA1"
WRONG = "tok-wrong-9a8b7c6d5e4f3a2bB2"
NO_SCOPE = "tok-noscope-1a2b3c4d5e6f7a8bC3"
PASSWORD = "pw-9f8e7d6c5b4a3secret"
QUERY_KEY = "q-9f8e7d6c5b4a3secretQ"
SECRETS = (GOOD, WRONG, NO_SCOPE, PASSWORD, QUERY_KEY)


def said(exc: BaseException) -> str:
    """Everything an exception shows: its text, repr and those of its causes."""
    out = []
    seen: BaseException | None = exc
    while seen is not None:
        out += [str(seen), repr(seen)]
        seen = seen.__cause__ or seen.__context__
    return "\n".join(out)


@pytest.fixture(scope="module")
def authed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``(url, revoked)``: the auth server, and the file whose existence revokes tokens."""
    revoked = tmp_path_factory.mktemp("auth") / "revoked"
    env = {"GOOD_TOKEN": GOOD, "NO_SCOPE_TOKEN": NO_SCOPE, "REVOKED_FILE": str(revoked)}
    with http_server(AUTH_SERVER, env) as (url, _):
        yield url, revoked


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_refused_token_is_said_as_http_401_without_the_token(
    authed: tuple[str, Path],
) -> None:
    url, _ = authed
    server = MCPServer.http(url, headers=_bearer(WRONG), prefix="h", connect_timeout=30)
    with server, pytest.raises(MCPServerError) as info:
        server.connect()
    text = str(info.value)
    assert "could not be started or reached" in text
    assert "HTTP 401 Unauthorized: the server refused the credentials" in text, text
    assert "headers=" in text  # where to look
    assert not [s for s in SECRETS if s in said(info.value)]


def test_no_token_at_all_is_said_as_http_401(authed: tuple[str, Path]) -> None:
    url, _ = authed
    server = MCPServer.http(url, prefix="h", connect_timeout=30)
    with server, pytest.raises(MCPServerError, match="HTTP 401 Unauthorized"):
        server.connect()


def test_a_token_without_the_scope_is_said_as_http_403(authed: tuple[str, Path]) -> None:
    url, _ = authed
    server = MCPServer.http(url, headers=_bearer(NO_SCOPE), prefix="h", connect_timeout=30)
    with server, pytest.raises(MCPServerError) as info:
        server.connect()
    assert "HTTP 403 Forbidden" in str(info.value), str(info.value)
    assert not [s for s in SECRETS if s in said(info.value)]


def test_a_token_revoked_mid_session_fails_the_call_saying_http_401(
    authed: tuple[str, Path],
) -> None:
    url, revoked = authed
    with MCPServer.http(url, headers=_bearer(GOOD), prefix="h", connect_timeout=30) as server:
        assert str(server.call("hello", {"name": "ada"})) == "hello ada"  # the token works
        chat = Chat(
            provider=ScriptedProvider([call_tools(("h_hello", {"name": "bob"})), reply("ok")])
        ).with_tools(server)
        revoked.touch()
        try:
            chat.ask("say hello")
        finally:
            revoked.unlink()
        [call] = chat.tool_calls
        assert call.status == "error" and call.result is not None
        told = str(call.result.content)  # what the model reads
        assert "HTTP 401 Unauthorized: the server refused the credentials" in told, told
        shown = told + chat.log.to_string() + repr(chat.messages)
        assert not [s for s in SECRETS if s in shown]
        # a working token again works again, and a server's own refusal (a JSON-RPC
        # error, its words) is not read as the earlier status
        assert str(server.call("hello", {"name": "cy"})) == "hello cy"
        with pytest.raises(MCPServerError) as info:
            server.prompt("no_such_prompt")
        assert "refused" in str(info.value) and "HTTP" not in str(info.value), str(info.value)


class _Gateway(BaseHTTPRequestHandler):
    """Answers every request with ``status`` (the class attribute), echoing the request's
    headers in a ``WWW-Authenticate`` header and in the body."""

    status = 500

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        body = json.dumps({"path": self.path, "headers": dict(self.headers)}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("WWW-Authenticate", f'Bearer error="{self.headers.get("Authorization")}"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (500, "HTTP 500 Internal Server Error: the server failed"),
        (502, "HTTP 502 Bad Gateway: the server failed"),
        (403, "HTTP 403 Forbidden: the server refused access"),
        (407, "HTTP 407 Proxy Authentication Required: the server refused the credentials"),
        (429, "HTTP 429 Too Many Requests"),
        (404, "HTTP 404 Not Found: nothing answers at this URL"),
        (418, "HTTP 418"),
    ],
)
def test_a_gateways_status_is_said_and_nothing_it_echoes(status: int, says: str) -> None:
    handler = type("Gateway", (_Gateway,), {"status": status})
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        port = httpd.server_port
        url = f"http://user:{PASSWORD}@127.0.0.1:{port}/mcp?api_key={QUERY_KEY}&x=1"
        server = MCPServer.http(url, headers=_bearer(GOOD), prefix="h", connect_timeout=30)
        with pytest.raises(MCPServerError) as info:
            server.connect()
        server.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert says in str(info.value), str(info.value)
    assert not [s for s in SECRETS if s in said(info.value)]
    assert "error=" not in str(info.value)  # the WWW-Authenticate header is not quoted
