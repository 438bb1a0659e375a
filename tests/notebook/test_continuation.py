"""A click's continuation and a cell driving the same chat: the cell waits, never a stale reply.

The failure of ``tests/notebooks/test_notebook_06.py`` in a loaded run: a card click started
the continuation, and a later cell's ``chat.complete()`` found it driving,
returned at once with the old reply, and ``chat.status`` said
``awaiting_approval``. Here a stand-in kernel runs the cells on its loop (a
blocking cell blocks that loop, as in ipykernel) and the click comes from
another thread (a subshell).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from _views import widgets_in

from nbagent import Chat, Tool
from nbagent.notebook import ChatView
from nbagent.notebook import _continuation as cont
from nbagent.notebook._widgets import ActionCard
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

T = TypeVar("T")
WAIT = 30.0


@pytest.fixture
def kernel() -> Iterator[Callable[[Callable[[], T]], T]]:
    """Run a "cell" (a plain function) on a stand-in kernel's loop thread, blocking it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kernel-main", daemon=True)
    thread.start()

    async def capture() -> None:
        cont.capture_main_loop()

    cont.set_main_loop(loop)
    asyncio.run_coroutine_threadsafe(capture(), loop).result(WAIT)

    def run_cell(fn: Callable[[], T]) -> T:
        async def cell() -> T:
            return fn()  # sync, inside the running loop: like a cell calling chat.complete()

        return asyncio.run_coroutine_threadsafe(cell(), loop).result(WAIT)

    try:
        yield run_cell
    finally:
        cont.set_main_loop(None)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


@pytest.mark.parametrize("rep", range(20))
def test_a_cell_completing_while_the_click_continues_waits_for_the_settled_reply(
    kernel: Callable[[Callable[[], Any]], Any], rep: int
) -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    class IssueRefund(Tool):
        """Issues a refund (slow, awaits the bank)."""

        requires_approval = True

        async def execute(self, order_id: int) -> str:
            started.set()
            await asyncio.get_running_loop().run_in_executor(None, release.wait, WAIT)
            runs.append(order_id)
            return f"refunded order {order_id}"

    script = [call_tools(("issue_refund", {"order_id": 42})), reply("Refunded order 42.")]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(IssueRefund)
    view = ChatView(chat)
    kernel(lambda: chat.ask("Refund order 42"))
    assert chat.status == "awaiting_approval"
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.kind == "approval"]
    clicker = threading.Thread(target=card.click, args=("approve",), name="subshell")
    clicker.start()
    clicker.join(WAIT)
    assert started.wait(WAIT)  # the continuation drives: the tool runs

    def release_once_the_cell_waits(cell_done: threading.Event) -> None:
        while not cell_done.is_set() and not getattr(getattr(chat, "_drive", None), "waiting", 0):
            cell_done.wait(0.001)
        release.set()

    cell_done = threading.Event()
    releaser = threading.Thread(target=release_once_the_cell_waits, args=(cell_done,))
    releaser.start()
    try:
        answer, status = kernel(lambda: (chat.complete(), chat.status))  # the next cell
    finally:
        cell_done.set()
        release.set()
        releaser.join(WAIT)
    assert view.continuation.wait(WAIT)
    assert status == "complete" and answer.content == "Refunded order 42."
    assert runs == [42]  # the approved call ran exactly once
    assert chat.status == "complete"
