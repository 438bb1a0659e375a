"""``stop_held``: the stop button (SIGINT) held over a change made in several steps.

It sets and restores the SIGINT handler around every such change (several per model
request). Through ``signal.signal``, each of the three calls tried to make an enum member
of the handler, and ``asyncio.run``'s handler (a partial holding the main task) failed that
with a message quoting its ``repr``: the task's, with its coroutine and stack, about 6% of
a batch's CPU. The handler is never asked its ``repr`` now; a press inside the block is
still held and delivered as it ends, to the handler that was there.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from nbagent._aio import stop_held


class Handler:
    """A SIGINT handler that counts its calls and the times it was asked its repr."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.reprs = 0

    def __call__(self, signum: int, frame: Any) -> None:
        self.calls.append(signum)

    def __repr__(self) -> str:
        self.reprs += 1
        return "<Handler>"


@pytest.fixture
def handler() -> Iterator[Handler]:
    assert threading.current_thread() is threading.main_thread()
    h = Handler()
    before = signal.signal(signal.SIGINT, h)
    try:
        yield h
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_handler_is_never_asked_its_repr(handler: Handler) -> None:
    for _ in range(10):
        with stop_held():
            pass
    assert handler.reprs == 0
    assert signal.getsignal(signal.SIGINT) is handler  # restored


def test_a_press_inside_is_held_and_delivered_once_as_the_block_ends(handler: Handler) -> None:
    with stop_held():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # Python runs signal handlers between bytecodes
            pass
        assert handler.calls == []  # held
    assert handler.calls == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is handler


def test_off_the_main_thread_the_block_just_runs(handler: Handler) -> None:
    ran: list[bool] = []

    def body() -> None:
        with stop_held():
            ran.append(True)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert ran == [True] and handler.reprs == 0
    assert signal.getsignal(signal.SIGINT) is handler
