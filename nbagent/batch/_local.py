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
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from .._errors import RateLimitError, StoreError
from .._events import Event, ModelRequestFinished
from ._backend import FINAL, Job, ProgressSink, RowResult, RowStatus, RowUpdate, RunSpec
from ._inputs import InputError
from ._limits import AdaptiveLimit, backoff
from ._watch import DecisionWatcher


class RowFailed(Exception):
    """A row failed before its chat could run (the factory, the store): the row's error."""

    def __init__(self, message: str, error_type: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
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
        cost, pending, chat_id = chat.cost_usd, len(chat.pending_approvals), chat.id
    if isinstance(error, BaseException):
        error_type = error_type or type(error).__name__
        error = one_line(error)
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
        watcher = DecisionWatcher(spec.store, spec.poll_interval)
        out: asyncio.Queue[RowResult | BaseException] = asyncio.Queue()
        tasks: set[asyncio.Task[None]] = set()

        async def dispatch() -> None:
            for job in jobs:
                if job.error is not None:  # no chat, no slot
                    if spec.on_error == "raise":
                        out.put_nowait(InputError(f"input {job.key!r}: {job.error}"))
                        return
                    out.put_nowait(result_of(job, None, "failed", None, job.error, "InputError"))
                    continue
                await limit.acquire()
                row = _Row(job, spec, limit, progress, watcher, self.on_chat)
                row.live = self.live.get(job.chat_id) if job.chat_id else None
                task = asyncio.get_running_loop().create_task(row.run(out))
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
            await watcher.close()


class _Row:
    """One job's chat, from making it to its final result."""

    def __init__(
        self,
        job: Job,
        spec: RunSpec,
        limit: AdaptiveLimit,
        progress: ProgressSink,
        watcher: DecisionWatcher,
        on_chat: Callable[[Any], None] | None = None,
    ) -> None:
        self.job, self.spec, self.limit = job, spec, limit
        self.on_chat = on_chat
        self.progress, self.watcher = progress, watcher
        self.chat: Any = None
        self.live: Any = None  # the chat to continue, alive in this process
        self.active = 0.0  # seconds run (waits for decisions excluded)

    def _update(self, status: RowStatus) -> None:
        chat = self.chat
        if chat is None:
            self.progress(RowUpdate(self.job.key, status))
            return
        usage = chat.usage
        self.progress(
            RowUpdate(
                self.job.key,
                status,
                chat.id,
                usage.input_tokens,
                usage.output_tokens,
                chat.cost_usd,
            )
        )

    def _on_response(self, event: Event) -> None:
        # emitted by the driver, on this loop's thread: a request went through
        self.limit.succeeded()
        self._update("running")

    async def run(self, out: asyncio.Queue[RowResult | BaseException]) -> None:
        """Holds a slot on entry; releases it on every exit path."""
        held = True
        try:
            self._update("running")
            try:
                self.chat = await self._make()
            except RowFailed as exc:
                out.put_nowait(result_of(self.job, None, "failed", None, str(exc), exc.error_type))
                self._update("failed")
                return
            except Exception as exc:
                if self.spec.on_error == "raise":
                    out.put_nowait(exc)
                    return
                error = f"make_chat raised {one_line(exc)}"
                out.put_nowait(result_of(self.job, None, "failed", None, error, type(exc).__name__))
                self._update("failed")
                return
            if self.on_chat is not None:
                self.on_chat(self.chat)
            self.chat.on(ModelRequestFinished, self._on_response)
            new = self.job.chat_id is None
            rate_limited = 0
            while True:
                started = time.monotonic()
                try:
                    if new:
                        self.chat.ask_later(self.job.prompt)
                        new = False
                    await self.chat.complete_async()
                except RateLimitError as exc:
                    self.active += time.monotonic() - started
                    self.limit.rate_limited(exc.retry_after)
                    rate_limited += 1
                    if rate_limited > self.spec.max_rate_limit_retries:
                        self._fail(out, exc, f" (still rate limited after {rate_limited} waits)")
                        return
                    self.limit.release()
                    held = False
                    self._update("queued")
                    await asyncio.sleep(backoff(rate_limited, exc.retry_after))
                    await self.limit.acquire()
                    held = True
                    self._update("running")
                    continue
                except Exception as exc:
                    self.active += time.monotonic() - started
                    if self.spec.on_error == "raise":
                        out.put_nowait(exc)
                        return
                    self._fail(out, exc)
                    return
                self.active += time.monotonic() - started
                status = self.chat.status
                if status == "awaiting_approval":
                    out.put_nowait(result_of(self.job, self.chat, "awaiting_approval", self.active))
                    self._update("awaiting_approval")
                    self.limit.release()
                    held = False
                    await self.watcher.wait(self.chat)
                    await self.limit.acquire()
                    held = True
                    self._update("running")
                    continue
                break
            if status == "complete":
                out.put_nowait(result_of(self.job, self.chat, "done", self.active))
                self._update("done")
            else:
                why = self._why_stopped(status)
                if self.spec.on_error == "raise":
                    out.put_nowait(RuntimeError(f"input {self.job.key!r}: {why}"))
                    return
                out.put_nowait(
                    result_of(self.job, self.chat, "failed", self.active, why, _stop_type(status))
                )
                self._update("failed")
        finally:
            if held:
                self.limit.release()
            if self.chat is not None:
                self.chat.off(self._on_response)

    def _fail(
        self, out: asyncio.Queue[RowResult | BaseException], exc: BaseException, more: str = ""
    ) -> None:
        error = one_line(exc) + more
        out.put_nowait(
            result_of(self.job, self.chat, "failed", self.active, error, type(exc).__name__)
        )
        self._update("failed")

    def _why_stopped(self, status: str) -> str:
        if status == "budget_exhausted":
            which = self.chat.exhausted_budget or "steps"
            return (
                f"budget_exhausted: the chat's {which} budget is spent; "
                "rerunning the batch with its store continues it"
            )
        return f"the chat stopped with status {status!r} (cancelled?)"

    async def _make(self) -> Any:
        """The row's chat: a new one from the factory, or its stored one (resumed)."""
        spec, job = self.spec, self.job
        if self.live is not None and not self.live.is_running:
            return self.live
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
        if spec.store is None:
            return made
        if job.chat_id is not None:
            return await self._load(made)
        from ..store._extension import StoreExtension

        if any(isinstance(e, StoreExtension) for e in made.extensions):
            raise RowFailed(
                "make_chat returned a chat with its own store: leave store= out of the chat; "
                "nbagent.batch(store=...) attaches the batch's store to each chat",
                "TypeError",
            )
        try:
            await asyncio.to_thread(self._attach, made)
        except StoreError as exc:
            raise RowFailed(
                f"the store could not record this input's chat: {one_line(exc)}", "StoreError"
            ) from exc
        return made

    def _attach(self, made: Any) -> None:
        from ..store._attach import attach_store

        attach_store(made, self.spec.store)
        recorded = self.spec.store.add_batch_chat(self.spec.batch_id, self.job.key, made.id)
        if recorded != made.id:
            raise RowFailed(
                f"another process started this input first (chat {recorded}); "
                "rerun the batch to pick up its result",
                "BatchConflict",
            )

    async def _load(self, template: Any) -> Any:
        """Continue the stored chat: the template's tools and provider, the store's state."""
        load = getattr(type(template), "load", None)
        if load is None:
            raise RowFailed(
                f"cannot continue stored chat {self.job.chat_id}: {type(template).__name__} "
                "has no load()",
                "TypeError",
            )
        tools = [*template.tools, *template.hosted_tools]

        def go() -> Any:
            return load(
                self.job.chat_id, store=self.spec.store, tools=tools, provider=template.provider
            )

        try:
            chat = await asyncio.to_thread(go)
        except StoreError as exc:
            raise RowFailed(
                f"cannot load stored chat {self.job.chat_id}: {one_line(exc)}", "StoreError"
            ) from exc
        finally:
            with contextlib.suppress(Exception):
                template.close()
        chat.display = False
        return chat


def _stop_type(status: str) -> str:
    return "budget_exhausted" if status == "budget_exhausted" else "Stopped"


__all__ = ["LocalBackend", "RowFailed", "one_line", "result_of"]
