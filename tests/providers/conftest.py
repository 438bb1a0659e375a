"""Fixtures: every provider kind, streaming on and off, against one loopback fake server.

``harness`` is parametrised over the four wire dialects (OpenAI Chat
Completions, OpenAI Responses, Anthropic Messages, an OpenAI-compatible server
that repeats ids in its stream) and over streaming on/off, so every test that
uses it runs eight times. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _provider_harness import KINDS, Harness, make_provider

from nbagent.providers._sdk import SDKProvider
from nbagent.testing import FakeLLMServer


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture(
    params=[(k, s) for k in KINDS for s in (False, True)],
    ids=[f"{k}-{'stream' if s else 'json'}" for k in KINDS for s in (False, True)],
)
def harness(request: pytest.FixtureRequest, server: FakeLLMServer) -> Iterator[Harness]:
    kind, stream = request.param
    provider = make_provider(kind, server)
    try:
        yield Harness(kind, stream, server, provider)
    finally:
        provider.close()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def provider_factory(server: FakeLLMServer) -> Iterator[Callable[..., SDKProvider]]:
    made: list[SDKProvider] = []

    def factory(kind: str, **kwargs: Any) -> SDKProvider:
        p = make_provider(kind, server, **kwargs)
        made.append(p)
        return p

    yield factory
    for p in made:
        p.close()


@pytest.fixture
def make_harness(server: FakeLLMServer) -> Iterator[Callable[[str, bool], Harness]]:
    """Build a harness of one kind (for tests that only apply to one dialect)."""
    made: list[SDKProvider] = []

    def factory(kind: str, stream: bool) -> Harness:
        p = make_provider(kind, server)
        made.append(p)
        return Harness(kind, stream, server, p)

    yield factory
    for p in made:
        p.close()
