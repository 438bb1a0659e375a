"""SDK errors are mapped at one boundary into nbagent's exception tree (retries off)."""

from __future__ import annotations

import socket
import traceback
from collections.abc import Callable

import pytest
from _provider_harness import KEY, WEATHER, Harness, make_provider

import nbagent
from nbagent import (
    AuthenticationError,
    BadRequestError,
    ChatMessage,
    ModelNotSupportedError,
    ModelRequest,
    ModelRequestFailed,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
)
from nbagent.providers._anthropic_wire import MessageStream
from nbagent.providers._openai_wire import ResponsesStream
from nbagent.providers._sdk import SDKProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

USER = ChatMessage("user", "hi")


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, BadRequestError),
        (422, BadRequestError),
        (429, RateLimitError),
        (500, ServerError),
        (503, ServerError),
        (529, ServerError),
    ],
)
def test_status_errors_are_mapped(harness: Harness, status: int, cls: type[ProviderError]) -> None:
    harness.script(Turn(status=status, error={"message": f"scripted failure {status}"}))
    with pytest.raises(cls) as info:
        harness.ask([USER], tools=[WEATHER])
    err = info.value
    assert isinstance(err, ProviderError)
    assert err.status_code == status
    assert err.provider == harness.provider.name
    assert f"scripted failure {status}" in str(err)  # the provider's message is kept
    assert str(err).startswith(f"{harness.provider.name}: ")
    assert len(harness.server.requests) == 1  # max_retries=0: no retry


def test_async_errors_are_mapped_too(harness: Harness) -> None:
    harness.script(Turn(status=429))
    with pytest.raises(RateLimitError, match=r"(?i)rate limit"):
        harness.ask_async([USER])


def test_authentication_error_says_where_the_key_comes_from(harness: Harness) -> None:
    harness.script(Turn(status=401))
    with pytest.raises(AuthenticationError) as info:
        harness.ask([USER])
    env = "ANTHROPIC_API_KEY" if harness.api == "anthropic" else "OPENAI_API_KEY"
    assert env in str(info.value)


def test_a_key_echoed_by_the_server_is_scrubbed(harness: Harness) -> None:
    harness.provider.close()
    harness.provider = make_provider(harness.kind, harness.server, api_key=KEY)
    harness.script(Turn(status=401, error={"message": f"Incorrect API key provided: {KEY}."}))
    with pytest.raises(AuthenticationError) as info:
        harness.ask([USER])
    err = info.value
    text = str(err) + repr(err) + "".join(traceback.format_exception(err))
    assert KEY not in text
    assert "Incorrect API key provided: ***." in str(err)
    # Nor does a program walking the chain find it: ``from None`` alone left the SDK's
    # exception, key and all, as ``err.__context__``.
    chain: list[BaseException | None] = [err.__cause__, err.__context__]
    while chain:
        linked = chain.pop()
        if linked is not None:
            assert KEY not in str(linked) + repr(linked), type(linked)
            chain += [linked.__cause__, linked.__context__]
    harness.provider.close()


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
def test_unreachable_server_is_a_connection_error(kind: str, stream: bool) -> None:
    port = _dead_port()

    class Dead:
        openai_base_url = f"http://127.0.0.1:{port}/v1"
        anthropic_base_url = f"http://127.0.0.1:{port}"

    provider = make_provider(kind, Dead())  # type: ignore[arg-type]
    try:
        with pytest.raises(ProviderConnectionError, match="Connection error"):
            provider.complete(ModelRequest((USER,), stream=stream))
    finally:
        provider.close()


def test_a_stream_that_breaks_off_is_a_connection_error(harness: Harness) -> None:
    harness.script(Turn(text="This answer will not arrive in full.", fail_mid_stream=True))
    with pytest.raises(ProviderConnectionError):
        harness.ask([USER])


def test_timeout_is_a_connection_error(server: FakeLLMServer, kind: str) -> None:
    provider = make_provider(kind, server, timeout=0.2)
    server.script([Turn(text="late", delay=1.0)])
    try:
        with pytest.raises(ProviderConnectionError, match="timed out"):
            provider.complete(ModelRequest((USER,)))
    finally:
        provider.close()


def test_the_sdk_retries_are_kept(server: FakeLLMServer, kind: str) -> None:
    provider = make_provider(kind, server, max_retries=2)
    server.script([Turn(status=500), Turn(status=429), "third time lucky"])
    try:
        assert provider.complete(ModelRequest((USER,))).text == "third time lucky"
    finally:
        provider.close()
    assert len(server.requests) == 3


def test_error_events_inside_streams() -> None:
    acc = MessageStream(None, model="m", provider="anthropic")
    with pytest.raises(ServerError, match="Overloaded"):
        acc.feed({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    with pytest.raises(RateLimitError):
        acc.feed({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    responses = ResponsesStream(None, model="m", provider="openai")
    with pytest.raises(ServerError, match="model crashed"):
        responses.feed(
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "model crashed"},
                },
            }
        )
    with pytest.raises(RateLimitError):
        responses.feed({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"})


def test_a_non_object_body_is_a_provider_error(
    provider_factory: Callable[..., SDKProvider],
) -> None:
    provider = provider_factory("openai-chat")
    with pytest.raises(ProviderError, match="expected a JSON object"):
        provider._checked_parse([1, 2])


def test_model_known_not_to_support_tools_fails_before_any_request(
    provider_factory: Callable[..., SDKProvider], server: FakeLLMServer
) -> None:
    provider = provider_factory("openai-chat", model="o1-mini-2024-09-12")
    with pytest.raises(ModelNotSupportedError, match="does not support tools"):
        provider.complete(ModelRequest((USER,), tools=(WEATHER,)))
    assert server.requests == []
    server.script(["fine without tools"])
    assert provider.complete(ModelRequest((USER,))).text == "fine without tools"


@pytest.mark.parametrize("stream", [False, True])
def test_a_failed_request_appends_nothing_and_the_chat_resumes(
    server: FakeLLMServer, kind: str, stream: bool
) -> None:
    provider = make_provider(kind, server, api_key=KEY)

    @nbagent.tool
    def get_weather(city: str) -> str:
        """Weather.

        Args:
            city: City.
        """
        return "sunny"

    chat = nbagent.Chat(provider=provider, stream=stream).with_tools(get_weather)
    failures: list[ModelRequestFailed] = []
    chat.on(ModelRequestFailed, failures.append)  # type: ignore[arg-type]
    server.script(
        [
            Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]),
            Turn(status=500, error={"message": f"upstream broke for {KEY}"}),
        ]
    )
    with pytest.raises(ServerError) as info:
        chat.ask("Weather in Paris?")
    assert KEY not in str(info.value)
    kinds = [type(m).__name__ for m in chat.transcript]
    assert kinds == ["ChatMessage", "AssistantToolCallMessage", "ToolResultMessage"]
    assert len(failures) == 1 and failures[0].error_type == "ServerError"
    assert KEY not in failures[0].error
    server.script(["Sunny in Paris."])
    assert chat.complete().content == "Sunny in Paris."  # type: ignore[union-attr]
    provider.close()


def test_odd_bodies_from_compatible_servers(provider_factory: Callable[..., SDKProvider]) -> None:
    provider = provider_factory("openai-compatible")
    with pytest.raises(BadRequestError, match="model not loaded"):
        provider._checked_parse(
            {"error": {"type": "invalid_request_error", "message": "model not loaded"}}
        )
    with pytest.raises(ProviderError, match="unexpected response"):
        provider._checked_parse({"choices": [{"message": {"tool_calls": [1]}}]})
    with pytest.raises(ProviderError, match="not JSON"):
        provider._json(b"<html>502 Bad Gateway</html>")
    # A gateway's 200 with no completion in it is no answer, not an empty one (it ended the
    # turn with an empty reply, 0 tokens).
    for kind, bodies in {
        "openai-compatible": [{}, {"choices": []}, {"choices": None}],
        "openai-chat": [{}, {"id": "x", "usage": {"prompt_tokens": 3}}],
        "openai-responses": [{}, {"status": "completed"}],
        "anthropic": [{}, {"type": "message", "stop_reason": "end_turn"}],
    }.items():
        for body in bodies:
            with pytest.raises(ProviderError, match="unexpected response from the server"):
                provider_factory(kind)._checked_parse(body)
    assert (
        provider_factory("anthropic")
        ._checked_parse({"type": "message", "content": [], "stop_reason": "end_turn"})
        .text
        == ""
    )  # an empty answer Anthropic does give, after a tool result


def test_sse_parser_handles_framing_variants() -> None:
    from nbagent.providers._sdk import SSEParser

    parser = SSEParser("p")
    stream = (
        b": keep-alive comment\r\n\r\n"
        b'event: message_start\r\ndata: {"a": 1}\r\n\r\n'
        b'data: {"b":\ndata: 2}\n\n'  # one event over two data lines
        b"event: ping\n\n"
        b'data:{"c": 3}\n\n'
        b"data: [DONE]\n\n"
        b'data: {"after": "done"}\n\n'
    )
    events = []
    for i in range(0, len(stream), 7):  # arbitrary chunk boundaries, CRLF split too
        events += parser.feed(stream[i : i + 7])
    events += parser.flush()
    assert events == [{"a": 1}, {"b": 2}, {"c": 3}]
    unterminated = SSEParser("p")
    assert unterminated.feed(b'data: {"last": true}') == []
    assert unterminated.flush() == [{"last": True}]
    with pytest.raises(ProviderError, match="invalid JSON in a stream event"):
        SSEParser("p").feed(b"data: {oops}\n\n")


def test_an_adapter_error_keeps_no_link_to_an_exception_that_shows_the_key() -> None:
    """An error the adapter raises while handling another (a 200 error body, a stream
    event) is scrubbed, and neither ``__cause__`` nor ``__context__`` leads to the key."""
    from nbagent._errors import reveals
    from nbagent.providers._errors import sdk_errors

    key = "sk-proj-abcdefghijklmnop123456"
    with pytest.raises(ProviderError) as raised, sdk_errors("openai", (key,)):
        try:
            raise ValueError(f"the server said back {key}")
        except ValueError:
            raise ProviderError(f"openai: bad answer for {key}", provider="openai") from None
    exc = raised.value
    assert key not in str(exc)
    assert exc.__cause__ is None and exc.__context__ is None
    assert not reveals(exc, (key,))
