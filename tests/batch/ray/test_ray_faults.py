"""The Ray backend under faults: a tool raising ``KeyboardInterrupt`` on a worker, a store
file replaced between batches, the store's options on the workers, and what the progress
and the frame say a row used when its worker died or its chat continued after a decision.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _ray_agents import FakeServerChat, close_providers, handler

import nbagent
from nbagent.testing import FakeLLMServer


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(handler=handler) as fake:
        try:
            yield fake
        finally:
            close_providers()


def _in_time(fn: Any, seconds: float = 90) -> Any:
    """``fn()`` on a thread: its result, or a failure (not a hung test) past ``seconds``."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"no result after {seconds:g} s: the batch hung"
    return out[0]


def test_a_tool_raising_keyboard_interrupt_fails_its_row_and_the_worker_goes_on(
    ray_cluster: Any, server: FakeLLMServer
) -> None:
    """The interrupt ended the worker's event loop: the batch never returned, and the kept
    worker (alive to Ray) hung every later batch of the process. It is the row's failure:
    no Ctrl-C reaches a worker (the driver's stop button cancels the rows)."""
    make = FakeServerChat(server.openai_base_url)
    options = {"workers": 1}  # one worker: the later batch runs where the interrupt was

    def first() -> Any:
        return nbagent.batch(
            ["interrupt now", "bb", "ccc"], make, progress=False, backend="ray",
            backend_options=options,
        )  # fmt: skip

    result = _in_time(first)
    assert list(result["status"]) == ["failed", "done", "done"], result[["status", "error"]]
    assert result.loc[0, "error_type"] == "KeyboardInterrupt"
    assert "not the stop button" in result.loc[0, "error"]
    later = _in_time(
        lambda: nbagent.batch(
            ["dddd"], make, progress=False, backend="ray", backend_options=options
        )
    )
    assert list(later["status"]) == ["done"] and later.loc[0, "reply"] == "dddd: 8"
