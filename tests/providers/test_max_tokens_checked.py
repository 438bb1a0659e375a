"""``max_tokens`` is a positive int (``None`` where the API allows it), checked where it is
given (the provider, ``complete_with_tools``), never a bad value on the wire (``0``, ``1.5``,
``"100"`` went out as they were; ``AnthropicProvider(max_tokens=None, reasoning=...)`` and
``complete_with_tools(max_tokens="100")`` on Anthropic failed with an unrelated TypeError).
Through the real SDK clients against the strict fake server, which refuses bad limits as the
APIs do."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from _provider_harness import KEY, make_provider

from nbagent import ChatMessage
from nbagent.testing import FakeLLMServer

# -- max_tokens ---------------------------------------------------------------------------

BAD_LIMITS = [
    (0, ValueError, "at least 1"),
    (-5, ValueError, "at least 1"),
    (1.5, TypeError, "positive int"),
    ("100", TypeError, "positive int"),
    (True, TypeError, "positive int"),
]
KINDS = ["openai-chat", "openai-responses", "anthropic", "openai-compatible"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("limit", "error", "match"), BAD_LIMITS)
def test_a_bad_max_tokens_fails_where_it_is_given_never_on_the_wire(
    server: FakeLLMServer, kind: str, limit: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=f"max_tokens must be .*{match}"):
        make_provider(kind, server, max_tokens=limit)
    provider = make_provider(kind, server)
    with pytest.raises(error, match=f"max_tokens must be .*{match}"):
        provider.complete_with_tools(
            messages=[ChatMessage(role="user", content="hi")], max_tokens=limit
        )
    assert server.requests == []
    provider.close()


def test_anthropic_needs_a_limit_and_says_so(server: FakeLLMServer) -> None:
    with pytest.raises(TypeError, match="max_tokens must be a positive int; got NoneType"):
        make_provider("anthropic", server, max_tokens=None)


@pytest.mark.parametrize("kind", KINDS)
def test_good_limits_go_on_the_wire_as_ints(server: FakeLLMServer, kind: str) -> None:
    import numpy as np

    server.script(["ok", "ok"])
    provider = make_provider(kind, server, max_tokens=np.int64(300))
    provider.complete_with_tools(messages=[ChatMessage(role="user", content="hi")])
    thinking: dict[str, Any] = {"reasoning": "low"} if kind == "anthropic" else {}
    provider.complete_with_tools(
        messages=[ChatMessage(role="user", content="hi")], max_tokens=200, **thinking
    )
    names = ("max_tokens", "max_completion_tokens", "max_output_tokens")
    sent = [{k: r.body[k] for k in names if k in r.body} for r in server.requests]
    assert [type(v) for s in sent for v in s.values()] == [int, int]
    assert list(sent[0].values()) == [300]
    # Anthropic: thinking needs room beyond its budget, which is added to the limit
    assert list(sent[1].values()) == ([200 + 1024] if kind == "anthropic" else [200])
    provider.close()


def test_the_strict_fake_refuses_bad_limits_as_the_apis_do(server: FakeLLMServer) -> None:
    server.script(["ok"] * 6)
    oai = openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0)
    ant = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic_base_url, max_retries=0)
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError, match="Expected a value >= 1, but got 0"):
        oai.chat.completions.create(model="gpt-4.1-mini", messages=hi, max_completion_tokens=0)
    with pytest.raises(openai.BadRequestError, match="expected an integer, but got a string"):
        oai.chat.completions.create(
            model="gpt-4.1-mini",
            messages=hi,
            extra_body={"max_tokens": "100"},
        )
    with pytest.raises(openai.BadRequestError, match="Expected a value >= 16, but got 10"):
        oai.responses.create(model="gpt-4.1-mini", input="hi", max_output_tokens=10)
    with pytest.raises(anthropic.BadRequestError, match="greater than or equal to 1"):
        ant.messages.create(model="claude-sonnet-4-5", max_tokens=0, messages=hi)
    with pytest.raises(anthropic.BadRequestError, match="valid integer"):
        ant.messages.create(model="claude-sonnet-4-5", max_tokens=1.5, messages=hi)  # type: ignore[arg-type]
    assert oai.responses.create(model="gpt-4.1-mini", input="hi", max_output_tokens=16)
    oai.close()
    ant.close()
