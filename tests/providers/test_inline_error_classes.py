"""An error reported inside a 200 answer (a failed Responses response, a Responses stream's
``error`` event, an OpenAI-compatible Chat stream's error chunk) is the same exception class on
every API, streamed or not, as the HTTP error of that kind: a bad key is an
``AuthenticationError``, a refused request a ``BadRequestError`` (neither retried as a
server's hiccup), a rate limit a ``RateLimitError``, an overload a ``ServerError``. Through
the real SDK clients against the strict fake server."""

from __future__ import annotations

from typing import Any

import pytest
from _provider_harness import make_provider

import nbagent
from nbagent import AuthenticationError, BadRequestError, RateLimitError, ServerError
from nbagent.testing import FakeLLMServer, Turn

ERRORS: list[tuple[dict[str, Any], type[Exception]]] = [
    (
        {"message": "bad key", "type": "authentication_error", "code": "invalid_api_key"},
        AuthenticationError,
    ),
    (
        {
            "message": "context too long",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        },
        BadRequestError,
    ),
    (
        {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"},
        RateLimitError,
    ),
    ({"message": "busy", "type": "overloaded_error"}, ServerError),
]
IDS = ["auth", "bad-request", "rate-limit", "overloaded"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
@pytest.mark.parametrize(("error", "expected"), ERRORS, ids=IDS)
def test_an_error_inside_a_200_answer_is_the_same_class_everywhere(
    server: FakeLLMServer,
    kind: str,
    stream: bool,
    error: dict[str, Any],
    expected: type[Exception],
) -> None:
    server.script([Turn(text="a partial answer that is long enough", inline_error=error)])
    provider = make_provider(kind, server)
    chat = nbagent.Chat(provider=provider, stream=stream, display=False)
    with pytest.raises(expected) as caught:
        chat.ask("Hello?")
    assert type(caught.value) is expected
    assert error["message"] in str(caught.value)
    assert len(server.requests) == 1
    provider.close()
