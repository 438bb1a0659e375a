"""OpenAI's 429 ``insufficient_quota`` (no credit left: retrying never helps) is a
``QuotaError``, sent once.

It was a ``RateLimitError``: the SDK retried it ``max_retries`` times with backoff, and a
batch waited it out ``max_rate_limit_retries`` times per row, before every row failed the
same way. Now the SDK is told not to retry it (every other 429 still is), and the error is
not a ``RateLimitError``, so a batch does not retry it either. Through the real SDK
clients against the loopback fake server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _provider_harness import make_provider

import nbagent
from nbagent import Chat, ChatMessage, ProviderError, QuotaError, RateLimitError
from nbagent.providers import ModelRequest
from nbagent.testing import FakeLLMServer, Turn

NO_QUOTA = {
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "type": "insufficient_quota",
    "code": "insufficient_quota",
}
OPENAI_KINDS = ["openai-chat", "openai-responses", "openai-compatible"]
ASK = [ChatMessage(role="user", content="hi")]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", OPENAI_KINDS)
def test_no_quota_is_a_quota_error_sent_once(
    server: FakeLLMServer, kind: str, stream: bool
) -> None:
    server.script([Turn(status=429, error=NO_QUOTA)] * 3)
    provider = make_provider(kind, server, max_retries=2)
    with pytest.raises(QuotaError) as info:
        provider.complete(ModelRequest(tuple(ASK), stream=stream))
    error = info.value
    assert isinstance(error, ProviderError) and not isinstance(error, RateLimitError)
    assert error.status_code == 429 and error.retry_after is None
    assert "insufficient_quota" in str(error) and "does not help" in str(error)
    assert len(server.requests) == 1  # not retried by the SDK
    provider.close()


@pytest.mark.parametrize("kind", OPENAI_KINDS)
def test_no_quota_is_not_retried_by_the_async_client_either(
    server: FakeLLMServer, kind: str
) -> None:
    server.script([Turn(status=429, error=NO_QUOTA)] * 3)
    provider = make_provider(kind, server, max_retries=2)

    async def go() -> Any:
        return await provider.complete_async(ModelRequest(tuple(ASK), stream=True))

    with pytest.raises(QuotaError):
        asyncio.run(go())
    assert len(server.requests) == 1
    provider.close()


@pytest.mark.parametrize("kind", OPENAI_KINDS)
def test_a_rate_limit_is_still_retried_by_the_sdk(server: FakeLLMServer, kind: str) -> None:
    limited = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
    server.script([Turn(status=429, error=limited), "ok"])
    provider = make_provider(kind, server, max_retries=2)
    assert provider.complete(ModelRequest(tuple(ASK))).text == "ok"
    assert len(server.requests) == 2
    provider.close()


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses"])
def test_no_quota_reported_inside_a_stream_is_a_quota_error(
    server: FakeLLMServer, kind: str
) -> None:
    server.script([Turn(inline_error=NO_QUOTA)])
    provider = make_provider(kind, server)
    with pytest.raises(QuotaError):
        provider.complete(ModelRequest(tuple(ASK), stream=True))
    provider.close()


def test_a_batch_fails_each_row_at_once_with_no_quota(server: FakeLLMServer) -> None:
    server.script([Turn(status=429, error=NO_QUOTA)], cycle=True)
    rows = [{"prompt": p} for p in "abc"]
    result = nbagent.batch(
        rows,
        lambda: Chat(provider=make_provider("openai-chat", server, max_retries=2)),
        concurrency=3,
        max_rate_limit_retries=4,
        progress=False,
    )
    assert list(result["status"]) == ["failed"] * 3
    assert all("QuotaError" in str(e) for e in result["error"])
    assert len(server.requests) == 3  # one request a row: nothing waited out or retried
