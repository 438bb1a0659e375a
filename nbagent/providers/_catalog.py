"""The model catalog: known models, their provider, tool support, context window, prices.

Prices are US dollars per million tokens (standard tier, as published by the
providers in 2025; check their pricing pages for today's numbers). They are
used to estimate ``cost_usd`` on model-request events; an unknown model simply
has no cost.

Names are matched case-insensitively, exactly first, then with a date or
``-latest`` suffix removed (``gpt-4.1-mini-2025-04-14``,
``claude-sonnet-4-5-20250929``, ``claude-3-5-haiku-latest``), then as a known
snapshot or alias of a model (``gpt-4-0613`` is ``gpt-4``, ``claude-opus-4-0`` is
``claude-opus-4``). Nothing else is matched: a
name that only starts with a registered one is a different model, usually with
its own (higher) price (``o3-pro`` is not ``o3``, ``gpt-4-32k`` not ``gpt-4``;
``-realtime``, ``-audio``, ``-search``, ``-deep-research``, ``-instruct``
variants; a fine-tune ``ft:...`` is billed above its base), so it is unpriced,
and its provider warns once (:class:`UnknownModelWarning`) until it is added
with :func:`register_model`. A dated name priced differently from its model is
registered itself (``gpt-4o-2024-05-13``). A ``provider/`` prefix
(``openai/gpt-4.1``) is ignored.
"""

from __future__ import annotations

import re
import threading
import warnings
from dataclasses import dataclass

from .._notice import user_stacklevel
from .._types import Usage


class UnknownModelWarning(UserWarning):
    """A model the registry does not know: it is used as given, with no cost estimate."""


@dataclass(frozen=True)
class ModelInfo:
    """What nbagent knows about a model.

    Attributes:
        name: Canonical model name.
        provider: ``"openai"``, ``"anthropic"`` or ``"demo"``.
        supports_tools: Whether the model accepts tool definitions.
        context_window: Input context size in tokens.
        input_price: Dollars per million input tokens (uncached).
        output_price: Dollars per million output tokens.
        cached_input_price: Dollars per million cached input tokens (cache reads;
            ``None``: the input price).
        cache_write_price: Dollars per million input tokens written to the
            prompt cache (Anthropic's 5-minute cache writes: 1.25x the input
            price; ``None``: the input price).
    """

    name: str
    provider: str
    supports_tools: bool
    context_window: int
    input_price: float
    output_price: float
    cached_input_price: float | None = None
    cache_write_price: float | None = None

    def cost(self, usage: Usage) -> float:
        """Dollars for one request's usage.

        Cache reads at the cached price, cache writes at the write price, the
        rest of the input at the input price (``input_tokens`` includes both).
        """
        cached = min(usage.cached_tokens, usage.input_tokens)
        written = min(usage.cache_write_tokens, usage.input_tokens - cached)
        cached_price = (
            self.input_price if self.cached_input_price is None else self.cached_input_price
        )
        write_price = self.input_price if self.cache_write_price is None else self.cache_write_price
        dollars = (
            (usage.input_tokens - cached - written) * self.input_price
            + cached * cached_price
            + written * write_price
            + usage.output_tokens * self.output_price
        )
        return dollars / 1_000_000


def _m(
    name: str,
    provider: str,
    context: int,
    price_in: float,
    price_out: float,
    price_cached: float | None,
    tools: bool = True,
) -> ModelInfo:
    # Anthropic bills 5-minute cache writes at 1.25x the input price; OpenAI's
    # automatic caching has no write surcharge.
    write = round(price_in * 1.25, 6) if provider == "anthropic" else None
    return ModelInfo(name, provider, tools, context, price_in, price_out, price_cached, write)


_BUILTIN: tuple[ModelInfo, ...] = (
    # OpenAI
    _m("gpt-5", "openai", 400_000, 1.25, 10.00, 0.125),
    _m("gpt-5-mini", "openai", 400_000, 0.25, 2.00, 0.025),
    _m("gpt-5-nano", "openai", 400_000, 0.05, 0.40, 0.005),
    _m("gpt-5-chat-latest", "openai", 128_000, 1.25, 10.00, 0.125, tools=False),
    _m("gpt-4.1", "openai", 1_047_576, 2.00, 8.00, 0.50),
    _m("gpt-4.1-mini", "openai", 1_047_576, 0.40, 1.60, 0.10),
    _m("gpt-4.1-nano", "openai", 1_047_576, 0.10, 0.40, 0.025),
    _m("gpt-4o", "openai", 128_000, 2.50, 10.00, 1.25),
    _m("gpt-4o-mini", "openai", 128_000, 0.15, 0.60, 0.075),
    _m("chatgpt-4o", "openai", 128_000, 5.00, 15.00, None, tools=False),
    _m("gpt-4-turbo", "openai", 128_000, 10.00, 30.00, None),
    _m("gpt-4", "openai", 8_192, 30.00, 60.00, None),
    _m("gpt-3.5-turbo", "openai", 16_385, 0.50, 1.50, None),
    _m("o4-mini", "openai", 200_000, 1.10, 4.40, 0.275),
    _m("o3", "openai", 200_000, 2.00, 8.00, 0.50),
    _m("o3-mini", "openai", 200_000, 1.10, 4.40, 0.55),
    _m("o1", "openai", 200_000, 15.00, 60.00, 7.50),
    _m("o1-mini", "openai", 128_000, 1.10, 4.40, 0.55, tools=False),
    _m("o1-preview", "openai", 128_000, 15.00, 60.00, 7.50, tools=False),
    # premium variants, priced as published (no cache discount)
    _m("o3-pro", "openai", 200_000, 20.00, 80.00, None),
    _m("o1-pro", "openai", 200_000, 150.00, 600.00, None),
    _m("gpt-5-pro", "openai", 400_000, 15.00, 120.00, None),
    # a dated gpt-4o priced above gpt-4o; the GPT-4 Turbo previews at GPT-4 Turbo's price
    _m("gpt-4o-2024-05-13", "openai", 128_000, 5.00, 15.00, None),
    _m("gpt-4-turbo-preview", "openai", 128_000, 10.00, 30.00, None),
    _m("gpt-4-0125-preview", "openai", 128_000, 10.00, 30.00, None),
    _m("gpt-4-1106-preview", "openai", 128_000, 10.00, 30.00, None),
    # Anthropic (cache reads 0.1x, cache writes 1.25x the input price)
    _m("claude-opus-4-5", "anthropic", 200_000, 5.00, 25.00, 0.50),
    _m("claude-opus-4-1", "anthropic", 200_000, 15.00, 75.00, 1.50),
    _m("claude-opus-4", "anthropic", 200_000, 15.00, 75.00, 1.50),
    _m("claude-sonnet-4-5", "anthropic", 200_000, 3.00, 15.00, 0.30),
    _m("claude-sonnet-4", "anthropic", 200_000, 3.00, 15.00, 0.30),
    _m("claude-haiku-4-5", "anthropic", 200_000, 1.00, 5.00, 0.10),
    _m("claude-3-7-sonnet", "anthropic", 200_000, 3.00, 15.00, 0.30),
    _m("claude-3-5-sonnet", "anthropic", 200_000, 3.00, 15.00, 0.30),
    _m("claude-3-5-haiku", "anthropic", 200_000, 0.80, 4.00, 0.08),
    _m("claude-3-opus", "anthropic", 200_000, 15.00, 75.00, 1.50),
    _m("claude-3-haiku", "anthropic", 200_000, 0.25, 1.25, 0.03),
    # The offline demo model costs nothing.
    _m("demo", "demo", 1_000_000, 0.0, 0.0, 0.0),
)

BUILTIN_MODELS = frozenset(_BUILTIN)
"""The catalog nbagent ships (a model's entry as shipped: a registered one is not in it)."""
_registry: dict[str, ModelInfo] = {m.name: m for m in _BUILTIN}
_lock = threading.Lock()
_cache: dict[str, ModelInfo | None] = {}
_warned: set[str] = set()
_SUFFIX = re.compile(r"(?:-\d{4}-\d{2}-\d{2}|-\d{8}|-latest|-preview-\d{2}-\d{2})$")
_SNAPSHOTS = {
    "gpt-4-0613": "gpt-4",
    "gpt-4-0314": "gpt-4",
    "gpt-3.5-turbo-0125": "gpt-3.5-turbo",
    "claude-opus-4-0": "claude-opus-4",
    "claude-sonnet-4-0": "claude-sonnet-4",
}
"""Snapshots and aliases billed as their model (a date suffix is removed without being
listed)."""


def register_model(info: ModelInfo) -> None:
    """Add or replace a model (e.g. a fine-tune, or a local model's context window)."""
    with _lock:
        _registry[info.name.lower()] = info
        _cache.clear()


def known_models(provider: str | None = None) -> list[ModelInfo]:
    """Every registered model, optionally of one provider."""
    return [m for m in _registry.values() if provider is None or m.provider == provider]


def lookup_model(name: str) -> ModelInfo | None:
    """The registry entry for ``name`` (see the module docstring for matching), or None."""
    try:
        return _cache[name]
    except KeyError:
        pass
    info = _lookup(name)
    with _lock:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[name] = info
    return info


def _lookup(name: str) -> ModelInfo | None:
    key = name.strip().lower()
    if "/" in key:
        key = key.rsplit("/", 1)[1]
    if key in _registry:
        return _registry[key]
    bare = _SUFFIX.sub("", key)
    if bare in _registry:
        return _registry[bare]
    snapshot_of = _SNAPSHOTS.get(bare)
    return None if snapshot_of is None else _registry.get(snapshot_of)


def warn_if_unknown(model: str, provider: str) -> None:
    """Warn (once per name) that ``model`` is unknown, so costs can't be estimated."""
    if lookup_model(model) is not None:
        return
    with _lock:
        if model in _warned:
            return
        _warned.add(model)
    warnings.warn(
        f"nbagent does not know the {provider} model {model!r}: it is used as given, with no "
        "cost estimate (add it with nbagent.providers.register_model(ModelInfo(...)))",
        UnknownModelWarning,
        stacklevel=user_stacklevel(3),
    )


def cost_of(model: str, usage: Usage) -> float | None:
    """Estimated dollars for ``usage`` on ``model``; None when the model is unknown."""
    info = lookup_model(model) if model else None
    return None if info is None else info.cost(usage)


__all__ = [
    "ModelInfo",
    "UnknownModelWarning",
    "cost_of",
    "known_models",
    "lookup_model",
    "register_model",
    "warn_if_unknown",
]
