"""``BatchRun.stop()`` lets its caller's own cancellation through.

It cancelled the run and waited for it under ``suppress(BaseException)``: a caller cancelled
meanwhile (the stop button pressed while a rerun cell waited for the earlier run to stop)
swallowed its own ``CancelledError`` and went on as if nothing had been asked. The run is
still stopped and finished; the caller's cancellation is raised after.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.batch._run import get_run
from nbagent.testing import ScriptedProvider, call_tools, reply

STARTED = threading.Event()


@tool
def slow_lookup(item: str) -> str:
    """Look an item up, slowly.

    Args:
        item: The item.
    """
    STARTED.set()
    time.sleep(1.0)
    return f"{item}: found"


def make_chat() -> Chat:
    script = [call_tools(("slow_lookup", {"item": "x"})), reply("found")]
    return Chat(provider=ScriptedProvider(script)).with_tools(slow_lookup)


def test_a_caller_cancelled_while_stop_waits_is_cancelled_and_the_run_stopped() -> None:
    async def main() -> tuple[bool, bool]:
        STARTED.clear()
        running = asyncio.ensure_future(
            nbagent.batch_async(["a"], make_chat, progress=False, name="stop-cancelled")
        )
        while not STARTED.is_set():  # the row's call runs (a second, on a worker thread)
            await asyncio.sleep(0.01)
        run = get_run("stop-cancelled")
        assert run is not None and run.running
        stopping = asyncio.ensure_future(run.stop())
        await asyncio.sleep(0.1)  # stop() waits for the running call to settle
        assert not stopping.done()
        stopping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopping
        frame = await running  # the stopped run's frame (no hang)
        assert list(frame.index) == [0]
        return stopping.cancelled(), run.running

    cancelled, still_running = asyncio.run(main())
    assert cancelled  # the caller's cancellation went through
    assert not still_running  # and the run was stopped and finished
