"""The chat record: ONE fold of a chat's events into calls, steps, messages and totals.

The core builds it as it emits (the bus's first subscriber folds every event
into it, then keeps the event in ``chat.events``); every wing reads it instead
of folding the stream itself: the log's DataFrames, the notebook view, fork,
comparison, the inbox. A loaded chat's record is folded from its
stored events, and a stored-only chat's with :func:`fold`: it is a pure function
of the events, so ``fold(chat.events) == chat.record`` always holds.

API (public as ``chat.record``; read-only: only the fold writes it)::

    r = chat.record
    r.calls        # tuple[CallRecord, ...], in request order (provider items too)
    r.call("id")   # one CallRecord by call id (KeyError if none)
    r.steps        # tuple[StepRecord, ...], one per model request (a retry is a new one)
    r.messages     # tuple[MessageRecord, ...], one per transcript message
    r.usage, r.cost_usd, r.unpriced, r.turn, r.step, r.last_step, r.last_budget
    r.steps_taken(turn=None)  # steps as max_steps counts them: requests and tool rounds
    r.version      # bumps on every change
    r.subscribe(fn)    # fn(RecordChange) after each change; r.unsubscribe(fn)
    with r.reading():  # a settled record while reading many fields (no event lands)
        ...

A :class:`CallRecord` is a call's lifecycle as its events told it; its
``decision`` is the log's kind (``auto``, ``pending``, ``approved``, ``denied``,
``policy``, ``none``) and ``decided`` the :class:`~nbagent.Decision` itself.
Records are read-only to their readers: only the fold writes them, in place (one
object per call, step and message for the chat's life; plain slotted objects,
since a fold that writes through a frozen guard costs several times more per
event), so a reader holding one sees it change; :class:`RecordChange` says
which one changed. What they hold of the provider's own JSON (a provider item's
``arguments``, a message's ``citations``) is a read-only copy: the item itself goes
back to the provider and is what the store keeps.

A provider item's record has the step whose response carried it; an Anthropic
``*_tool_use`` block and the ``*_tool_result`` answering it (its ``tool_use_id``) are
one record, the use's, with the result's status and output (as an OpenAI
``mcp_call`` is one item).
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal, NamedTuple

from ._events import (
    AlwaysAllowChanged,
    ApprovalDecided,
    ApprovalRequested,
    CallbackWarning,
    CallInDoubt,
    Event,
    InputAnswered,
    InputRequested,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    OptionsChanged,
    ReasoningDelta,
    RuleChanged,
    SamplingFinished,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallLog,
    ToolCallProgress,
    ToolCallRequested,
    ToolCallStarted,
)
from ._extension import Snapshot
from ._frozen import sent
from ._hosted import BREACHES, RAN_UNAPPROVED
from ._options import Forced, forced_after
from ._result_text import result_type, without_edit_note
from ._secrets import redacted
from ._types import (
    FINAL_STATUSES,
    POLICY_PREFIX,
    Approval,
    AssistantToolCallMessage,
    Decision,
    Message,
    PendingInput,
    ProviderItem,
    Reasoning,
    ToolCall,
    ToolResultMessage,
    Usage,
    short_id,
)

PREVIEW_CHARS = 200
ERROR_CHARS = 1000
FRAGMENTS = (TextDelta, ReasoningDelta, ToolCallDelta)
"""The streaming fragments: neither folded nor kept in ``chat.events`` (the whole is)."""
_FINAL_NOT_OK = FINAL_STATUSES - {"ok", "denied"}

ChangeKind = Literal["call", "step", "message", "chat", "reset", "input"]


@dataclass(slots=True)
class CallRecord:
    """One tool call (or one provider item: ``item_type`` set) as the chat's events tell it.

    The fields are ``chat.log``'s columns (see :mod:`nbagent.log`), plus the
    values behind them: ``call`` (the chat's :class:`~nbagent.ToolCall`, for its
    identity; ``None`` for a provider item), ``approval``, ``decided`` (the
    :class:`~nbagent.Decision`) and ``result`` (the
    :class:`~nbagent.ToolResultMessage` the model read). ``ran_before`` holds call ids.
    ``progress``, ``progress_total`` and ``progress_message`` are the latest progress
    report while it ran (``ToolCallProgress``); ``logs`` the server's log messages
    (``ToolCallLog``, as :class:`LogLine`), ``log_messages`` their number.
    """

    call_id: str
    tool: str
    status: str = "requested"
    decision: str = "auto"
    duration_ms: float | None = None
    arguments: Any = None
    result_preview: str | None = None
    result_type: str | None = None
    error: str | None = None
    decided_by: str | None = None
    reason: str | None = None
    edited_arguments: dict[str, Any] | None = None
    decided_at: datetime | None = None
    requires_approval: bool | None = None
    approval_source: str | None = None
    approval_reason: str | None = None
    server: str | None = None
    hosted: bool | None = None
    replayed: bool | None = None
    shared: bool | None = None
    ran_before: tuple[str, ...] = ()
    item_type: str | None = None
    turn: int | None = None
    step: int | None = None
    run_step: int | None = None
    concurrency: str | None = None
    input_kind: str | None = None
    answered_by: str | None = None
    answered_at: datetime | None = None
    input_wait_ms: float | None = None
    requested_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    model: str | None = None
    provider: str | None = None
    progress: float | None = None
    progress_total: float | None = None
    progress_message: str | None = None
    log_messages: int = 0
    call: ToolCall | None = None
    approval: Approval | None = None
    decided: Decision | None = None
    result: ToolResultMessage | None = None
    logs: tuple[LogLine, ...] = ()

    def __repr__(self) -> str:
        return _shown(self)


class LogLine(NamedTuple):
    """One log message a server sent while a call ran (``CallRecord.logs``)."""

    ts: datetime
    level: str
    message: str
    logger: str | None


@dataclass(slots=True)
class InputRecord:
    """One pending input (a :class:`~nbagent.PendingInput`) and how it was answered.

    ``status`` is ``pending`` until answered, then the answer's action (``accept``,
    ``decline``, ``cancel``); ``wait_ms`` is how long it waited; ``request`` is the
    :class:`~nbagent.PendingInput` itself.
    """

    input_id: str
    kind: str
    call_id: str | None
    tool: str | None
    server: str | None
    message: str
    step: int | None
    turn: int | None
    requested_at: datetime
    request: PendingInput
    status: str = "pending"
    data: Any = None
    answered_by: str | None = None
    answered_at: datetime | None = None
    reason: str | None = None
    wait_ms: float | None = None
    elsewhere: bool = False
    usage: Usage | None = None
    cost_usd: float | None = None
    resume: dict[str, Any] | None = None
    """A parked call's input (a 2026-07-28 server's): its ``key``, the ``round`` it was
    asked in and the server's ``request_state`` (see ``InputRequested.resume``)."""

    def __repr__(self) -> str:
        return _shown(self)


def _shown(row: Any) -> str:
    """A record's row as ``repr`` shows it: its fields as a dataclass shows them, with a
    key, URL credentials or a password in a text (the question, the answer, a reason, the
    arguments) as ``***``, as ``repr(ToolCall)`` and ``repr(PendingInput)`` hide them."""
    shown = ", ".join(f"{f.name}={redacted(getattr(row, f.name))!r}" for f in fields(row))
    return f"{type(row).__name__}({shown})"


@dataclass(slots=True)
class StepRecord:
    """One model request: ``chat.steps``'s columns, ``usage`` as a :class:`~nbagent.Usage`
    (``None`` while in flight or when it failed) and the answer's ``text``."""

    turn: int
    step: int
    model: str | None = None
    provider: str | None = None
    tool_choice: str | None = None
    n_messages: int | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    replayed: bool | None = None
    shared: bool | None = None
    latency_ms: float | None = None
    stop_reason: str | None = None
    raw_stop_reason: str | None = None
    n_tool_calls: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error_type: str | None = None
    error: str | None = None
    text: str | None = None


@dataclass(slots=True)
class MessageRecord:
    """One transcript message: ``chat.messages``'s columns and the ``message`` itself."""

    index: int
    turn: int
    role: str | None
    kind: str
    content: str | None
    n_tool_calls: int
    tool_call_id: str | None
    tool: str | None
    status: str | None
    is_error: bool | None
    stop_reason: str | None
    added_at: datetime
    message: Message

    @property
    def citations(self) -> list[dict[str, Any]] | None:
        """The sources the message's text cites (``chat.messages``' ``citations``), or None.

        Read-only copies: the message's own dicts are what goes back to the provider and
        what the store keeps, so an edit here would change one and not the other."""
        found = getattr(self.message, "citations", ())
        return sent(list(found)) if found else None


class RecordChange(NamedTuple):
    """What one event changed: ``kind`` ``call`` (``key``: the call id), ``step`` (the
    :class:`StepRecord`'s position in ``steps``), ``message`` (its index; the records of
    the provider items it carries are added with it), ``chat`` (the totals or the last
    step) or ``reset`` (refolded: a loaded chat's history)."""

    kind: ChangeKind
    key: str | int | None
    event: Event | None


RecordHook = Callable[[RecordChange], Any]


class ChatRecord:
    """One chat's calls, steps, messages and totals, folded from its events (see the module)."""

    def __init__(self, chat_id: str):
        self.chat_id = chat_id
        self._lock = threading.RLock()
        self._hooks: list[RecordHook] = []
        self.version = 0  # only ever grows (a refold too): a reader's cache key
        self._clear()

    def _clear(self) -> None:
        self._calls: list[CallRecord] = []
        self._by_id: dict[str, CallRecord] = {}
        self._steps: list[StepRecord] = []
        self._open_steps: dict[int, int] = {}
        self._messages: list[MessageRecord] = []
        self._inputs: dict[str, InputRecord] = {}
        self._model: str | None = None
        self._provider: str | None = None
        self.usage = Usage()
        self.cost_usd = 0.0
        self.replayed_cost_usd = 0.0  # what replayed requests cost when recorded (budgets)
        self.unpriced = 0
        self.turn = 0
        self.step = 0
        self.last_step: str | None = None
        self.last_budget: str | None = None
        self._taken: dict[int, int] = {}
        self._answered: tuple[int, int] | None = None  # (step, turn) of the response being added

    # ------------------------------------------------------------ reading
    @property
    def calls(self) -> tuple[CallRecord, ...]:
        """Every call and provider item, in request order."""
        with self._lock:
            return tuple(self._calls)

    @property
    def steps(self) -> tuple[StepRecord, ...]:
        """Every model request, in order."""
        with self._lock:
            return tuple(self._steps)

    @property
    def messages(self) -> tuple[MessageRecord, ...]:
        """Every transcript message, in order."""
        with self._lock:
            return tuple(self._messages)

    def steps_taken(self, turn: int | None = None) -> int:
        """Steps that did work in ``turn`` (default: the whole chat), counted as
        ``max_steps`` counts them: each model request and each round of tool calls.

        ``steps`` holds only the model requests; a failed request asked again is one
        step.
        """
        with self._lock:
            return self._taken.get(turn, 0) if turn is not None else sum(self._taken.values())

    @property
    def inputs(self) -> tuple[InputRecord, ...]:
        """Every input asked for (pending or answered), in request order."""
        with self._lock:
            return tuple(self._inputs.values())

    @property
    def pending_inputs(self) -> tuple[PendingInput, ...]:
        """The inputs still waiting for an answer, in request order."""
        with self._lock:
            return tuple(r.request for r in self._inputs.values() if r.status == "pending")

    def input(self, input_id: str) -> InputRecord | None:
        """The record of one input, by id, or ``None``."""
        with self._lock:
            return self._inputs.get(input_id)

    def call(self, call_id: str) -> CallRecord:
        """The record of one call, by id.

        Raises:
            KeyError: The chat has no such call.
        """
        with self._lock:
            return self._by_id[call_id]

    def get(self, call_id: str) -> CallRecord | None:
        """The record of one call, by id, or ``None``."""
        with self._lock:
            return self._by_id.get(call_id)

    @property
    def title(self) -> str | None:
        """The chat's first user message with text (what a store calls its title), or None."""
        with self._lock:
            for m in self._messages:
                if m.role == "user" and isinstance(m.content, str) and m.content.strip():
                    return m.content
        return None

    @contextmanager
    def reading(self) -> Iterator[ChatRecord]:
        """Hold the record still while reading many fields (no event folds meanwhile)."""
        with self._lock:
            yield self

    def snapshot(self) -> Snapshot:
        """The chat state the record describes, as new objects (fork restores it).

        Every call is a fresh :class:`~nbagent.ToolCall` with the lifecycle its
        events gave it; an assistant message's calls are those fresh ones.
        """
        with self._lock:
            calls = {r.call_id: _lived(r) for r in self._calls if r.call is not None}
            messages: list[Message] = []
            for mr in self._messages:
                m = mr.message
                if isinstance(m, AssistantToolCallMessage):
                    for tc in m.tool_calls:
                        calls.setdefault(tc.id, tc.copy_identity())
                    m = _with_calls(m, tuple(calls[tc.id] for tc in m.tool_calls))
                messages.append(m)
            return Snapshot(
                messages=tuple(messages),
                calls=tuple(calls.values()),
                call_turn={r.call_id: r.turn for r in self._calls if r.call is not None},  # type: ignore[misc]
                call_step={r.call_id: r.step for r in self._calls if r.call is not None},  # type: ignore[misc]
                turn=self.turn,
                step=self.step,
                forced_spent=self._forced(self.turn, calls).spent,
                last_step=self.last_step,
                last_budget=self.last_budget,
            )

    def request_choice(self, step: int) -> str | None:
        """The tool choice step ``step``'s request was sent with (``None``: no such request)."""
        with self._lock:
            for s in reversed(self._steps):
                if s.step == step:
                    return s.tool_choice
        return None

    def forced(self, turn: int | None = None) -> Forced:
        """Where ``turn`` (default: the current one) stands with a ``required`` or named
        tool choice: its closed tool rounds, each with the choice its request was sent
        with, folded by :func:`~nbagent._options.forced_after` (the rule the loop applies
        as it closes a round: a fork or a loaded chat goes on as the chat would)."""
        with self._lock:
            return self._forced(self.turn if turn is None else turn, {})

    def _forced(self, turn: int, calls: dict[str, ToolCall]) -> Forced:
        """:meth:`forced`, reading only ``turn``'s messages; ``calls``: the calls with their
        lifecycle made already (a snapshot's), the others are made from their records."""
        start = len(self._messages)  # a turn's messages are together, turns in order
        while start and self._messages[start - 1].turn >= turn:
            start -= 1
        mine = [m for m in self._messages[start:] if m.turn == turn]
        answered = {
            m.message.tool_call_id for m in mine if isinstance(m.message, ToolResultMessage)
        }
        state = Forced()
        for m in mine:
            msg = m.message
            if not isinstance(msg, AssistantToolCallMessage) or not msg.tool_calls:
                continue
            ids = [tc.id for tc in msg.tool_calls]
            records = [self._by_id.get(i) for i in ids]
            if not all(i in answered for i in ids) or any(r is None or not r.call for r in records):
                continue  # the round is still open: it is judged once it closes
            lived = [calls.get(r.call_id) or _lived(r) for r in records if r is not None]
            step = records[0].step if records[0] is not None else None
            choice = self.request_choice(step) if step is not None else None
            state = forced_after(state, choice, lived)
        return state

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChatRecord):
            return NotImplemented
        return self._state() == other._state()

    __hash__ = None  # type: ignore[assignment]

    def _state(self) -> tuple[Any, ...]:
        with self._lock:
            return (
                self.chat_id,
                list(self._calls),
                list(self._steps),
                list(self._messages),
                list(self._inputs.values()),
                self.usage,
                self.cost_usd,
                self.replayed_cost_usd,
                self.unpriced,
                self.turn,
                self.step,
                self.last_step,
                self.last_budget,
                dict(self._taken),
            )

    def __repr__(self) -> str:
        return (
            f"ChatRecord(chat_id={short_id(self.chat_id)!r}, calls={len(self._calls)}, "
            f"steps={len(self._steps)}, messages={len(self._messages)})"
        )

    # ------------------------------------------------------------ the hook
    def subscribe(self, fn: RecordHook) -> None:
        """Call ``fn(change)`` after every change (in the emitting thread; keep it quick).

        Subscribed inside :meth:`reading`, ``fn`` hears exactly the changes folded after
        what was read there: none missed, none twice (each change goes to the subscribers
        there were when it was folded).
        """
        if not callable(fn):
            raise TypeError(f"subscriber must be callable, got {fn!r}")
        with self._lock:
            self._hooks = [*self._hooks, fn]

    def unsubscribe(self, fn: RecordHook) -> bool:
        """Stop calling ``fn``; whether it was subscribed."""
        with self._lock:
            before = len(self._hooks)
            self._hooks = [f for f in self._hooks if f is not fn and f != fn]
            return len(self._hooks) != before

    def _tell(self, change: RecordChange, hooks: list[RecordHook] | None = None) -> None:
        for fn in self._hooks if hooks is None else hooks:
            try:
                fn(change)
            except Exception as exc:
                warnings.warn(
                    f"nbagent record subscriber {getattr(fn, '__qualname__', fn)!r} raised "
                    f"{type(exc).__name__}: {exc}",
                    CallbackWarning,
                    stacklevel=2,
                )

    # ------------------------------------------------------------ the fold
    def _apply(self, event: Event) -> RecordChange | None:
        """Fold one event (O(1)); the change it made, or ``None``."""
        rule = _RULES.get(type(event))
        if rule is None:
            raise TypeError(f"the chat record has no rule for {type(event).__name__}")
        with self._lock:
            change = rule(self, event)
            if change is not None:
                self.version += 1
        return change

    def _refold(self, events: Iterable[Event]) -> None:
        """Fold the whole history again (a loaded chat: its stored events come first)."""
        with self._lock:
            self._clear()
            for e in events:
                self._apply(e)
            self.version += 1
            hooks = self._hooks
        self._tell(RecordChange("reset", None, None), hooks)

    def _row(self, call: ToolCall, step: int | None, turn: int | None) -> CallRecord:
        r = self._by_id.get(call.id)
        if r is None:
            r = CallRecord(call.id, call.name, arguments=call.arguments, step=step, turn=turn)
            r.model, r.provider, r.server, r.hosted = (
                self._model,
                self._provider,
                call.server,
                call.hosted,
            )
            r.item_type, r.call = ("mcp_approval_request" if call.hosted else None), call
            self._by_id[call.id] = r
            self._calls.append(r)
        return r

    def _on_requested(self, e: ToolCallRequested) -> RecordChange:
        r = self._row(e.call, e.step, e.turn)
        a = r.approval = e.approval
        r.step, r.turn, r.requested_at = e.step, e.turn, e.ts
        r.requires_approval, r.approval_source, r.approval_reason = (
            a.required,
            a.source,
            a.reason or None,
        )
        r.status = "awaiting_approval" if a.required else "requested"
        r.decision = "pending" if a.required else "auto"
        return RecordChange("call", r.call_id, e)

    def _on_approval_requested(self, e: ApprovalRequested) -> RecordChange:
        r = self._row(e.call, e.step, e.turn)
        r.status, r.decision, r.requires_approval = "awaiting_approval", "pending", True
        if e.reason:
            r.approval_reason = e.reason
        if r.approval_source is None:
            r.approval_source = e.source
        return RecordChange("call", r.call_id, e)

    def _on_decided(self, e: ApprovalDecided) -> RecordChange:
        r = self._row(e.call, None, e.turn)
        d = r.decided = e.decision
        r.decision = "policy" if d.by.startswith(POLICY_PREFIX) else d.verdict
        r.decided_by, r.decided_at, r.reason, r.edited_arguments = d.by, d.at, d.reason, d.arguments
        r.requires_approval, r.result = True, None
        if d.verdict == "approved":
            if r.status == "denied":  # a human overruled an automatic denial
                r.finished_at = r.result_preview = r.error = r.result_type = None
            r.status = "approved"
        else:
            r.status = "denied"
        return RecordChange("call", r.call_id, e)

    def _on_started(self, e: ToolCallStarted) -> RecordChange:
        r = self._row(e.call, None, e.turn)
        r.status, r.run_step, r.started_at, r.concurrency = "running", e.step, e.ts, e.mode
        return RecordChange("call", r.call_id, e)

    def _on_finished(self, e: ToolCallFinished) -> RecordChange:
        r = self._row(e.call, e.step, e.turn)
        status = r.status = e.status
        r.result, r.finished_at, r.duration_ms = e.result, e.ts, e.duration_ms
        r.replayed, r.shared, r.ran_before = e.replayed, e.shared, e.ran_before
        # The model reads a note before an edited call's result; the preview shows the result.
        content = without_edit_note(e.result.content, r.edited_arguments is not None)
        r.result_preview = content[:PREVIEW_CHARS]
        r.result_type = result_type(content, e.result.parts) if status == "ok" else None
        if e.started_at is not None:
            r.started_at = e.started_at
        if status in _FINAL_NOT_OK:
            r.error = (e.error or content)[:ERROR_CHARS]
        if r.decision == "pending":
            r.decision = "none"
        if r.input_kind is not None:  # asked mid-call and never answered (a crash): closed
            for i in self._inputs.values():
                if i.call_id == r.call_id and i.status == "pending":
                    i.status, i.answered_at, i.reason = "cancel", e.ts, "the call ended"
        return RecordChange("call", r.call_id, e)

    def _on_progress(self, e: ToolCallProgress) -> RecordChange | None:
        r = self._by_id.get(e.call.id)
        if r is None or r.status != "running":
            return None  # a report that lost the race with the call's end
        r.progress, r.progress_total, r.progress_message = e.progress, e.total, e.message
        return RecordChange("call", r.call_id, e)

    def _on_log(self, e: ToolCallLog) -> RecordChange | None:
        r = self._by_id.get(e.call.id)
        if r is None or r.status != "running":
            return None
        r.logs = (*r.logs, LogLine(e.ts, e.level, e.message, e.logger))
        r.log_messages = len(r.logs)
        return RecordChange("call", r.call_id, e)

    def _on_in_doubt(self, e: CallInDoubt) -> RecordChange | None:
        if not e.rerun:
            return None  # its ToolCallFinished (in_doubt) follows
        r = self._row(e.call, e.step, e.turn)
        r.status = "approved" if r.requires_approval else "requested"
        r.started_at = None
        return RecordChange("call", r.call_id, e)

    def _on_input_requested(self, e: InputRequested) -> RecordChange:
        request = PendingInput(
            e.input_id,
            e.kind,  # type: ignore[arg-type]
            e.call.id if e.call is not None else None,
            e.call.name if e.call is not None else None,
            e.prompt,
            dict(e.content),
            e.schema,
            e.server,
            e.ts,
        )
        self._inputs[e.input_id] = InputRecord(
            e.input_id,
            e.kind,
            request.call_id,
            request.tool,
            e.server,
            e.prompt,
            e.step,
            e.turn,
            e.ts,
            request,
            resume=e.resume,
        )
        if e.call is not None:
            r = self._row(e.call, None, e.turn)
            r.input_kind = e.kind
            if r.status in ("requested", "approved"):  # an external call parks; a running one runs
                r.status = "awaiting_input"
            elif e.resume is not None:  # a run that ended parked on its inputs (2026-07-28)
                r.status, r.started_at = "awaiting_input", None
        return RecordChange("input", e.input_id, e)

    def parked_round(self, call_id: str) -> list[InputRecord] | None:
        """The inputs of the last round a call parked on (``resume``d inputs), or ``None``."""
        with self._lock:
            mine = [i for i in self._inputs.values() if i.call_id == call_id and i.resume]
            if not mine:
                return None
            last = mine[-1].resume["round"]  # type: ignore[index]
            return [i for i in mine if i.resume["round"] == last]  # type: ignore[index]

    def _on_input_answered(self, e: InputAnswered) -> RecordChange | None:
        i = self._inputs.get(e.input_id)
        if i is None:
            return None
        i.status, i.data, i.answered_by, i.answered_at = e.action, e.data, e.by, e.ts
        i.reason, i.elsewhere = e.reason, e.elsewhere
        i.wait_ms = max(0.0, (e.ts - i.requested_at).total_seconds() * 1000.0)
        r = self._by_id.get(i.call_id) if i.call_id is not None else None
        if r is not None:
            r.answered_by, r.answered_at = e.by, e.ts
            r.input_wait_ms = (r.input_wait_ms or 0.0) + i.wait_ms
            if i.resume and r.status == "awaiting_input":  # the round answered: runnable again
                rid = i.resume.get("round")
                if not any(
                    o.call_id == i.call_id
                    and o.status == "pending"
                    and (o.resume or {}).get("round") == rid
                    for o in self._inputs.values()
                ):
                    r.status = "approved" if r.requires_approval else "requested"
        return RecordChange("input", e.input_id, e)

    def _on_sampled(self, e: SamplingFinished) -> RecordChange:
        """A sampling request's tokens and cost join the chat's totals (it is no step)."""
        self.usage = self.usage + e.usage
        if e.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd += e.cost_usd
        i = self._inputs.get(e.input_id)
        if i is not None:
            i.usage, i.cost_usd = e.usage, e.cost_usd
        return RecordChange("chat", None, e)

    def _new_step(self, step: int, turn: int, model: str, provider: str) -> int:
        self._steps.append(StepRecord(turn, step, model, provider))
        return len(self._steps) - 1

    def _on_request_started(self, e: ModelRequestStarted) -> RecordChange:
        i = self._open_steps[e.step] = self._new_step(e.step, e.turn, e.model, e.provider)
        s = self._steps[i]
        s.tool_choice, s.n_messages, s.started_at = e.tool_choice, e.n_messages, e.ts
        return RecordChange("step", i, e)

    def _step_row(self, e: ModelRequestFinished | ModelRequestFailed) -> int:
        i = self._open_steps.pop(e.step, None)
        return self._new_step(e.step, e.turn, e.model, e.provider) if i is None else i

    def _on_request_finished(self, e: ModelRequestFinished) -> RecordChange:
        i = self._step_row(e)
        s = self._steps[i]
        s.model, s.provider = self._model, self._provider = e.model, e.provider
        s.usage, s.cost_usd, s.replayed, s.shared = e.usage, e.cost_usd, e.replayed, e.shared
        s.latency_ms, s.stop_reason, s.raw_stop_reason = (
            e.latency_ms,
            e.stop_reason,
            e.raw_stop_reason,
        )
        s.n_tool_calls, s.finished_at, s.text = e.n_tool_calls, e.ts, e.text
        self._answered = (e.step, e.turn)  # its assistant message comes next, with its items
        self.usage = self.usage + e.usage
        if e.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd += e.cost_usd
        self.replayed_cost_usd += e.recorded_cost_usd or 0.0
        return RecordChange("step", i, e)

    def _on_request_failed(self, e: ModelRequestFailed) -> RecordChange:
        i = self._step_row(e)
        s = self._steps[i]
        s.latency_ms, s.error_type, s.error = e.latency_ms, e.error_type, e.error[:ERROR_CHARS]
        s.n_tool_calls, s.finished_at = 0, e.ts
        return RecordChange("step", i, e)

    def _on_step_finished(self, e: StepFinished) -> RecordChange:
        self.step = max(self.step, e.step)
        self.last_step, self.last_budget = e.kind, e.budget
        if e.kind in ("generated", "ran_tools"):  # the units of work max_steps counts
            self._taken[e.turn] = self._taken.get(e.turn, 0) + 1
        return RecordChange("chat", e.step, e)

    def _on_message(self, e: MessageAdded) -> RecordChange:
        record = _message_record(e)
        self._messages.append(record)
        self.turn = max(self.turn, e.turn)
        step: int | None = None
        if record.role == "assistant":  # the response whose finish came just before
            answered, self._answered = self._answered, None
            if answered is not None and answered[1] == e.turn:
                step = answered[0]
        for n, item in enumerate(getattr(e.message, "items", ())):
            if not isinstance(item, Reasoning) and not item.is_text:  # no call: see the steps
                self._on_item(item, f"{e.index}.{n}", e, step)
        return RecordChange("message", e.index, e)

    def _on_item(self, item: ProviderItem, key: str, e: MessageAdded, step: int | None) -> None:
        """A record for what the provider did on its side (never run here), in the step
        whose response carried it.

        An Anthropic ``*_tool_result`` block answers the ``*_tool_use`` block named by its
        ``tool_use_id``: one hosted call, one record (the use's, as an OpenAI ``mcp_call``
        is one item), its status and output the result's.
        """
        raw = item.raw
        use_id = raw.get("tool_use_id") if item.type.endswith("_tool_result") else None
        if isinstance(use_id, str):
            use = self._by_id.get(use_id)
            if use is not None and use.call is None and use.item_type is not None:
                if use.status is None:  # not answered yet (else: a replay)
                    use.status, use.finished_at = item.status, e.ts
                    _item_outcome(use, item)
                return
        ident = item.call_id or (use_id if isinstance(use_id, str) else None) or key
        if ident in self._by_id:
            return  # a replay
        r = CallRecord(ident, item.name or item.type, status=item.status)  # type: ignore[arg-type]
        r.server, r.hosted, r.item_type, r.turn = item.server, True, item.type, e.turn
        r.step, r.requested_at, r.finished_at = step, e.ts, e.ts
        r.model, r.provider, r.requires_approval = self._model, self._provider, False
        r.arguments = _arguments_of(raw)
        self._by_id[ident] = r
        self._calls.append(r)
        approval = raw.get("approval_request_id")
        j = self._by_id.get(approval) if isinstance(approval, str) else None
        if j is not None:  # it ran after an approval: that approval's decision
            r.decision, r.decided_by, r.decided_at = j.decision, j.decided_by, j.decided_at
            r.reason, r.decided, r.requires_approval = j.reason, j.decided, True
        elif item.status == RAN_UNAPPROVED:  # an approval was due and nobody gave one
            r.requires_approval, r.decision = True, "none"
        _item_outcome(r, item)

    def _unchanged(self, e: Event) -> None:
        """Events that change none of the record (options, rules, streaming fragments)."""
        return None


_RULES: dict[type[Event], Callable[[ChatRecord, Any], RecordChange | None]] = {
    MessageAdded: ChatRecord._on_message,
    ModelRequestStarted: ChatRecord._on_request_started,
    TextDelta: ChatRecord._unchanged,
    ReasoningDelta: ChatRecord._unchanged,
    ToolCallDelta: ChatRecord._unchanged,
    ModelRequestFinished: ChatRecord._on_request_finished,
    ModelRequestFailed: ChatRecord._on_request_failed,
    ToolCallRequested: ChatRecord._on_requested,
    ApprovalRequested: ChatRecord._on_approval_requested,
    ApprovalDecided: ChatRecord._on_decided,
    ToolCallStarted: ChatRecord._on_started,
    ToolCallFinished: ChatRecord._on_finished,
    CallInDoubt: ChatRecord._on_in_doubt,
    StepFinished: ChatRecord._on_step_finished,
    OptionsChanged: ChatRecord._unchanged,
    AlwaysAllowChanged: ChatRecord._unchanged,
    RuleChanged: ChatRecord._unchanged,
    ToolCallProgress: ChatRecord._on_progress,
    ToolCallLog: ChatRecord._on_log,
    InputRequested: ChatRecord._on_input_requested,
    InputAnswered: ChatRecord._on_input_answered,
    SamplingFinished: ChatRecord._on_sampled,
}
"""The fold's rule for every event type (a test checks none is missing)."""


def fold(events: Iterable[Event], chat_id: str | None = None) -> ChatRecord:
    """A record folded from ``events`` (a chat's ``chat.events``, or a store's), from scratch.

    ``chat_id`` defaults to the first event's.
    """
    record: ChatRecord | None = None if chat_id is None else ChatRecord(chat_id)
    for e in events:
        if record is None:
            record = ChatRecord(e.chat_id)
        record._apply(e)
    return record if record is not None else ChatRecord("")


def fold_chats(events: Iterable[Event]) -> list[ChatRecord]:
    """One record per chat of a stream mixing chats (a store's), in order of first event."""
    records: dict[str, ChatRecord] = {}
    for e in events:
        record = records.get(e.chat_id)
        if record is None:
            record = records[e.chat_id] = ChatRecord(e.chat_id)
        record._apply(e)
    return list(records.values())


def keeper(history: list[Event], record: ChatRecord) -> Callable[[Event], None]:
    """The bus's first subscriber: folds each event into ``record``, then keeps it in
    ``history`` (``chat.events``); the record's subscribers hear of the change last.

    It holds the list and the record, not the chat, so the bus never keeps its chat alive.
    """

    def keep(event: Event) -> None:
        if isinstance(event, FRAGMENTS):
            return
        with record._lock:
            history.append(event)
            change = record._apply(event)
            hooks = record._hooks  # those subscribed when it was folded (see subscribe)
        if change is not None:
            record._tell(change, hooks)

    return keep


def _lived(r: CallRecord) -> ToolCall:
    """A fresh :class:`~nbagent.ToolCall` with the lifecycle ``r``'s events gave it."""
    assert r.call is not None
    c = r.call.copy_identity()
    c.approval, c.decision, c.result = r.approval, r.decided, r.result
    c.status = r.status  # type: ignore[assignment]
    c.started_at, c.finished_at = r.started_at, r.finished_at
    return c


def _with_calls(m: AssistantToolCallMessage, calls: tuple[ToolCall, ...]) -> Message:
    import dataclasses

    return dataclasses.replace(m, tool_calls=calls)


def _message_record(e: MessageAdded) -> MessageRecord:
    m: Any = e.message
    if isinstance(m, ToolResultMessage):
        return MessageRecord(
            e.index, e.turn, "tool", "tool_result", m.content, 0, m.tool_call_id,
            m.name or None, m.status, m.is_error, None, e.ts, m,
        )  # fmt: skip
    if isinstance(m, AssistantToolCallMessage):
        return MessageRecord(
            e.index, e.turn, "assistant", "tool_calls", m.content, len(m.tool_calls),
            None, None, None, None, m.stop_reason, e.ts, m,
        )  # fmt: skip
    role = getattr(m, "role", None)
    stop = getattr(m, "stop_reason", None) if role == "assistant" else None
    content = getattr(m, "content", None)
    return MessageRecord(
        e.index, e.turn, role, "text", content, 0, None, None, None, None, stop, e.ts, m
    )


def _arguments_of(raw: dict[str, Any]) -> Any:
    """A provider item's arguments, read-only and its own: ``raw`` is what goes back to the
    provider and what the store keeps, so the record never hands out its dicts."""
    arguments = raw.get("arguments", raw.get("input"))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return sent({"_raw": arguments})
    return sent(arguments) if isinstance(arguments, dict) else None


def _item_outcome(r: CallRecord, item: ProviderItem) -> None:
    """A provider item's output (``result_preview``, ``result_type``) or error, on ``r``."""
    raw = item.raw
    output = _item_output(raw)
    failed = item.status == "error" or (item.status in BREACHES and bool(raw.get("error")))
    if output is not None:
        r.result_preview = output[:PREVIEW_CHARS]
        if not failed:
            r.result_type = result_type(output)
    if failed:
        r.error = (output or "failed")[:ERROR_CHARS]


def _item_output(raw: dict[str, Any]) -> str | None:
    """A provider item's output or error, as text (``mcp_call``, ``mcp_tool_result``...)."""
    for key in ("error", "output", "content"):
        value = raw.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and isinstance(value.get("message"), str):
            return value["message"]
        if isinstance(value, list):
            texts = [p.get("text") for p in value if isinstance(p, dict)]
            joined = "".join(t for t in texts if isinstance(t, str))
            if joined:
                return joined
        try:
            return json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return json.dumps(repr(value))
    return None


__all__ = [
    "CallRecord",
    "ChatRecord",
    "LogLine",
    "MessageRecord",
    "RecordChange",
    "StepRecord",
    "fold",
    "fold_chats",
    "keeper",
]
