"""``astream_events(text)`` yields the events of its own turn, and only those.

Started while another driver runs turn "a", it waits for its turn (as ``ask_async``
does); it used to subscribe at once and yield turn a's tool calls and answer as if they
were its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nbagent import Chat, MessageAdded, ToolCallFinished, ToolCallStarted, tool
from nbagent.testing._scripted import ScriptedProvider


def last_user(request: Any) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


def answer(request: Any) -> Any:
    from nbagent.testing._scripted import call_tools, reply

    last = request.messages[-1]
    q = last_user(request)
    if last.role == "user":
        return call_tools(("w", {"q": q}))
    return reply(f"answer to {q}")


@pytest.mark.parametrize("rep", range(5))
def test_a_stream_started_while_another_turn_runs_yields_only_its_own(rep: int) -> None:
    started = asyncio.Event()

    @tool
    async def w(q: str) -> str:
        """Work for a question."""
        if q == "a":
            started.set()
            await asyncio.sleep(0.05)
        return f"w{q}"

    chat = Chat(provider=ScriptedProvider([answer], repeat_last=True), display=False)
    chat.with_tools(w)

    async def main() -> list[Any]:
        a = asyncio.ensure_future(chat.ask_async("a"))
        await started.wait()  # turn a is in its tool round
        got = [e async for e in chat.astream_events("b")]
        assert (await a).content == "answer to a"
        return got

    got = asyncio.run(main())
    texts = [getattr(e.message, "content", None) for e in got if isinstance(e, MessageAdded)]
    assert texts == ["b", None, "wb", "answer to b"], texts
    b_calls = {c.id for c in chat.tool_calls if c.arguments["q"] == "b"}
    ran = [e for e in got if isinstance(e, ToolCallStarted | ToolCallFinished)]
    assert ran and all(e.call.id in b_calls and e.turn == chat.turn for e in ran)
    assert chat.transcript[-1].content == "answer to b"


def test_a_stream_with_nobody_else_driving_yields_its_whole_turn() -> None:
    @tool
    async def w(q: str) -> str:
        """Work for a question."""
        return f"w{q}"

    chat = Chat(provider=ScriptedProvider([answer], repeat_last=True), display=False)
    chat.with_tools(w)

    async def main() -> list[Any]:
        return [e async for e in chat.astream_events("b")]

    got = asyncio.run(main())
    texts = [getattr(e.message, "content", None) for e in got if isinstance(e, MessageAdded)]
    assert texts == ["b", None, "wb", "answer to b"]
    assert any(isinstance(e, ToolCallFinished) for e in got)
