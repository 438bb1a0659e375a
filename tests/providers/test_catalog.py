"""The model catalog: lookup, aliases, costs, tool support, unknown models."""

from __future__ import annotations

import uuid
import warnings

import pytest
from _provider_harness import KEY

from nbagent import ModelRequest, Usage
from nbagent.providers import (
    AnthropicProvider,
    ModelInfo,
    OpenAIProvider,
    UnknownModelWarning,
    cost_of,
    lookup_model,
    register_model,
)
from nbagent.providers._catalog import known_models
from nbagent.providers._registry import provider_for_model
from nbagent.testing import FakeLLMServer


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("GPT-4.1-mini", "gpt-4.1-mini"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4-0613", "gpt-4"),
        ("chatgpt-4o-latest", "chatgpt-4o"),
        ("o1-mini-2024-09-12", "o1-mini"),
        ("o4-mini", "o4-mini"),
        ("openai/gpt-5-mini", "gpt-5-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
    ],
)
def test_lookup_matches_names_aliases_and_dated_versions(name: str, canonical: str) -> None:
    info = lookup_model(name)
    assert info is not None and info.name == canonical


@pytest.mark.parametrize("name", ["llama3.1", "gpt-4x", "claude", "mistral-large", ""])
def test_unknown_models(name: str) -> None:
    assert lookup_model(name) is None
    assert cost_of(name, Usage(100, 100)) is None


def test_every_model_has_a_provider_and_sane_numbers() -> None:
    for m in known_models():
        assert m.provider in ("openai", "anthropic", "demo")
        assert m.context_window > 0
        assert m.input_price >= 0 and m.output_price >= 0
        if m.cached_input_price is not None:
            assert m.cached_input_price <= m.input_price
        if m.cache_write_price is not None:  # Anthropic: cache writes cost 1.25x input
            assert m.provider == "anthropic"
            assert m.cache_write_price == pytest.approx(m.input_price * 1.25)
        if m.provider != "demo":
            assert provider_for_model(m.name) == m.provider
    assert {m.name for m in known_models("anthropic")} >= {"claude-sonnet-4-5", "claude-haiku-4-5"}


def test_cost_counts_cached_input_at_the_cached_price() -> None:
    info = lookup_model("gpt-4.1-mini")
    assert info is not None
    assert (info.input_price, info.output_price, info.cached_input_price) == (0.40, 1.60, 0.10)
    # 1M input of which 400k cached, 100k output
    cost = cost_of("gpt-4.1-mini-2025-04-14", Usage(1_000_000, 100_000, 400_000))
    assert cost == pytest.approx(0.6 * 0.40 + 0.4 * 0.10 + 0.1 * 1.60)
    assert cost_of("claude-sonnet-4-5", Usage(2000, 1000)) == pytest.approx(0.006 + 0.015)
    assert cost_of("demo", Usage(10, 10)) == 0.0


def test_tool_support_flags() -> None:
    for name in ("o1-mini", "chatgpt-4o-latest", "o1-preview"):
        info = lookup_model(name)
        assert info is not None and info.supports_tools is False
    for name in ("gpt-4.1-mini", "gpt-5", "o3", "claude-sonnet-4-5", "claude-3-haiku"):
        info = lookup_model(name)
        assert info is not None and info.supports_tools is True


def test_register_model() -> None:
    name = f"my-finetune-{uuid.uuid4().hex[:6]}"
    register_model(ModelInfo(name, "openai", True, 32_000, 1.0, 2.0))
    info = lookup_model(name + "-2025-01-01")
    assert info is not None and info.context_window == 32_000
    assert cost_of(name, Usage(1_000_000, 0)) == pytest.approx(1.0)


def test_an_unknown_native_model_warns_once_and_still_works(server: FakeLLMServer) -> None:
    name = f"gpt-future-{uuid.uuid4().hex[:6]}"
    with pytest.warns(UnknownModelWarning, match=name):
        p = OpenAIProvider(
            name, base_url=server.openai_base_url, api_key=KEY, compatible=False, max_retries=0
        )
    server.script(["works"])
    assert p.complete(ModelRequest(())).text == "works"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        OpenAIProvider(name, base_url=server.openai_base_url, api_key=KEY, compatible=False).close()
    p.close()
    claude = f"claude-next-{uuid.uuid4().hex[:6]}"
    with pytest.warns(UnknownModelWarning):
        AnthropicProvider(claude, base_url=server.anthropic_base_url, api_key=KEY).close()


def test_local_models_do_not_warn(server: FakeLLMServer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        OpenAIProvider("qwen2.5-coder:7b", base_url=server.openai_base_url).close()
