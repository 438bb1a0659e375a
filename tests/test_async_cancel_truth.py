"""The async API and cancellation tell the truth: what a record says happened, happened.

A call that ran to its end is recorded ``ok`` with its result however its round is
cancelled; one that never started is never said to have run; nothing of a turn goes on
after the call that drove it returned; sub-agents asked with the sync API never hang.
Races are repeated at random moments, with real cancellation (``Task.cancel``, timeouts).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from nbagent import Chat, ToolResultMessage, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


def _results(chat: Chat) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in chat.transcript if isinstance(m, ToolResultMessage)}


def _on_a_thread(fn: Callable[[], Any], timeout: float) -> Any:
    """``fn()`` on a daemon thread; a hang fails the test instead of hanging it."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"still running after {timeout} s: hung"
    if errors:
        raise errors[0]
    return out[0]


# -- astream_events: leaving the iteration ends the turn ------------------------------------


@pytest.mark.parametrize("how", ["timeout", "break", "raise"])
def test_leaving_astream_events_stops_the_turn_before_going_on(how: str) -> None:
    """Left early, the iteration left the turn running as an orphan task: its tool ran on
    after the caller's timeout, and a failure of the turn was reported nowhere."""
    ran: list[str] = []

    @tool
    async def charge(amount: int) -> str:
        """Charge a card."""
        await asyncio.sleep(0.3)
        ran.append("charged")
        return f"charged {amount}"

    async def main() -> tuple[list[asyncio.Task[Any]], str]:
        chat = Chat(
            provider=ScriptedProvider([call_tools(("charge", {"amount": 5}, "c")), reply("ok")])
        ).with_tools(charge)
        stream = chat.astream_events("charge 5")
        try:
            if how == "timeout":
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.1):
                        async for _ in stream:
                            pass
            elif how == "break":
                async for _ in stream:
                    break
            else:
                with pytest.raises(ValueError):
                    async for _ in stream:
                        raise ValueError("the consumer failed")
        finally:
            await stream.aclose()  # (what `async for` leaves to the garbage collector)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.sleep(0.5)
        call = chat.tool_calls[0] if chat.tool_calls else None
        return left, call.status if call else "never asked"

    left, status = asyncio.run(main())
    assert left == [], "the turn's task was left running"
    assert ran == [], "the tool ran on after the caller left the iteration"
    assert status in ("cancelled", "never asked")


def test_astream_events_run_to_its_end_still_yields_every_event() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    async def main() -> list[str]:
        chat = Chat(
            provider=ScriptedProvider([call_tools(("add", {"a": 1, "b": 2}, "c")), reply("3")])
        ).with_tools(add)
        return [type(e).__name__ async for e in chat.astream_events("add")]

    names = asyncio.run(main())
    assert "ToolCallFinished" in names
    assert names.count("MessageAdded") >= 4


# -- sub-agents asked with the sync API from async tools, at any depth ------------------------


def _agent(level: int, depth: int) -> Chat:
    if level == depth:
        return Chat(provider=ScriptedProvider([reply(f"leaf {level}")]))

    @tool(name=f"delegate{level}")
    async def delegate(q: str) -> str:
        """Ask a sub-agent, with the sync API."""
        answer = _agent(level + 1, depth).ask(q)
        assert answer is not None
        return answer.content

    provider = ScriptedProvider([call_tools((f"delegate{level}", {"q": "sub"})), reply(f"{level}")])
    return Chat(provider=provider).with_tools(delegate)


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("how", ["script", "async", "cell"])
def test_sub_agents_asked_with_the_sync_api_never_hang(how: str, depth: int) -> None:
    """Three deep in a cell (a sync ask() while the kernel's loop runs), four in a script, the
    innermost ask() was scheduled on nbagent's background loop while a sync ask() above it
    blocked that loop waiting for it: it hung for ever."""
    top = _agent(0, depth)

    def run() -> Any:
        if how == "script":
            return top.ask("go")
        if how == "async":
            return asyncio.run(top.ask_async("go"))

        async def cell() -> Any:
            return top.ask("go")

        return asyncio.run(cell())

    answer = _on_a_thread(run, timeout=20)
    assert answer.content == "0"
    assert _results(top)[top.tool_calls[0].id].content == ("leaf 1" if depth == 1 else "1")
