"""Store work never blocks the loop that drives chats (issue 28, item 1), on both stores.

Under the async driver (``await chat.ask_async()``, a batch) every write and claim runs on
a worker thread, awaited before the next model request or tool round: the loop goes on
serving other chats meanwhile. A round commits twice (the claim before its tool runs,
the result before the next request), with the response's recording in the second.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[str] = []


@tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: The item.
    """
    RAN.append(item)
    return f"{item}: found"


def _script(n: int) -> list[Any]:
    return [*(call_tools(("lookup", {"item": f"x{i}"})) for i in range(n)), reply("done")]


def _spy(store: Any, on_loop: list[str], loop_thread: list[threading.Thread]) -> None:
    """Note every store write or claim made on the thread running the driving loop."""
    for name in ("write", "claim", "record_response"):
        inner = getattr(store, name)

        def spied(*args: Any, _inner: Any = inner, _name: str = name, **kwargs: Any) -> Any:
            if loop_thread and threading.current_thread() is loop_thread[0]:
                on_loop.append(_name)
            return _inner(*args, **kwargs)

        setattr(store, name, spied)


def test_an_async_drive_writes_and_claims_off_its_loop(backend: Any) -> None:
    RAN.clear()
    store = backend.open()
    on_loop: list[str] = []
    loop_thread: list[threading.Thread] = []
    _spy(store, on_loop, loop_thread)

    async def drive() -> Chat:
        loop_thread.append(threading.current_thread())
        chat = Chat(provider=ScriptedProvider(_script(3)), store=store).with_tools(lookup)
        await chat.ask_async("look three things up")
        return chat

    chat = asyncio.run(drive())
    assert chat.status == "complete" and RAN == ["x0", "x1", "x2"]
    assert on_loop == []  # not one write or claim blocked the loop
    stored = store.load(chat.id)  # and everything is on disk when ask_async returned
    assert [c.status for c in stored.calls] == ["ok"] * 3
    assert stored.messages[-1]["role"] == "assistant"
    assert len(store.recordings()) == 4
    store.close()


def test_a_claim_is_committed_before_its_tool_runs_under_the_async_driver(backend: Any) -> None:
    """Claim-before-run holds off the loop: when the tool runs, another connection reads its
    call as running, claimed by this process."""
    seen: list[tuple[str, str | None]] = []
    other = backend.open()

    @tool
    def probe(item: str) -> str:
        """Read my own row from another connection.

        Args:
            item: The item.
        """
        call = nbagent.current_tool_call()
        assert call is not None
        row = other.call(call.id)
        seen.append((row.status, row.claimed_by))
        return item

    store = backend.open()
    chat = Chat(
        provider=ScriptedProvider([call_tools(("probe", {"item": "a"})), reply("ok")]),
        store=store,
    ).with_tools(probe)
    asyncio.run(chat.ask_async("probe"))
    assert [s for s, _ in seen] == ["running"]
    assert seen[0][1] is not None
    store.close()
    other.close()


def test_a_tool_round_commits_twice(tmp_path: Path) -> None:
    """One transaction for the claim, one for the result with the response's recording
    (three before: the recording had its own)."""
    store = SQLiteStore(tmp_path / "t.db")
    chat = Chat(provider=ScriptedProvider(_script(5)), store=store).with_tools(lookup)
    chat.ask_later("go")
    statements: list[str] = []
    conn: sqlite3.Connection = store._conn  # the store's one connection
    conn.set_trace_callback(statements.append)
    asyncio.run(chat.complete_async())
    conn.set_trace_callback(None)
    begins = sum(1 for s in statements if s.startswith("BEGIN"))
    assert chat.status == "complete"
    assert begins == 2 * 5 + 1  # five rounds, then the answer
    store.close()


@pytest.mark.parametrize("drive", ["sync", "async"])
def test_every_recording_is_kept_when_a_chat_ends(tmp_path: Path, drive: str) -> None:
    """A response's recording waits for the next events' write: none is left behind."""
    store = SQLiteStore(tmp_path / "r.db")
    chat = Chat(provider=ScriptedProvider(_script(2)), store=store).with_tools(lookup)
    if drive == "sync":
        chat.ask("go")
    else:
        asyncio.run(chat.ask_async("go"))
    assert len(store.recordings()) == 3
    store.close()
