"""The ``"local"`` backend: every chat a task on the caller's event loop.

One dispatcher takes a slot of the :class:`~nbagent.batch._limits.AdaptiveLimit`
for each job in order and starts the job's task, which holds the slot while
its chat runs (``await chat.complete_async()``), gives it back while it waits
for a decision or for a rate limit to pass, and takes one again to continue.
So at most ``limit`` chats run at once, parked chats cost no slot, and there
are never more tasks than running, waiting and parked rows.

Everything that can go wrong with one row ends as a ``failed`` result with a
one-line error (``on_error="record"``); see :mod:`nbagent.batch._backend`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from .._aio import to_the_end
from .._chat_state import SETTINGS
from .._config import get_config
from .._errors import RateLimitError, StoreError, provider_secrets, redact_keys, scrub
from .._events import ApprovalDecided, Event, InputAnswered, ModelRequestFinished
from .._extension import overrides
from .._runner import sync_tools_off_loop
from ._backend import FINAL, Job, ProgressSink, RowResult, RowStatus, RunSpec
from ._limits import AdaptiveLimit, backoff


async def wait_for_decisions(chat: Any) -> None:
    """A parked chat waits here, without a slot, until someone decided: on the live chat in
    this process (its ``ApprovalDecided`` event, or an ``InputAnswered``: a pending input
    answered), or through its store from anywhere (its ``follow_decisions`` subscription on
    the store's one follower ``refresh()``-es it when a decision was recorded, and once as
    it parks: one may have come before; a refresh that failed is tried again, with a
    backoff, until one works)."""
    loop, woken = asyncio.get_running_loop(), asyncio.Event()

    def wake(_event: Event | None = None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(woken.set)  # from whichever thread decided

    def look() -> None:  # from the follower, on a worker thread
        # A refresh that fails (the store cannot be read now) is not the end: the store's
        # follow_decisions has the follower call this again, with a backoff, until one works
        # (one decision gets one piece of news: waiting for the next would wait for ever).
        with contextlib.suppress(Exception):
            if chat.refresh() or not chat.awaiting_approval:
                wake()

    chat.on(ApprovalDecided, wake)
    chat.on(InputAnswered, wake)  # an external result or ask_user answered here
    sub = None  # without a store (or with one that cannot be read now): decided here only
    for ext in [e for e in chat.extensions if overrides(e, "follow_decisions")][:1]:
        with contextlib.suppress(Exception):
            sub = ext.follow_decisions(look)
    try:
        while chat.awaiting_approval:
            woken.clear()
            if not chat.awaiting_approval:
                break
            await woken.wait()
    finally:
        chat.off(wake)
        if sub is not None:
            sub.close()


def stops_the_batch(exc: BaseException, *, stop_button: bool = True) -> bool:
    """Whether ``exc``, escaping a row's chat, stops the whole batch rather than failing
    the row: a cancellation (the stop button as asyncio delivers it: ``batch()`` in a
    script or a notebook, ``ray.cancel``), and a ``KeyboardInterrupt`` raised on the
    main thread, where Python delivers Ctrl-C and cannot tell it from one a tool raised
    (``stop_button=False``: a Ray worker, which no Ctrl-C reaches). Any other
    ``BaseException`` (``SystemExit`` from a library, a ``KeyboardInterrupt`` raised on
    another thread: nbagent's background loop, a worker thread, a Ray worker's loop) is
    the row's failure: let out of the row's task, it would end the event loop running it
    (every other row, and every later batch of a kept Ray worker, waited for ever)."""
    if isinstance(exc, Exception | asyncio.CancelledError | GeneratorExit):
        return not isinstance(exc, Exception)  # GeneratorExit: its coroutine is being closed
    return (
        stop_button
        and isinstance(exc, KeyboardInterrupt)
        and threading.current_thread() is threading.main_thread()
    )


class RowRaised(RuntimeError):
    """``on_error="raise"``: a row's chat raised a ``BaseException`` that is not a stop
    (:func:`stops_the_batch`), carried as an ``Exception`` (raised as it is, it would end
    the event loop running the batch). ``__cause__`` is the original."""


class RowFailed(Exception):
    """A row failed before its chat could run (the factory, the store): the row's error."""

    def __init__(self, message: str, error_type: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def one_line(exc: BaseException, limit: int | None = None) -> str:
    """``Type: message`` on one line (the message cut to ``limit`` characters, if given),
    anything shaped like a key, URL credentials or a password in it as ``***``: it becomes a
    row's ``error`` (the frame, the store, the screen), and a factory's or a provider's own
    exception may quote its DSN or key."""
    try:
        text = redact_keys(" ".join(str(exc).split()))
    except Exception as broken:  # its __str__ raised: the row still fails, with its type
        text = f"(its message could not be read: {type(broken).__name__})"
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def result_of(
    job: Job,
    chat: Any,
    status: RowStatus,
    latency: float | None,
    error: BaseException | str | None = None,
    error_type: str | None = None,
) -> RowResult:
    """A row's result, read from its chat's public state."""
    reply = None
    calls, tin, tout, cost, pending, chat_id = 0, 0, 0, 0.0, 0, None
    if chat is not None:
        if status == "done":  # a parked or failed chat's last text is not its answer
            last = chat.last_assistant_message
            content = getattr(last, "content", None)
            reply = content if isinstance(content, str) and content else None
        usage = chat.usage
        calls, tin, tout = len(chat.tool_calls), usage.input_tokens, usage.output_tokens
        cost, chat_id = chat.cost_usd, chat.id
        pending = len(chat.pending_approvals) + len(chat.pending_inputs)
    if isinstance(error, BaseException):
        error_type = error_type or type(error).__name__
        error = one_line(error)
    if error:  # and the chat's provider's own key, whatever its shape (as in its log)
        error = scrub(error, provider_secrets(chat.provider) if chat is not None else ())
    return RowResult(
        key=job.key,
        index=job.index,
        status=status,
        reply=reply,
        chat_id=chat_id,
        calls=calls,
        input_tokens=tin,
        output_tokens=tout,
        cost_usd=cost,
        latency_s=latency,
        error=error,
        error_type=error_type,
        pending=pending,
    )


def outcome(job: Job, chat: Any, latency: float | None) -> RowResult:
    """A row's result from where its chat stopped: ``done``, parked, or ``failed`` saying why."""
    status = chat.status
    if status == "complete":
        return result_of(job, chat, "done", latency)
    if status == "awaiting_approval":
        return result_of(job, chat, "awaiting_approval", latency)
    if status == "budget_exhausted":
        return result_of(job, chat, "failed", latency, budget_spent(chat), "budget_exhausted")
    last = chat.last_step
    if last is not None and last.kind == "busy":  # the store: another process drives it now
        why = (
            "another process is driving this row's chat now (the same batch run twice at "
            "once?); its calls run there, once. Rerun the batch once it is done to read it back"
        )
        return result_of(job, chat, "failed", latency, why, "DrivenElsewhere")
    why = f"the chat stopped with status {status!r} (cancelled?)"
    return result_of(job, chat, "failed", latency, why, "Stopped")


def budget_spent(chat: Any) -> str:
    """A row's error when its chat's budget stopped it: which, and how to continue it. A
    rerun goes on with ``make_chat``'s settings: a spent cost or token budget only once
    raised there (rerun as it is, the row stops again before asking anything), the steps
    for as many steps again."""
    which = chat.exhausted_budget or "steps"
    config = get_config()
    if which in ("cost", "tokens"):
        name = "max_cost_usd" if which == "cost" else "max_total_tokens"
        cap = getattr(chat, name, None)
        cap = getattr(config, name, None) if cap is None else cap
        return (
            f"budget_exhausted: the chat's {which} budget is spent ({name}={cap}); to continue "
            f"it, raise {name} in make_chat (or nbagent.configure) and rerun the batch with "
            "its store: rerun as it is, the row stops here again"
        )
    steps = chat.max_steps or config.max_steps
    return (
        f"budget_exhausted: the chat took its max_steps={steps} steps without an answer; "
        f"rerunning the batch with its store continues it for max_steps more (raise "
        "max_steps in make_chat to allow more at once)"
    )


async def settle_job(
    job: Job, spec: RunSpec, progress: ProgressSink, limit: AdaptiveLimit
) -> RowResult:
    """Run one job in a slot of ``limit`` until it first settles: what a remote backend's
    worker runs (the local backend's own code, so a row's result does not depend on
    where it ran).

    Makes the chat (or loads ``job.chat_id`` from ``spec.store``), attaches and
    records it in the store, drives it with the rate-limit rules of the module
    and reports progress; the slot is given back while a rate limit is waited
    out, and on return. A parked row returns ``awaiting_approval`` at once
    instead of waiting: the remote backend continues it later with
    ``Job(chat_id=...)``. The chat is closed whatever the outcome (everything
    written to the store, nothing kept in a worker that lives on). With
    ``spec.on_error == "raise"`` a failure raises instead of returning ``failed``.
    """
    row = _Row(job, spec, limit, progress, stop_button=False)
    await limit.acquire()
    try:
        return await row.settle()
    except BaseException as exc:  # the row's own (settle lets out only stops and on_error=raise)
        if isinstance(exc, Exception | asyncio.CancelledError | GeneratorExit):
            raise
        raise RowRaised(f"input {job.key!r}: {one_line(exc)}") from exc
    finally:
        if row.held:  # not while waiting out a rate limit (cancelled then)
            limit.release()
        if row.chat is not None:
            with contextlib.suppress(Exception):  # a failed write is the row's own error
                await asyncio.to_thread(row.chat.close)


def _unstored(chat: Any) -> bool:
    """A chat with no store: closing it lets its tool sources go and nothing else (it
    continues as it was). A stored one is left open: closed, it would stop recording (a
    fork a sweep makes of it, or the user asking it more, failed or went unrecorded)."""
    if chat is None:
        return False
    if not chat.extensions:  # (a store is one): the store package is not imported for it
        return True
    from ..store import store_of

    return store_of(chat) is None


async def _let_go(chat: Any) -> None:
    """Close a chat that is done with here (a done row's chat with no store, or a template
    loaded from): its tool sources let go (an MCP server made per row stopped, not left
    running until the chat is collected: a batch of 30 rows kept 17 servers up). It still
    reads and continues (a server used again reconnects). A failed row's chat is not
    closed: the batch keeps it, and a rerun continues it. A close that fails leaves the
    chat as it was: it closes again when collected, and its row's result stands."""
    with contextlib.suppress(Exception):
        await asyncio.to_thread(chat.close)


class LocalBackend:
    """Runs a batch's chats as tasks on the running event loop (``backend="local"``)."""

    name = "local"

    def __init__(self) -> None:
        self.on_chat: Callable[[Any], None] | None = None
        """Set by the batch: called with each chat made or loaded (they live here)."""
        self.limit: AdaptiveLimit | None = None
        """The adaptive limit of the latest run (how many chats may run at once now)."""
        self.live: dict[str, Any] = {}
        """Set by the batch: chats of an earlier run of this batch in this process, by id.
        A job continuing one of them continues the live object (its writes the store
        could not take yet are still queued in it) instead of loading it."""

    async def run(
        self, jobs: Sequence[Job], spec: RunSpec, progress: ProgressSink
    ) -> AsyncIterator[RowResult]:
        limit = self.limit = AdaptiveLimit(spec.concurrency)
        live, self.live = self.live, {}  # this run's: the backend keeps no chat past it
        out: asyncio.Queue[RowResult | BaseException] = asyncio.Queue()
        tasks: set[asyncio.Task[None]] = set()

        async def one(row: _Row) -> None:
            """Holds a slot on entry; gives it back on every way out."""
            try:
                result = await row.settle()
                while result.status == "awaiting_approval":
                    out.put_nowait(result)
                    await row.without_slot(wait_for_decisions(row.chat))  # parked: costs none
                    result = await row.settle()
                if result.status == "done" and _unstored(row.chat):  # before batch() returns
                    await _let_go(row.chat)  # (a failed row's chat is kept: a rerun goes on)
                out.put_nowait(result)
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except BaseException as exc:  # on_error="raise", or the stop button (a
                # KeyboardInterrupt on the main thread): raised by the batch, not by this
                # task (a task raising it ends the event loop and is never retrieved)
                out.put_nowait(exc)
            finally:
                if row.held:
                    limit.release()

        async def dispatch() -> None:
            for job in jobs:
                await limit.acquire()
                row = _Row(job, spec, limit, progress, self.on_chat)
                row.live = live.get(job.chat_id) if job.chat_id else None
                task = asyncio.get_running_loop().create_task(one(row))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        dispatcher = asyncio.get_running_loop().create_task(dispatch())
        remaining = len(jobs)
        try:
            while remaining:
                item = await out.get()
                if isinstance(item, BaseException):
                    raise item
                if item.status in FINAL:
                    remaining -= 1
                yield item
        finally:
            dispatcher.cancel()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(dispatcher, *tasks, return_exceptions=True)


class _Row:
    """One job's chat: made once, then driven until it settles, as often as asked."""

    def __init__(
        self,
        job: Job,
        spec: RunSpec,
        limit: AdaptiveLimit,
        progress: ProgressSink,
        on_chat: Callable[[Any], None] | None = None,
        *,
        stop_button: bool = True,
    ) -> None:
        self.job, self.spec, self.limit = job, spec, limit
        self.progress, self.on_chat = progress, on_chat
        self.stop_button = stop_button  # whether a KeyboardInterrupt may be Ctrl-C here
        self.chat: Any = None
        self.live: Any = None  # the chat to continue, alive in this process
        self.active = 0.0  # seconds run (waits for decisions excluded)
        self.held = True  # whether this row holds a slot of the limit
        self.asked = False  # the prompt is in the chat (set once the chat is made or loaded)

    def update(self, status: RowStatus) -> None:
        self.progress(result_of(self.job, self.chat, status, None).as_update())

    async def without_slot(self, wait: Awaitable[Any]) -> None:
        """Wait (for a decision, a rate limit) without a slot; then take one and run again."""
        self.limit.release()
        self.held = False
        await wait
        await self.limit.acquire()
        self.held = True
        self.update("running")

    def _on_response(self, event: Event) -> None:
        # emitted by the driver, on this loop's thread: a request went through
        self.limit.succeeded()
        self.update("running")

    def _failed(self, error: BaseException | str, error_type: str | None = None) -> RowResult:
        if self.spec.on_error == "raise":
            raise (
                error
                if isinstance(error, BaseException)
                else RuntimeError(f"input {self.job.key!r}: {error}")
            )
        self.update("failed")
        return result_of(self.job, self.chat, "failed", self.active or None, error, error_type)

    async def settle(self) -> RowResult:
        """Drive the chat until it is done, failed or parked (see :func:`settle_job`).

        A ``BaseException`` from the chat that does not stop the batch
        (:func:`stops_the_batch`: a tool raising ``KeyboardInterrupt`` off the main
        thread, or ``SystemExit`` from the factory) fails the row with its type; with
        ``on_error="raise"`` it is raised as a :class:`RowRaised`."""
        try:
            return await self._settle()
        except BaseException as exc:
            if isinstance(exc, Exception) or stops_the_batch(exc, stop_button=self.stop_button):
                raise
            if self.spec.on_error == "raise":
                raise RowRaised(f"input {self.job.key!r}: {one_line(exc)}") from exc
            why = (
                f"{one_line(exc)} raised in this row's chat (by a tool?): not the stop button, "
                "so only this row stopped"
            )
            return self._failed(why, type(exc).__name__)

    async def _settle(self) -> RowResult:
        self.update("running")
        if self.chat is None:
            try:
                self.chat = await self._make()
            except RowFailed as exc:
                return self._failed(str(exc), exc.error_type)
            except Exception as exc:
                if self.spec.on_error == "raise":
                    raise
                return self._failed(f"make_chat raised {one_line(exc)}", type(exc).__name__)
            if self.on_chat is not None:
                self.on_chat(self.chat)
            if self.spec.prepare is not None:
                try:
                    self.spec.prepare(self.chat)
                except Exception as exc:
                    if self.spec.on_error == "raise":
                        raise
                    return self._failed(
                        f"preparing the chat raised {one_line(exc)}", type(exc).__name__
                    )
            # A new chat is asked its prompt. A continued one has it already, unless its
            # process died (or its run was cancelled) after the batch recorded the chat and
            # before the prompt was written: an empty chat is asked again, never completed
            # as it is.
            self.asked = self.job.chat_id is not None and self.chat.status != "idle"
        chat = self.chat
        rate_limited = 0
        chat.on(ModelRequestFinished, self._on_response)
        try:
            while True:
                started = time.monotonic()
                try:
                    if not self.asked:
                        chat.ask_later(self.job.prompt)
                        self.asked = True
                    with sync_tools_off_loop():  # this loop runs the other rows
                        await chat.complete_async()
                except RateLimitError as exc:
                    self.active += time.monotonic() - started
                    self.limit.rate_limited(exc.retry_after)
                    if rate_limited >= self.spec.max_rate_limit_retries:
                        more = (
                            f" (still rate limited after {rate_limited} wait"
                            f"{'' if rate_limited == 1 else 's'})"
                            if rate_limited
                            else " (max_rate_limit_retries=0: not waited out)"
                        )
                        return self._failed(one_line(exc) + more, type(exc).__name__)
                    rate_limited += 1
                    self.update("queued")
                    await self.without_slot(asyncio.sleep(backoff(rate_limited, exc.retry_after)))
                    continue
                except Exception as exc:
                    self.active += time.monotonic() - started
                    if self.spec.on_error == "raise":
                        raise
                    return self._failed(exc)
                self.active += time.monotonic() - started
                break
        finally:
            chat.off(self._on_response)
        result = outcome(self.job, chat, self.active)
        if result.status == "failed":
            return self._failed(result.error or "", result.error_type)
        self.update(result.status)
        return result

    async def _make(self) -> Any:
        """The row's chat: a new one from the factory, or its stored one (resumed)."""
        spec, job = self.spec, self.job
        made = spec.make_chat(job.row) if spec.takes_row else spec.make_chat()
        if inspect.isawaitable(made):
            made = await made
        if not (
            callable(getattr(made, "complete_async", None))
            and isinstance(getattr(made, "id", None), str)
        ):
            raise RowFailed(
                f"make_chat must return an nbagent Chat, got {type(made).__name__}", "TypeError"
            )
        if made.display is None:  # a batch's chats do not each show a view in the notebook
            made.display = False
        if made.stream is None and made.display is False:  # nobody watches its fragments:
            made.stream = False  # whole responses cost less (stream=True keeps them streamed)
        if self.live is not None:  # its other driver (the inbox, a cell), if any, goes first
            # it goes on with make_chat's settings (a budget raised for the rerun), as a
            # chat loaded from the store does; the rest of what make_chat set up it has
            for name in SETTINGS:
                setattr(self.live, name, getattr(made, name))
            await _let_go(made)
            return self.live
        if spec.store is None:
            return made
        if job.chat_id is not None:
            return await self._load(made, job.chat_id)
        from ..store import attach_batch_chat, store_of

        if store_of(made) is not None:
            raise RowFailed(
                "make_chat returned a chat with its own store: leave store= out of the chat; "
                "nbagent.batch(store=...) attaches the batch's store to each chat",
                "TypeError",
            )
        try:
            recorded = await attach_batch_chat(made, spec.store, spec.batch_id, job.key)
        except StoreError as exc:
            raise RowFailed(
                f"the store could not record this input's chat: {one_line(exc)}", "StoreError"
            ) from exc
        if recorded != made.id:
            raise RowFailed(
                f"another process started this input first (chat {recorded}); "
                "rerun the batch to pick up its result",
                "BatchConflict",
            )
        return made

    async def _load(self, template: Any, chat_id: str) -> Any:
        """Continue the stored chat as the template is set up (its tools, provider and
        settings, what it was given in code: callbacks, subscriptions, extensions,
        ``always_allow`` predicates), with the store's state: as the chat ``make_chat`` made
        first would go on, wherever the row continues (``load_chat(template=)``)."""
        if getattr(type(template), "load", None) is None:
            raise RowFailed(
                f"cannot continue stored chat {self.job.chat_id}: {type(template).__name__} "
                "has no load()",
                "TypeError",
            )
        tools = [*template.tools, *template.hosted_tools]
        from ..store import load_chat

        def go() -> Any:
            return load_chat(
                type(template),
                chat_id,
                store=self.spec.store,
                tools=tools,
                provider=template.provider,
                template=template,
            )

        try:
            chat = await to_the_end(go)
        except StoreError as exc:
            raise RowFailed(
                f"cannot load stored chat {self.job.chat_id}: {one_line(exc)}", "StoreError"
            ) from exc
        # the template lets go of its tool sources now the loaded chat holds them: a server
        # both use stays up (a source closes with its last open chat), one made for the
        # template alone stayed up, a process per resumed row, until collected
        await _let_go(template)
        chat.display = False
        return chat


__all__ = [
    "LocalBackend",
    "RowFailed",
    "RowRaised",
    "one_line",
    "outcome",
    "result_of",
    "settle_job",
    "stops_the_batch",
]
