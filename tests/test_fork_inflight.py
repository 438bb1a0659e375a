"""A fork made while the chat waits for the model: the fork asks the model itself.

Forked mid-request, the fork's history ended with a ``ModelRequestStarted`` nothing
answered: a step row that never finished (stored, and reloaded so), whose number
the fork's own first request took again. The fork is cut before that request.
Real chats on threads, with the scripted provider held on an event.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, ModelRequestFailed, ModelRequestFinished, ModelRequestStarted, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def lookup(order_id: int) -> str:
    """Look an order up.

    Args:
        order_id: The order.
    """
    return f"order {order_id}: shoes"


class Held:
    """A provider's answer that waits until released (the request in flight meanwhile)."""

    def __init__(self, hold: bool = True, pause: float = 0.0) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        self.pause = pause
        if not hold:
            self.release.set()

    def __call__(self, request: Any) -> Any:
        self.asked.set()
        self.release.wait(10)
        time.sleep(self.pause)
        if not any(getattr(m, "role", "") == "assistant" for m in request.messages):
            return call_tools(("lookup", {"order_id": 1}, "c0"))
        return reply("done")


def _open_requests(events: Any) -> list[int]:
    """The steps of model requests started and never finished nor failed."""
    open_: dict[int, int] = {}
    for e in events:
        if isinstance(e, ModelRequestStarted):
            open_[e.step] = open_.get(e.step, 0) + 1
        elif isinstance(e, (ModelRequestFinished, ModelRequestFailed)):
            open_[e.step] -= 1
    return [s for s, n in open_.items() if n]


def _check_fork(fork: Chat) -> None:
    assert _open_requests(fork.events) == []
    fork.complete()
    assert fork.status == "complete"
    assert _open_requests(fork.events) == []
    steps = fork.steps
    assert not steps["input_tokens"].isna().any()  # every step finished
    assert steps["step"].is_unique


@pytest.mark.parametrize("where", ["memory", "store"])
def test_a_fork_made_while_the_model_is_asked_asks_it_itself(where: str, tmp_path: Path) -> None:
    held = Held()
    kw: dict[str, Any] = {"store": str(tmp_path / "c.db")} if where == "store" else {}
    chat = Chat(provider=ScriptedProvider([held], repeat_last=True), display=False, **kw)
    chat.with_tools(lookup)
    driving = threading.Thread(target=chat.ask, args=("go",))
    driving.start()
    try:
        assert held.asked.wait(10)
        fork = chat.fork()
    finally:
        held.release.set()
        driving.join(10)
    assert fork.status == "ready"  # the user's message, the model not asked yet
    assert [m.role for m in fork.transcript] == ["user"]
    _check_fork(fork)
    assert list(fork.steps["step"]) == [1, 3]  # its own steps, numbered from 1
    assert chat.status == "complete"
    if where == "store":
        fork_id = fork.id
        fork.close()
        chat.close()
        again = Chat.load(fork_id, store=str(tmp_path / "c.db"), provider=ScriptedProvider([]))
        assert _open_requests(again.events) == []
        assert list(again.steps["step"]) == [1, 3]
        assert not again.steps["input_tokens"].isna().any()
        again.close()


def test_a_fork_after_a_failed_request_keeps_the_failure_and_retries() -> None:
    def fail(request: Any) -> Any:
        raise RuntimeError("the model is down")

    chat = Chat(provider=ScriptedProvider([fail, reply("hello")]), display=False)
    with pytest.raises(Exception, match="the model is down"):
        chat.ask("hi")
    fork = chat.fork()
    assert any(isinstance(e, ModelRequestFailed) for e in fork.events)  # its history
    assert _open_requests(fork.events) == []
    fork.complete()
    assert fork.status == "complete" and fork.last_assistant_message.content == "hello"  # type: ignore[union-attr]
    steps = fork.steps  # the failure, then the retry of its step number
    assert list(steps["step"]) == [1, 1]
    assert list(steps["error"].isna()) == [False, True]


def test_forking_while_the_chat_runs_never_gives_a_half_made_fork() -> None:
    """Repeated race: ``fork()`` at a random moment of a chat asking the model and running
    a call; each fork is whole (no open request, unique finished steps), or refused because
    a call is running at that point."""
    refused = made = 0
    for _ in range(60):
        chat = Chat(
            provider=ScriptedProvider([Held(False, 0.002)], repeat_last=True), display=False
        ).with_tools(lookup)
        driving = threading.Thread(target=chat.ask, args=("go",))
        driving.start()
        time.sleep(random.random() * 0.008)
        try:
            fork = chat.fork()
        except ValueError as exc:
            assert "is running at that point" in str(exc)
            refused += 1
            driving.join(10)
            continue
        driving.join(10)
        _check_fork(fork)
        made += 1
    assert made
