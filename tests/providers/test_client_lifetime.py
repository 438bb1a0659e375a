"""An SDK provider's async clients live as long as the provider and no longer: one dropped
while its event loop runs (a batch's chat, once its row is done) closes its client on that
loop, quietly, instead of leaving a pending task for the garbage collector to destroy."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from nbagent import Chat
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.testing import FakeLLMServer

KEY = "sk-test-lifetime-000000000000"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_provider_dropped_while_its_loop_runs_closes_its_client_there(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    with FakeLLMServer(["one", "two"], cycle=True) as server:

        async def main() -> int:
            for _ in range(3):  # chats made and dropped one after another, the loop running
                if kind == "anthropic":
                    provider: object = AnthropicProvider(
                        "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY
                    )
                else:
                    provider = OpenAIProvider(
                        "gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY
                    )
                chat = Chat(provider=provider)
                assert (await chat.ask_async("hello")).content in ("one", "two")
                del chat, provider
                gc.collect()
                for _ in range(50):  # the loop turns the client's closing takes
                    await asyncio.sleep(0)
            return len([t for t in asyncio.all_tasks() if t.get_name() == "nbagent-client-keeper"])

        keepers = asyncio.run(main())
    assert keepers == 0  # every dropped provider's client was closed, not left to the loop's end
    assert "Task was destroyed but it is pending" not in caplog.text
