"""Model providers: the ``Provider`` protocol, the ``ModelRequest`` it takes, and its adapters.

``OpenAIProvider`` (Chat Completions or Responses, and OpenAI-compatible
servers), ``AnthropicProvider`` and the offline ``DemoProvider``. ``Output`` is
what ``ModelRequest.output`` holds when a chat asks for a structured answer
(its ``name``, ``schema``, ``strict_schema(dialect)``): a provider of your own
reads it there, and inherits ``CompleteWithToolsMixin`` to have Ragrails'
``complete_with_tools(messages=, system=, tools=)`` like the providers here. The SDK-backed
adapters are imported on first use, so ``import nbagent`` never imports
``openai`` or ``anthropic``; each SDK is imported when its provider is made.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._exports import publish as _publish
from .._exports import publish_one as _publish_one
from .._output import Output
from ._base import CompleteWithToolsMixin, ModelRequest, Provider, StreamDelta

# Re-exported as `x as x` and left out of __all__: this face's API for the core and
# nbagent.testing (the in-process providers' base; picking a provider), not for users.
from ._base import InProcessProvider as InProcessProvider
from ._registry import provider_for_model as provider_for_model
from ._registry import resolve_provider as resolve_provider
from ._registry import with_model as with_model

if TYPE_CHECKING:
    from ._anthropic import AnthropicProvider
    from ._catalog import ModelInfo, UnknownModelWarning, cost_of, lookup_model, register_model
    from ._demo import DemoProvider
    from ._openai import OpenAIProvider

_LAZY = {
    "AnthropicProvider": "._anthropic",
    "DemoProvider": "._demo",
    "ModelInfo": "._catalog",
    "OpenAIProvider": "._openai",
    "UnknownModelWarning": "._catalog",
    "cost_of": "._catalog",
    "lookup_model": "._catalog",
    "register_model": "._catalog",
}

__all__ = [
    "AnthropicProvider",
    "CompleteWithToolsMixin",
    "DemoProvider",
    "ModelInfo",
    "ModelRequest",
    "OpenAIProvider",
    "Output",
    "Provider",
    "StreamDelta",
    "UnknownModelWarning",
    "cost_of",
    "lookup_model",
    "register_model",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _publish_one(__name__, getattr(importlib.import_module(module, __name__), name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_publish(__name__, globals(), __all__)
