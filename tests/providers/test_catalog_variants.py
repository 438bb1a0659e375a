"""A premium variant is not its cheaper base model: o3-pro is not priced as o3. Only a date,
-latest or a listed snapshot is stripped; anything else is unpriced, and said so."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from _provider_harness import KEY

from nbagent import Chat, Usage, tool
from nbagent.providers import OpenAIProvider, UnknownModelWarning, cost_of, lookup_model
from nbagent.testing import FakeLLMServer, ScriptedProvider, call_tools, reply


@pytest.mark.parametrize(
    ("name", "dollars_in", "dollars_out"),
    [
        ("o3-pro", 20.0, 80.0),
        ("o3-pro-2025-06-10", 20.0, 80.0),
        ("o1-pro", 150.0, 600.0),
        ("gpt-5-pro", 15.0, 120.0),
        ("gpt-4o-2024-05-13", 5.0, 15.0),  # the first gpt-4o, priced above today's
        ("gpt-4-1106-preview", 10.0, 30.0),  # GPT-4 Turbo, not GPT-4
        ("o3-2025-04-16", 2.0, 8.0),  # a date is harmless
        ("gpt-4-0613", 30.0, 60.0),  # a listed snapshot too
    ],
)
def test_a_variant_is_priced_as_published(name: str, dollars_in: float, dollars_out: float) -> None:
    assert cost_of(name, Usage(1_000_000, 0)) == pytest.approx(dollars_in)
    assert cost_of(name, Usage(0, 1_000_000)) == pytest.approx(dollars_out)


@pytest.mark.parametrize(
    "name",
    [
        "o3-deep-research",
        "o4-mini-deep-research-2025-06-26",
        "gpt-4-32k",
        "gpt-4o-realtime-preview-2024-12-17",
        "gpt-4o-audio-preview",
        "gpt-4o-mini-search-preview",
        "gpt-3.5-turbo-instruct",
        "gpt-3.5-turbo-16k",
        "ft:gpt-4o-mini-2024-07-18:acme::abc123",  # a fine-tune is billed above its base
        "gpt-4.1-mini-ft-x",
        "gpt-4-0125",  # an unlisted snapshot
    ],
)
def test_a_name_that_only_starts_like_a_known_model_is_unpriced(name: str) -> None:
    assert lookup_model(name) is None
    assert cost_of(name, Usage(1_000_000, 1_000_000)) is None


def test_the_openai_provider_warns_that_a_variant_has_no_price() -> None:
    with FakeLLMServer() as server, pytest.warns(UnknownModelWarning, match="o3-deep-research"):
        OpenAIProvider(
            "o3-deep-research", base_url=server.openai_base_url, api_key=KEY, compatible=False
        ).close()


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


def test_a_cost_budget_on_an_unpriced_model_warns_once_per_chat() -> None:
    def on(response: object) -> object:
        return dataclasses.replace(response, model="gpt-4-32k")  # type: ignore[type-var]

    script = [on(call_tools(("weather", {"city": c}))) for c in "AB"] + [on(reply("done"))]
    chat = Chat(provider=ScriptedProvider(script), max_cost_usd=0.01, display=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        chat.with_tools(weather).ask("go")
    assert [w.category for w in seen] == [UnknownModelWarning]  # once, for three requests
    assert "no price for 'gpt-4-32k', so max_cost_usd=0.01 cannot count" in str(seen[0].message)
    assert chat.status == "complete" and chat.cost_usd is None


def test_no_budget_no_warning() -> None:
    chat = Chat(provider=ScriptedProvider([reply("hi")]), display=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chat.ask("hello")
