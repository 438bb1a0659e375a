"""Run a coroutine to completion from synchronous code, even inside a running loop.

Jupyter (and IPython with autoawait) runs an event loop in the kernel's main
thread, so ``asyncio.run`` fails there with "event loop is already running".
:func:`run_sync` detects that case and runs the coroutine on nbagent's own
background loop thread, blocking the caller until it finishes. A
``KeyboardInterrupt`` (the notebook's stop button) cancels the coroutine and
waits for it to settle before re-raising, so nothing is left half-recorded.

While :func:`run_sync` blocks a running loop (the kernel's, during
``chat.ask()`` in a cell), that loop is recorded as *blocked*:
:func:`run_on_loop` (how an async tool bound to a loop with ``loop=``, or an
MCP session on the background loop, is reached) fails at once with
:class:`~nbagent.ToolLoopError` for a blocked loop instead of waiting forever.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ._errors import ToolLoopError

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures
    import contextvars

T = TypeVar("T")

_local = threading.local()
_bg_lock = threading.Lock()
_bg_loop: asyncio.AbstractEventLoop | None = None
_blocked: dict[asyncio.AbstractEventLoop, int] = {}  # loops run_sync is blocking, and how often
_blocked_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    import asyncio

    global _bg_loop
    with _bg_lock:
        if _bg_loop is None or _bg_loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="nbagent-loop", daemon=True)
            thread.start()
            _bg_loop = loop
        return _bg_loop


def spawn(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Run ``coro`` as a task on nbagent's background loop (from any thread); its future.

    How nbagent's background work runs (the store's follower, its listener on
    PostgreSQL, its write retries and WAL checkpoints): tasks on one loop, no
    thread of their own.
    """
    import asyncio

    try:
        return asyncio.run_coroutine_threadsafe(coro, _background_loop())
    except BaseException:
        coro.close()  # never started: no "never awaited" warning
        raise


_EXIT_WAIT = 5.0
"""How long interpreter exit may wait on the background loop, in all: for its tasks to settle
once cancelled, then for the finalizers' releases (:func:`let_go`). One deadline for the
whole exit: a loop blocked by a sync call (``time.sleep`` in an async tool) holds it once,
not once for the settling and again for each chat and store left open."""

_exiting = False  # set by _settle_background: the interpreter exits
_exit_deadline = 0.0  # when the exit stops waiting on the background loop (time.monotonic())


def exiting_here() -> bool:
    """Whether the interpreter exits and this thread runs nbagent's background loop: no call
    may start here any more (one not started stays runnable, for the next process)."""
    return _exiting and on_background_loop()


def _exit_left() -> float:
    """Seconds the exit may still wait on the background loop (none once its deadline passed)."""
    import time

    return max(0.0, _exit_deadline - time.monotonic())


async def _cancel_all() -> None:
    """Cancel every other task of the running loop and await them, again for the tasks their
    ends made (a few rounds: one that makes another each time it ends is left)."""
    import asyncio

    this = asyncio.current_task()
    for _ in range(3):
        tasks = [t for t in asyncio.all_tasks() if t is not this]
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # their errors taken: none logged


def _settle_background() -> None:
    """At interpreter exit, cancel the background loop's tasks and wait for them to end (until
    the exit's deadline, :data:`_EXIT_WAIT`).

    By then Python has waited for its pools' threads (``concurrent.futures``' exit hook, run
    by ``threading._shutdown`` before any ``atexit`` hook): a tool that ran on one has
    returned, and its pool takes no more work. Its round, cancelled, keeps that outcome (the
    runner waits for a call's thread however it is cancelled): the result is recorded. An
    async tool still running there is cancelled at once ("cancelled while it ran": it did
    start), and the round's calls not started stay as they were, runnable (the runner answers
    none of them at exit; :func:`exiting_here` refuses their claims), for the next process.
    Nothing waits for a call to end on its own: an async tool may run for minutes, and a
    notebook kernel shut down politely is killed after 2.5 s (jupyter_client's
    ``shutdown_wait_time``), before anything was written. Nor for a call on a loop of the
    user's own (the kernel's, one on a thread of theirs): this loop cannot run it.

    The loop's daemon thread is never joined: its pending tasks (a shared async client's
    keeper, closing the client when its loop shuts down, a store's follower) were collected
    during finalization with asyncio's "Task was destroyed but it is pending!", their
    cleanup never run. They now end as ``asyncio.run``'s own do; the loop keeps running for
    whatever runs after this hook (the chats' and stores' finalizers: :func:`let_go`).
    """
    import asyncio
    import time

    global _exiting, _exit_deadline
    _exiting = True
    _exit_deadline = time.monotonic() + _EXIT_WAIT
    loop = _bg_loop
    if loop is None or loop.is_closed() or not loop.is_running() or on_background_loop():
        return
    try:
        asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(_exit_left())
    except Exception:  # exit goes on whatever happens here (past its deadline: a blocked loop)
        pass
    except BaseException:  # the stop button pressed at exit: nothing waits any more
        _exit_deadline = 0.0


class _Anchor:
    """An object that lives as long as the module: the finalizer made on it registers
    ``weakref.finalize``'s exit hook."""


_anchor = _Anchor()
# ``weakref.finalize`` registers its exit hook (which runs the finalizers still alive: a chat's
# last write and its store's release, a store's own) with the first finalizer made. Made here,
# before the hook below is registered, it runs after that hook (atexit runs hooks last in,
# first out): the background loop's calls end and are recorded before their chats' stores are
# written a last time and closed. Registered later, it ran first: the store closed before the
# loop recorded a result the exit had just waited for (in doubt on the next load, though the
# call ran). Registered earlier by another module, it runs after this one anyway.
weakref.finalize(_anchor, int).atexit = False
# at import: it runs after the hooks of nbagent's modules that use the loop
atexit.register(_settle_background)


def let_go(fn: Callable[[], object]) -> None:
    """Run ``fn`` (a finalizer's release, which takes locks) off this thread: on a worker of
    the background loop (a garbage collector's finalizer may interrupt, on this thread, the
    code holding the lock ``fn`` takes). At interpreter exit it runs on the loop's own thread
    (the pools take no work: :func:`in_worker`), and this thread waits for it until the
    exit's deadline (:data:`_EXIT_WAIT`, shared with the loop's settling): left to the daemon
    thread, it was cut off by the end of the process. Past the deadline (the loop is blocked)
    it is not waited for. With no background loop left to run it, it runs here.
    """
    global _exit_deadline
    try:
        future = spawn(in_worker(fn))
    except RuntimeError:  # no background loop (no thread may start at exit)
        fn()
        return
    if _exiting and not on_background_loop() and (left := _exit_left()) > 0:
        try:
            future.result(left)
        except Exception:  # exit goes on whatever happens there
            pass
        except BaseException:  # the stop button pressed at exit: nothing waits any more
            _exit_deadline = 0.0


def _pools_shut() -> bool:
    """Whether Python's thread pools take no more work: the interpreter exits (their module's
    exit hook ran, or ``threading``'s shutdown began: a pool module first imported then
    cannot even be, "can't register atexit after shutdown"; or this module's hook ran)."""
    import sys

    pools = sys.modules.get("concurrent.futures.thread")
    shutting = getattr(threading, "_SHUTTING_DOWN", False)
    return _exiting or bool(shutting) or bool(getattr(pools, "_shutdown", False))


async def in_worker(fn: Callable[..., T], *args: Any) -> T:
    """Await a blocking ``fn(*args)`` run on a worker thread, so the loop never waits on it.

    How nbagent's own blocking work (a store's sync database call) is awaited. On the
    background loop, on that loop's pool (nbagent's background work's). On any other loop
    (the async driver's writes on the app's loop), on nbagent's pool for that work
    (:func:`_io_pool`), not the loop's default executor: the app's own ``to_thread`` calls
    filled that one, and every chat's turn waited behind them (1 ms became 2 s). Not on the
    tools' pool either: its threads may all be stuck in timed-out calls, and the writes must
    still go on. From a loop run by one of the pool's own threads, on that loop's default
    executor: a pool thread never waits for the pool.

    Once the interpreter exits, Python's pools take no more work ("cannot schedule new
    futures after interpreter shutdown"): ``fn`` then runs on the loop's own thread. A
    call's result written as the script ends, a store's last release, failed instead.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    own = loop is _bg_loop or getattr(_local, "io_worker", False)
    try:
        future = loop.run_in_executor(None if own else _io_pool(), fn, *args)
    except RuntimeError:
        if not _pools_shut():
            raise
        return fn(*args)  # the interpreter exits: no pool takes work, this thread does it
    return await future


_io: concurrent.futures.ThreadPoolExecutor | None = None
_io_lock = threading.Lock()


def _io_pool() -> concurrent.futures.ThreadPoolExecutor:
    """One pool, for every loop, of threads for nbagent's blocking work (made on demand,
    idle ones reused; as many as a loop's default executor has)."""
    global _io
    with _io_lock:
        if _io is None:
            import concurrent.futures
            import os

            _io = concurrent.futures.ThreadPoolExecutor(
                min(32, (os.cpu_count() or 1) + 4),
                thread_name_prefix="nbagent-io",
                initializer=_mark_io_worker,
            )
        return _io


def _mark_io_worker() -> None:
    _local.io_worker = True


async def to_the_end(fn: Callable[..., T], *args: Any) -> T:
    """:func:`in_worker`; cancelled, it still waits for the thread to end (then raises).

    A store write cannot be taken back once its thread started: a batch cancelled
    while it records a chat returns only once the record is written, so a rerun
    started after it finds the record (and continues that chat) instead of
    racing it with a new chat for the same input.
    """
    import asyncio

    future = asyncio.ensure_future(in_worker(fn, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await future
        raise


def on_background_loop() -> bool:
    """Whether this thread is running nbagent's background loop (it must not wait for its tasks)."""
    import asyncio

    try:
        return asyncio.get_running_loop() is _bg_loop
    except RuntimeError:
        return False


def in_running_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Finish a coroutine that never suspends, without an event loop.

    Used for rounds of plain synchronous tools run one after another: the
    coroutine only calls functions, so one ``send`` completes it. While it runs,
    :func:`running_inline` is true for it (even on a thread whose loop runs: a cell).
    """
    previous = getattr(_local, "inline", None)
    _local.inline = _running_task()
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    finally:
        _local.inline = previous
    coro.close()
    raise RuntimeError("internal error: coroutine suspended in run_inline")


_NO_TASK = object()


def _running_task() -> object:
    """The task running here (a sentinel where no loop runs, ``None`` outside a task)."""
    import asyncio

    try:
        return asyncio.current_task()
    except RuntimeError:
        return _NO_TASK


def running_inline() -> bool:
    """Whether the coroutine asking is run by :func:`run_inline` (it must not suspend),
    rather than awaited on an event loop (which a blocking call would hold up).

    Where no loop runs, always. Where one runs (a sync ``ask()`` in a notebook's cell),
    when the innermost ``run_inline`` of this thread was entered from the task running now
    (a coroutine awaited on a loop is in a task of that loop; one a sync tool run inline
    drives with ``asyncio.run`` is on a new loop, in another task).
    """
    here = _running_task()
    return here is _NO_TASK or getattr(_local, "inline", _NO_TASK) is here


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` and return its result, whether or not a loop is running here.

    It runs in a copy of the caller's context either way (``contextvars``: a request id,
    OpenTelemetry's current span): the background loop's task is made with one, and this
    thread's runner is given one each time (its own, made at its first run, was that run's
    caller's: a later caller's variables were not seen).

    Where a loop runs here (a notebook's cell), ``coro`` runs on nbagent's background loop
    while this thread waits; the stop button (``KeyboardInterrupt``) cancels it there and
    this thread waits for it to settle before re-raising (pressed again, it waits on):
    returned at once, the round went on there, unseen, after the chat's turn was given
    back, and a next cell's round ran a call the old round then recorded as cancelled
    before it ran. On the background loop itself (a sync ``inner.ask()`` in an async tool
    of a chat asked from a cell) ``coro`` runs on a thread of its own (scheduled on the loop
    this thread runs, it waited for ever); so it does while the background loop is blocked
    so (a sub-agent of that inner chat asking its own with the sync API: scheduled on the
    blocked background loop, it waited for ever too). Where no loop runs, on this thread's runner;
    stopped there with tasks left (the stop button landing between two of their steps), they
    are cancelled and settled before the exception is re-raised, so none is left to run
    inside the next call's round.
    """
    import contextvars

    if not in_running_loop():
        return _on_this_thread(coro, contextvars.copy_context())
    if on_background_loop() or _background_blocked():
        with blocking():
            return _on_own_thread(coro, contextvars.copy_context())
    with blocking():  # before the coroutine can start: it may ask at once
        return _on_background(coro)


def _background_blocked() -> bool:
    """Whether a sync call blocks nbagent's background loop (it waits for a nested round
    on a thread of its own): a coroutine scheduled there now would wait for it, and when
    that round is the one asking (sub-agents asked with the sync API from async tools,
    three deep in a cell, four in a script), for ever."""
    loop = _bg_loop
    return loop is not None and is_blocked(loop)


class _Raised(Exception):
    """A ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``) the coroutine raised,
    carried out of its task (raised there, it would end the loop running it)."""

    def __init__(self, original: BaseException):
        super().__init__(repr(original))
        self.original = original


class _Remote:
    """``coro`` run as a task on ``loop`` (its body: ``body``, a coroutine awaiting it) for a
    waiter on another thread or loop: :attr:`ended` is the task's end (its result, its error,
    its cancellation). :meth:`start` and :meth:`cancel` run on ``loop``
    (``call_soon_threadsafe``), start first."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any],
        body: Coroutine[Any, Any, Any],
    ):
        import concurrent.futures

        self.loop, self._coro, self._body = loop, coro, body
        self.ended: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.ended.set_running_or_notify_cancel()  # only the task (or its never starting) ends it
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        if self.ended.done():  # cancelled before it could start: it never runs
            self._body.close()
            return
        try:
            self._task = self.loop.create_task(self._body)
        except BaseException as exc:
            self._coro.close()
            self.ended.set_exception(exc)
            return
        self._task.add_done_callback(self._settle)

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
        elif not self.ended.done():  # stopped before start was scheduled: it never runs
            import asyncio

            self._coro.close()
            self._body.close()
            self.ended.set_exception(asyncio.CancelledError())

    def _settle(self, task: asyncio.Task[Any]) -> None:
        import asyncio

        self._coro.close()  # cancelled before its first step: no "never awaited" warning
        if task.cancelled():
            self.ended.set_exception(asyncio.CancelledError())
        elif (exc := task.exception()) is not None:
            self.ended.set_exception(exc)
        else:
            self.ended.set_result(task.result())


async def _carried(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio

    try:
        return await coro
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:
        raise _Raised(exc) from None


def _unwrapped(future: concurrent.futures.Future[T]) -> T:
    """``future``'s result (waited for as :func:`_wait` does); a carried ``BaseException``
    raised as it was."""
    _wait(future)
    try:
        return future.result()
    except _Raised as carried:
        raise carried.original from None


_SIGNAL_TICK = 0.05
"""Seconds the main thread waits on a lock at a time, so that a signal it missed as the wait
began is taken this late at worst (see :func:`_wait`)."""


def _wait(future: concurrent.futures.Future[Any]) -> None:
    """Wait until ``future`` is done; on the main thread, taking the stop button at once.

    The kernel gives a process's SIGINT to any of its threads that does not block it, and
    often not to the main thread (a worker's, a loop's). CPython's C handler, run there,
    only sets a flag for the main thread to run ``KeyboardInterrupt`` when it next runs
    bytecode; a lock wait of the main thread is cut short only by a signal delivered to
    that thread. Waited for without a timeout, the press was taken when the round ended:
    a 3 s async tool ran to its end after it (1 run in 3 of the stop-button test, 4 in 5
    under load; with SIGINT blocked in every other thread, never). Waited for in short
    steps, a pending press is taken as the step returns. Elsewhere (no signal is handled
    there) it simply waits.
    """
    import concurrent.futures

    if threading.current_thread() is not threading.main_thread():
        concurrent.futures.wait([future])
        return
    while not future.done():
        concurrent.futures.wait([future], timeout=_SIGNAL_TICK)


def _on_background(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` as a task on the background loop, waiting for it to end whatever happens
    here: the stop button cancels the task and waits again (a future of
    ``run_coroutine_threadsafe``, cancelled, ended the wait at once, the task still running)."""

    loop = _background_loop()
    remote = _Remote(loop, coro, _carried(coro))  # on the loop, in a copy of the caller's context
    ended: concurrent.futures.Future[T] = remote.ended
    try:
        try:
            loop.call_soon_threadsafe(remote.start)
        except RuntimeError:  # the loop was closed: never started
            remote.cancel()
            raise
        # The task may run, and the stop button be pressed, before this thread waits (even
        # before call_soon_threadsafe returns): the press is taken below either way.
        return _unwrapped(ended)
    except KeyboardInterrupt:
        while True:
            try:
                loop.call_soon_threadsafe(remote.cancel)
                _wait(ended)
                break
            except KeyboardInterrupt:  # pressed again: still waited for
                continue
        raise


def _on_this_thread(coro: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    import asyncio

    held: _Held | None = getattr(_local, "runner", None)
    if held is None:
        held = _local.runner = _Held(asyncio.Runner())
        # Closed as its thread ends (the thread's locals are dropped then; at exit for the
        # main thread), so no event loop is left unclosed. Tied to the Thread object, it
        # lived as long as anyone kept that (a list of finished workers): an event loop's
        # three file descriptors per thread, until the process ran out of them.
        held.closer = weakref.finalize(held, _close_runner, held.runner)
    runner = held.runner
    try:
        return runner.run(coro, context=context)
    except BaseException:
        _settle_left(runner)
        # A run stopped from outside (the stop button between the run's end and the loop's
        # own stop, as it ran its loop) can leave the loop's callbacks half done: a stale
        # "stop" of that run, ready, stopped the thread's next run at once ("Event loop
        # stopped before Future completed."), a chat nobody touched failing with its call
        # recorded cancelled. The thread's next run gets a new runner.
        _local.runner = None
        held.closer.detach()
        _discard(runner)
        raise


class _Held:
    """This thread's runner, held only by the thread's locals (dropped as the thread ends)."""

    __slots__ = ("__weakref__", "closer", "runner")

    def __init__(self, runner: asyncio.Runner):
        self.runner = runner
        self.closer: weakref.finalize[Any, Any]


def _discard(runner: asyncio.Runner) -> None:
    """Close a runner whose run was stopped, whatever its loop was left holding.

    Its async generators are finalized (a stale stop cuts that short: it is not tried
    again), then its loop is closed without waiting for the loop's default executor's
    threads (``Runner.close`` joins them: a tool's stuck ``to_thread`` held the stop
    button's ``KeyboardInterrupt`` back for as long as it ran). The runner itself is
    dropped unclosed (nothing of it is left open).
    """
    import asyncio
    import warnings

    try:
        loop = runner.get_loop()
    except RuntimeError:  # closed already
        return
    if loop.is_closed():
        return
    with contextlib.suppress(BaseException):  # a stale stop, the stop button again
        loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()  # its default executor is shut down without waiting
    # The runner made it this thread's event loop: no longer (as Runner.close would).
    with warnings.catch_warnings(), contextlib.suppress(Exception):
        warnings.simplefilter("ignore", DeprecationWarning)
        if asyncio.get_event_loop_policy().get_event_loop() is loop:
            asyncio.set_event_loop(None)


def _settle_left(runner: asyncio.Runner) -> None:
    """Cancel the tasks a stopped run left on ``runner``'s loop and run them to their end."""
    import asyncio

    with contextlib.suppress(RuntimeError):  # closed
        loop = runner.get_loop()
        while left := [t for t in asyncio.all_tasks(loop) if not t.done()]:
            for task in left:
                task.cancel()
            with contextlib.suppress(BaseException):  # theirs, or the stop button again
                loop.run_until_complete(_settled(left))


async def _settled(tasks: list[asyncio.Task[Any]]) -> None:
    import asyncio

    await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved: no "Task exception was never retrieved"


def _on_own_thread(coro: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    """Run ``coro`` to its end on a new thread of its own (its own event loop), waiting."""
    import asyncio
    import concurrent.futures

    ended: concurrent.futures.Future[T] = concurrent.futures.Future()
    ended.set_running_or_notify_cancel()

    def run() -> None:
        try:
            with asyncio.Runner() as runner:
                ended.set_result(runner.run(coro, context=context))
        except BaseException as exc:
            ended.set_exception(exc)
        finally:
            coro.close()

    threading.Thread(target=run, name="nbagent-nested", daemon=True).start()
    return ended.result()


@contextlib.contextmanager
def blocking() -> Iterator[None]:
    """Mark the loop running here (if any) as blocked while the block waits on its thread."""
    import asyncio

    try:
        blocked = asyncio.get_running_loop()
    except RuntimeError:
        yield
        return
    with _blocked_lock:
        _blocked[blocked] = _blocked.get(blocked, 0) + 1
    try:
        yield
    finally:
        with _blocked_lock:
            n = _blocked.pop(blocked) - 1
            if n:
                _blocked[blocked] = n


def _close_runner(runner: asyncio.Runner) -> None:
    """Close a finished thread's runner, wherever the garbage collector finalizes it.

    On a thread running a loop of its own (the background loop, a kernel's) the
    runner's loop cannot be run to shut down cleanly: it is only closed.
    """
    if not in_running_loop():
        runner.close()
        return
    with contextlib.suppress(RuntimeError):  # the runner was closed already
        runner.get_loop().close()


UNSTARTED = "nbagent: cancelled before it began"
"""The message of a ``CancelledError`` raised for work cancelled before it began (a tool's
task before its first step, a call still queued for a worker thread): the runner records
such a call "cancelled before it ran", never "while it ran"."""


def is_blocked(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether :func:`run_sync` is blocking ``loop`` (its thread waits for a round)."""
    return loop in _blocked


async def run_on_loop(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop, what: str
) -> T:
    """Await ``coro`` on ``loop`` from whichever loop is running here.

    On ``loop`` itself it is awaited directly; otherwise it is run as a task on
    ``loop`` and its result awaited here; cancelling the caller cancels it there and
    waits for it to settle (its result kept if it finished anyway).

    Raises:
        ToolLoopError: ``loop`` is closed, not running, or blocked by
            :func:`run_sync` (it could never run ``coro``). ``what`` names the
            caller in the message (``"tool 'fetch'"``).
    """
    import asyncio

    if asyncio.get_running_loop() is loop:
        return await coro
    problem = None
    if loop.is_closed() or not loop.is_running():
        problem = "is closed" if loop.is_closed() else "is not running"
    elif is_blocked(loop):
        problem = (
            "is blocked: chat.ask() (or another sync call) is waiting on that loop's own "
            "thread, so it cannot run anything until the call returns; use "
            "`await chat.ask_async(...)` there instead"
        )
    if problem is not None:
        coro.close()
        raise ToolLoopError(f"{what} runs on an event loop that {problem}")
    began: list[bool] = []

    async def begin() -> T:
        began.append(True)
        return await coro

    remote = _Remote(loop, coro, begin())  # on ``loop``, in a copy of this caller's context
    try:
        loop.call_soon_threadsafe(remote.start)
    except RuntimeError:  # closed meanwhile
        remote.cancel()
        raise ToolLoopError(f"{what} runs on an event loop that is closed") from None
    ended: concurrent.futures.Future[T] = remote.ended
    waited = asyncio.wrap_future(ended)
    try:
        return await asyncio.shield(waited)
    except asyncio.CancelledError:
        # Cancelled here: cancelled there, and waited for however often this task is
        # cancelled meanwhile, as a call on a thread is (``ToolRunner._after_cancel``).
        # Given up at once, the caller's round ended while the call still ran (its cleanup,
        # or all of its work, came after the chat had moved on), recorded as cancelled.
        with contextlib.suppress(RuntimeError):  # that loop was closed: nothing runs there
            loop.call_soon_threadsafe(remote.cancel)
        while not waited.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([waited])
        # It answered before the cancellation reached it (the stop button taken as the
        # answer woke it), or finished anyway: the answer stands, and the caller, still
        # being cancelled, stops after keeping it (``ToolRunner``). Dropped, a call that
        # ran would be reported as never done.
        if waited.cancelled() or isinstance(waited.exception(), asyncio.CancelledError):
            if not began:  # cancelled there before it took a step: it never ran
                raise asyncio.CancelledError(UNSTARTED) from None
            raise
        return waited.result()  # (its own error raised: how the call really ended)


@contextlib.contextmanager
def stop_held() -> Iterator[None]:
    """Hold the stop button (SIGINT) until the block is done, then take it.

    For a change made in several steps that must never be left half made: a decision
    written to the store and then put on the call (its verdict, its status, its
    answer). The interrupt lands between two bytecodes, and one landing between the
    verdict and the status left a call "awaiting approval" with a decision: nothing
    asked for it again, nothing ran it (found by the stop-button property). Only in the
    main thread, where Python delivers signals, and only over a handler Python runs
    (the default one raises ``KeyboardInterrupt``; a kernel's too); elsewhere the block
    just runs. A press held is delivered as the block ends, to the handler that was there.

    Through ``_signal``, the C module under ``signal``: ``signal.getsignal`` and
    ``signal.signal`` try to turn a handler into an enum member first, and one that is none
    (``asyncio.run``'s, a partial holding the main task) fails that with a message quoting
    its ``repr``: the task's, with its coroutine and stack, three times a block, about 6%
    of a batch's CPU.
    """
    import _signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = _signal.getsignal(_signal.SIGINT)
    if not callable(previous):  # ignored, the OS default, or set outside Python
        yield
        return
    held: list[tuple[int, Any]] = []
    _signal.signal(_signal.SIGINT, lambda signum, frame: held.append((signum, frame)))
    try:
        yield
    finally:
        _signal.signal(_signal.SIGINT, previous)
        if held:
            previous(*held[0])
