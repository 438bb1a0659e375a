"""Picking a provider: from a provider object, a name, a model name, or the environment.

``Chat()`` with nothing set uses the best provider whose API key is in the
environment (OpenAI, then Anthropic) and otherwise the offline demo model, and
says which once. SDK modules are imported only when their provider is chosen.
A provider object passed with another model is copied (:func:`with_model`),
never changed.
"""

from __future__ import annotations

import copy
import os
import threading
from typing import Any

from .._notice import notice
from ._base import Provider
from ._catalog import lookup_model

DEFAULT_MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-5", "demo": "demo"}
GEMINI_HINT = (
    "nbagent has no Gemini adapter; reach Gemini models through Google's OpenAI-compatible "
    "endpoint: Chat(model='gemini-2.5-flash', "
    "base_url='https://generativelanguage.googleapis.com/v1beta/openai/', api_key=...)"
)
_announced: set[str] = set()
_announce_lock = threading.Lock()


def provider_for_model(model: str) -> str | None:
    """The provider a model name belongs to: by its well-known prefixes, else the catalog."""
    m = model.lower()
    if m.startswith("demo"):
        return "demo"
    if m.startswith("claude"):
        return "anthropic"
    if m.startswith(("gpt-", "gpt4", "o1", "o3", "o4", "chatgpt", "text-", "codex")):
        return "openai"
    info = lookup_model(model)
    return info.provider if info is not None else None


def announce(message: str) -> None:
    """Say something once per process (e.g. which provider ``Chat()`` picked).

    An information line (:func:`nbagent._notice.notice`): small and neutral in a
    notebook, one line on stderr elsewhere.
    """
    from .._config import get_config

    with _announce_lock:
        if message in _announced or get_config().quiet:
            return
        _announced.add(message)
    notice(message)


def make_provider(name: str, model: str | None, **kwargs: Any) -> Provider:
    name = name.lower().replace("_", "-")
    if name == "demo":
        from ._demo import DemoProvider

        return DemoProvider(model or "demo")
    if name in ("openai", "openai-responses", "openai-chat", "openai-compatible", "compatible"):
        from ._openai import OpenAIProvider

        if name == "openai-responses":
            kwargs.setdefault("api", "responses")
        if name == "openai-chat":
            kwargs.setdefault("api", "chat")
        if name in ("openai-compatible", "compatible"):
            kwargs.setdefault("compatible", True)
        return OpenAIProvider(model or DEFAULT_MODELS["openai"], **kwargs)
    if name == "anthropic":
        from ._anthropic import AnthropicProvider

        return AnthropicProvider(model or DEFAULT_MODELS["anthropic"], **kwargs)
    if name in ("gemini", "google"):
        raise ValueError(f"unknown provider {name!r}: {GEMINI_HINT}")
    raise ValueError(
        f"unknown provider {name!r}; use 'openai', 'openai-responses', 'openai-chat', "
        "'openai-compatible', 'anthropic', 'demo', or pass a provider object"
    )


def with_model(provider: Provider, model: str) -> Provider:
    """``provider`` answering as ``model``, without changing the object passed in.

    The same object when it already serves ``model``; otherwise a shallow copy
    with its ``model`` set. The copy shares the original's SDK clients and wire
    caches (and a scripted provider's script), so two chats can share one
    provider object, each with its own model, without changing each other's.
    """
    if provider.model == model:
        return provider
    other = copy.copy(provider)
    other.model = model
    return other


def resolve_provider(
    model: str | None = None,
    provider: Provider | str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
) -> Provider:
    """The provider a chat talks to (see the module docstring)."""
    extra: dict[str, Any] = {}
    if base_url is not None:
        extra["base_url"] = base_url
    if api_key is not None:
        extra["api_key"] = api_key
    if provider is not None and not isinstance(provider, str):
        return provider if model is None else with_model(provider, model)
    if isinstance(provider, str):
        return make_provider(provider, model, **extra)
    if model is not None:
        name = provider_for_model(model)
        if name is None:
            if base_url is not None or os.environ.get("OPENAI_BASE_URL"):
                name = "openai-compatible"
            elif model.lower().startswith("gemini"):
                raise ValueError(
                    f"cannot tell which provider serves model {model!r}: {GEMINI_HINT}"
                )
            else:
                raise ValueError(
                    f"cannot tell which provider serves model {model!r}; pass "
                    "provider='openai' | 'anthropic' | 'openai-compatible' (with base_url=)"
                )
        return make_provider(name, model, **extra)
    if base_url is not None:
        return make_provider("openai-compatible", None, **extra)
    if api_key is not None:
        return make_provider("openai", None, **extra)
    if os.environ.get("OPENAI_API_KEY"):
        announce(f"using OpenAI ({DEFAULT_MODELS['openai']}) from OPENAI_API_KEY")
        return make_provider("openai", None)
    if os.environ.get("ANTHROPIC_API_KEY"):
        announce(f"using Anthropic ({DEFAULT_MODELS['anthropic']}) from ANTHROPIC_API_KEY")
        return make_provider("anthropic", None)
    announce(
        "no OPENAI_API_KEY or ANTHROPIC_API_KEY set; using the offline demo model "
        "(deterministic, no network)"
    )
    return make_provider("demo", None)
