"""``store.watch(chat_ids)``: decisions reach whoever waits, as they are recorded (both stores).

PostgreSQL pushes them (a trigger NOTIFYs; the store's listening connection
wakes the watches), SQLite is polled; the contract is the same: a decision
recorded after ``watch()`` returned is reported by the next ``wait`` (the ids of
the chats that got one), one recorded before is not, a watch reports only the
chats it follows, and closing it wakes a waiter.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError
from nbagent.store import DecisionWatch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund  # noqa: E402
from test_processes import _env, run_agent  # noqa: E402


def parked(store: Any) -> tuple[Chat, str]:
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    return chat, chat.pending_approvals[0].id


def test_a_decision_from_another_process_wakes_the_watch_at_once(
    store: Any, backend: Any, tmp_path: Path
) -> None:
    chat, call_id = parked(store)
    with store.watch([chat.id]) as watch:
        assert isinstance(watch, DecisionWatch)
        assert watch.wait(0.2) == set()  # nothing decided yet
        got: list[set[str]] = []
        # The waiter's own timeout is far beyond the join's: back within the join, the
        # decision woke it (no timed assertion: a watch that only wakes at its timeout fails).
        waiter = threading.Thread(target=lambda: got.append(watch.wait(3600)), daemon=True)
        waiter.start()
        run_agent("approve", backend.url, call_id, env=_env(tmp_path / "runs.txt"))
        waiter.join(120)
        assert not waiter.is_alive() and got == [{chat.id}]
        assert [c.id for c in chat.refresh()] == [call_id]  # the chat applies it on its own
        assert watch.wait(0.3) == set()  # reported once
    chat.complete()
    assert chat.status == "complete"
    chat.close()


def test_a_watch_reports_only_its_chats_and_what_came_after_it(store: Any, backend: Any) -> None:
    (a, a_call), (b, b_call), (c, c_call) = parked(store), parked(store), parked(store)
    store.approve(a_call, chat_id=a.id)  # before any watch
    only_b = store.watch([b.id])
    every = store.watch()
    other = backend.open()  # another store object: decisions from elsewhere
    try:
        other.deny(c_call, chat_id=c.id, reason="no")
        assert every.wait(10) == {c.id}
        b.approve(b_call)  # a chat object's own decision is recorded too
        deadline = time.monotonic() + 10
        seen: set[str] = set()
        while b.id not in seen and time.monotonic() < deadline:
            seen |= every.wait(1)
        assert seen == {b.id}
        assert only_b.wait(10) == {b.id}  # not c's, not a's
        assert only_b.wait(0.3) == set()
    finally:
        only_b.close()
        every.close()
        other.close()
        for chat in (a, b, c):
            chat.close()


def test_closing_a_watch_wakes_its_waiter(store: Any) -> None:
    watch = store.watch(["some-chat"])
    done = threading.Event()
    result: list[set[str]] = []

    def wait() -> None:
        result.append(watch.wait(3600))
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    time.sleep(0.2)
    watch.close()
    assert done.wait(120)  # woken by the close: its own timeout is an hour
    assert result == [set()] and watch.closed
    assert watch.wait(60) == set()  # closed: returns at once
    assert "closed" in repr(watch)


def test_wait_async_is_woken_by_a_decision(store: Any, backend: Any) -> None:
    chat, call_id = parked(store)
    watch = store.watch([chat.id])

    def decide_soon() -> None:
        time.sleep(0.3)
        with backend.open() as other:
            other.approve(call_id, chat_id=chat.id)

    async def main() -> set[str]:
        threading.Thread(target=decide_soon, daemon=True).start()
        # woken by the decision: its own timeout is an hour, the test's two minutes
        return await asyncio.wait_for(watch.wait_async(3600), 120)

    assert asyncio.run(main()) == {chat.id}
    assert asyncio.run(watch.wait_async(0.2)) == set()
    watch.close()
    chat.close()


def test_a_closed_store_cannot_be_watched(backend: Any) -> None:
    store = backend.open()
    watch = store.watch()
    store.close()
    assert watch.closed and watch.wait(60) == set()  # closing the store closed its watches
    with pytest.raises(StoreError, match="closed"):
        store.watch()
    with pytest.raises(TypeError, match="collection of chat ids"):
        DecisionWatch("one-chat-id")
