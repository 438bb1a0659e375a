"""A ProviderError keeps its response's headers, with no secret among them.

The SDK's exception is not chained when it holds the API key (its request's
headers), so what a person paces requests by, a 429's ``x-ratelimit-*`` /
``anthropic-ratelimit-*`` headers, would be lost with it: ``err.headers`` keeps
them (a read-only mapping, names case-insensitive), with every header named as a
secret's (``set-cookie``, ``x-api-key``...) and every value holding a secret or a
key's shape as ``***``. It pickles (a batch's worker, Ray) and shows nowhere
unless read.
"""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx2
import pytest
from _provider_harness import make_provider
from hypothesis import given, settings
from hypothesis import strategies as st
from test_error_chain_holds_no_key import reachable

from nbagent import ChatMessage, ModelRequest, ProviderError, RateLimitError
from nbagent._secrets import redact_keys, secret_field
from nbagent.providers._errors import response_headers, sdk_errors

KEY = "PLAINKEY-abcdefghijklmnop-9876"
COOKIE = "sessionvalue-QWERTYUIOP-1234"
GATEWAY = "gw-secret-5678"
SHAPED = "sk-proj-" + "Zx9" * 15
RATE = [
    ("x-ratelimit-limit-requests", "500"),
    ("x-ratelimit-remaining-tokens", "0"),
    ("x-ratelimit-reset-tokens", "6m0s"),
    ("anthropic-ratelimit-tokens-reset", "2026-01-01T00:00:06Z"),
    ("anthropic-ratelimit-input-tokens-remaining", "0"),
]
OTHER = [
    ("Set-Cookie", f"__cf_bm={COOKIE}; path=/; HttpOnly"),
    ("X-Api-Key", GATEWAY),
    ("x-echo", f"key was {KEY}"),
    ("x-debug", f"upstream said {SHAPED}"),
    ("x-request-id", "req_123"),
    ("request-id", "req_123"),
    ("retry-after", "2"),
]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        body = json.dumps(
            {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
        ).encode()
        self.send_response(429)
        for name, value in [("content-type", "application/json"), *RATE, *OTHER]:
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _Server:
    """What ``make_provider`` needs of a server: one answering every POST with a 429."""

    def __init__(self) -> None:
        self.http = HTTPServer(("127.0.0.1", 0), _Handler)
        self.base_url = f"http://127.0.0.1:{self.http.server_port}"
        self.openai_base_url = self.base_url + "/v1"
        self.anthropic_base_url = self.base_url


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    thread = threading.Thread(target=s.http.serve_forever, daemon=True)
    thread.start()
    yield s
    s.http.shutdown()
    s.http.server_close()


def rate_limited(kind: str, server: _Server) -> ProviderError:
    provider = make_provider(kind, server, api_key=KEY)  # type: ignore[arg-type]
    try:
        provider.complete(ModelRequest((ChatMessage("user", "hi"),)))
    except ProviderError as err:
        return err
    finally:
        provider.close()
    raise AssertionError("no error")


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
def test_a_429_keeps_its_rate_limit_headers(kind: str, server: _Server) -> None:
    err = rate_limited(kind, server)
    assert isinstance(err, RateLimitError)
    assert err.__cause__ is None  # the SDK's exception held the key: not chained
    headers = err.headers
    assert isinstance(headers, Mapping)
    assert headers["x-ratelimit-reset-tokens"] == "6m0s"
    assert headers["X-RateLimit-Reset-Tokens"] == "6m0s"  # any case, as HTTP reads them
    assert headers.get("anthropic-ratelimit-tokens-reset") == "2026-01-01T00:00:06Z"
    for name, value in RATE:
        assert headers[name] == value
    assert headers["x-request-id"] == "req_123" == err.request_id
    assert "x-ratelimit-limit-requests" in headers
    assert "X-RATELIMIT-LIMIT-REQUESTS" in headers
    assert headers.get("not-sent") is None


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
def test_no_secret_is_kept_among_them(kind: str, server: _Server) -> None:
    err = rate_limited(kind, server)
    headers = err.headers
    assert headers["set-cookie"] == "***"
    assert headers["x-api-key"] == "***"
    assert headers["x-echo"] == "***"
    assert headers["x-debug"] == "***"
    for needle in (KEY, COOKIE, GATEWAY, SHAPED):
        assert needle not in repr(dict(headers))
        assert reachable(err, needle) == []


def test_they_are_read_only_and_pickle(server: _Server) -> None:
    err = rate_limited("openai-chat", server)
    with pytest.raises(TypeError):
        err.headers["x-ratelimit-reset-tokens"] = "0s"  # type: ignore[index]
    with pytest.raises(AttributeError):
        err.headers.update({"a": "b"})  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert back.headers == err.headers
    assert dict(back.headers) == dict(err.headers)
    assert back.headers["X-Ratelimit-Reset-Tokens"] == "6m0s"
    assert back.request_id == err.request_id


def test_they_show_nowhere_unless_read(server: _Server) -> None:
    err = rate_limited("openai-chat", server)
    shown = "\n".join([str(err), repr(err), *err._render_traceback_()])
    for _, value in RATE:
        if len(value) > 2:
            assert value not in shown
    assert "6m0s" not in err.details()


def test_an_error_with_no_response_has_no_headers() -> None:
    with pytest.raises(ProviderError) as info, sdk_errors("openai", (KEY,)):
        raise httpx2.ConnectError("connection refused")
    assert info.value.headers is None


_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_", min_size=1, max_size=24).filter(
    lambda n: n.strip("-_") != ""
)
_VALUE = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60),
    st.sampled_from([KEY, f"Bearer {KEY}", SHAPED, f"x={SHAPED}", "Basic dXNlcjpwYXNzd29yZA=="]),
)
_SECRET_NAMES = st.sampled_from(
    ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(_NAME, _SECRET_NAMES), _VALUE),
        max_size=8,
    )
)
def test_what_is_kept_shows_no_secret(pairs: list[tuple[str, str]]) -> None:
    """Whatever a response's headers are, what the error keeps of them holds neither the
    configured key nor anything redaction hides, and a secret's header shows only
    ``***``; every header is kept, by name."""
    pairs = [(n, v.strip()) for n, v in pairs]
    response = httpx2.Response(429, headers=pairs)
    kept = response_headers(response, (KEY,))
    assert kept is not None
    assert set(kept) == {n.lower() for n, _ in pairs}
    for name, value in kept.items():
        line = f"{name}: {value}"
        assert KEY not in value
        assert redact_keys(line) == line
        if secret_field(name) or name in ("authorization", "cookie", "set-cookie"):
            assert value in ("", "***")
