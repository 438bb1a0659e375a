"""An SDK provider's async clients are shared or closed, never left behind: providers made
with the same key and options share one client per event loop (closed when the loop shuts
down, quietly); a provider with a client of its own (an option compared by identity, like
a custom ``http_client``) that is dropped while its loop runs (a batch's chat, once its
row is done) closes it on that loop, instead of leaving a pending task for the garbage
collector to destroy."""

from __future__ import annotations

import asyncio
import gc
import logging

import httpx
import httpx2
import pytest

from nbagent import Chat
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.testing import FakeLLMServer

KEY = "sk-test-lifetime-000000000000"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("own", [False, True], ids=["shared", "own"])
def test_a_provider_dropped_while_its_loop_runs_closes_its_client_there(
    kind: str, own: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    with FakeLLMServer(["one", "two"], cycle=True) as server:

        async def main() -> int:
            for _ in range(3):  # chats made and dropped one after another, the loop running
                client = (httpx2 if kind == "anthropic" else httpx).Client()  # the SDK's httpx
                extra = {"http_client": client} if own else {}  # an object: not shared
                if kind == "anthropic":
                    provider: object = AnthropicProvider(
                        "claude-sonnet-4-5",
                        base_url=server.anthropic_base_url,
                        api_key=KEY,
                        **extra,
                    )
                else:
                    provider = OpenAIProvider(
                        "gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY, **extra
                    )
                chat = Chat(provider=provider)
                assert (await chat.ask_async("hello")).content in ("one", "two")
                del chat, provider
                gc.collect()
                for _ in range(50):  # the loop turns the client's closing takes
                    await asyncio.sleep(0)
            return len([t for t in asyncio.all_tasks() if t.get_name() == "nbagent-client-keeper"])

        keepers = asyncio.run(main())
    # one client for the three chats, closed with the loop; or each chat's own, closed
    # when it was dropped, not left to the loop's end
    assert keepers == (0 if own else 1)
    assert "Task was destroyed but it is pending" not in caplog.text
