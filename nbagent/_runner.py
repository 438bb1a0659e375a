"""Runs one round of approved tool calls: sequentially, on threads, or as tasks.

The runner knows nothing about chats, approvals or rendering. It gets the
runnable calls of a round (already gated and validated) and a
:class:`RoundHooks` object, and reports each call's start and outcome through
it, in the order things happen.

Modes:
    ``sequential``: one call at a time, in call order. Sync tools run on the
        thread that drives the chat (so they may touch thread-bound state), but
        on a worker thread when that is nbagent's shared background loop (a
        click's continuation, a batch in a kernel) or the chat is a batch's row
        (:func:`sync_tools_off_loop`: the loop runs the other rows); async tools
        are awaited.
    ``threads``: every call on a worker thread (async tools get a private event
        loop there), at most ``max_concurrency`` at once.
    ``async``: every call is a task on the driving event loop; async tools run on
        the loop itself, sync tools are offloaded to worker threads.

    A round of one plain sync call run by the sync API without a loop (``run_inline``)
    runs it on the caller's thread whatever the mode (nothing else waits for it), and
    reports ``sequential``; awaited on a loop, even a lone call follows its mode.

Timeouts: an async tool that times out is cancelled; a sync tool's thread
cannot be killed, so it is abandoned (its eventual return value is discarded)
and the call is recorded as ``timed_out`` at once. A sync call still queued for
a worker thread when its timeout expires never starts: the call reported
``timed_out`` is never run afterwards. Abandoned threads are counted
(:func:`abandoned_threads`, and in the call's error text) and bounded by the
pool's size (:data:`POOL_SIZE`): once every worker is stuck, new sync calls
time out before they start instead of piling up threads. An abandoned thread keeps
its call's slot in the round until it ends (:class:`_Slots`): a round run one call at
a time never starts the next beside it; that call waits at most its own timeout.

A tool that raises ``SystemExit`` (or any ``BaseException`` but
``KeyboardInterrupt`` and cancellation) fails like one that raises an
``Exception``: an ``error`` outcome, never a call left running.

An async tool bound to an event loop (``Tool.loop``, ``@tool(loop=...)``) is
awaited on that loop in every mode (:func:`~nbagent._aio.run_on_loop`); one
whose loop is blocked by the sync driver fails with ``ToolLoopError`` at once.

Cancellation (``chat.cancel()``, KeyboardInterrupt): calls that have not started
are cancelled (a call still queued for a worker thread, every thread busy, too: it is
dropped from the queue, "cancelled before it ran", and never runs, unless it is a
sequential call sent there only to keep the loop free: ``_Seat.whole``); calls already
running settle first and keep their real outcome. An async
tool that returned as its round was cancelled (in the same turn of the loop) keeps its
result; one whose task never took a step is "cancelled before it ran", never "while it ran".

Context: every call runs in a copy of the caller's context (``contextvars``), in every
mode, with or without a timeout: what the code asking the chat set in a context variable
(a request id, OpenTelemetry's current span) is what the tool reads, on whichever thread or
task it runs, and what the tool sets stays its own. The call's start hook
(:meth:`RoundHooks.start`: its ``ToolCallStarted`` event and whoever hears it) runs in that
same copy, before the tool, marked as the call's (:func:`in_call_context`): a listener may
set a context variable there for the tool to see and nothing else (the tracer makes the
call's ``execute_tool`` span current, so the tool's own spans are its children).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from ._aio import UNSTARTED as _UNSTARTED
from ._aio import (
    exiting_here,
    on_background_loop,
    run_on_loop,
    run_sync,
    running_inline,
    stop_held,
)
from ._events import utcnow
from ._recording import RecordedResult
from ._tools import CallReporter, CancelEvent, InputAsker, Tool, _bind_call
from ._types import ConcurrencyMode, RunStatus, ToolCall

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

Mode = ConcurrencyMode


@dataclass
class Job:
    """One runnable call: the tool and the validated keyword arguments.

    ``replayed``: the call's recorded outcome (a :class:`~nbagent._recording.RecordedResult`,
    ``replay_tools``): the call starts and finishes as usual, but the tool is not run.
    """

    call: ToolCall
    tool: Tool
    kwargs: dict[str, Any]
    timeout: float | None = None
    replayed: RecordedResult | None = None
    cancel: CancelEvent | None = None  # the chat's (a tool may give up its wait on it)
    report: CallReporter | None = None  # the call's progress and log reports (the chat's)
    asker: InputAsker | None = None  # how the call asks a person mid-call (an MCP elicitation)


@dataclass
class Outcome:
    """How a call ended."""

    call: ToolCall
    status: RunStatus
    value: Any = None
    error: BaseException | None = None
    message: str | None = None
    started_at: datetime | None = None
    finished_at: datetime = field(default_factory=utcnow)
    duration_ms: float | None = None
    replayed: RecordedResult | None = None


_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "nbagent_call_context", default=None
)


_OFF_LOOP: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nbagent_sync_tools_off_loop", default=False
)


@contextlib.contextmanager
def sync_tools_off_loop() -> Iterator[None]:
    """Inside, a sequential round's sync tool runs on a worker thread (the shared pool),
    not on the thread of the loop driving the chat: a batch drives its rows' chats so
    (``batch/_local._Row``), since that loop runs every other row too. On it, a tool that
    blocked held up every row, and the calls other rows had claimed, recorded running in
    the store (their claims committed together), did not start until it returned: a
    process killed meanwhile left them in doubt, never run. The round still runs its
    calls one at a time, in call order."""
    token = _OFF_LOOP.set(True)
    try:
        yield
    finally:
        _OFF_LOOP.reset(token)


def in_call_context(call_id: str) -> bool:
    """Whether the code running here runs in the context of call ``call_id``'s own: its
    start hook or its tool (see Context in the module docstring). A context variable set
    here is seen by that call's tool and by nothing else."""
    return _CALL.get() == call_id


class RoundHooks(Protocol):
    """What the runner reports to (implemented by the chat)."""

    async def ready(self, job: Job) -> None:
        """Awaited on the runner's loop right before :meth:`start`: what may wait (the
        async driver's store claiming a call its round did not claim ahead) waits here,
        off the loop's other work, not inside ``start``."""

    def start(self, job: Job, mode: Mode) -> str | None:
        """Called right before a call runs. Return a reason to skip it instead."""

    def finish(self, outcome: Outcome) -> None:
        """Record a call's outcome (called once per call, in completion order)."""

    def cancelled(self) -> bool:
        """Whether the chat was asked to stop (or the round was: see :meth:`escaped`)."""

    def escaped(self) -> BaseException | None:
        """Called once, as the round ends: a ``BaseException`` raised off the round's own
        stack while it ran (a subscriber to a call's progress, heard on the round's loop),
        which the round raises once its calls settled (:meth:`cancelled` turned true with
        it, so no call started after it)."""


class ToolExited(Exception):
    """A tool raised a ``BaseException`` that is not an interruption (``SystemExit``...).

    Carried as an ``Exception`` so that it fails the call instead of escaping a
    worker thread or an asyncio task (where asyncio re-raises ``SystemExit``
    into the event loop).
    """

    def __init__(self, original: BaseException):
        super().__init__(f"{type(original).__name__}: {original}")
        self.original = original


@contextlib.contextmanager
def _running(job: Job) -> Iterator[None]:
    """The tool of ``job`` runs inside: its call is bound, and a non-interrupting
    ``BaseException`` it raises comes out as a :class:`ToolExited`."""
    import asyncio

    with _bind_call(job.call, job.cancel, job.report, job.asker):
        try:
            yield
        except (Exception, KeyboardInterrupt, asyncio.CancelledError):
            raise
        except BaseException as exc:
            raise ToolExited(exc) from exc


def _call_sync(job: Job) -> Any:
    """Run a sync tool's call here; a coroutine it returns is run to its end, inside the call.

    The coroutine runs on a loop of its own when none runs on this thread, else on
    nbagent's background loop while this thread waits (:func:`~nbagent._aio.run_sync`).
    A generator it returns is refused (nothing would iterate it): an error result.
    """
    import inspect

    with _running(job):
        result = job.tool.execute(**job.tool.bind(job.call, job.kwargs))
        if inspect.iscoroutine(result):  # a sync execute() that returned a coroutine
            return run_sync(result)
        if inspect.isgenerator(result) or inspect.isasyncgen(result):
            raise TypeError(
                f"tool {job.tool.name!r} returned a generator, which nothing iterates (its "
                "body did not run); return a list (or a str) instead"
            )
        return result


async def _call_async(job: Job) -> Any:
    with _running(job):
        coro = job.tool.execute(**job.tool.bind(job.call, job.kwargs))
        if job.tool.loop is not None:  # its resources live on that loop: run it there
            return await run_on_loop(coro, job.tool.loop, f"tool {job.tool.name!r}")
        return await coro


class _Interrupted(Exception):
    """The stop button raised in a tool's task, carried to the task awaiting it."""

    def __init__(self, interrupt: KeyboardInterrupt):
        super().__init__("interrupted")
        self.interrupt = interrupt


async def _interruptible(job: Job, started: list[bool]) -> Any:
    """An async tool's call, as its task runs it. The call's coroutine is made here, once
    the task runs: a task cancelled before its first step never makes it (made before, it
    was never awaited, and Python warned so at the next garbage collection), and
    ``started`` stays empty (the call is then said not to have run)."""
    import asyncio

    started.append(True)
    try:
        return await _call_async(job)
    except KeyboardInterrupt as exc:
        raise _Interrupted(exc) from None
    except asyncio.CancelledError as exc:
        if exc.args == (_UNSTARTED,):  # a bound tool, cancelled on its loop before it began
            started.clear()
        raise


def _call_async_in_thread(
    job: Job, deadline: float | None = None, stopper: _Stopper | None = None
) -> Any:
    """An async tool's call on a worker thread, on a loop of its own; past ``deadline``
    (``time.monotonic()``, its timeout counted from when it was queued) it is cancelled
    there, as in the other modes (before, it ran to its end after being reported
    timed out). ``stopper``: how the round cancels it there when the round is cancelled."""
    import asyncio

    left = None
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _NeverStarted(
                f"timed out after {job.timeout:g} s before it started (every worker thread "
                "was busy); it was not run"
            )

    async def run() -> Any:
        if stopper is not None and not stopper.begin(asyncio.current_task()):
            raise asyncio.CancelledError(_UNSTARTED)  # stopped while queued: never runs
        if left is None:
            return await _call_async(job)
        return await asyncio.wait_for(_call_async(job), left)

    return asyncio.run(run())


class _Stopper:
    """Cancels an async tool's call on its worker thread's loop from the round's loop (the
    round cancelled: the stop button, a timeout around ``ask_async``), as the other modes
    cancel theirs; before, it ran to its end while the caller waited for its thread."""

    __slots__ = ("_lock", "_stopped", "_task")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._task: asyncio.Task[Any] | None = None
        self._stopped = False

    def begin(self, task: asyncio.Task[Any] | None) -> bool:
        """On the worker thread, as the call begins: False if it was stopped already."""
        with self._lock:
            self._task = task
            return not self._stopped

    def stop(self) -> None:
        """From the round's loop: cancel the call there (or, not begun, never begin it)."""
        with self._lock:
            self._stopped = True
            task = self._task
        if task is not None:
            with contextlib.suppress(RuntimeError):  # its loop ended: the call is over
                task.get_loop().call_soon_threadsafe(task.cancel)


_held: dict[int, CallReporter | None] = {}
"""Per thread, the reporter of the sync call run on it now by a round coordinated there
(:func:`held_by`)."""


def held_by(thread: int) -> CallReporter | None:
    """The reporter of the sync call running on ``thread`` for a round coordinated there (a
    sequential round's, under the async API on the loop's own thread): while it runs, that
    thread's loop does nothing else, so a report handed to the loop waits for the call's end
    (and is then dropped, too late); its reports are heard where they are made instead."""
    return _held.get(thread)


@contextlib.contextmanager
def _holding(job: Job) -> Iterator[None]:
    thread = threading.get_ident()
    before = _held.get(thread)  # a chat asked (inline) inside a tool run here: restored after
    _held[thread] = job.report
    try:
        yield
    finally:
        if before is None:
            _held.pop(thread, None)
        else:
            _held[thread] = before


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
POOL_SIZE = 256  # threads are created on demand and reused; the semaphore bounds each round
_abandoned = 0  # worker threads still running a call that timed out
_abandoned_lock = threading.Lock()


def abandoned_threads() -> int:
    """Worker threads still running a sync call that already timed out."""
    return _abandoned


def _abandon_count(delta: int) -> int:
    global _abandoned
    with _abandoned_lock:
        _abandoned += delta
        return _abandoned


def _shared_pool() -> concurrent.futures.ThreadPoolExecutor:
    """One pool for every chat: idle worker threads are reused across rounds."""
    global _pool
    with _pool_lock:
        if _pool is None:
            import concurrent.futures  # (with logging, traceback...) only once tools run in threads

            _pool = concurrent.futures.ThreadPoolExecutor(
                POOL_SIZE, thread_name_prefix="nbagent-tool"
            )
        return _pool


def needs_event_loop(jobs: Sequence[Job], mode: Mode) -> bool:
    """Whether a round can run without an event loop (plain sync tools, one by one)."""
    if mode != "sequential":
        return len(jobs) > 1 or any(j.tool.is_async or j.timeout for j in jobs)
    return any(j.tool.is_async or j.timeout for j in jobs)


class ToolRunner:
    """Executes rounds of calls; see the module docstring for the modes."""

    def __init__(self, max_concurrency: int = 8):
        self.max_concurrency = max_concurrency
        self.waiting = 0  # calls waiting for a slot an abandoned thread holds (tests wait on it)

    async def run_round(self, jobs: Sequence[Job], mode: Mode, hooks: RoundHooks) -> list[Outcome]:
        """Run ``jobs``; return their outcomes in call order.

        Never raises for a tool's failure: failures are outcomes. Re-raises
        ``CancelledError``/``KeyboardInterrupt`` after the running calls settled
        and the unstarted ones were recorded as cancelled (cancelled by the interpreter's
        exit, on nbagent's background loop: left unanswered, runnable, as a call its pool
        refuses then); so it raises what :meth:`RoundHooks.escaped` hands it.
        """
        try:
            outcomes = await self._run_round(jobs, mode, hooks)
        except BaseException:
            hooks.escaped()  # the round's own exception goes first
            raise
        escaped = hooks.escaped()
        if escaped is not None:
            raise escaped
        return outcomes

    async def _run_round(self, jobs: Sequence[Job], mode: Mode, hooks: RoundHooks) -> list[Outcome]:
        import asyncio

        outcomes: dict[str, Outcome] = {}
        # One call of a round run inline (the sync API, plain sync tools) runs on the
        # caller's thread: nothing waits for it. Awaited on a loop (the async API), a sync
        # call goes to a worker thread as the mode says: on the loop's own thread it held up
        # every other coroutine there (a batch of chats ran their calls one after another).
        if mode == "sequential" or (len(jobs) <= 1 and running_inline()):
            slots = _Slots(self, 1)
            for i, job in enumerate(jobs):
                try:
                    outcomes[job.call.id] = await self._one(job, "sequential", None, hooks, slots)
                except _NotStarted as exc:  # it and the rest stay runnable, unanswered
                    raise exc.original from None
                except BaseException:
                    self._cancel_rest(jobs[i + 1 :], outcomes, hooks)
                    raise
            return [outcomes[j.call.id] for j in jobs]

        limit = max(1, min(self.max_concurrency, len(jobs)))
        sem = asyncio.Semaphore(limit)
        slots = _Slots(self, max(1, self.max_concurrency))
        pool = _shared_pool()
        unstarted: list[_NotStarted] = []
        tasks = [
            asyncio.ensure_future(
                self._guarded(job, mode, sem, slots, pool, hooks, outcomes, unstarted)
            )
            for job in jobs
        ]
        try:
            await asyncio.gather(*tasks)
        except BaseException as exc:
            # Interrupted: let every task settle (running calls finish, the
            # rest record themselves as cancelled), then re-raise. A call's thread
            # is waited for however often its task is cancelled (``_after_cancel``).
            for t in tasks:
                t.cancel()
            await _all_settled(tasks)
            self._cancel_rest(jobs, outcomes, hooks)
            if isinstance(exc, _Escaped):  # a tool's KeyboardInterrupt, a callback's SystemExit
                raise exc.original from None
            raise
        if unstarted:  # the others settled; those not started stay runnable, unanswered
            raise unstarted[0].original
        return [outcomes[j.call.id] for j in jobs]

    def _cancel_rest(
        self, jobs: Sequence[Job], outcomes: dict[str, Outcome], hooks: RoundHooks
    ) -> None:
        if exiting_here():  # cancelled by the interpreter's exit: not answered, runnable
            return
        for job in jobs:
            if job.call.id not in outcomes:
                out = Outcome(job.call, "cancelled", message="cancelled before it ran")
                outcomes[job.call.id] = out
                hooks.finish(out)

    async def _guarded(
        self,
        job: Job,
        mode: Mode,
        sem: asyncio.Semaphore,
        slots: _Slots,
        pool: concurrent.futures.ThreadPoolExecutor,
        hooks: RoundHooks,
        outcomes: dict[str, Outcome],
        unstarted: list[_NotStarted],
    ) -> None:
        import asyncio

        async with sem:
            try:
                outcomes[job.call.id] = await self._one(job, mode, pool, hooks, slots)
            except _NotStarted as exc:  # not a failure of the round: its others go on
                unstarted.append(exc)
            except (Exception, asyncio.CancelledError):
                raise
            except BaseException as exc:  # raised by the task, it would end the event loop
                raise _Escaped(exc) from None

    async def _one(
        self,
        job: Job,
        mode: Mode,
        pool: concurrent.futures.ThreadPoolExecutor | None,
        hooks: RoundHooks,
        slots: _Slots,
    ) -> Outcome:
        """Run one call once the round has a slot for it (:class:`_Slots`)."""
        if hooks.cancelled():
            out = Outcome(job.call, "cancelled", message="cancelled before it ran")
            hooks.finish(out)
            return out
        try:
            refused = await slots.take(job, hooks)
        except BaseException:  # the stop button, the round cancelled: it never started
            if not exiting_here():  # (cancelled by the exit: not answered, runnable)
                hooks.finish(Outcome(job.call, "cancelled", message="cancelled before it ran"))
            raise
        if refused is not None:
            hooks.finish(refused)
            return refused
        try:
            return await self._started(job, mode, pool, hooks, slots)
        finally:
            slots.give_back()

    async def _started(
        self,
        job: Job,
        mode: Mode,
        pool: concurrent.futures.ThreadPoolExecutor | None,
        hooks: RoundHooks,
        slots: _Slots,
    ) -> Outcome:
        seat = _Seat.take(job, mode, pool, slots)  # before it is claimed (_Seat)
        try:
            try:
                await hooks.ready(job)
            except Exception as exc:  # its claim could not be made: not started, runnable
                raise _NotStarted(exc) from None
            if hooks.cancelled():  # stopped while the claim was made (it is let go at close)
                out = Outcome(job.call, "cancelled", message="cancelled before it ran")
                hooks.finish(out)
                return out
            ctx = contextvars.copy_context()  # the call's own: the caller's variables, a copy
            ctx.run(_CALL.set, job.call.id)
            if _OFF_LOOP.get():  # a chat the tool asks is not a batch's row
                ctx.run(_OFF_LOOP.set, False)
            return await self._begun(job, mode, hooks, ctx, seat)
        finally:
            if seat is not None:
                seat.drop()  # not used: skipped, replayed, stopped before it ran

    async def _begun(
        self,
        job: Job,
        mode: Mode,
        hooks: RoundHooks,
        ctx: contextvars.Context,
        seat: _Seat | None,
    ) -> Outcome:
        """The call's start (``hooks.start``), its tool's run and its end, recorded."""
        import asyncio

        try:
            skip = ctx.run(hooks.start, job, mode)
            started = utcnow()
            t0 = time.perf_counter()
        except BaseException as exc:
            # The stop button after the call was marked running (claimed, its start being
            # recorded) and before its tool ran, or a callback's SystemExit there: answered
            # as cancelled, like the calls of the round not started yet. Left "running", it
            # stayed so: the chat could not go on, and a store reloading it found it in doubt.
            if job.call.status == "running":
                why = (
                    "interrupted before it ran"
                    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError)
                    else f"not run: {type(exc).__name__} was raised as it started"
                )
                out = Outcome(job.call, "cancelled", message=why)
                self._settle(out, utcnow(), time.perf_counter(), hooks)
            elif isinstance(exc, Exception):  # its claim failed: not started, still runnable
                raise _NotStarted(exc) from None
            raise
        if skip is not None:
            out = Outcome(job.call, "skipped", message=skip)
            hooks.finish(out)
            return out
        if job.replayed is not None:  # its recorded outcome: the tool is not run again
            out = _replayed(job.call, job.replayed)
            self._settle(out, started, t0, hooks)
            return out
        try:
            value = await self._execute(job, ctx, seat)
            out = Outcome(job.call, "ok", value=value)
        except TimeoutError as exc:  # an async tool's or an MCP server's call: told to stop
            if job.timeout is None and not str(exc):
                # the tool's own (a socket's, concurrent.futures' result(timeout=)): formatting
                # "after None s" raised here, the call was left running (in doubt in a store)
                # and the turn failed
                message = f"TimeoutError raised by the tool (it has no timeout here){_UNKNOWN}"
                out = Outcome(job.call, "error", error=exc, message=message)
            else:
                message = str(exc) or f"timed out after {job.timeout:g} s and was stopped{_UNKNOWN}"
                out = Outcome(job.call, "timed_out", message=message)
        except asyncio.CancelledError as exc:  # the model must not read "not done": it may retry
            message = (
                "cancelled before it ran"  # its task never took a step, its thread never began
                if exc.args == (_UNSTARTED,)
                else f"cancelled while it ran{_UNKNOWN}"
            )
            out = Outcome(job.call, "cancelled", message=message)
            self._settle(out, started, t0, hooks)
            raise
        except KeyboardInterrupt:
            out = Outcome(job.call, "cancelled", message=f"interrupted while it ran{_UNKNOWN}")
            self._settle(out, started, t0, hooks)
            raise
        except ToolExited as exc:
            out = Outcome(job.call, "error", error=exc.original, message=str(exc))
        except _NeverStarted as exc:
            out = Outcome(job.call, "timed_out", message=str(exc))
        except Exception as exc:
            out = Outcome(job.call, "error", error=exc, message=f"{type(exc).__name__}: {exc}")
        try:
            self._settle(out, started, t0, hooks)
        except KeyboardInterrupt:
            # The stop button after the tool ended and before its end was recorded (as its
            # value was read: a slow __str__ stays interruptible). Left "running", the call
            # stayed so: the chat was stuck, and a store reloading it found it in doubt. Its
            # end is recorded (an ok value as lost: it cannot be read now), then the stop.
            if job.call.status == "running":
                if out.status == "ok":
                    out = Outcome(job.call, "ok", value=RESULT_LOST)
                with stop_held():
                    self._settle(out, started, t0, hooks)
            raise
        if _being_cancelled():
            # Cancelled (the stop button) while a thread ran it: its real outcome was waited
            # for and is kept; the round stops here, its calls not started are cancelled.
            # Returned instead, the cancellation was lost: the next call started, and the
            # chat went on to the model as if nobody had pressed stop.
            raise asyncio.CancelledError
        return out

    @staticmethod
    def _settle(out: Outcome, started: datetime, t0: float, hooks: RoundHooks) -> None:
        out.started_at = started
        out.finished_at = utcnow()
        out.duration_ms = (time.perf_counter() - t0) * 1000.0
        hooks.finish(out)

    async def _execute(self, job: Job, ctx: contextvars.Context, seat: _Seat | None) -> Any:
        """Run ``job``'s tool in ``ctx`` (the call's copy of the caller's context): on the
        worker thread its ``seat`` waits on (:func:`_worker_for`), else as a task of this
        loop (an async tool) or here (a sync one)."""
        if seat is not None:
            return await self._in_thread(job, seat, ctx)
        if job.tool.is_async:
            return await self._in_task(job, ctx)
        with _holding(job):  # on this thread (the loop's, under the async API)
            return ctx.run(_call_sync, job)

    @staticmethod
    async def _in_task(job: Job, ctx: contextvars.Context) -> Any:
        """Await an async tool's call as a task of its own running in ``ctx`` (a coroutine
        runs in another context only as a task); cancelling the caller cancels it, and the
        stop button raised in it comes out here (a task's would leave the event loop)."""
        import asyncio

        started: list[bool] = []
        task = asyncio.get_running_loop().create_task(_interruptible(job, started), context=ctx)
        try:
            if job.timeout:
                return await asyncio.wait_for(task, job.timeout)
            return await task
        except _Interrupted as exc:
            raise exc.interrupt from None
        except asyncio.CancelledError:
            # Cancelled once the tool had returned (in the same turn of the loop, before
            # this task resumed) or while it finished anyway: its real outcome stands, and
            # ``_one`` stops the round after recording it (the task is still being
            # cancelled). Dropped, a call that ran to its end was recorded "cancelled while
            # it ran", its result lost.
            if task.done() and not started:  # cancelled before its first step
                raise asyncio.CancelledError(_UNSTARTED) from None
            if not task.done() or task.cancelled():
                raise
            if (error := task.exception()) is None:
                return task.result()
            if isinstance(error, _Interrupted):
                raise error.interrupt from None
            raise error from None

    @staticmethod
    async def _in_thread(job: Job, seat: _Seat, ctx: contextvars.Context) -> Any:
        import asyncio
        import functools

        fn = seat.fn
        stoppable = fn is _call_async_in_thread  # its own loop cancels it (timeout, cancel)
        stopper = _Stopper() if stoppable else None
        if stoppable:
            fn = functools.partial(fn, stopper=stopper)
        # Every call goes behind a ticket: cancelled while it still waits for a worker
        # thread (all of them busy: stuck in timed-out calls, another round's), it is dropped
        # and never runs. Queued bare, it ran once a thread came free, after the round was
        # cancelled, and the cancelled turn waited for it to end.
        ticket = seat.ticket  # abandoned, its thread keeps its slot until it ends
        if stoppable and job.timeout:
            fn = functools.partial(fn, deadline=time.monotonic() + job.timeout)
        fut = seat.go(fn, ctx, job)
        if not job.timeout:
            try:
                return await asyncio.shield(fut)
            except asyncio.CancelledError:
                if seat.drop_if_queued():
                    fut.cancel()  # out of the pool's queue too, if no thread took it yet
                    raise asyncio.CancelledError(_UNSTARTED) from None
                if stopper is not None:
                    stopper.stop()
                return await ToolRunner._after_cancel(fut)  # waited for: not abandoned
        try:
            try:
                return await asyncio.wait_for(asyncio.shield(fut), job.timeout)
            except TimeoutError:
                if fut.done():  # its own outcome (a TimeoutError it raised, or its loop's)
                    return _outcome_of(fut)
                if ticket.drop_if_queued():  # it will never start
                    fut.cancel()
                    raise _NeverStarted(
                        f"timed out after {job.timeout:g} s before it started (every worker "
                        "thread was busy); it was not run"
                    ) from None
                if stoppable:  # being stopped in its thread: its outcome comes soon
                    await asyncio.wait([fut], timeout=_STOP_GRACE)
                    if fut.done():
                        return _outcome_of(fut)
                ticket.abandon()
                n = abandoned_threads()
                raise TimeoutError(
                    f"timed out after {job.timeout:g} s; its thread could not be stopped and "
                    f"finishes in the background, its result discarded ({n} such thread"
                    f"{'s' if n != 1 else ''} now), so it may still do what it was asked; it "
                    "was not retried"
                ) from None
        except asyncio.CancelledError:
            if seat.drop_if_queued():
                fut.cancel()
                raise asyncio.CancelledError(_UNSTARTED) from None  # never started: never will
            if stopper is not None:
                stopper.stop()
            return await ToolRunner._after_cancel(fut)  # waited for: not abandoned

    @staticmethod
    async def _after_cancel(fut: asyncio.Future[Any]) -> Any:
        """Cancelled while a thread runs a call: wait for it so its real outcome is kept."""
        import asyncio

        while not fut.done():
            try:
                await asyncio.wait([fut])
            except asyncio.CancelledError:
                # Cancelled again (the round cancels every call once one of them ended
                # cancelled, the caller's task may be cancelled twice): the thread runs on,
                # so it is still waited for. Given up, a call that finished was recorded
                # "cancelled while it ran", its real outcome lost. The task stays cancelled
                # (``_one`` raises after recording the outcome).
                continue
        return _outcome_of(fut)


def _outcome_of(fut: asyncio.Future[Any]) -> Any:
    """A done thread future's result, or its exception raised."""
    import asyncio

    if fut.cancelled():
        raise asyncio.CancelledError
    exc = fut.exception()
    if exc is not None:
        raise exc from None
    return fut.result()


async def _all_settled(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Wait until every one of ``tasks`` is done, their exceptions retrieved, however often
    the round is cancelled meanwhile (it stops anyway: its task stays cancelled). The round
    never ends with a call's task still running: that call was recorded after the round was
    over, its chat's turn given back."""
    import asyncio

    while True:
        try:
            await asyncio.wait(tasks)
            break
        except asyncio.CancelledError:
            continue
    for task in tasks:
        if not task.cancelled():
            task.exception()


def _worker_for(
    job: Job, mode: Mode, pool: concurrent.futures.ThreadPoolExecutor | None
) -> tuple[concurrent.futures.ThreadPoolExecutor, Any] | None:
    """The pool ``job``'s tool runs on and what runs it there; ``None``: on this thread (a
    sync tool: see ``sequential`` in the module docstring), as a task of this loop (an async
    one), or not at all (its recorded outcome is replayed)."""
    if job.replayed is not None:
        return None
    is_async = job.tool.is_async
    if mode == "sequential" or pool is None:
        off_loop = on_background_loop() or (_OFF_LOOP.get() and not running_inline())
        if is_async or not (job.timeout or off_loop):
            return None
        # The shared pool, not the loop's default executor: that one is small (a few stuck
        # calls made every later one time out before it started) and, on the background
        # loop, nbagent's own background work's.
        return _shared_pool(), _call_sync
    if mode == "threads":
        return pool, _call_async_in_thread if is_async else _call_sync
    return None if is_async else (pool, _call_sync)  # async mode


class _Seat:
    """A call's place in its worker pool's queue, taken before the call is claimed (the
    store's claim, ``RoundHooks.ready`` and ``start``) and marked running.

    A pool takes no more work once the interpreter exits (a chat continued on the background
    loop as a script ends: an inbox's approval): refused here, the call was never started and
    stays as it was, runnable (:class:`_NotStarted`); refused once it was marked running, it
    was answered as an error though its tool never ran, the model was told it failed, and a
    resumed chat never ran what the person approved (claimed in the store and then refused,
    it was left in doubt). A seat taken is kept: the exit waits for the pool's threads, so
    the call runs. The thread that takes the seat waits, while the call is claimed and its
    start is heard, to be told to :meth:`go`, or returns at once, having run nothing, if the
    seat is dropped (skipped, a recorded outcome, a failed claim, stopped before it ran).

    ``whole``: a sequential round's sync call without a timeout, sent off the loop's thread
    only so that the loop goes on (nbagent's background loop, a batch's row:
    :func:`_worker_for`). On the loop's thread it ran from its start to its end with nothing
    between; so here, once marked running it runs, however soon a cancel comes (waited for,
    never dropped from its pool's queue: :meth:`drop_if_queued`). Dropped as it was handed
    to a thread not scheduled yet, a batch's row cancelled a moment after the call started
    answered it "cancelled before it ran", and the rerun never did its work.
    """

    __slots__ = ("_gate", "_work", "fn", "future", "ticket", "whole")

    def __init__(
        self,
        pool: concurrent.futures.ThreadPoolExecutor,
        fn: Any,
        ticket: _Ticket,
        whole: bool = False,
    ) -> None:
        import asyncio

        self.fn = fn  # what the thread runs the call with (``_call_sync``...)
        self.ticket = ticket
        self.whole = whole
        self._gate = threading.Event()
        self._work: tuple[Any, contextvars.Context, Job] | None = None
        self.future = asyncio.get_running_loop().run_in_executor(pool, self._run)

    @classmethod
    def take(
        cls,
        job: Job,
        mode: Mode,
        pool: concurrent.futures.ThreadPoolExecutor | None,
        slots: _Slots,
    ) -> _Seat | None:
        """``job``'s seat (``None``: it runs on no worker thread); :class:`_NotStarted` if
        the pool refuses it."""
        where = _worker_for(job, mode, pool)
        if where is None:
            return None
        whole = (mode == "sequential" or pool is None) and not job.timeout
        try:
            return cls(where[0], where[1], _Ticket(slots), whole)
        except RuntimeError as exc:  # "cannot schedule new futures after (interpreter) shutdown"
            raise _NotStarted(exc) from None

    def _run(self) -> Any:
        self._gate.wait()
        if self._work is None:
            return None  # dropped: the call's tool never runs here
        fn, ctx, job = self._work
        return ctx.run(self.ticket.run, fn, job)

    def go(self, fn: Any, ctx: contextvars.Context, job: Job) -> asyncio.Future[Any]:
        """Run ``fn(job)`` in ``ctx`` on the seat's thread (behind its ticket); its future."""
        self._work = (fn, ctx, job)
        self._gate.set()
        return self.future

    def drop(self) -> None:
        """Let the thread go without running anything (once :meth:`go` was called, nothing)."""
        self._gate.set()

    def drop_if_queued(self) -> bool:
        """Cancelled once told to go: True if the call was still queued for a thread (every
        one busy), and now never runs; never for a ``whole`` call, which started."""
        return not self.whole and self.ticket.drop_if_queued()


class _NotStarted(Exception):
    """A call could not start (its claim failed: the store cannot be written, say) and was
    left as it was, runnable: the round lets its other calls go on and settle, answers
    none of the calls not started, and raises the claim's error. Answered "cancelled",
    an approved call was used up for good by a store's passing failure."""

    def __init__(self, original: Exception):
        super().__init__(repr(original))
        self.original = original


class _Escaped(Exception):
    """A ``BaseException`` other than a cancellation a call's task ended with (a tool's own
    ``KeyboardInterrupt``, a callback's ``SystemExit``), carried to the round, which lets
    the other calls settle and raises it (raised by the task, it ended the event loop with
    the round's other tasks left pending)."""

    def __init__(self, original: BaseException):
        super().__init__(repr(original))
        self.original = original


_STOP_GRACE = 1.0
"""Seconds an async tool run on a worker thread is given, past its timeout, to stop there
before its thread is abandoned (one that blocks its loop cannot be stopped)."""


def _being_cancelled() -> bool:
    """Whether the running task has a cancellation it has not given way to yet (a round
    run without an event loop has none)."""
    import asyncio

    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: run_inline
        return False
    return task is not None and task.cancelling() > 0


_UNKNOWN = "; whether it did anything is unknown, so it was not retried"
"""Said of a call stopped while it ran (an async tool or an MCP server's call, told to stop
at its next await): it may have done part of its work, or all of it."""

RESULT_LOST = (
    "The tool ran, but its result was lost: the run was stopped while it was being read. "
    "Do not run it again to get it; ask the user."
)
"""A call's result when the stop button came after its tool ended, before its value was
read and recorded: the call ran (``ok``), and the model is told it must not run it again."""


def _replayed(call: ToolCall, recorded: RecordedResult) -> Outcome:
    status: RunStatus = "ok"
    message: str | None = None
    if recorded.status in ("error", "timed_out"):
        status = recorded.status  # type: ignore[assignment]
        message = recorded.content.removeprefix("Error: ")
    return Outcome(call, status, value=None, message=message, replayed=recorded)


class _NeverStarted(Exception):
    """A queued sync call timed out before a worker thread picked it up."""


class _Slots:
    """A round's turn to start a call: at most ``limit`` of its calls run at once, and a call
    that timed out while its thread runs on (abandoned: it cannot be stopped) keeps its slot
    until that thread ends. So a round that runs its calls one at a time never starts one
    beside an abandoned thread (a tool that is not thread-safe, a rate limit); before, the
    slot came free at the timeout and three calls of such a round ran at once.

    A call waiting for a slot held so waits at most its own timeout (then it is answered
    ``timed_out`` without having run: a thread that never ends holds a timed call up no
    longer than its timeout), one with no timeout as long as the thread runs;
    ``chat.cancel()`` and the stop button end the wait (the call is cancelled before it ran).
    Once it starts, its timeout counts afresh.
    The round's end frees its slots: a call of a later round is not held.

    ``running`` is read and changed on the round's loop only; ``held`` is changed by a worker
    thread as its abandoned call ends, which wakes the waiters on their loop.
    """

    __slots__ = ("_held", "_lock", "_runner", "_wakers", "limit", "running")

    def __init__(self, runner: ToolRunner, limit: int) -> None:
        self._runner = runner  # counts the calls waiting (``ToolRunner.waiting``)
        self.limit = limit
        self.running = 0
        self._held = 0
        self._lock = threading.Lock()
        self._wakers: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def _free(self) -> bool:
        return self.running + self._held < self.limit

    async def take(self, job: Job, hooks: RoundHooks) -> Outcome | None:
        """Take a slot for ``job`` (``None``), waiting while abandoned threads hold them;
        or the call's answer, not run: its timeout passed first, or the chat was cancelled."""
        import asyncio

        with self._lock:
            if self._free() or running_inline():  # (a round run inline abandons no thread)
                self.running += 1
                return None
        loop = asyncio.get_running_loop()
        timeout = job.timeout or None
        deadline = None if timeout is None else loop.time() + timeout
        withdraw = job.cancel.register(self.wake) if job.cancel is not None else None
        self._runner.waiting += 1
        try:
            while True:
                if hooks.cancelled():
                    return Outcome(job.call, "cancelled", message="cancelled before it ran")
                with self._lock:
                    if self._free():
                        self.running += 1
                        return None
                    woken = loop.create_future()
                    self._wakers.append((loop, woken))
                    held = self._held
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    return Outcome(job.call, "timed_out", message=self._why(timeout, held))
                await asyncio.wait([woken], timeout=left)
        finally:
            self._runner.waiting -= 1
            if withdraw is not None:
                withdraw()

    def _why(self, timeout: float | None, held: int) -> str:
        which = (
            "an earlier call of this round timed out and its thread still runs, holding its slot"
            if held == 1
            else f"{held} earlier calls of this round timed out and their threads still run, "
            "holding their slots"
        )
        at_once = "one at a time" if self.limit == 1 else f"at most {self.limit} at once"
        return (
            f"timed out after {timeout:g} s before it started: {which} (calls run {at_once} "
            "here); it was not run"
        )

    def give_back(self) -> None:
        """A call of the round ended (or was abandoned: its thread holds a slot now)."""
        self.running -= 1
        self.wake()

    def hold(self) -> None:
        """A call was abandoned at its timeout, its thread still running."""
        with self._lock:
            self._held += 1

    def release(self) -> None:
        """An abandoned call's thread ended (on that thread)."""
        with self._lock:
            self._held -= 1
        self.wake()

    def wake(self) -> None:
        """Have every waiting call look again (from any thread)."""
        with self._lock:
            wakers, self._wakers = self._wakers, []
        for loop, woken in wakers:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle_future, woken)


def _settle_future(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


class _Ticket:
    """Decides, once, whether a queued call starts or is abandoned before it can.

    States: ``queued`` -> ``started`` -> ``finished``; ``abandon()`` turns
    ``queued`` into ``abandoned`` (the call will never start) and ``started``
    into ``running-abandoned`` (counted in :func:`abandoned_threads` until the
    thread returns: counted by the worker itself, so no event loop is needed). Such a
    thread keeps its slot in its round (``slots``, :class:`_Slots`) until it returns.
    """

    __slots__ = ("_lock", "_slots", "_state")

    def __init__(self, slots: _Slots | None = None) -> None:
        self._lock = threading.Lock()
        self._state = "queued"
        self._slots = slots

    def run(self, fn: Any, job: Job) -> Any:
        """In the worker thread: run ``fn(job)`` unless the caller gave up first."""
        with self._lock:
            if self._state == "abandoned":
                return None  # reported timed_out before it started: never run it
            self._state = "started"
        try:
            return fn(job)
        finally:
            with self._lock:
                ended = self._state == "running-abandoned"
                if ended:
                    _abandon_count(-1)
                self._state = "finished"
            if ended and self._slots is not None:
                self._slots.release()

    def drop_if_queued(self) -> bool:
        """True if the call had not started: now it never will."""
        with self._lock:
            if self._state == "queued":
                self._state = "abandoned"
                return True
            return False

    def abandon(self) -> bool:
        """The caller gives up at the call's timeout; True if the call had started (its
        thread may run on, and is counted until it ends). Not used when the caller waits
        for the thread instead (the stop button): such a thread is not abandoned."""
        with self._lock:
            if self._state == "queued":
                self._state = "abandoned"
                return False
            if self._state == "started":
                self._state = "running-abandoned"
                _abandon_count(1)
                if self._slots is not None:
                    self._slots.hold()
            return True
