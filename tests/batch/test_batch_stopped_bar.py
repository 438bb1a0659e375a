"""The progress bar of a batch stopped while rows run (the stop button cancels the batch's
coroutine): it used to stay "running 16 · queued 8 · ETA 10s" with its clock frozen, in the
cell and in the saved notebook. It now says stopped: what finished, what did not, how to go
on; no ETA, and its clock stays stopped."""

from __future__ import annotations

import asyncio
import contextlib
import io
import time

import pandas as pd

import nbagent
from nbagent import Chat, tool
from nbagent.batch._display import TerminalDisplay
from nbagent.batch._progress import Progress, progress_html, progress_text

_gate: asyncio.Event | None = None


@tool
async def slow_status(order_id: int) -> str:
    """Look up an order's status slowly.

    Args:
        order_id: The order number.
    """
    if order_id > 3:
        assert _gate is not None
        await _gate.wait()  # never set: these rows run until the batch is stopped
    return "delivered"


def test_a_stopped_batch_says_stopped_and_its_clock_stops() -> None:
    async def main() -> TerminalDisplay:
        global _gate
        _gate = asyncio.Event()
        display = TerminalDisplay(Progress([]), stream=io.StringIO())
        tickets = pd.DataFrame({"order_id": list(range(1, 13))})
        task = asyncio.ensure_future(
            nbagent.batch_async(
                tickets,
                lambda: Chat("demo").with_tools(slow_status),
                prompt="Check the status of order {order_id}",
                concurrency=4,
                progress="text",
                _display=display,
            )
        )
        deadline = time.monotonic() + 20
        while display.progress.snapshot().counts["done"] < 3:
            assert time.monotonic() < deadline, display.progress.snapshot()
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        task.cancel()  # what the stop button does to the batch's coroutine
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return display

    display = asyncio.run(main())
    snap = display.progress.snapshot()
    assert snap.eta is None
    assert snap.counts["done"] == 3
    text = progress_text(snap)
    assert "stopped" in text and "not finished 9" in text, text
    assert "ETA" not in text and "running" not in text and "queued" not in text, text
    html = progress_html(snap)
    assert "stopped" in html and "ETA" not in html
    assert 'data-status="stopped"' in html and "run the cell again" in html
    assert snap.stopped and snap.unfinished == 9
    # what the display drew last (the saved notebook's bar, the terminal's last line)
    last = display.stream.getvalue().strip().splitlines()[-1]  # type: ignore[attr-defined]
    assert "stopped" in last and "ETA" not in last, last
    # its clock stays stopped
    elapsed = snap.elapsed
    time.sleep(0.3)
    assert display.progress.snapshot().elapsed == elapsed


def test_a_batch_that_finishes_is_not_stopped() -> None:
    tickets = pd.DataFrame({"order_id": [1, 2, 3]})
    display = TerminalDisplay(Progress([]), stream=io.StringIO())
    asyncio.run(
        nbagent.batch_async(
            tickets,
            lambda: Chat("demo").with_tools(slow_status),
            prompt="Check the status of order {order_id}",
            progress="text",
            _display=display,
        )
    )
    snap = display.progress.snapshot()
    assert not snap.stopped and snap.counts["done"] == 3
    assert "stopped" not in progress_text(snap)
