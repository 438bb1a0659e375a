"""A provider's own token limit and ``extra_body`` are part of a request's identity.

A cut-off answer recorded at ``max_tokens=10`` was replayed after raising the limit
to 4000 (and a structured answer's error then said it was cut off at 4000); a
temperature changed in ``extra_body`` replayed the old sample. Left at their
defaults they change nothing: recordings made before they counted still answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat
from nbagent._recording import fingerprint, provider_settings, request_key
from nbagent._replay import PROCESS
from nbagent._types import ChatMessage
from nbagent.providers import AnthropicProvider, ModelRequest, OpenAIProvider
from nbagent.testing import FakeLLMServer, Turn


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


def _limited(request: Any) -> Turn:
    body = request.body
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit is not None and limit < 50:
        return Turn(text="The answer is", stop="max_tokens")
    return Turn(text=f"42 (temperature={body.get('temperature')})")


def _openai(server: FakeLLMServer, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-x", max_retries=0, **kw
    )


def _ask(provider: Any, folder: Path, **kw: Any) -> Chat:
    chat = Chat(provider=provider, replay="auto", recordings=folder, display=False, **kw)
    chat.ask("question")
    return chat


def test_raising_the_providers_limit_asks_the_model_again(tmp_path: Path) -> None:
    with FakeLLMServer(handler=_limited) as server:
        cut = _ask(_openai(server, max_tokens=10), tmp_path)
        assert cut.last_assistant_message.content == "The answer is"  # type: ignore[union-attr]
        raised = _ask(_openai(server, max_tokens=4000), tmp_path)
        assert list(raised.steps["replayed"]) == [False]
        assert raised.last_assistant_message.content.startswith("42")  # type: ignore[union-attr]
        again = _ask(_openai(server, max_tokens=4000), tmp_path)  # the same limit: replayed
        assert list(again.steps["replayed"]) == [True]
        assert len(server.requests) == 2


def test_a_changed_extra_body_asks_the_model_again(tmp_path: Path) -> None:
    with FakeLLMServer(handler=_limited) as server:
        _ask(_openai(server, extra_body={"temperature": 0}), tmp_path)
        hot = _ask(_openai(server, extra_body={"temperature": 1.5}), tmp_path)
        assert list(hot.steps["replayed"]) == [False]
        assert "1.5" in hot.last_assistant_message.content  # type: ignore[union-attr]
        same = _ask(_openai(server, extra_body={"temperature": 0}), tmp_path)
        assert list(same.steps["replayed"]) == [True]
        assert len(server.requests) == 2


# The keys of these requests before the provider's settings counted (made by the code
# before this change): a recording made with the defaults still answers.
_OLD_KEYS = {
    "OpenAIProvider": "dd67945f92becbce8eecc1e1e07bf3dd7b69939ceaae79e2dc9e67bbd204f0fe",
    "AnthropicProvider": "a3d8519bffea612049f774bc16a459e279d816289ddc230671e3884aa88bd805",
}


def test_a_provider_left_at_its_defaults_keeps_the_old_keys() -> None:
    with FakeLLMServer(handler=lambda request: Turn(text="hi there")) as server:
        providers = (
            _openai(server),
            AnthropicProvider(
                "claude-sonnet-4-5",
                base_url=server.anthropic_base_url,
                api_key="sk-x",
                max_retries=0,
            ),
        )
        for provider in providers:
            chat = Chat(provider=provider, replay="off", display=False, system="be brief")
            chat.ask("hello")
            assert chat._replayer.keys == {1: _OLD_KEYS[type(provider).__name__]}


_REQUEST = ModelRequest(messages=[ChatMessage("user", "hi")])


def _key(provider: Any, request: ModelRequest = _REQUEST) -> str:
    settings_ = provider_settings(provider)
    return request_key(fingerprint(provider.name, provider.model, request, None, settings_))


_limits = st.one_of(st.none(), st.integers(1, 64))
_bodies = st.dictionaries(st.sampled_from(["temperature", "seed", "top_p"]), st.integers(0, 3))


@settings(max_examples=60, deadline=None)
@given(a=st.tuples(_limits, _bodies), b=st.tuples(_limits, _bodies), asked=_limits)
def test_two_providers_share_keys_exactly_when_they_send_the_same(
    a: tuple[int | None, dict[str, int]],
    b: tuple[int | None, dict[str, int]],
    asked: int | None,
) -> None:
    request = ModelRequest(messages=[ChatMessage("user", "hi")], max_tokens=asked)
    pa = OpenAIProvider("gpt-4.1-mini", api_key="sk-x", max_tokens=a[0], extra_body=a[1])
    pb = OpenAIProvider("gpt-4.1-mini", api_key="sk-x", max_tokens=b[0], extra_body=b[1])
    sent_a = (asked if asked is not None else a[0], a[1])  # a request's own limit wins
    sent_b = (asked if asked is not None else b[0], b[1])
    assert (_key(pa, request) == _key(pb, request)) == (sent_a == sent_b)
