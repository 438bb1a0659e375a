"""Configuration follows the SDKs' conventions; keys never show anywhere."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from _provider_harness import KEY, WEATHER, make_provider

import nbagent
from nbagent import AuthenticationError, ChatMessage, ModelRequest
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

USER = ChatMessage("user", "hi")


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in (
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "OPENAI_ADMIN_KEY",
        "OPENAI_CUSTOM_HEADERS",
        "ANTHROPIC_CUSTOM_HEADERS",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no credential profile on disk
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))


@pytest.fixture
def other() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def test_openai_env_vars_are_honoured(
    monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    server.script(["from the env-configured server"])
    with OpenAIProvider("gpt-4.1-mini", max_retries=0) as p:
        assert p.client.api_key == KEY
        assert p.base_url.rstrip("/") == server.openai_base_url
        assert p.complete(ModelRequest((USER,))).text == "from the env-configured server"
    assert server.last_request.headers["authorization"] == "REDACTED"  # a key was sent


def test_openai_arguments_override_env(
    monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer, other: FakeLLMServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-0000")
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    other.script(["from the argument server"])
    with OpenAIProvider(
        "gpt-4.1-mini", base_url=other.openai_base_url, api_key=KEY, max_retries=0
    ) as p:
        assert p.client.api_key == KEY
        assert p.complete(ModelRequest((USER,))).text == "from the argument server"
    assert server.requests == []


def test_anthropic_env_vars_are_honoured(
    monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    server.script(["from the env-configured server"])
    with AnthropicProvider("claude-sonnet-4-5", max_retries=0) as p:
        assert p.client.api_key == KEY
        assert p.complete(ModelRequest((USER,))).text == "from the env-configured server"


def test_anthropic_arguments_override_env(
    monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer, other: FakeLLMServer
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env-0000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    other.script(["from the argument server"])
    with AnthropicProvider(
        "claude-sonnet-4-5", base_url=other.anthropic_base_url, api_key=KEY, max_retries=0
    ) as p:
        assert p.client.api_key == KEY
        assert p.complete(ModelRequest((USER,))).text == "from the argument server"
    assert server.requests == []


def test_a_missing_key_is_a_clear_error() -> None:
    # made without one (a chat replaying recordings needs none); the first request says so
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        OpenAIProvider("gpt-4.1-mini").complete(ModelRequest((USER,)))
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider("claude-sonnet-4-5").complete(ModelRequest((USER,)))


def test_compatible_servers_need_no_key(server: FakeLLMServer) -> None:
    server.script(["local model says hi"])
    with OpenAIProvider("llama3.1", base_url=server.openai_base_url, max_retries=0) as p:
        assert p.compatible is True
        assert p.name == "openai-compatible"
        assert p.complete(ModelRequest((USER,))).text == "local model says hi"


def test_compatible_mode_is_inferred_from_the_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAIProvider("gpt-4.1-mini") as p:
        assert p.compatible is False and p.name == "openai" and p.api == "chat"
    with OpenAIProvider("gpt-4.1-mini", base_url="https://api.openai.com/v1") as p:
        assert p.compatible is False
    with OpenAIProvider("qwen3", base_url="http://localhost:11434/v1") as p:
        assert p.compatible is True
    with OpenAIProvider(
        "gpt-4.1-mini", base_url="https://gateway.example/v1", compatible=False
    ) as p:
        assert p.compatible is False
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    with OpenAIProvider("served-model") as p:
        assert p.compatible is True


def test_sdk_defaults_and_overrides(server: FakeLLMServer) -> None:
    with OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY) as p:
        assert p.client.max_retries == openai.DEFAULT_MAX_RETRIES
    with OpenAIProvider(
        "gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY, max_retries=0, timeout=3.0
    ) as p:
        assert (p.client.max_retries, p.client.timeout) == (0, 3.0)
    with AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=5
    ) as a:
        assert a.client.max_retries == 5


def test_a_client_passed_in_is_used_and_not_closed(server: FakeLLMServer) -> None:
    client = openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0)
    server.script(["via your client"])
    with OpenAIProvider("gpt-4.1-mini", client=client) as p:
        assert p.client is client
        assert p.complete(ModelRequest((USER,))).text == "via your client"
    assert not client.is_closed()
    client.close()


def test_extra_body_is_sent(server: FakeLLMServer) -> None:
    server.script(["ok"])
    with OpenAIProvider(
        "gpt-4.1-mini",
        base_url=server.openai_base_url,
        api_key=KEY,
        extra_body={"temperature": 0, "seed": 7},
    ) as p:
        p.complete(ModelRequest((USER,)))
        assert p.last_request is not None and p.last_request["temperature"] == 0
    assert server.last_request.body["seed"] == 7


def test_last_request_is_the_body(server: FakeLLMServer) -> None:
    server.script(["ok"])
    with AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY
    ) as p:
        assert p.last_request is None
        p.complete(ModelRequest((USER,), tools=(WEATHER,), tool_choice="required"))
        assert p.last_request == server.last_request.body


def test_chat_arguments_build_the_provider(server: FakeLLMServer) -> None:
    server.script(["openai here", "anthropic here"])
    chat = nbagent.Chat(model="gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
    assert isinstance(chat.provider, OpenAIProvider)
    assert chat.ask("hi").content == "openai here"  # type: ignore[union-attr]
    chat.provider.close()  # type: ignore[attr-defined]
    chat = nbagent.Chat(model="claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY)
    assert isinstance(chat.provider, AnthropicProvider)
    assert chat.ask("hi").content == "anthropic here"  # type: ignore[union-attr]
    chat.provider.close()  # type: ignore[attr-defined]


def test_chats_sharing_a_provider_keep_their_own_models(server: FakeLLMServer) -> None:
    server.script(["mini", "full", "mini again"])
    with OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY) as shared:
        first = nbagent.Chat(provider=shared)
        second = nbagent.Chat(provider=shared, model="gpt-4.1")
        assert shared.model == "gpt-4.1-mini"  # the caller's object is never changed
        assert (first.model, second.model) == ("gpt-4.1-mini", "gpt-4.1")
        first.ask("hi")
        assert server.last_request.body["model"] == "gpt-4.1-mini"
        second.ask("hi")
        assert server.last_request.body["model"] == "gpt-4.1"
        first.ask("and you?")
        assert server.last_request.body["model"] == "gpt-4.1-mini"
        assert nbagent.Chat(provider=shared, model="gpt-4.1-mini").provider is shared


def test_chat_picks_up_a_proxy_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    server.script(["through the gateway"])
    chat = nbagent.Chat()
    assert isinstance(chat.provider, OpenAIProvider)
    assert chat.ask("hi").content == "through the gateway"  # type: ignore[union-attr]
    chat.provider.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["openai", "openai-responses", "anthropic"])
def test_keys_never_appear_in_reprs_events_or_logs(server: FakeLLMServer, kind: str) -> None:
    if kind == "anthropic":
        provider: OpenAIProvider | AnthropicProvider = AnthropicProvider(
            "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY, max_retries=0
        )
    else:
        provider = OpenAIProvider(
            "gpt-4.1-mini",
            api="responses" if "responses" in kind else "chat",
            base_url=server.openai_base_url,
            api_key=KEY,
            max_retries=0,
        )

    @nbagent.tool
    def get_weather(city: str) -> str:
        """Weather.

        Args:
            city: City.
        """
        return "sunny"

    events: list[object] = []
    chat = nbagent.Chat(provider=provider, stream=True).with_tools(get_weather)
    chat.on(None, events.append)
    server.script([Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]), "Sunny."])
    chat.ask("Weather in Paris?")
    for text in (
        repr(provider),
        str(provider),
        repr(vars(provider)),
        repr(events),
        repr(chat),
        repr(chat.transcript),
        repr(provider.last_request),
    ):
        assert KEY not in text
    provider.close()


def test_import_does_not_import_the_sdks() -> None:
    code = (
        "import sys, nbagent, nbagent.providers; "
        "from nbagent.providers import OpenAIProvider, AnthropicProvider, DemoProvider, Provider; "
        "assert nbagent.OpenAIProvider is OpenAIProvider; "
        "print([m for m in ('openai', 'anthropic') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
def test_async_clients_follow_the_event_loop(server: FakeLLMServer, kind: str) -> None:
    provider = make_provider(kind, server)
    server.script(["a", "b", "c", "d"])

    async def two_requests() -> object:
        await provider.complete_async(ModelRequest((USER,)))
        client = provider._async()
        await provider.complete_async(ModelRequest((USER,)))
        assert provider._async() is client  # one client (and connection pool) per loop
        return client

    first = asyncio.run(two_requests())
    assert first.is_closed()  # type: ignore[attr-defined]  # closed as its loop shut down
    second = asyncio.run(two_requests())
    assert second is not first

    async def with_block() -> object:
        async with provider:
            await provider.complete_async(ModelRequest((USER,)))
            return provider._async()

    server.script(["e"])
    client = asyncio.run(with_block())
    assert client.is_closed()  # type: ignore[attr-defined]
