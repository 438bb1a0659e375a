"""Shared pieces of the reasoning tests: a validating fake server and providers on it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "testing"))
from test_fake_server import validate_payload

from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.providers._sdk import SDKProvider
from nbagent.testing import FakeLLMServer

KEY = "sk-test-SECRET-reasoning-0123456789"


def validate(api: str, kind: str, payload: dict[str, Any]) -> None:
    """The fake's payloads against the SDK types; Chat's ``reasoning_content`` is the
    compatible servers' extra field (DeepSeek, vLLM), which the openai SDK keeps as an extra."""
    if api == "chat" and kind in ("response", "event"):
        payload = _without_reasoning_content(payload)
    validate_payload(api, kind, payload)


def _without_reasoning_content(payload: dict[str, Any]) -> dict[str, Any]:
    choices = []
    for choice in payload.get("choices") or ():
        choice = dict(choice)
        for key in ("message", "delta"):
            if isinstance(choice.get(key), dict) and "reasoning_content" in choice[key]:
                part = dict(choice[key])
                part.pop("reasoning_content")
                choice[key] = part
        choices.append(choice)
    return {**payload, "choices": choices}


def server() -> FakeLLMServer:
    return FakeLLMServer(validator=validate)


def provider(kind: str, fake: FakeLLMServer, **kwargs: Any) -> SDKProvider:
    """``anthropic``, ``responses``, ``chat`` (OpenAI) or ``compatible`` (DeepSeek-like)."""
    kwargs.setdefault("max_retries", 0)
    if kind == "anthropic":
        return AnthropicProvider(
            kwargs.pop("model", "claude-sonnet-4-5"),
            base_url=fake.anthropic_base_url,
            api_key=KEY,
            **kwargs,
        )
    if kind == "compatible":
        return OpenAIProvider(
            kwargs.pop("model", "deepseek-reasoner"), base_url=fake.openai_base_url, **kwargs
        )
    return OpenAIProvider(
        kwargs.pop("model", "o4-mini"),
        api="responses" if kind == "responses" else "chat",
        base_url=fake.openai_base_url,
        api_key=KEY,
        compatible=False,
        **kwargs,
    )
