"""A chat's record as OpenTelemetry GenAI spans: one :class:`Tracer` per traced chat.

The tracer listens to the chat record's change hook (``chat.record.subscribe``): the
core's one fold of the event stream tells it what changed and hands it the folded
:class:`~nbagent._record.CallRecord` / :class:`~nbagent._record.StepRecord`, so it keeps
no copy of the chat's state, only the spans it has open. Spans, following the GenAI
semantic conventions (``gen_ai.*``; nbagent's own facts as ``nbagent.*``):

- ``invoke_agent nbagent``: one run of the loop for a turn, from the user's message
  (or the step that continues a parked turn) until the turn completes, parks on an
  approval, spends a budget, fails or is stopped. A continued turn's span links to its
  first one; a fork's first span links to the parent chat's turn its step was in (same
  process), a replayed request to the turn that recorded it.
- ``chat {model}``: one model request, a child of its turn: model, provider (the one
  its endpoint names: Groq, DeepSeek... through an OpenAI-compatible client), server,
  usage, finish reasons, the output type asked for, ``nbagent.cost_usd``,
  ``nbagent.replayed``.
- ``execute_tool {tool}``: one run of a tool call. A call that runs has its span from
  its start on, and while its tool runs that span is the current one (in the call's own
  context, see :mod:`nbagent._runner`): what the tool makes (its own spans, an
  instrumented client's, a sub-agent's chat) is its child. So that a call costs nothing
  more when its tool makes no span, what is current is a stand-in (:class:`_CallSpan`)
  that has the span made only when asked for its context. A call that never runs
  (denied, skipped) is made when it is final (so a call decided hours later, or in
  another process that loaded the chat, still gets one): one denied after its run parked
  is made at the decision, under that run, whether or not a run continues the turn; only
  a call whose run was not traced here (a loaded chat's) waits for the run that
  continues the turn, to be its child. The span starts when the model
  asked for the call and ends when it was answered (a run that parks on inputs ends
  ``awaiting_input``, and the run once they are answered is a span of its own); the approval
  is two span events (``nbagent.approval.requested``, ``nbagent.approval.decided``
  with verdict, who, reason and the wait); the outcome is ``nbagent.call.status``
  (``ok``, ``denied``, ``in_doubt``, ``timed_out``...), ``nbagent.call.hosted``,
  ``nbagent.call.server``. What the provider ran on its side (a hosted MCP call) is an
  ``execute_tool`` span under the model request that reported it.

An attribute at its default is left out (absent means: decision ``auto``, not gated,
not hosted, not replayed, mode ``sequential``...; docs/traces.md lists them).

The hook only keeps the changes that make spans; they are turned into spans in one
burst when the turn's run ends (parks, completes...; the chat is closed or dropped), or
when :data:`KEEP_MAX` changes or :data:`KEEP_SECONDS` (the batch span processor's own
delay) have piled up (checked at the next change, and by the one check on nbagent's
background loop every tracer shares, :data:`_DUE`, since none may come: a turn stepped
through with ``step()``), or a call
is final outside any run (a denial after the turn parked: no run may ever follow): every span
is back-dated to the events' times, so a trace is the same, but the tracer's work and the
SDK's run once per turn with their code and data warm, not after every model request
when the wait for the model has evicted them (about half of their cost; ``bench_otel``).
Between bursts a change costs only its keeping (a request's settings are noted as it
starts, made into attributes in the burst), and a turn no hop to another thread.
A tool that makes a span of its own has them made then (its call's span is its parent).

Message content (prompts, answers, arguments, results) is exported only with
``content=True``; all free text goes through the scrubber (``scrub``: the chat's
provider's key, its hosted tools' secrets, the values its calls were given under a secret's
name, and anything shaped like a key), and so does a tool's name wherever a span shows it,
content or not (the model writes it: :meth:`Tracer._shown_name`).
Events that happened before the tracer was attached (a fork's shared history, a
loaded chat's stored events) are history, not traced again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
import weakref
from collections import OrderedDict
from datetime import datetime, timedelta
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode

from .._aio import in_worker, spawn
from .._errors import ChatCancelled, provider_secrets, redact_keys, redacted
from .._events import (
    Event,
    InputRequested,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    StepFinished,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
    utcnow,
)
from .._extension import ChatHost, Extension
from .._hosted import BREACHES
from .._record import CallRecord, ChatRecord, RecordChange
from .._runner import in_call_context
from .._secrets import Masks, _quoted, named_values, token_masks
from .._types import AssistantToolCallMessage, Reasoning, ToolResultMessage

AGENT = "nbagent"
_TURN_NAME = f"invoke_agent {AGENT}"
CONTENT_CHARS = 8000
"""The most characters of one piece of content (a message part, arguments, a result)."""
NAME_CHARS = 200
"""The most characters of a tool's name in a span's name or attribute (a model may write
any name for a tool it calls: an unknown one's is bounded too)."""
_NAMES_KEPT = 1024
"""The most names one tracer keeps as shown (:meth:`Tracer._shown_name`)."""
ENDS_TURN = frozenset({"complete", "awaiting_approval", "budget_exhausted", "busy"})
"""The step kinds after which the loop stops: the turn's span ends."""
_FAILED = frozenset({"error", "timed_out", "in_doubt", "cancelled", *BREACHES})

# the attribute keys every span of a kind sets (the GenAI conventions' and nbagent's own)
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
CONVERSATION = "gen_ai.conversation.id"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
COST = "nbagent.cost_usd"
STEP = "nbagent.step"
TURN = "nbagent.turn"
_NAMES: dict[tuple[str, str], str] = {}  # (operation, model or tool) -> the span's name
KEEP_MAX = 256
"""The most changes kept before they are made into spans (a long turn: in bursts)."""
KEEP_SECONDS = 5.0
"""The longest a kept change waits (at the next change) to be made into spans: the
``BatchSpanProcessor``'s default delay, so a long turn shows up as it runs."""

# Where each chat's turns were traced in this process, so a fork or a replay can link to
# them: (chat id, turn) -> the span context of the turn's first span. Bounded.
_TURNS: OrderedDict[tuple[str, int], SpanContext] = OrderedDict()
_TURNS_MAX = 4096
_TURNS_LOCK = threading.Lock()  # chats of a batch emit on many threads


# The turn of each traced request: (chat id, step) -> turn, so a fork made at a step, or a
# replay of a recorded request, links to the turn that step was in. Bounded.
_STEP_TURNS: OrderedDict[tuple[str, int], int] = OrderedDict()
_STEP_TURNS_MAX = 16384


def step_turn(chat_id: str, step: int) -> int | None:
    """The turn a traced request (``step``) of ``chat_id`` was made in, in this process."""
    with _TURNS_LOCK:
        return _STEP_TURNS.get((chat_id, step))


def _remember_step(chat_id: str, step: int, turn: int) -> None:
    with _TURNS_LOCK:
        _STEP_TURNS[chat_id, step] = turn
        while len(_STEP_TURNS) > _STEP_TURNS_MAX:
            _STEP_TURNS.popitem(last=False)


def turn_context(chat_id: str, turn: int | None = None) -> SpanContext | None:
    """The span context of a traced turn of ``chat_id`` in this process (its last, by default)."""
    with _TURNS_LOCK:
        if turn is not None:
            return _TURNS.get((chat_id, turn))
        found = None
        for (cid, _t), ctx in _TURNS.items():
            if cid == chat_id:
                found = ctx
        return found


def _remember(chat_id: str, turn: int, ctx: SpanContext) -> None:
    with _TURNS_LOCK:
        _TURNS.setdefault((chat_id, turn), ctx)
        while len(_TURNS) > _TURNS_MAX:
            _TURNS.popitem(last=False)


def ns(ts: datetime | None) -> int | None:
    """A timestamp as OpenTelemetry's nanoseconds since the epoch."""
    if ts is None:
        return None
    return int(ts.timestamp() * 1e6) * 1000  # microseconds, as datetimes hold them


class Tracer(Extension):
    """Turns one chat's record changes into spans (see the module docstring)."""

    def __init__(self, inst: Any):
        """``inst``: the instrumentation in force (its ``tracer`` and ``content``)."""
        self._inst = inst
        self._tracer = inst.tracer
        self._content = inst.content
        self._since = utcnow()
        self._record: ChatRecord | None = None
        self._chat_id = ""
        self._host: ChatHost | None = None
        self._chat_ref: Any = _gone  # the chat, weakly (the host's own reads cost two calls)
        self._turn_span: Any = None
        self._turn: int | None = None
        self._turn_usage = [0, 0]
        self._turn_cost = 0.0
        self._turn_input: list[dict[str, Any]] = []
        self._steps: dict[int, Any] = {}  # record step index -> open chat span
        self._finishing: Any = None  # a chat span ended by its response's message
        self._turn_ctx: Any = None  # an OpenTelemetry context holding the open turn span
        self._last_step: Any = None  # the last request's span (a hosted call's parent)
        self._call_parent: dict[str, Any] = {}  # call id -> the context of its turn span
        # calls started and not final: call id -> (parent context, start), for their span
        self._starts: dict[str, tuple[Any, int | None]] = {}
        # the spans of those made before the call was final (a stand-in was asked for one)
        self._open_calls: dict[str, Any] = {}
        # what is current in each running tool for its call's span (see _CallSpan)
        self._stand_ins: dict[str, _CallSpan] = {}
        self._flushing: int | None = None  # the thread making kept changes into spans
        self._reran: set[str] = set()  # calls whose run ended unfinished (parked on inputs)
        self._last_window: tuple[int | None, int | None] = (None, None)  # the last request's
        self._endpoint: tuple[Any, dict[str, Any]] = (None, {})  # (provider, its attributes)
        self._output_turn: tuple[int | None, bool] = (None, False)  # (turn, asks for json)
        # calls that ended outside any run this tracer saw (a loaded chat's call denied):
        # their span waits for the run that continues the turn, to be its child
        self._orphans: list[tuple[CallRecord, ToolCallFinished]] = []
        self._linked_parent = False
        self._kept: list[RecordChange] = []  # changes not yet made into spans
        self._kept_at = 0.0  # time.monotonic() of the first kept change
        self._run_kept = False  # a change only a run makes is among the kept ones
        # the OpenTelemetry context current when the run did something: a turn's parent
        # (a batch's span, the user's own), taken when it changes, applied in order at flush
        self._contexts: list[tuple[int, Any]] = []  # (index in _kept, context)
        self._seen_context: Any = None
        self._run_context: Any = None
        # what each kept request was sent with, read when it started (a tool may change the
        # instructions or the provider before the run ends): record key -> (the provider,
        # the instructions with content, whether its turn asks for JSON); the attributes
        # are made from them in the burst
        self._sent: dict[Any, tuple[Any, str | None, bool]] = {}
        # the chat's provider and hosted tools as last seen (their secrets, read only when
        # text is exported: a chat garbage-collected before its spans were made has them)
        self._seen: tuple[Any, tuple[Any, ...]] = (None, ())
        # what exported text masks besides key-shaped text (see _masking): the chat's
        # provider's and hosted tools' secrets as last read, and the values its calls were
        # given under a secret's name (gathered once text is first exported: None till then)
        self._chat_secrets: list[str] = []
        self._arg_secrets: set[str] | None = None
        self._args_to_read: set[str] = set()  # calls whose arguments are not gathered yet
        self._masks: Masks | None = None  # all of them as one pattern (None: to be made)
        self._arg_order: list[str] = []  # the values of _arg_secrets, in the order gathered
        # names as exported (see _shown_name): name -> (as shown, how many of _name_forms it
        # was looked for in); every form of the secrets (as they are, as repr and JSON quote
        # them), those of the chat secrets they were made from first, then of _arg_order's
        # first _forms_args
        self._names_shown: dict[str, tuple[str, int]] = {}
        self._name_forms: list[str] = []
        self._forms_chat: list[str] | None = None
        self._forms_args = 0
        self._later = False  # in _DUE: the late check looks at this tracer
        self._dropped: Any = None  # ends the run if the chat is garbage-collected
        self._lock = threading.Lock()  # calls of a round may end on worker threads

    # ------------------------------------------------------------ attaching
    def attach(self, host: ChatHost) -> None:
        chat = host.chat
        self._host, self._chat_id = host, chat.id
        self._chat_ref = weakref.ref(chat)
        self._record = chat.record
        self._record.subscribe(self.on_change)
        # a chat dropped mid-turn (the cell making it ran again): nothing else ends its run,
        # and its turn's span was never ended. The finalizer holds this tracer (not the
        # chat), so it ends the run as the chat goes, not at uninstrument() or exit hours
        # later; at exit, _at_exit ends the live chats' runs first (``interrupted``)
        self._dropped = weakref.finalize(chat, self._chat_dropped)
        self._dropped.atexit = False

    def detach(self, outcome: str = "detached") -> None:
        """Stop tracing this chat, for good: an open turn span ends now with ``outcome``
        (``detached``: tracing was turned off; ``interrupted``: the process exits;
        ``dropped``: the chat was garbage-collected), and the chat lets go of this tracer
        (and so of the tracer provider and its exporters)."""
        dropped = self._dropped
        if dropped is not None:
            dropped.detach()
        if self._record is not None:
            self._record.unsubscribe(self.on_change)
        with self._lock:
            self._end_run(None, outcome)
        host, self._host, self._record = self._host, None, None
        self._chat_ref = _gone
        if host is not None:
            host.remove(self)

    def close(self) -> None:
        """``chat.close()``: the kept changes become spans and an open turn ends ``closed``
        (a turn driven with ``step()`` and left in the middle has no event that ends it).
        The chat stays traced: a run after it continues the turn in a span of its own."""
        with self._lock:
            self._end_run(None, "closed")

    def _chat_dropped(self) -> None:
        """The chat was garbage-collected (a finalizer): its run ends ``dropped``, on a worker
        thread (a finalizer may interrupt this very tracer, or the SDK, on its thread). The
        usual chat has nothing left to end (its turn ended, every span is made): nothing is
        done then, no thread is woken (a batch drops a chat per row)."""
        if self._lock.acquire(blocking=False):  # not held here: what it guards reads true
            try:
                idle = not (
                    self._kept
                    or self._turn_span is not None
                    or self._finishing is not None
                    or self._starts
                    or self._orphans
                    or self._stand_ins
                )
            finally:
                self._lock.release()
            if idle:
                return
        try:
            spawn(in_worker(self.detach, "dropped"))
        except RuntimeError:  # no background loop (the interpreter exits)
            self.detach("dropped")

    def run_stopped(self, error: BaseException) -> None:
        """The run ended by raising (see :class:`~nbagent.Extension`): its spans are made now
        and its turn ends, ``cancelled`` (the stop button, ``chat.cancel()``) or ``failed``;
        nothing waits for a next turn that may never come."""
        with self._lock:
            if isinstance(error, _STOPPED):
                self._end_run(utcnow(), "cancelled")
            else:
                self._flush()  # the run's calls first: what their arguments hide, its text does
                kind = type(error).__name__
                text = self._text(str(error), 1000) if self._content else kind
                self._end_run(utcnow(), "failed", error=(kind, text))

    def _end_run(
        self, ts: datetime | None, outcome: str, error: tuple[str, str] | None = None
    ) -> None:
        """(Under the lock.) No run follows here: the kept changes become spans, the open
        turn ends with ``outcome``, and the calls no run adopted are exported on their own."""
        self._flush()
        if self._finishing is not None:
            self._end_finishing()
        self._end_turn(ts, outcome, error=error)
        self._orphans_as_roots()
        for stand_in in self._stand_ins.values():  # its call's start was never traced
            stand_in.real = stand_in.real or NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
        self._stand_ins.clear()

    # ------------------------------------------------------------ the change hook
    def on_change(self, change: RecordChange) -> None:
        """The record's hook: keep the change; make the kept ones into spans when the
        turn's run ends, or when too many or too old (see the module docstring)."""
        e = change.event
        if e is None:
            return  # a refold (a loaded chat): history, not traced again
        t = type(e)
        if t not in _HANDLERS and not self._content:
            return  # most events change no span (with content, one may end a request's)
        span = None
        check = None
        with self._lock:
            kept = self._kept
            if not kept:
                self._kept_at = now = time.monotonic()
                self._inst.exit_first()  # a provider made since instrument(): flushed first
                if not self._later or _DUE_AT is None:  # else the check looks here already
                    self._later = True
                    check = _due(self, now)
            if t in _RUNS:  # a decision made outside a run is no part of the run's context
                self._run_kept = True
                ctx = otel_context.get_current()
                if ctx is not self._seen_context:
                    self._seen_context = ctx
                    self._contexts.append((len(kept), ctx))
            kept.append(change)
            if t is ModelRequestStarted and e.ts >= self._since:
                sent = self._as_sent(e)  # type: ignore[arg-type]
                if sent is not None:
                    self._sent[change.key] = sent
            if t is ToolCallStarted and in_call_context(e.call.id):  # type: ignore[attr-defined]
                # the call's own context (the runner's copy for it, where its tool then
                # runs): its span is current for the tool, and for nothing else
                span = self._stand_ins[e.call.id] = _CallSpan(self, e.call.id)  # type: ignore[attr-defined]
            if (
                (t is StepFinished and e.kind in ENDS_TURN)  # type: ignore[attr-defined]
                or len(kept) >= KEEP_MAX
                or time.monotonic() - self._kept_at >= KEEP_SECONDS
                # a call final outside any run (denied after its turn parked): its span is
                # made now, for no run may ever continue the turn (a sweep's retired call)
                or (t is ToolCallFinished and self._turn_span is None and not self._run_kept)
            ):
                self._flush()
        if check is not None:
            _start_check(check)
        if span is not None:
            otel_context.attach(trace.set_span_in_context(span))

    def due_in(self, now: float) -> float | None:
        """(The late check, on the background loop: never waits.) How long until the kept
        changes have waited :data:`KEEP_SECONDS` (0 or less: they have, or the lock is busy:
        :meth:`flush_if_late` decides); ``None``: nothing is kept, the check lets go of this
        tracer (its next kept change brings it back)."""
        if not self._lock.acquire(blocking=False):
            return 0.0
        try:
            if self._kept:
                return self._kept_at + KEEP_SECONDS - now
            self._not_due()
            return None
        finally:
            self._lock.release()

    def flush_if_late(self) -> float | None:
        """(A worker thread.) The kept changes become spans if they have waited
        :data:`KEEP_SECONDS`; else when to look again (``None``: nothing is kept)."""
        with self._lock:
            try:
                if self._kept:
                    wait = self._kept_at + KEEP_SECONDS - time.monotonic()
                    if wait > 0:
                        return wait
                    self._flush()
            finally:
                if not self._kept:
                    self._not_due()
            return None

    def _not_due(self) -> None:
        """(Under the lock.) Nothing is kept: the late check no longer looks at this tracer."""
        self._later = False
        with _DUE_LOCK:
            _DUE.discard(self)

    def flush(self) -> None:
        """Make the kept changes into spans now."""
        with self._lock:
            self._flush()

    def materialize(self, stand_in: _CallSpan) -> None:
        """``stand_in`` was asked for its context (its tool makes a span): the kept changes
        become spans now, and its call's span is made (started, ended when the call is).
        Nothing is made inside a flush of this thread's own (what asks is this tracer)."""
        if self._flushing == threading.get_ident():
            return
        with self._lock:
            stand_in.asked = True
            self._flush()
            call_id = stand_in.call_id
            if stand_in.real is None and call_id in self._starts:  # started, kept by now
                self._open_span(call_id)

    def _flush(self) -> None:
        self._flushing = threading.get_ident()
        try:
            self._flush_kept()
        finally:
            self._flushing = None

    def _flush_kept(self) -> None:
        kept, self._kept = self._kept, []
        contexts, self._contexts = self._contexts, []
        self._run_kept = False  # a run among them opens its turn's span (_turn_span)
        failed: Exception | None = None
        at = 0
        for i, change in enumerate(kept):
            while at < len(contexts) and contexts[at][0] <= i:
                self._run_context = contexts[at][1]
                at += 1
            try:
                self._handle(change)
            except Exception as exc:  # one change's failure loses none of the others' spans
                failed = failed or exc
        if failed is not None:
            raise failed  # the record warns (CallbackWarning) as it did for one change

    def _handle(self, change: RecordChange) -> None:
        e: Any = change.event
        handler = _HANDLERS.get(type(e))  # most events change no span: nothing more to do
        if handler is None:
            if self._finishing is not None and e.ts >= self._since:
                self._end_finishing(e)
            return
        if e.ts < self._since:
            return  # history copied into a fork
        if self._finishing is not None:
            self._end_finishing(e)
        handler(self, change.key, e)

    def _on_message(self, key: Any, e: MessageAdded) -> None:
        m: Any = e.message
        role = getattr(m, "role", None)
        if role == "user":
            self._turn_for(e.turn, e.ts)
            if self._content:
                self._turn_input.append(
                    _message_json(m, self._text, self._arguments, self._shown_name)
                )
        elif isinstance(m, AssistantToolCallMessage) or role == "assistant":
            self._provider_items(e)

    def _on_request_started(self, key: Any, e: ModelRequestStarted) -> None:
        # the span is made once, when the request ends, with every attribute at once (one
        # pass of the SDK's attribute checks); until then only what it needs is kept
        parent = self._turn_for(e.turn, e.ts)
        attrs: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: e.provider,
            REQUEST_MODEL: e.model,
            CONVERSATION: self._chat_id,
            STEP: e.step,
            TURN: e.turn,
            "nbagent.request.messages": e.n_messages,
        }
        if e.tool_choice != "auto":
            attrs["nbagent.request.tool_choice"] = e.tool_choice
        sent = self._sent.pop(key, None) or self._as_sent(e)
        system = None
        if sent is not None:
            provider, system, json_output = sent
            self._request_settings(provider, e, json_output, attrs)
        if self._content:
            attrs["gen_ai.input.messages"] = self._transcript_json(e.n_messages)
            if system:
                attrs["gen_ai.system_instructions"] = json.dumps(
                    [{"type": "text", "content": self._text(system)}], ensure_ascii=False
                )
        self._steps[key] = (attrs, ns(e.ts), parent)

    def _as_sent(self, e: ModelRequestStarted) -> tuple[Any, str | None, bool] | None:
        """(Under the lock.) What the request was sent with, as it starts, not when its span
        is made (a tool may change the instructions or the provider before the run ends):
        the provider, the instructions (with content) and whether its turn asks for JSON;
        ``None``: the chat is gone. Only what may change is read here, between the model's
        answers; the attributes are made from it in the burst (:meth:`_request_settings`)."""
        chat = self._chat()
        if chat is None:
            return None
        provider = chat.provider
        self._seen = (provider, chat.hosted_tools)  # for a chat collected before its spans
        if self._output_turn[0] != e.turn:
            self._output_turn = (e.turn, e.turn in chat.outputs)
        return provider, chat.system if self._content else None, self._output_turn[1]

    def _request_settings(
        self, provider: Any, e: ModelRequestStarted, json_output: bool, attrs: dict[str, Any]
    ) -> None:
        """What the conventions say of a request that its provider knows: the provider its
        endpoint names, the server, the output type, the token limit and temperature."""
        if getattr(provider, "name", None) != e.provider:
            return  # the chat changed providers since: not this request's
        attrs.update(self._endpoint_of(provider))
        if json_output:
            attrs["gen_ai.output.type"] = "json"
        extra = getattr(provider, "extra_body", None)
        extra = extra if isinstance(extra, dict) else {}
        limit = getattr(provider, "max_tokens", None)
        for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            limit = extra.get(key, limit)
        if isinstance(limit, int) and not isinstance(limit, bool):
            attrs["gen_ai.request.max_tokens"] = limit
        temperature = extra.get("temperature")
        if isinstance(temperature, int | float) and not isinstance(temperature, bool):
            attrs["gen_ai.request.temperature"] = float(temperature)

    def _endpoint_of(self, provider: Any) -> dict[str, Any]:
        """``provider``'s endpoint as the conventions' attributes (made once per provider):
        ``server.address`` and ``server.port``, and ``gen_ai.provider.name`` when the URL
        names a provider the conventions know that the provider's own name does not say (an
        OpenAI-compatible client talking to Groq, DeepSeek, xAI, Azure OpenAI...)."""
        cached, attrs = self._endpoint
        if cached is provider:
            return attrs
        attrs = _endpoint_attributes(provider)
        self._endpoint = (provider, attrs)
        return attrs

    def _request_span(self, key: Any, e: ModelRequestFinished | ModelRequestFailed) -> Any:
        """The request's span, started back when the request did, with the attributes so far."""
        _remember_step(self._chat_id, e.step, e.turn)
        started = self._steps.pop(key, None)
        if started is not None:
            attrs, start, parent = started
        else:  # its start was not traced: back to when it started
            parent = self._turn_for(e.turn, e.ts)
            start = ns(e.ts - timedelta(milliseconds=e.latency_ms))
            attrs = {
                OPERATION: "chat",
                PROVIDER: e.provider,
                CONVERSATION: self._chat_id,
                STEP: e.step,
                TURN: e.turn,
            }
        return attrs, start, parent

    def _on_request_finished(self, key: Any, e: ModelRequestFinished) -> None:
        attrs, start, parent = self._request_span(key, e)
        u = e.usage
        attrs["gen_ai.response.model"] = e.model
        attrs["gen_ai.response.finish_reasons"] = (e.raw_stop_reason or e.stop_reason,)
        attrs[INPUT_TOKENS] = u.input_tokens
        attrs[OUTPUT_TOKENS] = u.output_tokens
        attrs["nbagent.stop_reason"] = e.stop_reason
        if e.n_tool_calls:
            attrs["nbagent.tool_calls"] = e.n_tool_calls
        if e.replayed:
            attrs["nbagent.replayed"] = True
        if u.cached_tokens:
            attrs["gen_ai.usage.cache_read.input_tokens"] = u.cached_tokens
        if u.cache_write_tokens:
            attrs["gen_ai.usage.cache_creation.input_tokens"] = u.cache_write_tokens
        if u.reasoning_tokens:  # part of the output tokens, as the conventions count them
            attrs["gen_ai.usage.reasoning.output_tokens"] = u.reasoning_tokens
        if e.cost_usd is not None:
            attrs[COST] = e.cost_usd
            self._turn_cost += e.cost_usd
        links = self._replay_link(attrs, e.step) if e.replayed else None
        span = self._tracer.start_span(
            self._name("chat", attrs.get(REQUEST_MODEL) or e.model),  # the conventions' name
            context=_parent(parent),
            kind=SpanKind.CLIENT,
            attributes=attrs,
            links=links,
            start_time=start,
        )
        self._turn_usage[0] += u.input_tokens
        self._turn_usage[1] += u.output_tokens
        self._last_step = span
        self._last_window = (start, ns(e.ts))
        if self._content:  # the response's message follows: its content goes on the span
            self._finishing = (span, ns(e.ts))
        else:
            span.end(end_time=ns(e.ts))

    def _on_request_failed(self, key: Any, e: ModelRequestFailed) -> None:
        attrs, start, parent = self._request_span(key, e)
        stopped = e.error_type in _STOPPED_NAMES  # the stop button, a cancelled task: no error
        if stopped:
            attrs["nbagent.stop_reason"] = "cancelled"
        else:
            attrs["error.type"] = e.error_type
        span = self._tracer.start_span(
            self._name("chat", attrs.get(REQUEST_MODEL) or e.model),
            context=_parent(parent),
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=start,
        )
        if stopped:
            span.end(end_time=ns(e.ts))
            self._end_turn(e.ts, "cancelled")
            return
        # the message may quote what was sent: content; its type is a name
        error = self._text(e.error, 1000) if self._content else e.error_type
        span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=ns(e.ts))
        self._end_turn(e.ts, "failed", error=(e.error_type, error))

    def _on_requested(self, key: Any, e: ToolCallRequested) -> None:
        self._call_parent[e.call.id] = self._turn_for(e.turn, e.ts)
        self._read_arguments_of(e.call.id)

    def _on_started(self, key: Any, e: ToolCallStarted) -> None:
        """The call runs: where its span will hang and when it starts (back-dated to the
        model's request for it). The span itself is made when the call is final, in one go,
        unless its tool asks for it first (:meth:`materialize`)."""
        turn_ctx = self._turn_for(e.turn, e.ts)
        call_id = e.call.id
        record = self._record
        r = record.get(call_id) if record is not None else None
        if call_id in self._starts:  # started again before its first run was seen to end
            self._end_unfinished(call_id, e.ts, "running")
        if r is None or r.hosted:
            return
        again = call_id in self._reran  # a run after one that parked on inputs
        parent = self._call_parent.get(call_id)
        start = ns(e.ts if again else (r.requested_at or e.ts))
        self._starts[call_id] = (turn_ctx if parent is None else parent, start)
        stand_in = self._stand_ins.get(call_id)
        if stand_in is not None and stand_in.asked:  # its tool asked for it already
            self._open_span(call_id)

    def _open_span(self, call_id: str) -> None:
        """Make a started call's span now, open (its attributes come when it ends): the
        tool asked for it, to be the parent of its own spans."""
        record = self._record
        r = record.get(call_id) if record is not None else None
        if r is None:
            return
        parent, start = self._starts[call_id]
        tool = self._shown_name(r.tool)
        span = self._open_calls[call_id] = self._tracer.start_span(
            self._name("execute_tool", tool),
            context=_parent(parent),
            kind=SpanKind.INTERNAL,
            attributes={OPERATION: "execute_tool", "gen_ai.tool.name": tool},
            start_time=start,
        )
        stand_in = self._stand_ins.get(call_id)
        if stand_in is not None:
            stand_in.real = span

    def _end_run_of(
        self,
        call_id: str,
        r: CallRecord,
        e: ToolCallFinished | None,
        until: datetime | None = None,
        status: str | None = None,
    ) -> None:
        """A started call's run ended (final, or not: ``until``, ``status``): its span, the
        one made for its tool or one made now in one go; its stand-in stands for that."""
        started = self._starts.pop(call_id, None)
        span = self._open_calls.pop(call_id, None)
        stand_in = self._stand_ins.pop(call_id, None)
        parent, start = started if started is not None else (None, None)
        span = self._call_span(r, parent, e, span=span, until=until, status=status, start=start)
        if stand_in is not None and stand_in.real is None:
            stand_in.real = span  # asked later (a thread the tool left running)

    def _end_unfinished(self, call_id: str, ts: datetime | None, status: str | None) -> None:
        record = self._record
        r = record.get(call_id) if record is not None else None
        self._reran.add(call_id)
        if r is None:
            self._starts.pop(call_id, None)
            span = self._open_calls.pop(call_id, None)
            if span is not None:
                span.end(end_time=ns(ts))
            return
        self._end_run_of(call_id, r, None, until=ts, status=status)

    def _on_input_requested(self, key: Any, e: InputRequested) -> None:
        """A call parked on inputs (``resume`` says so; an input asked for in the middle of a
        call holds it running): this run of it ends here, ``awaiting_input``; the run once
        they are answered is a span of its own."""
        call = e.call
        if call is not None and e.resume is not None and call.id in self._starts:
            self._end_unfinished(call.id, e.ts, "awaiting_input")

    def _end_open_calls(self, ts: datetime | None) -> None:
        """The calls started and not final as the turn's run ends (the tracer stops while
        they run): their span ends now, with the status they have."""
        for call_id in list(self._starts):
            self._end_unfinished(call_id, ts, None)

    def _on_finished(self, key: Any, e: ToolCallFinished) -> None:
        record = self._record
        r = record.get(e.call.id) if record is not None else None
        if r is None or e.shared:
            return
        self._reran.discard(r.call_id)
        parent = self._call_parent.pop(r.call_id, None)
        if r.call_id in self._starts:  # it ran: the span of its run
            self._end_run_of(r.call_id, r, e)
            return
        if parent is None:
            if self._turn_span is None:
                self._orphans.append((r, e))  # the run that continues its turn adopts it
                return
            parent = self._turn_ctx
        self._call_span(r, parent, e)

    def _orphans_as_roots(self) -> None:
        """Calls no run adopted (the tracer stops, or a run ended before one began): each a
        span of its own rather than none."""
        orphans, self._orphans = self._orphans, []
        for r, e in orphans:
            self._call_span(r, None, e)

    def _on_step_finished(self, key: Any, e: StepFinished) -> None:
        if e.kind in ENDS_TURN:
            self._end_turn(e.ts, e.kind, budget=e.budget)

    # ------------------------------------------------------------ turns
    def _turn_for(self, turn: int, ts: datetime) -> Any:
        """The context of ``turn``'s open span, started now if the loop (re)starts on it."""
        if self._turn_span is not None:
            if self._turn == turn:
                return self._turn_ctx
            self._end_turn(ts, "next_turn")
        chat = self._chat()
        attrs: dict[str, Any] = {
            OPERATION: "invoke_agent",
            "gen_ai.agent.name": AGENT,
            "gen_ai.agent.id": self._chat_id,
            CONVERSATION: self._chat_id,
            TURN: turn,
        }
        if chat is not None:
            attrs[PROVIDER] = chat.provider.name
            attrs[REQUEST_MODEL] = chat.provider.model
            named = self._endpoint_of(chat.provider).get(PROVIDER)
            if named is not None:
                attrs[PROVIDER] = named
        links = []
        first = turn_context(self._chat_id, turn)
        if first is not None:  # a parked turn continued: the same turn's first run
            attrs["nbagent.continued"] = True
            links.append(Link(first, {"nbagent.link": "continues"}))
        parent = chat.parent if chat is not None else None
        if parent is not None:
            attrs["nbagent.fork.parent_chat_id"] = parent.chat_id
            attrs["nbagent.fork.step"] = parent.step
            attrs["nbagent.fork.change"] = parent.change
            if parent.call_id is not None:
                attrs["nbagent.fork.call_id"] = parent.call_id
            if not self._linked_parent:
                self._linked_parent = True
                origin = self._fork_origin(parent.chat_id, parent.step)
                if origin is not None:
                    links.append(Link(origin, {"nbagent.link": "forked_from"}))
        span = self._tracer.start_span(
            _TURN_NAME,
            context=self._run_context,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            links=links,
            start_time=ns(ts),
        )  # the span current when the turn ran (a batch, the user's own) is its parent
        self._turn_span, self._turn = span, turn
        self._turn_usage, self._turn_cost = [0, 0], 0.0
        self._turn_ctx = trace.set_span_in_context(span)
        _remember(self._chat_id, turn, span.get_span_context())
        orphans, self._orphans = self._orphans, []
        for r, e in orphans:  # answered before this run, in it: what it continues
            self._call_span(r, self._turn_ctx, e)
        return self._turn_ctx

    def _fork_origin(self, chat_id: str, step: int) -> SpanContext | None:
        """The span of the parent's turn the fork was made in: the one holding ``step``."""
        turn = step_turn(chat_id, step)
        if turn is None and self._record is not None:  # the shared history says it too
            turn = next((s.turn for s in self._record.steps if s.step == step), None)
        return turn_context(chat_id, turn) if turn is not None else None

    def _end_turn(
        self,
        ts: datetime | None,
        outcome: str,
        *,
        budget: str | None = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        self._end_open_calls(ts)
        span = self._turn_span
        if span is None:
            return
        self._turn_span = None
        attrs: dict[str, Any] = {
            "nbagent.outcome": outcome,
            INPUT_TOKENS: self._turn_usage[0],
            OUTPUT_TOKENS: self._turn_usage[1],
            COST: self._turn_cost,
        }
        if budget is not None:
            attrs["nbagent.budget"] = budget
        if error is not None:
            attrs["error.type"] = error[0]
            span.set_status(Status(StatusCode.ERROR, error[1]))
        if self._content:
            if self._turn_input:
                attrs["gen_ai.input.messages"] = json.dumps(self._turn_input)
            answer = self._answer()
            if answer is not None:
                attrs["gen_ai.output.messages"] = json.dumps([answer])
        span.set_attributes(attrs)  # one pass of the SDK's checks
        self._turn_input = []
        span.end(end_time=ns(ts))

    # ------------------------------------------------------------ requests
    def _end_finishing(self, e: Event | None = None) -> None:
        span, end = self._finishing
        self._finishing = None
        if self._content and isinstance(e, MessageAdded):
            m: Any = e.message
            if getattr(m, "role", None) == "assistant":
                span.set_attribute(
                    "gen_ai.output.messages",
                    json.dumps([_message_json(m, self._text, self._arguments, self._shown_name)]),
                )
        span.end(end_time=end)

    def _replay_link(self, attrs: dict[str, Any], step: int) -> list[Link] | None:
        """A replayed request names the chat that recorded it (``attrs``) and links to its
        turn (same process)."""
        chat = self._chat()
        recording = chat.recordings().get(step) if chat is not None else None
        if recording is None or not recording.chat_id:
            return None
        attrs["nbagent.replay.chat_id"] = recording.chat_id
        attrs["nbagent.replay.step"] = recording.step
        if recording.chat_id != self._chat_id:
            turn = step_turn(recording.chat_id, recording.step)  # the turn that recorded it
            origin = turn_context(recording.chat_id, turn) if turn is not None else None
            if origin is not None:
                return [Link(origin, {"nbagent.link": "replays"})]
        return None

    # ------------------------------------------------------------ calls
    def _call_span(
        self,
        r: CallRecord,
        parent: Any,
        e: ToolCallFinished | None,
        *,
        span: Any = None,
        until: datetime | None = None,
        window: tuple[int | None, int | None] | None = None,
        status: str | None = None,
        start: int | None = None,
    ) -> Any:
        """The call's span, ended (and returned): ``span`` the one made when its tool asked
        (else one made now under ``parent``, from ``start``, or when the model asked for the
        call); ``until``: when an unfinished call's span ends, and ``status`` its status then
        (else the record's); ``window``: a provider's item's request (start, end)."""
        unfinished = until is not None or status is not None
        status = status or r.status
        self._read_arguments_of(r.call_id)  # edited since, or never seen (a hosted call's)
        tool = self._shown_name(r.tool)  # the model's (an unknown tool's may hold a password)
        attrs: dict[str, Any] = {
            OPERATION: "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": r.call_id,
            "gen_ai.tool.type": "extension" if (r.server or r.hosted) else "function",
            CONVERSATION: self._chat_id,
            "nbagent.call.status": status,
        }
        # an attribute at its default is left out (absent means: decision ``auto``, not
        # gated, not hosted, not replayed, run ``sequential``): a span's attributes are
        # most of what the SDK spends on it, building and encoding each one
        if r.decision != "auto":
            attrs["nbagent.call.decision"] = r.decision
        if r.requires_approval:
            attrs["nbagent.call.requires_approval"] = True
        if r.hosted:
            attrs["nbagent.call.hosted"] = True
            if r.provider is not None:
                attrs[PROVIDER] = r.provider
        if r.server is not None:
            attrs["nbagent.call.server"] = r.server
        if r.item_type is not None:
            attrs["nbagent.call.item_type"] = r.item_type
        if r.concurrency is not None and r.concurrency != "sequential":
            attrs["nbagent.call.mode"] = r.concurrency
        if r.duration_ms is not None:
            attrs["nbagent.call.duration_ms"] = r.duration_ms
        if r.replayed:
            attrs["nbagent.call.replayed"] = True
        if r.step is not None:
            attrs[STEP] = r.step
        if r.turn is not None:
            attrs[TURN] = r.turn
        if r.server and not r.hosted:
            attrs["mcp.method.name"] = "tools/call"
        if r.ran_before:
            attrs["nbagent.call.ran_before"] = list(r.ran_before)
        if self._content:
            if r.arguments is not None:  # what ran: the edited arguments when edited ({} too)
                ran = r.arguments if r.edited_arguments is None else r.edited_arguments
                attrs["gen_ai.tool.call.arguments"] = _clipped(  # "password": "***"
                    json.dumps(self._arguments(ran), ensure_ascii=False, default=str)
                )
            content = r.result.content if r.result is not None else r.result_preview
            if content is not None and status == "ok":  # the conventions: a successful run's
                attrs["gen_ai.tool.call.result"] = self._text(content)
        failed = status in _FAILED
        if failed:
            attrs["error.type"] = _error_type(r)
        if span is not None:
            span.set_attributes(attrs)  # started when the call did: its name and tool
        else:
            if window is not None and window[0] is not None:
                start_ns: int | None = window[0]  # ran within its request, told after it
            elif start is not None:
                start_ns = start
            else:
                start_ns = ns(
                    r.requested_at or r.started_at or (e.ts if e is not None else utcnow())
                )
            span = self._tracer.start_span(
                self._name("execute_tool", tool),
                context=_parent(parent),
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=start_ns,
            )
        if r.requires_approval and r.approval_source is not None:
            reason = r.approval_reason
            span.add_event(
                "nbagent.approval.requested",
                {"nbagent.approval.source": r.approval_source}
                | ({"nbagent.approval.reason": self._text(
                    reason if self._content else _reason_kind(reason), 500)}
                   if reason else {}),
                timestamp=ns(r.requested_at),
            )  # fmt: skip
        d = r.decided
        if d is not None:
            decided: dict[str, Any] = {
                "nbagent.decision.verdict": d.verdict,
                # policy:always_allow:<tool>: a hosted call's name, always allowed from its card
                "nbagent.decision.by": self._shown_name(d.by),
            }
            if d.arguments is not None:
                decided["nbagent.decision.edited"] = True
            if d.reason:
                decided["nbagent.decision.reason"] = self._text(d.reason, 1000)
            if r.requested_at is not None and d.at is not None:
                decided["nbagent.decision.wait_ms"] = max(
                    0.0, (d.at - r.requested_at).total_seconds() * 1000.0
                )
            span.add_event("nbagent.approval.decided", decided, timestamp=ns(d.at))
        if failed:  # an error's text may quote the arguments: content; without, the status
            text = self._text(r.error or status, 1000) if self._content else status
            span.set_status(Status(StatusCode.ERROR, text))
        if window is not None and window[1] is not None:
            span.end(end_time=window[1])
            return span
        end = e.ts if e is not None else (until if unfinished else (r.finished_at or until))
        span.end(end_time=ns(end))
        return span

    def _provider_items(self, e: MessageAdded) -> None:
        """What the provider ran on its side, reported with this message: one span each."""
        record = self._record
        items = getattr(e.message, "items", ())
        if record is None or not items:
            return
        for n, item in enumerate(items):
            if isinstance(item, Reasoning) or item.type.endswith("list_tools"):
                continue
            r = record.get(item.call_id or f"{e.index}.{n}")
            if r is None or r.item_type is None or r.call is not None:
                continue
            parent = self._last_step
            window: tuple[int | None, int | None] | None = self._last_window
            if parent is None and self._turn_span is not None:
                parent, window = self._turn_ctx, None
            self._call_span(r, parent, None, window=window)

    # ------------------------------------------------------------ text
    def _text(self, text: str | None, limit: int = CONTENT_CHARS) -> str:
        """``text`` as exported: the chat's secrets (:meth:`_masking`) and key-shaped text
        masked, clipped."""
        return _clipped(redact_keys(self._masked(text or "")), limit)

    def _shown_name(self, name: str) -> str:
        """A name as a span's name or attribute shows it: a tool's (the model writes it, and
        an unknown tool's may hold ``password=...`` or a key, which the model itself reads as
        ``***``), a decider's (``policy:always_allow:<tool>``). As :meth:`_text` shows text,
        with or without content: the chat's secrets (:meth:`_masking`), then what
        ``redact_keys`` hides as ``***``; clipped to :data:`NAME_CHARS`.

        Made once per name, and looked at again only for the secrets found since: their
        masks are made only for a name one of them may stand in (a chat whose every call
        brings a new password would have them made again for each call's span)."""
        forms = self._secret_forms()
        kept = self._names_shown.get(name)
        if kept is not None:
            shown, looked = kept
            if looked == len(forms):
                return shown
            if not any(form in name for form in islice(forms, looked, None)):
                self._names_shown[name] = (shown, len(forms))
                return shown
        elif len(self._names_shown) >= _NAMES_KEPT:
            self._names_shown.clear()
        hidden = name
        if any(form in name for form in forms):
            masks = self._masking()
            if masks is not None:
                hidden = masks.hide(name)
        shown = _clipped(redact_keys(hidden), NAME_CHARS)
        self._names_shown[name] = (shown, len(forms))
        return shown

    def _secret_forms(self) -> list[str]:
        """Every form of every secret :meth:`_masking` masks (each as it is, and as
        ``repr()`` and JSON quote it), in the order found: what a name is looked at for
        before any masks are made. The chat's secrets changed (another provider): all anew."""
        self._read_secrets()
        if self._forms_chat is not self._chat_secrets:
            self._forms_chat = self._chat_secrets
            self._name_forms, self._forms_args, self._names_shown = [], 0, {}
            self._name_forms += (f for secret in self._chat_secrets for f in _quoted(secret))
        if self._forms_args < len(self._arg_order):
            added = self._arg_order[self._forms_args :]
            self._name_forms += (f for secret in added for f in _quoted(secret))
            self._forms_args = len(self._arg_order)
        return self._name_forms

    def _masked(self, text: str) -> str:
        """``text`` with the chat's secrets (:meth:`_masking`) as ``***``."""
        masks = self._masking()
        return text if masks is None else masks.hide(text)

    def _arguments(self, value: Any) -> Any:
        """A call's arguments as exported: by name (:func:`redacted`: ``"password": "***"``,
        key-shaped text), then the chat's secrets masked in each string (a tool's argument
        quoting a password), never in the dumped JSON (a number under a secret's name in one
        call must not cut another call's numbers, nor make its arguments no longer JSON)."""
        shown = redacted(value)
        masks = self._masking()
        return shown if masks is None else _each_string(shown, masks.hide)

    def _masking(self) -> Masks | None:
        """What no exported text may show (``None``: nothing but key-shaped text): the
        chat's provider's key (``gsk_...``, ``AIza...``: not every key is shaped like one)
        and its hosted tools' headers and tokens, wherever they appear (as :func:`scrub`
        does), and what its calls were given under a secret's name (``password``,
        ``api_key``, a nested ``access_token``: the arguments attribute masks them, and a
        tool's error quoting them must not show them either) only as a whole token (see
        :func:`~nbagent._secrets.token_masks`); each also as ``repr()`` and JSON quote it."""
        self._read_secrets()
        masks = self._masks
        if masks is None:
            masks = self._masks = token_masks(self._chat_secrets, self._arg_secrets or ())
        return masks if masks.forms else None

    def _read_secrets(self) -> None:
        """Read the chat's secrets and its calls' (see :meth:`_masking`) not read yet."""
        chat = self._chat()
        if chat is not None:  # a chat gone (dropped mid-turn): its secrets as last seen
            self._seen = (chat.provider, chat.hosted_tools)
        self._read_chat_secrets()
        self._read_arguments()

    def _read_chat_secrets(self) -> None:
        provider, hosted = self._seen
        if provider is None:
            return
        found = [s for h in hosted for s in getattr(h, "secrets", tuple)()]
        found += provider_secrets(provider)
        if found != self._chat_secrets:
            self._chat_secrets, self._masks = found, None

    def _read_arguments_of(self, call_id: str) -> None:
        """The call's arguments may hold secrets not gathered yet (read when text is next
        exported; before any was, every call's are read then)."""
        if self._arg_secrets is not None:
            self._args_to_read.add(call_id)

    def _read_arguments(self) -> None:
        """Gather the values under a secret's name in the calls' arguments (as asked for,
        as edited by a decision) not gathered yet: every call's, the first time."""
        record = self._record
        if record is None or (self._arg_secrets is not None and not self._args_to_read):
            return
        if self._arg_secrets is None:
            self._arg_secrets = found = set()
            calls: Any = record.calls
        else:
            found = self._arg_secrets
            calls = [r for c in self._args_to_read if (r := record.get(c)) is not None]
        self._args_to_read = set()
        before = len(found)
        for r in calls:
            decided = r.decided.arguments if r.decided is not None else None
            new = named_values(r.arguments, r.edited_arguments, decided) - found
            if new:
                found |= new
                self._arg_order += sorted(new)
        if len(found) != before:
            self._masks = None

    def _transcript_json(self, n: int) -> str:
        record = self._record
        messages = record.messages[:n] if record is not None else ()
        return json.dumps(
            [
                _message_json(m.message, self._text, self._arguments, self._shown_name)
                for m in messages
            ]
        )

    def _answer(self) -> dict[str, Any] | None:
        record = self._record
        if record is None:
            return None
        with record.reading():
            for m in reversed(record.messages):
                if m.role == "assistant" and m.turn == self._turn:
                    return _message_json(m.message, self._text, self._arguments, self._shown_name)
                if m.role == "user":
                    return None
        return None

    @staticmethod
    def _name(operation: str, what: str) -> str:
        """A span's name (``chat gpt-4o``, ``execute_tool refund``), made once per pair."""
        name = _NAMES.get((operation, what))
        if name is None:
            if len(_NAMES) > 4096:  # names come from models and tools: bounded
                _NAMES.clear()
            name = _NAMES[operation, what] = f"{operation} {what}"
        return name

    def _chat(self) -> Any:
        """The chat (``None``: gone, or no longer traced)."""
        return self._chat_ref()


# ------------------------------------------------------------ the late check
_DUE: weakref.WeakSet[Tracer] = weakref.WeakSet()
"""The tracers whose kept changes may wait for no next change (a turn stepped through with
``step()``, a long tool call): one check on nbagent's background loop looks at them all,
:data:`KEEP_SECONDS` apart at most, while any is here. A tracer is here from its first kept
change until the check finds nothing kept (its turn's run ended): back-to-back turns and a
batch's many chats share the one check, started by one hop to that loop, not one each."""
_DUE_LOCK = threading.Lock()  # taken under a tracer's lock, never the other way round
_DUE_AT: float | None = None  # when the pending check looks next (time.monotonic())
_DUE_GEN = 0  # the pending check's number: one an earlier change superseded ends as it wakes


def _due(tracer: Tracer, now: float) -> int | None:
    """(Under ``tracer``'s lock, as it keeps a first change at ``now``.) The check looks at
    ``tracer`` from now on; the number of a check to start (:func:`_start_check`) when none
    is pending that looks within :data:`KEEP_SECONDS`."""
    global _DUE_AT, _DUE_GEN
    with _DUE_LOCK:
        _DUE.add(tracer)
        at = now + KEEP_SECONDS
        if _DUE_AT is not None and at >= _DUE_AT:
            return None
        _DUE_AT, _DUE_GEN = at, _DUE_GEN + 1
        return _DUE_GEN


def _start_check(gen: int) -> None:
    global _DUE_AT
    try:
        spawn(_late_check(gen, KEEP_SECONDS))
    except RuntimeError:  # no background loop (the interpreter exits: _at_exit flushes)
        with _DUE_LOCK:
            if gen == _DUE_GEN:
                _DUE_AT = None


async def _late_check(gen: int, delay: float) -> None:
    """The check (see :data:`_DUE`): every tracer whose kept changes have waited
    :data:`KEEP_SECONDS` has them made into spans, all on one worker thread; it looks again
    when the next one's will have, until no tracer keeps any. It holds the tracers only
    while it looks, so a chat dropped in the meantime is not kept alive by it."""
    global _DUE_AT
    try:
        await _checking(gen, delay)
    finally:  # however it ends (cancelled at exit): the next kept change starts another
        with _DUE_LOCK:
            if gen == _DUE_GEN:
                _DUE_AT = None


async def _checking(gen: int, delay: float) -> None:
    global _DUE_AT
    while True:
        await asyncio.sleep(delay)
        looked = _look(gen)
        if looked is None:
            return  # superseded by one that looks sooner
        late, delay = looked
        if late:
            with contextlib.suppress(Exception):  # a failed change: its burst's others are spans
                wait = await in_worker(_flush_late, late)
                if wait is not None:
                    delay = min(delay, wait)
            late.clear()
        with _DUE_LOCK:
            if gen != _DUE_GEN:
                return
            if not _DUE:
                _DUE_AT = None
                return
            _DUE_AT = time.monotonic() + delay


def _look(gen: int) -> tuple[list[Tracer], float] | None:
    """(The background loop: never waits.) The tracers whose kept changes have waited
    :data:`KEEP_SECONDS` (or whose lock is busy), and when the next others' will have;
    ``None``: check ``gen`` was superseded."""
    with _DUE_LOCK:
        if gen != _DUE_GEN:
            return None
        tracers = list(_DUE)
    now, delay = time.monotonic(), KEEP_SECONDS
    late = []
    for tracer in tracers:
        wait = tracer.due_in(now)
        if wait is not None and wait <= 0:
            late.append(tracer)
        elif wait is not None:
            delay = min(delay, wait)
    return late, delay


def _flush_late(tracers: list[Tracer]) -> float | None:
    """(A worker thread.) :meth:`Tracer.flush_if_late` of each; the soonest wait left."""
    soonest = None
    for tracer in tracers:
        try:
            wait = tracer.flush_if_late()
        except Exception:  # one change's failure: the others are spans; nothing to do here
            continue
        if wait is not None:
            soonest = wait if soonest is None else min(soonest, wait)
    return soonest


class _CallSpan(trace.Span):
    """What is current in a running tool for its call's ``execute_tool`` span, which is made
    with the turn's other spans, in a burst (see the module docstring): made now, at every
    call, it cost the burst. Asked for its context (the tool makes a span of its own, an
    instrumented client does, a sub-agent's chat does), it has the tracer make the spans
    kept so far, its call's among them, and answers with that span's: what the tool makes is
    that span's child. A tool that makes no span costs one object."""

    __slots__ = ("_tracer", "asked", "call_id", "real")

    def __init__(self, tracer: Tracer, call_id: str):
        self._tracer = weakref.ref(tracer)
        self.call_id = call_id
        self.asked = False  # asked for the span: it is made (and kept open) for the tool
        self.real: Any = None  # the call's span, once made

    def _span(self) -> Any:
        real = self.real
        if real is None:
            tracer = self._tracer()
            if tracer is not None:
                tracer.materialize(self)
            real = self.real
        return real

    def get_span_context(self) -> SpanContext:
        real = self._span()
        return real.get_span_context() if real is not None else trace.INVALID_SPAN_CONTEXT

    def is_recording(self) -> bool:
        real = self._span()
        return real is not None and real.is_recording()

    def set_attribute(self, key: str, value: Any) -> None:
        real = self._span()
        if real is not None:
            real.set_attribute(key, value)

    def set_attributes(self, attributes: Any) -> None:
        real = self._span()
        if real is not None:
            real.set_attributes(attributes)

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        real = self._span()
        if real is not None:
            real.add_event(name, attributes, timestamp)

    def record_exception(self, exception: BaseException, *args: Any, **kwargs: Any) -> None:
        real = self._span()
        if real is not None:
            real.record_exception(exception, *args, **kwargs)

    def set_status(self, *args: Any, **kwargs: Any) -> None:
        """The call's status is the record's: not the tool's to set."""

    def update_name(self, name: str) -> None:
        """The span's name is the conventions' (``execute_tool {tool}``)."""

    def end(self, end_time: int | None = None) -> None:
        """The span ends when the call does: not the tool's to end."""


def _gone() -> None:
    """No chat: what :meth:`Tracer._chat` reads before it is attached and once detached."""
    return None


def _parent(ctx: Any) -> Any:
    """An OpenTelemetry context for a parent: a context as is, a span or a span context
    made current in a new one; ``None``: the caller's current context."""
    if ctx is None or isinstance(ctx, dict):  # a Context is a dict
        return ctx
    if not isinstance(ctx, SpanContext):
        ctx = ctx.get_span_context()
    return trace.set_span_in_context(NonRecordingSpan(ctx))


def _each_string(value: Any, mask: Any, depth: int = 0) -> Any:
    """``value`` (arguments, already :func:`redacted`) with ``mask`` applied to each string
    in it (dict keys too), its structure and its numbers as they are."""
    if isinstance(value, str):
        return mask(value)
    if depth > 200:
        return value
    if isinstance(value, dict):
        return {
            mask(k) if isinstance(k, str) else k: _each_string(v, mask, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_each_string(v, mask, depth + 1) for v in value]
    return value


def _clipped(text: str, limit: int = CONTENT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _message_json(m: Any, text: Any, arguments: Any, name: Any) -> dict[str, Any]:
    """A message in the GenAI conventions' shape: a role and its parts (``text``: how free
    text is exported, ``arguments``: how a call's arguments are, ``name``: a tool's name)."""
    parts: list[dict[str, Any]] = []
    if isinstance(m, ToolResultMessage):
        parts.append(
            {"type": "tool_call_response", "id": m.tool_call_id, "response": text(m.content)}
        )
        return {"role": "tool", "parts": parts}
    content = getattr(m, "content", None)
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": text(content)})
    for c in getattr(m, "tool_calls", ()) or ():
        parts.append(
            {
                "type": "tool_call",
                "id": c.id,
                "name": name(c.name),
                "arguments": _json_value(arguments(c.arguments)),
            }
        )
    out: dict[str, Any] = {"role": getattr(m, "role", "assistant"), "parts": parts}
    stop = getattr(m, "stop_reason", None)
    if stop and out["role"] == "assistant":
        out["finish_reason"] = _FINISH.get(stop, stop)
    return out


def _json_value(value: Any) -> Any:
    """``value`` (a call's arguments, masked) as the conventions want it in a message part:
    an object (as JSON reads it back); as a string only when clipped."""
    raw = json.dumps(value, ensure_ascii=False, default=str)
    if len(raw) > CONTENT_CHARS:
        return _clipped(raw)
    return json.loads(raw)


_NOTE = re.compile(r" \(approval rule (?:raised ([\w.]+)|returned\b).*\)\Z", re.S)
"""The note a resolver's failure adds to a call's approval reason (``_approvals``): its
error's text, or the value it returned, may quote the arguments."""


def _reason_kind(reason: str) -> str:
    """An approval reason without content: a resolver's failure only as its kind."""
    m = _NOTE.search(reason)
    if m is None:
        return reason
    kind = f"raised {m.group(1)}" if m.group(1) else "returned no verdict"
    return f"{reason[: m.start()]} (approval rule {kind})"


def _error_type(r: CallRecord) -> str:
    """A failed call's ``error.type``: its status (``error``, ``timed_out``...); an MCP
    server's tool that answered ``isError`` is ``tool_error``, as the MCP conventions say."""
    mcp = r.server is not None and not r.hosted
    if mcp and r.status == "error" and (r.error or "").startswith("MCPToolError"):
        return "tool_error"
    return r.status


_KNOWN_HOSTS = (
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.x.ai", "x_ai"),
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    ("models.inference.ai.azure.com", "azure.ai.inference"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.cohere.ai", "cohere"),
    ("api.cohere.com", "cohere"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
)
"""Endpoints whose provider the conventions name (``gen_ai.provider.name``'s well-known
values), by host (a leading dot: any host ending so)."""


def _endpoint_attributes(provider: Any) -> dict[str, Any]:
    """``server.address``, ``server.port`` and, for a known endpoint reached through another
    provider's client (OpenAI-compatible), ``gen_ai.provider.name``; {} without a URL."""
    url = getattr(provider, "base_url", None)
    if not isinstance(url, str) or not url:
        return {}
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return {}
    if not host:
        return {}
    attrs: dict[str, Any] = {"server.address": host}
    if port is None:
        port = {"https": 443, "http": 80}.get(parts.scheme)
    if port is not None:
        attrs["server.port"] = port
    for known, name in _KNOWN_HOSTS:
        if (
            host == known
            or (known.startswith(".") and host.endswith(known))
            or host.endswith("." + known)
        ):
            if getattr(provider, "name", None) != name:
                attrs[PROVIDER] = name
            break
    return attrs


_FINISH = {
    "end": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "context_window": "length",
    "refusal": "content_filter",
}
"""nbagent's stop reasons as the conventions' output message ``finish_reason`` values
(``pause_turn`` and ``other`` have none there and stay as they are)."""


_STOPPED = (KeyboardInterrupt, asyncio.CancelledError, ChatCancelled)
"""What a stopped run raises (the stop button, a cancelled task, ``chat.cancel()``)."""

_STOPPED_NAMES = frozenset(t.__name__ for t in _STOPPED)
"""The same as a failed request's ``error_type`` says it."""

_HANDLERS: dict[type[Event], Any] = {
    MessageAdded: Tracer._on_message,
    ModelRequestStarted: Tracer._on_request_started,
    ModelRequestFinished: Tracer._on_request_finished,
    ModelRequestFailed: Tracer._on_request_failed,
    ToolCallRequested: Tracer._on_requested,
    ToolCallStarted: Tracer._on_started,
    ToolCallFinished: Tracer._on_finished,
    StepFinished: Tracer._on_step_finished,
    InputRequested: Tracer._on_input_requested,
}
"""What each event does to the spans; the other events change none (a decision is read
off the call's record when the call is final)."""

_RUNS = frozenset(_HANDLERS) - {ToolCallFinished}
"""Events only a run of the loop emits (a call's end may be a decision made outside one)."""
