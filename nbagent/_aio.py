"""Run a coroutine to completion from synchronous code, even inside a running loop.

Jupyter (and IPython with autoawait) runs an event loop in the kernel's main
thread, so ``asyncio.run`` fails there with "event loop is already running".
:func:`run_sync` detects that case and runs the coroutine on nbagent's own
background loop thread, blocking the caller until it finishes. A
``KeyboardInterrupt`` (the notebook's stop button) cancels the coroutine and
waits for it to settle before re-raising, so nothing is left half-recorded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()
_bg_lock = threading.Lock()
_bg_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _bg_loop
    with _bg_lock:
        if _bg_loop is None or _bg_loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="nbagent-loop", daemon=True)
            thread.start()
            _bg_loop = loop
        return _bg_loop


def in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Finish a coroutine that never suspends, without an event loop.

    Used for rounds of plain synchronous tools run one after another: the
    coroutine only calls functions, so one ``send`` completes it.
    """
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("internal error: coroutine suspended in run_inline")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` and return its result, whether or not a loop is running here."""
    if not in_running_loop():
        runner: asyncio.Runner | None = getattr(_local, "runner", None)
        if runner is None:
            runner = asyncio.Runner()
            _local.runner = runner
            # Closed with its thread (or at exit), so no event loop is left unclosed.
            weakref.finalize(threading.current_thread(), runner.close)
        return runner.run(coro)
    future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(
        coro, _background_loop()
    )
    try:
        return future.result()
    except KeyboardInterrupt:
        future.cancel()
        with contextlib.suppress(BaseException):
            future.result(timeout=30)
        raise
