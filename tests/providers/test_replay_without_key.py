"""A chat replaying committed recordings needs no API key.

``Chat("gpt-4.1-mini", replay="only", recordings=...)`` on a CI runner or a colleague's
machine, with no ``OPENAI_API_KEY``, raised ``AuthenticationError`` while the chat was
being made, though with ``replay="only"`` nothing is ever sent. A provider made with no
credentials is made all the same now; the first request it would send raises the
``AuthenticationError`` instead, before anything is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbagent import AuthenticationError, Chat, ChatMessage
from nbagent._replay import PROCESS
from nbagent.providers import AnthropicProvider, ModelRequest, OpenAIProvider
from nbagent.testing import FakeLLMServer, Turn

USER = ChatMessage(role="user", content="hello")
ENV = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")
ENV += ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    PROCESS.clear()
    yield
    PROCESS.clear()


def _record(model: str, folder: Path) -> None:
    """Record one answer for ``model`` as its own provider would (keyed, OpenAI's or
    Anthropic's identity), against the fake server."""
    with FakeLLMServer([Turn(text="recorded answer")]) as server:
        if model.startswith("claude"):
            provider: object = AnthropicProvider(
                model, base_url=server.anthropic_base_url, api_key="sk-ant-x", max_retries=0
            )
        else:
            provider = OpenAIProvider(
                model,
                base_url=server.openai_base_url,
                api_key="sk-x",
                compatible=False,
                max_retries=0,
            )
        chat = Chat(provider=provider, replay="auto", recordings=folder, display=False)  # type: ignore[arg-type]
        chat.ask("hello")
        assert len(server.requests) == 1
    PROCESS.clear()  # what the colleague has: the folder only


@pytest.mark.parametrize("model", ["gpt-4.1-mini", "claude-sonnet-4-5"])
def test_a_committed_recording_replays_with_no_key(model: str, tmp_path: Path) -> None:
    _record(model, tmp_path)
    chat = Chat(model, replay="only", recordings=tmp_path, display=False)
    chat.ask("hello")
    assert chat.last_assistant_message.content == "recorded answer"  # type: ignore[union-attr]
    assert list(chat.steps["replayed"]) == [True]


@pytest.mark.parametrize("model", ["gpt-4.1-mini", "claude-sonnet-4-5"])
def test_a_live_request_with_no_key_is_refused_before_sending(model: str) -> None:
    env = "ANTHROPIC_API_KEY" if model.startswith("claude") else "OPENAI_API_KEY"
    chat = Chat(model, display=False)  # made: nothing needs the key yet
    with pytest.raises(
        AuthenticationError,
        match=f"no API key.*{env}.*make the chat .or its provider. again.*nothing was sent",
    ):
        chat.ask("hello")


def test_the_provider_refuses_every_request_it_would_send(tmp_path: Path) -> None:
    """Sync, async, and the same client shared by a second keyless provider: each raises,
    none sends the placeholder the client was made with."""
    with FakeLLMServer([Turn(text="never")], cycle=True) as server:
        made = [
            OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, compatible=False),
            OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, compatible=False),
            AnthropicProvider("claude-sonnet-4-5", base_url=server.anthropic_base_url),
        ]
        for provider in made:
            request = ModelRequest((USER,))
            with pytest.raises(AuthenticationError, match="no API key"):
                provider.complete(request)
            with pytest.raises(AuthenticationError, match="no API key"):
                asyncio.run(provider.complete_async(request))
            assert provider.preview_request(request)["messages"]  # shows, sends nothing
            assert "nbagent-no-api-key" not in repr(provider)
            provider.close()
        assert server.requests == []


def test_a_key_set_later_is_used_by_a_provider_made_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The keyless client is not handed to a provider made once a key is set."""
    with FakeLLMServer([Turn(text="with a key")]) as server:
        keyless = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, compatible=False)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-later")
        keyed = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, compatible=False)
        assert keyed.complete(ModelRequest((USER,))).text == "with a key"
        assert keyed.client.api_key == "sk-later"
        assert len(server.requests) == 1
        with pytest.raises(AuthenticationError):
            keyless.complete(ModelRequest((USER,)))
        keyless.close()
        keyed.close()
