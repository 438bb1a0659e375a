"""Store work never blocks the loop that drives chats (issue 28, item 1), on both stores.

Under the async driver (``await chat.ask_async()``, a batch) every write and claim is
awaited before the next model request or tool round, on a worker thread, so that the loop
goes on serving other chats meanwhile. A SQLite store in WAL with ``synchronous`` NORMAL is
written on the loop's own thread instead (``nbagent/store/_waiting.py``: its commits wait
for nothing but the CPU, and the handoff cost more than the write): whatever would wait
there (another connection writing, another thread on the store, a WAL to truncate) is
written on a worker thread after all. A round commits twice (the claim before its tool
runs, the result before the next request), with the response's recording in the second.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
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


def _drive_spied(store: Any, rounds: int) -> tuple[Chat, list[str]]:
    """Drive a chat of ``rounds`` tool rounds with ``ask_async``: the chat, and the writes
    and claims made on the thread running its loop."""
    RAN.clear()
    on_loop: list[str] = []
    loop_thread: list[threading.Thread] = []
    _spy(store, on_loop, loop_thread)

    async def drive() -> Chat:
        loop_thread.append(threading.current_thread())
        chat = Chat(provider=ScriptedProvider(_script(rounds)), store=store).with_tools(lookup)
        await chat.ask_async("look things up")
        return chat

    return asyncio.run(drive()), on_loop


def test_an_async_drive_writes_and_claims_off_its_loop_unless_nothing_can_wait(
    backend: Any,
) -> None:
    store = backend.open()
    inline = backend.kind == "sqlite"  # WAL, synchronous NORMAL: no commit waits
    assert getattr(store, "writes_inline", False) is inline
    chat, on_loop = _drive_spied(store, 3)
    assert chat.status == "complete" and RAN == ["x0", "x1", "x2"]
    if inline:  # every write and claim on the loop's thread: no handoff
        assert on_loop.count("claim") == 3 and "write" in on_loop
    else:
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
    (three before: the recording had its own), one for the question, before the model
    is asked it, and the answer's own before its step says the chat is complete (a copy of
    the chat another process moved on stops there, ``busy``), then that step's end."""
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
    assert begins == 1 + 2 * 5 + 2  # the question, five rounds, the answer, the last step
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


def test_sqlite_with_synchronous_full_writes_off_the_loop(tmp_path: Path) -> None:
    """Each commit fsyncs: a write that waits on the disk is not made on the loop."""
    store = SQLiteStore(tmp_path / "full.db", synchronous="FULL")
    assert store.writes_inline is False
    chat, on_loop = _drive_spied(store, 2)
    assert chat.status == "complete" and RAN == ["x0", "x1"]
    assert on_loop == []
    store.close()


def _drive_while(
    store: SQLiteStore, hold: Any, release: Any, seconds: float = 1.0
) -> tuple[Chat, list[float], float, float]:
    """Drive a 3-round chat on a loop that also ticks every 10 ms, while ``hold()`` keeps
    the store from being written for ``seconds`` (``release()`` ends it, on a thread):
    the chat, the tick times, when the hold began and when it ended."""
    RAN.clear()
    chat = Chat(provider=ScriptedProvider(_script(3)), store=store).with_tools(lookup)
    ticks: list[float] = []
    span: list[float] = []

    def let_go() -> None:
        time.sleep(seconds)
        span.append(time.monotonic())
        release()

    async def main() -> None:
        async def tick() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        await asyncio.sleep(0)
        hold()
        span.append(time.monotonic())
        releaser = threading.Thread(target=let_go)
        releaser.start()
        try:
            await chat.ask_async("look three things up")
        finally:
            ticker.cancel()
            releaser.join()

    asyncio.run(main())
    return chat, ticks, span[0], span[1]


def _check_nothing_lost(store: SQLiteStore, chat: Chat) -> None:
    assert chat.status == "complete" and RAN == ["x0", "x1", "x2"]  # each ran once
    stored = store.load(chat.id)
    assert [c.status for c in stored.calls] == ["ok"] * 3
    assert stored.messages[-1]["content"] == "done"
    assert len(store.recordings()) == 4


def test_another_connection_writing_never_stalls_the_loop_that_writes_sqlite(
    tmp_path: Path,
) -> None:
    """A second connection (another process, a DB browser) holds the file's write lock for a
    second: the loop's own write does not wait for it (SQLite's busy wait would have stalled
    every chat on the loop); it is made on a worker thread once the lock is let go."""
    path = tmp_path / "held.db"
    store = SQLiteStore(path)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    chat, ticks, held_at, released = _drive_while(
        store, lambda: other.execute("BEGIN IMMEDIATE"), lambda: other.execute("COMMIT")
    )
    during = [t for t in ticks if held_at + 0.2 < t < released - 0.2]
    assert len(during) >= 5  # the loop kept ticking while the file was locked
    _check_nothing_lost(store, chat)
    other.close()
    store.close()


def test_another_thread_on_the_store_never_stalls_the_loop_that_writes_sqlite(
    tmp_path: Path,
) -> None:
    """Another thread holds the store's connection (a panel reading it, a retry writing) for
    a second: the loop's write goes to a worker thread instead of waiting for it."""
    store = SQLiteStore(tmp_path / "busy.db")
    taken, done = threading.Event(), threading.Event()

    def holder() -> None:
        with store._lock:  # the connection's lock, as any user of the store takes it
            taken.set()
            done.wait(30)

    thread = threading.Thread(target=holder)

    def hold() -> None:
        thread.start()
        taken.wait(30)

    chat, ticks, held_at, released = _drive_while(store, hold, done.set)
    thread.join()
    during = [t for t in ticks if held_at + 0.2 < t < released - 0.2]
    assert len(during) >= 5
    _check_nothing_lost(store, chat)
    store.close()


def test_a_wal_past_the_hard_limit_is_truncated_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last resort against a runaway WAL waits (for other writers, up to two seconds):
    past the limit, the next write is made on a worker thread, which truncates."""
    from nbagent.store import _checkpointer

    monkeypatch.setattr(_checkpointer, "HARD_LIMIT", 1)
    monkeypatch.setattr(_checkpointer, "CHECK_EVERY", 1)
    truncated_on: list[threading.Thread] = []
    truncate = _checkpointer.Checkpointer._truncate
    driving: list[threading.Thread] = []

    def spied(self: Any, conn: Any) -> None:
        if driving:
            truncated_on.append(threading.current_thread())
        truncate(self, conn)

    monkeypatch.setattr(_checkpointer.Checkpointer, "_truncate", spied)
    RAN.clear()
    store = SQLiteStore(tmp_path / "wal.db")
    chat = Chat(provider=ScriptedProvider(_script(3)), store=store).with_tools(lookup)

    async def drive() -> None:
        driving.append(threading.current_thread())
        await chat.ask_async("look three things up")

    asyncio.run(drive())
    assert chat.status == "complete" and RAN == ["x0", "x1", "x2"]
    assert truncated_on and driving[0] not in truncated_on
    assert [c.status for c in store.load(chat.id).calls] == ["ok"] * 3
    store.close()


def test_a_subscriber_using_the_store_during_a_step_on_the_loop_may_wait(
    tmp_path: Path,
) -> None:
    """A step on the loop applies a decision made elsewhere; the chat's event reaches a user's
    subscriber, which reads the store while another thread holds it. The subscriber waits as
    anywhere else (only the store's own work on the loop refuses to): it gets its answer,
    and every subscriber after it still gets the event (the store writes it)."""

    @tool(requires_approval=True)
    def refund(order: int) -> str:
        """Refund an order.

        Args:
            order: The order.
        """
        RAN.append(str(order))
        return "refunded"

    RAN.clear()
    path = tmp_path / "sub.db"
    store = SQLiteStore(path)
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order": 7})), reply("done")]),
        store=store,
    ).with_tools(refund)
    asyncio.run(chat.ask_async("refund 7"))
    assert chat.status == "awaiting_approval"
    with SQLiteStore(path) as other:  # decided elsewhere: applied at the next step
        other.approve(chat.tool_calls[0].id)
    seen: list[int] = []
    taken, done = threading.Event(), threading.Event()

    def holder() -> None:
        with store._lock:
            taken.set()
            done.wait(0.3)

    def on_decided(event: Any) -> None:
        threading.Thread(target=holder).start()
        taken.wait(30)
        seen.append(len(store.pending_approvals()))  # waits out the holder
        done.set()

    chat.on("approval_decided", on_decided)
    asyncio.run(chat.complete_async())
    assert seen == [0]  # the callback ran to its end
    assert chat.status == "complete" and RAN == ["7"]
    with SQLiteStore(path) as again:
        kinds = [e.type for e in again.iter_events(chat.id)]
    assert kinds.count("approval_decided") == 1  # the store's subscriber got it too
    store.close()


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
def test_a_batch_records_each_chat_on_its_loop_unless_the_store_waits(
    tmp_path: Path, synchronous: str
) -> None:
    """A batch row's chat is created in the store and recorded as its input's chat (two
    transactions) on the batch's own thread when the store writes inline; a store whose
    commits fsync does both on a worker thread. The rows are recorded either way."""
    store = SQLiteStore(tmp_path / "batch.db", synchronous=synchronous)
    where: list[tuple[str, bool]] = []
    loop_thread: list[threading.Thread] = []
    for name in ("create_chat", "add_batch_chat"):
        inner = getattr(store, name)

        def spied(*args: Any, _inner: Any = inner, _name: str = name, **kwargs: Any) -> Any:
            where.append((_name, threading.current_thread() is loop_thread[0]))
            return _inner(*args, **kwargs)

        setattr(store, name, spied)

    async def run() -> Any:
        loop_thread.append(threading.current_thread())
        return await nbagent.batch_async(
            [f"task {i}" for i in range(5)],
            lambda: Chat(provider=ScriptedProvider(_script(1))).with_tools(lookup),
            store=store,
            concurrency=2,
            progress=False,
        )

    result = asyncio.run(run())
    assert list(result["status"]) == ["done"] * 5
    assert sorted(name for name, _ in where) == ["add_batch_chat"] * 5 + ["create_chat"] * 5
    on_loop = {here for _, here in where}
    assert on_loop == ({True} if synchronous == "NORMAL" else {False})
    assert len(store.chats()) == 5
    store.close()


def _two_call_script() -> list[Any]:
    return [call_tools(("lookup", {"item": "x0"}), ("lookup", {"item": "x1"})), reply("done")]


@pytest.mark.parametrize("mode", ["sequential", "threads"])
def test_a_call_waiting_behind_another_is_claimed_off_the_loop(
    backend: Any, tmp_path: Path, mode: str
) -> None:
    """A round's call that starts only when another ends (a sequential round's second, a
    parallel one's past ``max_concurrency``) is claimed right before it starts (a crash
    during the first leaves it runnable), and that claim is awaited off the loop like the
    round's first: claimed in the runner's start, a PostgreSQL round trip (or a file lock's
    wait) held up every chat on the loop."""
    store = (
        SQLiteStore(tmp_path / "full.db", synchronous="FULL")  # commits wait: never inline
        if backend.kind == "sqlite"
        else backend.open()
    )
    RAN.clear()
    on_loop: list[str] = []
    loop_thread: list[threading.Thread] = []
    _spy(store, on_loop, loop_thread)

    chat = Chat(provider=ScriptedProvider(_two_call_script()), store=store).with_tools(lookup)
    chat.with_tool_options(concurrency=mode, max_concurrency=1)  # (written here, at once)

    async def drive() -> None:
        loop_thread.append(threading.current_thread())
        await chat.ask_async("look two things up")

    asyncio.run(drive())
    assert chat.status == "complete" and RAN == ["x0", "x1"]
    assert on_loop == []  # neither claim (nor any write) was made on the loop's thread
    assert [c.status for c in store.load(chat.id).calls] == ["ok", "ok"]
    store.close()
