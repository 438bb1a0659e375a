"""The backend seam: where a batch's chats run (``nbagent.batch(..., backend=...)``).

:func:`nbagent.batch` does everything that does not depend on *where* chats
run: it turns the inputs into :class:`Job` values (a key, a prompt or the
reason there is none, the row), finds what a store already finished, shows
progress and builds the result DataFrame. A :class:`Backend` runs the jobs and
reports back; ``"local"`` (:mod:`nbagent.batch._local`: tasks on the caller's
event loop) is the first, ``"ray"`` runs chats as Ray tasks.

The contract, for a backend's author:

- ``run(jobs, spec, progress)`` is an async iterator of :class:`RowResult`.
  It yields a row when it **settles**: ``done``, ``failed``, or
  ``awaiting_approval`` (parked on a gated call). A parked row is yielded
  again when it settles after a decision; the last result yielded for a key
  wins. The iterator ends when every row is ``done`` or ``failed``; the caller
  may stop iterating earlier (``aclose()``, or cancelling its task): the
  backend then stops watching parked chats and releases what it holds.
- Every job has a prompt: an input that could not be formatted (a
  :class:`Job` with an ``error``) is failed by the batch itself, and never
  reaches a backend.
- A row never stops the batch: a factory that raises, a chat whose request
  fails, a worker that dies, a store that goes away: each becomes a
  ``failed`` result with a clear ``error``. Only with
  ``spec.on_error == "raise"`` may ``run`` raise instead (the first such
  error; the caller cancels the rest).
- ``progress`` (a :data:`ProgressSink`, thread-safe, cheap, never raises) gets
  a :class:`RowUpdate` at every status change (``running`` when a chat
  starts or continues, ``awaiting_approval``, ``done``, ``failed``) and may
  get more in between (tokens and cost after each model request). A remote
  backend forwards them to the driver's process.
- With a store (``spec.store``), the backend records every chat it creates
  for a key **before** running it: ``spec.store.add_batch_chat(spec.batch_id,
  job.key, chat.id)`` (first writer wins: it returns the chat id recorded for
  the key, and a backend that gets another id continues that chat instead).
  A job with a ``chat_id`` continues that stored chat (resumed batch): load it
  (``Chat.load(chat_id, store=..., tools=...)`` with the tools and provider of
  a chat the factory makes) and ``complete()`` it; never start it again.
- Rate limits: a :class:`~nbagent.RateLimitError` that escapes a chat (the
  SDK retried the request itself first, honouring ``retry-after``) shrinks the
  batch's concurrency (:class:`~nbagent.batch._limits.AdaptiveLimit`) and the
  chat is continued after ``error.retry_after`` seconds (else a backoff), at
  most ``spec.max_rate_limit_retries`` times; successes grow it back.
  Continuing a chat resends only the failed request: finished tool calls are
  never rerun.

Everything in a :class:`Job`, :class:`RunSpec` (but the store, which a remote
backend opens from its own configuration), :class:`RowUpdate` and
:class:`RowResult` is picklable (``make_chat`` with cloudpickle).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

RowStatus = Literal["queued", "running", "awaiting_approval", "done", "failed"]
"""A row's status: the progress widget's columns and the result's ``status``."""
SETTLED: frozenset[str] = frozenset({"awaiting_approval", "done", "failed"})
"""Statuses a row settles in (``run`` yields a result); only the last two are final."""
FINAL: frozenset[str] = frozenset({"done", "failed"})


@dataclass(frozen=True, slots=True)  # one of each a row: no __dict__
class Job:
    """One input of a batch, ready to run.

    Attributes:
        key: The input's stable key (the DataFrame's index or ``key=`` column,
            a list's position), as text: how a store finds it again.
        index: Its position in the inputs (the result keeps the inputs' order).
        prompt: The first user message, or ``None`` when ``error`` says why
            there is none.
        row: What the factory is given when it takes an argument
            (``make_chat(row)``): the row as a dict of column -> value, or the
            prompt itself for a list of prompts.
        error: Why the input could not become a prompt (a missing column...):
            the batch fails the row with this error; no chat is made and no
            backend sees the job.
        chat_id: A stored chat this key already has (a resumed batch): continue
            it instead of making a new one.
    """

    key: str
    index: int
    prompt: str | None
    row: Any = None
    error: str | None = None
    chat_id: str | None = None


@dataclass(frozen=True)
class RunSpec:
    """How to run a batch's jobs (the same for every job).

    Attributes:
        batch_id: The batch's id (``nbagent.batch(name=...)``, else derived
            from the inputs): the key of its records in a store.
        make_chat: The factory: ``make_chat()`` or ``make_chat(row)``
            (``takes_row``); returns a chat with no store attached.
        takes_row: Whether ``make_chat`` takes the row.
        store: The store, or ``None`` (a batch that cannot be resumed).
        concurrency: Most chats running at once (the adaptive limit's ceiling).
        on_error: ``"record"`` (a failing row is recorded) or ``"raise"``.
        max_rate_limit_retries: Times one row is continued after a
            :class:`~nbagent.RateLimitError` before it fails with it.
        poll_interval: ``nbagent.batch(poll_interval=)``, for a backend of its own
            (the built-in ones follow the store through ``nbagent.store.follow``).
        options: Backend-specific options (``nbagent.batch(backend_options=)``),
            e.g. Ray's ``address``.
        trace: The batch's trace as a W3C carrier (``{"traceparent": ...}``) when
            ``nbagent.instrument()`` is on: a backend running chats elsewhere (a Ray
            worker) runs them inside it (``nbagent.otel.attached``). Empty when off.
        prepare: Called with each row's chat once it is made or continued from the
            store, before it is driven (``nbagent.evaluate`` wires ``decide=`` there,
            deciding the calls a continued chat has waiting); ``None``: nothing. A
            backend running the local row code (``settle_job``) calls it; if it
            raises, the row fails with its error.
    """

    batch_id: str
    make_chat: Callable[..., Any]
    takes_row: bool = False
    store: Any = None
    concurrency: int = 16
    on_error: Literal["record", "raise"] = "record"
    max_rate_limit_retries: int = 8
    poll_interval: float = 2.0
    options: Mapping[str, Any] | None = None
    trace: Mapping[str, str] = field(default_factory=dict)
    prepare: Callable[[Any], None] | None = None


@dataclass(frozen=True, slots=True)  # one of each a row: no __dict__
class RowUpdate:
    """A row changed (progress): its status and what its chat used so far."""

    key: str
    status: RowStatus
    chat_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0


ProgressSink = Callable[[RowUpdate], None]
"""Where a backend reports progress: thread-safe, cheap, never raises."""


@dataclass(frozen=True, slots=True)  # one of each a row: no __dict__
class RowResult:
    """One row as it settled: a row of the result DataFrame.

    Attributes:
        key / index: The job's.
        status: ``done``, ``failed`` or ``awaiting_approval``.
        reply: The chat's answer: its last assistant text once ``done``
            (``None`` before, and when it has none).
        chat_id: The chat's id (``None`` when no chat was made).
        calls: Tool calls the chat made (all turns).
        input_tokens / output_tokens: What the chat used (all requests).
        cost_usd: Its estimated cost (``None``: a request's model has no price).
        latency_s: Seconds the chat ran in this batch (waits for approval
            excluded; waits for a rate limit included).
        error: What went wrong, in one line (``None`` when nothing did).
        error_type: The exception's class name, or ``budget_exhausted``.
        pending: What a parked row waits for: calls awaiting a decision and inputs
            awaiting an answer (an external tool's result, ``ask_user``'s).
    """

    key: str
    index: int
    status: RowStatus
    reply: str | None = None
    chat_id: str | None = None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    latency_s: float | None = None
    error: str | None = None
    error_type: str | None = None
    pending: int = 0

    def as_update(self) -> RowUpdate:
        """The progress update this row stands for: its status and what its chat used."""
        return RowUpdate(
            self.key,
            self.status,
            self.chat_id,
            self.input_tokens,
            self.output_tokens,
            self.cost_usd,
        )


@runtime_checkable
class Backend(Protocol):
    """Where a batch's chats run (see the module docstring for the contract)."""

    name: str

    def run(
        self, jobs: Sequence[Job], spec: RunSpec, progress: ProgressSink
    ) -> AsyncIterator[RowResult]:
        """Run ``jobs``; yield each row as it settles (again after a decision)."""
        ...


__all__ = [
    "FINAL",
    "SETTLED",
    "Backend",
    "Job",
    "ProgressSink",
    "RowResult",
    "RowStatus",
    "RowUpdate",
    "RunSpec",
]
