"""Providers that would make the same SDK client share it (``providers/_clients.py``).

``Chat(model=...)`` made a provider with an SDK client of its own: about 20 ms of CPU
(an SSL context, an HTTP pool) and a socket held as long as the chat lived, and an async
client per event loop the same again. A batch whose ``make_chat`` named a model spent
20 times the CPU of one sharing a provider; a notebook keeping a few hundred chats held
a few hundred sockets.
"""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest

from nbagent import Chat
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.testing import FakeLLMServer

KEY = "sk-test-shared-0000000000000"


@pytest.fixture
def server() -> FakeLLMServer:
    with FakeLLMServer(["Hello."], cycle=True) as s:
        yield s  # type: ignore[misc]


def _openai(server: FakeLLMServer, **kw: object) -> OpenAIProvider:
    options: dict[str, object] = {"api_key": KEY, **kw}
    return OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, **options)  # type: ignore[arg-type]


def test_the_same_key_and_options_share_one_client(server: FakeLLMServer) -> None:
    a, b = _openai(server), _openai(server)
    assert a.client is b.client
    assert _openai(server, api_key=KEY + "x").client is not a.client  # another key
    assert _openai(server, max_retries=7).client is not a.client  # other options
    own = _openai(server, http_client=httpx.Client())  # an object: compared by identity
    assert own.client is not a.client and own.client is not _openai(server).client
    c = AnthropicProvider("claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY)
    d = AnthropicProvider("claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY)
    assert c.client is d.client


def test_an_environment_variable_set_later_makes_a_new_client(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _openai(server)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-set-in-a-later-cell")
    after = _openai(server)
    assert after.client is not before.client
    assert after.client.organization == "org-set-in-a-later-cell"


def test_closing_one_provider_leaves_the_others_working(server: FakeLLMServer) -> None:
    a, b = _openai(server, timeout=31.0), _openai(server, timeout=31.0)
    client = a.client
    a.close()
    a.close()  # idempotent: one lease, let go once
    assert not client.is_closed()
    assert Chat(provider=b).ask("hi").content == "Hello."
    b.close()
    assert client.is_closed()  # the last one closed it
    c = _openai(server, timeout=31.0)
    assert c.client is not client and Chat(provider=c).ask("hi").content == "Hello."


def test_a_client_passed_in_is_never_closed(server: FakeLLMServer) -> None:
    import openai

    mine = openai.OpenAI(api_key=KEY, base_url=server.openai_base_url)
    provider = OpenAIProvider("gpt-4.1-mini", client=mine)
    provider.close()
    assert not mine.is_closed()
    mine.close()


def _sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return n


def test_chats_naming_a_model_hold_one_pool_between_them(server: FakeLLMServer) -> None:
    before = _sockets()
    chats = []
    for _ in range(100):
        chat = Chat(
            model="gpt-4.1-mini",
            provider="openai-compatible",
            base_url=server.openai_base_url,
            api_key=KEY,
        )
        assert chat.ask("hi").content == "Hello."
        chats.append(chat)  # kept, as a notebook keeps them
    # the client's side and the fake server's side of its few pooled connections: was 200
    assert _sockets() - before <= 10


def test_async_chats_on_one_loop_share_its_client(server: FakeLLMServer) -> None:
    async def main() -> int:
        chats = [Chat(provider=_openai(server, max_retries=3)) for _ in range(5)]  # all alive
        for chat in chats:
            assert (await chat.ask_async("hi")).content == "Hello."
        return sum(t.get_name() == "nbagent-client-keeper" for t in asyncio.all_tasks())

    assert asyncio.run(main()) == 1  # one async client for the five providers
