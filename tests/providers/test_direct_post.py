"""The Anthropic adapter posts through the SDK's httpx client with its per-request work done once
(``providers/_direct.py``): the same headers, retries and errors as ``client.post``, against the
real ``anthropic`` SDK and the strict fake server."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest
from _provider_harness import KEY
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import (
    BadRequestError,
    ChatMessage,
    ModelRequest,
    ProviderConnectionError,
    RateLimitError,
)
from nbagent.providers import AnthropicProvider
from nbagent.providers._direct import direct_post
from nbagent.providers._sdk import Prepared
from nbagent.testing import FakeLLMServer, Turn

USER = ChatMessage("user", "hi")
ERRORS = (anthropic.AnthropicError, anthropic.APITimeoutError, anthropic.APIConnectionError)
PER_REQUEST = {"content-length", "x-stainless-retry-count"}
"""Headers that differ between two requests of one client whatever sends them."""


def _sdk_headers(server: FakeLLMServer, client: Any) -> dict[str, str]:
    """The headers the SDK's own ``messages.create`` sends."""
    server.script(["by the SDK"])
    client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    return dict(server.last_request.headers)


def _comparable(headers: dict[str, str]) -> dict[str, str]:
    # the SDK's own methods add their helper header and a per-call timeout; post() adds neither
    return {
        k: v
        for k, v in headers.items()
        if k not in PER_REQUEST and k not in ("x-stainless-timeout", "x-stainless-read-timeout")
    }


@pytest.mark.parametrize("stream", [False, True])
def test_the_requests_carry_the_sdks_headers(server: FakeLLMServer, stream: bool) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    provider = AnthropicProvider("claude-sonnet-4-5", client=client)
    expected = _comparable(_sdk_headers(server, client))
    server.script(["one", "two"])
    for _ in range(2):
        provider.complete(ModelRequest((USER,), stream=stream))
        sent = dict(server.last_request.headers)
        assert _comparable(sent) == expected
        assert sent["x-stainless-retry-count"] == "0"
        assert int(sent["content-length"]) > 0
    client.close()


def test_the_sdks_per_request_work_is_done_once(server: FakeLLMServer) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    built: list[int] = []
    original = client._build_headers

    def counted(options: Any, *, retries_taken: int = 0) -> Any:
        built.append(retries_taken)
        return original(options, retries_taken=retries_taken)

    client._build_headers = counted  # type: ignore[method-assign]
    provider = AnthropicProvider("claude-sonnet-4-5", client=client)
    server.script([f"answer {i}" for i in range(5)])
    for i in range(5):
        assert provider.complete(ModelRequest((USER,))).text == f"answer {i}"
    assert built == [0]  # resolved once for the client, not once per request
    client.close()


@pytest.mark.parametrize("stream", [False, True])
def test_retries_count_up_and_honour_the_sdks_policy(server: FakeLLMServer, stream: bool) -> None:
    provider = AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=2
    )
    server.script([Turn(status=529), Turn(status=429), "third time lucky"])
    try:
        assert provider.complete(ModelRequest((USER,), stream=stream)).text == "third time lucky"
        counts = [r.headers["x-stainless-retry-count"] for r in server.requests]
        assert counts == ["0", "1", "2"]
        # a status the policy does not retry is raised at once, mapped
        server.script([Turn(status=400, error={"message": "bad field"})])
        with pytest.raises(BadRequestError, match="bad field"):
            provider.complete(ModelRequest((USER,), stream=stream))
        assert len(server.requests) == 4
        # retries run out: the last error is raised
        server.script([Turn(status=500), Turn(status=500), Turn(status=429)])
        with pytest.raises(RateLimitError):
            provider.complete(ModelRequest((USER,), stream=stream))
        assert len(server.requests) == 7
    finally:
        provider.close()


def test_async_requests_go_the_same_way(server: FakeLLMServer) -> None:
    provider = AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=1
    )
    server.script([Turn(status=500), "async, retried", "streamed"])

    async def main() -> list[str]:
        try:
            first = await provider.complete_async(ModelRequest((USER,)))
            second = await provider.complete_async(ModelRequest((USER,), stream=True))
            return [first.text, second.text]
        finally:
            await provider.aclose()

    assert asyncio.run(main()) == ["async, retried", "streamed"]
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1", "0"]
    assert server.requests[0].headers["x-stainless-async"].startswith("async")


def test_a_refused_connection_is_retried_then_a_connection_error() -> None:
    with FakeLLMServer() as gone:
        url = gone.anthropic_base_url
    provider = AnthropicProvider("claude-sonnet-4-5", base_url=url, api_key=KEY, max_retries=1)
    try:
        with pytest.raises(ProviderConnectionError):
            provider.complete(ModelRequest((USER,)))
    finally:
        provider.close()


def test_a_changed_key_is_sent_at_once(server: FakeLLMServer) -> None:
    # the fake server redacts keys: read the headers the resolved request would carry
    client = anthropic.Anthropic(api_key="sk-first", base_url=server.anthropic_base_url)
    plain = (anthropic.Anthropic,)
    errors = (anthropic.AnthropicError, anthropic.APITimeoutError, anthropic.APIConnectionError)
    first = direct_post(client, plain, errors)
    assert first is not None and direct_post(client, plain, errors) is first
    client.api_key = "sk-second"
    second = direct_post(client, plain, errors)
    assert second is not None and second is not first
    request = next(second.steps(Prepared("/v1/messages", b"{}", False)))
    assert request.headers["authorization"] == "Bearer sk-second"
    client.close()


def test_clients_that_need_the_sdks_post_still_use_it(server: FakeLLMServer) -> None:
    class Signing(anthropic.Anthropic):  # a subclass may sign or rewrite in post()
        built = 0

        def _build_headers(self, options: Any, *, retries_taken: int = 0) -> Any:
            Signing.built += 1
            return super()._build_headers(options, retries_taken=retries_taken)

    client = Signing(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    provider = AnthropicProvider("claude-sonnet-4-5", client=client)
    server.script(["through post", "again"])
    assert provider.complete(ModelRequest((USER,))).text == "through post"
    assert provider.complete(ModelRequest((USER,))).text == "again"
    assert Signing.built == 2  # once per request: the SDK's own post
    client.close()


@given(body=st.binary(max_size=2048))
@settings(max_examples=40, deadline=None)
def test_a_request_is_the_one_the_http_client_would_build(body: bytes) -> None:
    # the request is built from a template of build_request's, taken once: for any body, the
    # same URL, headers in the same order (Host, Content-Length), extensions and content
    client = anthropic.Anthropic(api_key=KEY, base_url="http://127.0.0.1:9", max_retries=0)
    direct = direct_post(client, (anthropic.Anthropic,), ERRORS)
    assert direct is not None
    steps = direct.steps(Prepared("/v1/messages", b'{"warm":1}', False))
    next(steps)  # the template is taken by the first request
    request = next(direct.steps(Prepared("/v1/messages", body, False)))
    expected = client._client.build_request(
        "POST",
        request.url,
        headers=client._build_headers(direct._options, retries_taken=0),
        content=body,
        timeout=client.timeout,
    )
    assert request.url == expected.url
    assert request.headers.raw == expected.headers.raw
    assert request.extensions == expected.extensions
    assert request.content == expected.content == body
    client.close()


def test_cookies_the_http_client_holds_are_sent(server: FakeLLMServer) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    provider = AnthropicProvider("claude-sonnet-4-5", client=client)
    server.script(["one", "two"])
    provider.complete(ModelRequest((USER,)))
    assert "cookie" not in server.last_request.headers
    client._client.cookies.set("session", "abc")  # what a server's Set-Cookie leaves
    provider.complete(ModelRequest((USER,)))
    assert "cookie" in server.last_request.headers  # (the fake server records it redacted)
    client.close()


def test_a_request_the_sdk_would_not_send_unstreamed_goes_out_streamed(
    server: FakeLLMServer,
) -> None:
    """The SDK's messages.create refuses a request without streaming that may run past ten
    minutes (its max_tokens; a lower limit for some models) while the client has the
    default timeout. nbagent streams such a request instead, heard by nobody; a smaller
    one, or a client given its own timeout, goes as asked."""
    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    with pytest.raises(ValueError, match="Streaming is required"):  # the SDK's own rule
        client.messages.create(model="claude-sonnet-4-5", max_tokens=64_000, messages=[])
    big = AnthropicProvider("claude-sonnet-4-5", client=client, max_tokens=64_000)
    opus = AnthropicProvider("claude-opus-4-0", client=client, max_tokens=10_000)
    small = AnthropicProvider("claude-sonnet-4-5", client=client, max_tokens=4_096)
    server.script(["long", "opus", "short"])
    for provider, streamed, text in ((big, True, "long"), (opus, True, "opus"),
                                     (small, False, "short")):  # fmt: skip
        response = provider.complete(ModelRequest((USER,), stream=False))
        assert response.text == text
        assert server.last_request.body.get("stream", False) is streamed
    # decided once per model and limit, again when the client's timeout is another
    client.timeout = 3600.0
    server.script(["as asked now"])
    assert big.complete(ModelRequest((USER,), stream=False)).text == "as asked now"
    assert "stream" not in server.last_request.body
    own = anthropic.Anthropic(
        api_key=KEY, base_url=server.anthropic_base_url, max_retries=0, timeout=3600
    )
    server.script(["as asked"])
    provider = AnthropicProvider("claude-sonnet-4-5", client=own, max_tokens=64_000)
    assert provider.complete(ModelRequest((USER,), stream=False)).text == "as asked"
    assert "stream" not in server.last_request.body
    client.close()
    own.close()
