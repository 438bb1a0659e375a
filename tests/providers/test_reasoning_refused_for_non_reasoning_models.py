"""``reasoning=`` for an OpenAI model known not to reason fails before any request.

``Chat(model="gpt-4.1-mini", reasoning="low")`` was accepted and every request sent
``reasoning_effort`` (``reasoning.effort`` on Responses), which OpenAI answers for
non-reasoning models with a 400 ``unsupported_parameter``: the chat failed on its first
question instead of where the setting was made. A model the catalog knows as OpenAI's and
not a reasoning model is now refused with a ``ValueError``; reasoning models, models the
catalog does not know and OpenAI-compatible servers are left as they were.
"""

from __future__ import annotations

import warnings

import pytest

from nbagent import Chat, ChatMessage
from nbagent.providers import OpenAIProvider, UnknownModelWarning
from nbagent.testing import FakeLLMServer, Turn

USER = ChatMessage("user", "Think about it.")
PLAIN = ["gpt-4.1-mini", "gpt-4o", "gpt-4o-2024-08-06", "openai/gpt-4.1", "gpt-5-chat-latest"]


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("model", PLAIN)
def test_a_known_non_reasoning_model_is_refused_before_sending(model: str, api: str) -> None:
    with FakeLLMServer([Turn(text="ok")]) as fake:
        provider = OpenAIProvider(
            model, api=api, base_url=fake.openai_base_url, api_key="sk-x", compatible=False
        )
        with pytest.raises(ValueError, match="not a reasoning model"):
            Chat(provider=provider, reasoning="low", display=False)
        with pytest.raises(ValueError, match="not a reasoning model"):
            provider.complete_with_tools(messages=[USER], reasoning="high")
        with pytest.raises(ValueError, match="not a reasoning model"):
            provider.preview_request(messages=[USER], reasoning="medium")
        assert fake.requests == []
        assert Chat(provider=provider, display=False).ask("hi").content == "ok"  # unset: fine
        provider.close()


@pytest.mark.parametrize("model", ["o4-mini", "o3", "gpt-5-mini", "gpt-5"])
def test_reasoning_models_still_send_it(model: str) -> None:
    provider = OpenAIProvider(model, api_key="sk-x")
    Chat(provider=provider, reasoning="low", display=False)
    assert provider.preview_request(messages=[USER], reasoning="low")["reasoning_effort"] == "low"
    provider.close()


def test_unknown_models_and_compatible_servers_are_left_alone() -> None:
    """The catalog does not know them, or a gateway may serve a reasoning model by that name."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownModelWarning)
        unknown = OpenAIProvider("gpt-9-preview", api_key="sk-x")
    gateway = OpenAIProvider("gpt-4.1-mini", base_url="http://127.0.0.1:9/v1")
    for provider in (unknown, gateway):
        assert provider.preview_request(messages=[USER], reasoning="low")["reasoning_effort"]
        provider.close()


def test_a_registered_model_is_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registering a model (what the unknown-model warning asks) made nbagent judge it by
    its name: a new OpenAI reasoning model registered for its prices was refused reasoning.
    Only the catalog nbagent ships is judged."""
    from nbagent.providers import ModelInfo, _catalog, register_model

    monkeypatch.setattr(_catalog, "_registry", dict(_catalog._registry))
    monkeypatch.setattr(_catalog, "_cache", {})
    register_model(ModelInfo("gpt-6", "openai", True, 400_000, 1.0, 8.0))
    provider = OpenAIProvider("gpt-6", api_key="sk-x")
    Chat(provider=provider, reasoning="high", display=False)
    assert provider.preview_request(messages=[USER], reasoning="high")["reasoning_effort"]
    provider.close()
