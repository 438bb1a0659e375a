"""A tool with no timeout that raises a bare ``TimeoutError()`` (what a socket or
``concurrent.futures``' ``result(timeout=)`` raise, with no message) is answered as an error.

The runner took any ``TimeoutError`` for its own timeout and wrote "timed out after
{timeout:g} s", with no timeout set: formatting ``None`` raised ``TypeError``, the turn
failed with it, and the call, never settled, stayed ``running`` (in doubt in a store).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nbagent import Chat, tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def fetch_sync(item: str) -> str:
    """Fetch an item.

    Args:
        item: The item.
    """
    raise TimeoutError()


@tool
async def fetch_async(item: str) -> str:
    """Fetch an item.

    Args:
        item: The item.
    """
    raise TimeoutError()


@pytest.mark.parametrize("fetch", [fetch_sync, fetch_async], ids=["sync", "async"])
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_bare_timeout_error_is_the_calls_error_and_the_turn_goes_on(
    tmp_path: Path, fetch: object, driver: str
) -> None:
    name = fetch.name  # type: ignore[attr-defined]
    script = [call_tools((name, {"item": "x"})), reply("it could not be fetched")]
    db = tmp_path / "s.db"
    with Chat(provider=ScriptedProvider(script), store=db, display=False) as chat:
        chat.with_tools(fetch)
        ask = chat.ask_async if driver == "async" else None
        answer = asyncio.run(ask("fetch x")) if ask is not None else chat.ask("fetch x")
        assert answer is not None and answer.content == "it could not be fetched"
        (call,) = chat.tool_calls
        assert call.status == "error"
        assert call.result is not None
        assert "TimeoutError raised by the tool" in call.result.content
        assert chat.status == "complete"
    with SQLiteStore(db) as store:
        (stored,) = store.load(chat.id).calls
    assert stored.status == "error"  # settled, not left running (in doubt)


def test_a_timeout_of_its_own_is_still_timed_out() -> None:
    @tool(timeout=0.05)
    async def slow(item: str) -> str:
        """Fetch slowly.

        Args:
            item: The item.
        """
        await asyncio.sleep(5)
        return item

    script = [call_tools(("slow", {"item": "x"})), reply("gave up")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(slow)
    chat.ask("go")
    (call,) = chat.tool_calls
    assert call.status == "timed_out"
    assert call.result is not None and "timed out after 0.05 s" in call.result.content
