"""The event stream: every state change of a chat, as typed, timestamped values.

The notebook view, the DataFrame log, the store and user callbacks are all
subscribers of one :class:`EventBus`; none of them reads the chat's internals.
Events are emitted by the thread that drives the chat (never concurrently for
one chat), in the order things happened: tool calls of a concurrent round
finish in completion order.

Subscribe with ``chat.on(EventType, fn)`` (or ``chat.on("tool_call_finished", fn)``,
or ``chat.on(None, fn)`` for everything); ``chat.off(fn)`` removes it.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, dataclass_transform

from ._secrets import redact_keys
from ._types import Approval, Decision, Message, ToolCall, ToolResultMessage, Usage


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
class _Frozen:
    """Every subclass is a frozen, keyword-only dataclass; ``type=`` names its kind."""

    def __init_subclass__(cls, type: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if type is not None:
            cls.type = type  # type: ignore[attr-defined]
        dataclass(frozen=True, kw_only=True)(cls)


class Event(_Frozen):
    """Base of every event; a subclass is declared as ``class X(Event, type="x"):``.

    Attributes:
        chat_id: The chat that emitted it.
        seq: Position in the chat's stream (0, 1, 2, ...), set when the event
            is emitted: the order subscribers saw it in.
        ts: When it happened (timezone-aware UTC).
    """

    type: ClassVar[str] = "event"
    chat_id: str
    seq: int = 0
    ts: datetime = field(default_factory=utcnow)


class MessageAdded(Event, type="message_added"):
    """A message joined the transcript (user, assistant, or a tool result)."""

    message: Message
    index: int
    turn: int


class ModelRequestStarted(Event, type="model_request_started"):
    step: int
    turn: int
    model: str
    provider: str
    n_messages: int
    tool_choice: str
    calls: str


class TextDelta(Event, type="text_delta"):
    """A fragment of assistant text while a response streams."""

    step: int
    text: str


class ReasoningDelta(Event, type="reasoning_delta"):
    """A fragment of the model's thinking (or reasoning summary) while a response streams."""

    step: int
    text: str


class ToolCallDelta(Event, type="tool_call_delta"):
    """A fragment of a tool call's arguments while a response streams."""

    step: int
    index: int
    call_id: str | None
    name: str | None
    arguments_delta: str


class ModelRequestFinished(Event, type="model_request_finished"):
    step: int
    turn: int
    model: str
    provider: str
    usage: Usage
    latency_ms: float
    stop_reason: str
    raw_stop_reason: str | None
    n_tool_calls: int
    text: str
    cost_usd: float | None = None
    replayed: bool = False
    """Answered from a recording (``Chat(replay=...)``): ``usage`` is the recorded
    tokens, ``cost_usd`` is 0 (nothing was spent now)."""
    recorded_cost_usd: float | None = None
    """A replayed request's cost when it was recorded (``None`` otherwise, or unknown):
    a cost budget counts it, so a replayed run stops where the recorded one did, and so
    do a fork of it and the chat loaded from a store."""
    shared: bool = False
    """A fork's copy of its parent's request (``chat.fork``): the parent made it and
    spent its tokens and cost; leave it out when adding up what chats spent."""


class ModelRequestFailed(Event, type="model_request_failed"):
    """A request failed; nothing was added to the transcript."""

    step: int
    turn: int
    model: str
    provider: str
    error_type: str
    error: str
    latency_ms: float


class ToolCallRequested(Event, type="tool_call_requested"):
    """The model asked for a call; ``approval`` is decided now, once."""

    call: ToolCall
    step: int
    turn: int
    approval: Approval


class ApprovalRequested(Event, type="approval_requested"):
    call: ToolCall
    step: int
    turn: int
    reason: str
    source: str


class ApprovalDecided(Event, type="approval_decided"):
    """A gated call was decided.

    ``elsewhere`` is true when the decision was made outside this chat object
    and applied here: through a store, by another process or another chat
    object of the same stored chat (``store.approve``, ``Chat.load(...).approve``),
    picked up at a step, on ``chat.refresh()``, or when a decision made here
    found it already recorded (the first decision wins; nothing new is written).
    """

    call: ToolCall
    decision: Decision
    turn: int
    elsewhere: bool = False


class ToolCallStarted(Event, type="tool_call_started"):
    call: ToolCall
    step: int
    turn: int
    mode: str
    arguments: dict[str, Any]


class ToolCallFinished(Event, type="tool_call_finished"):
    """A call reached a final status (ran, failed, was denied, skipped...)."""

    call: ToolCall
    step: int
    turn: int
    status: str
    result: ToolResultMessage
    error: str | None
    duration_ms: float | None
    started_at: datetime | None
    mode: str | None
    replayed: bool = False
    """Its result is a recorded one (``replay_tools``): the tool did not run again."""
    shared: bool = False
    """A fork's copy of its parent's outcome (``chat.fork``): the call ran, or was
    answered, in the parent, never in the fork."""
    ran_before: tuple[str, ...] = ()
    """The ids of the earlier gated calls of the same response that were still waiting
    for a decision when this call started (the default ``order="ready"`` lets it run
    first): its result cannot reflect them. Empty under ``order="listed"``."""


class CallInDoubt(Event, type="call_in_doubt"):
    """A call was found ``running`` but the process running it is gone (see ``nbagent.store``).

    Whether the tool took effect is unknown. With ``rerun`` (the tool is
    ``idempotent``) the call is runnable again; otherwise a ``ToolCallFinished``
    with status ``in_doubt`` follows and the model is told the outcome is unknown.
    """

    call: ToolCall
    step: int
    turn: int
    claimed_by: str | None
    claimed_at: datetime | None
    rerun: bool


class StepFinished(Event, type="step_finished"):
    step: int
    turn: int
    kind: str
    budget: str | None = None
    """With ``kind="budget_exhausted"``: the budget spent (``steps``, ``cost``, ``tokens``)."""


class OptionsChanged(Event, type="options_changed"):
    options: dict[str, Any]


class AlwaysAllowChanged(Event, type="always_allow_changed"):
    """``chat.always_allow(tool)`` added a rule, or ``chat.revoke(tool)`` removed the tool's.

    Attributes:
        tool: The tool's name.
        allowed: ``True``: a rule was added; ``False``: the tool's rules were revoked.
        conditional: The added rule has a ``when`` predicate (code: a store keeps
            only that it had one).
        elsewhere: The change was made outside this chat object (another process, on
            the stored chat) and applied here; its store has it already.
    """

    tool: str
    allowed: bool
    conditional: bool = False
    elsewhere: bool = False


class RuleChanged(Event, type="rule_changed"):
    """``chat.add_rule(rule)`` added a rule, or ``chat.remove_rule(rule)`` removed it.

    Attributes:
        rule: The rule as a store keeps it (:meth:`~nbagent.Rule.as_dict`).
        added: ``True``: added; ``False``: removed.
        elsewhere: The change was made outside this chat object (another process added
            the rule to the stored chat) and applied here; its store has it already.
    """

    rule: dict[str, Any]
    added: bool = True
    elsewhere: bool = False


class ToolCallProgress(Event, type="tool_call_progress"):
    """A running call said how far it is: an MCP server's progress notification, or
    :func:`nbagent.report_progress` inside a Python tool.

    Attributes:
        call: The running call.
        step: The step (tool round) running it.
        turn: Its user turn.
        progress: How far it is (grows with each report; units are the tool's).
        total: What ``progress`` counts up to, if the tool knows (``None``: unknown).
        message: What it is doing now, if it said.
    """

    call: ToolCall
    step: int
    turn: int
    progress: float
    total: float | None = None
    message: str | None = None


class ToolCallLog(Event, type="tool_call_log"):
    """A log message an MCP server sent (``notifications/message``) while the call ran.

    Attributes:
        call: The running call (each call of the server running at the time gets one).
        step: The step (tool round) running it.
        turn: Its user turn.
        level: The message's level (``debug``, ``info``, ``notice``, ``warning``,
            ``error``, ``critical``, ``alert``, ``emergency``).
        message: Its text (the server's data as text, its secrets replaced by ``***``).
        logger: The logger the server named, if any.
    """

    call: ToolCall
    step: int
    turn: int
    level: str
    message: str
    logger: str | None = None


class InputRequested(Event, type="input_requested"):
    """The chat waits for an input (a :class:`~nbagent.PendingInput`) from a person or a system.

    An external tool's call or ``ask_user``'s parks (status ``awaiting_input``) until
    it is answered; a server's request in the middle of a call (an elicitation, a
    sampling request) holds that call while it waits.

    Attributes:
        call: The call it belongs to (``None``: none).
        input_id: The input's id (``chat.answer`` takes it).
        kind: See :data:`~nbagent.PendingInput.kind`.
        prompt: What the person reads (the input's ``message``).
        content: The request as it came (JSON).
        schema: What an answer must match (JSON Schema; ``None``: anything).
        server: The MCP server that asked, if one did.
        step: The step the chat was at.
        turn: The turn.
        resume: What its call is retried with once answered (a 2026-07-28 server's
            ``InputRequiredResult``: the input's ``key`` and the server's
            ``request_state``); ``None`` for every other input.
    """

    call: ToolCall | None
    input_id: str
    kind: str
    prompt: str
    content: dict[str, Any]
    schema: dict[str, Any] | None
    server: str | None
    step: int
    turn: int
    resume: dict[str, Any] | None = None


class InputAnswered(Event, type="input_answered"):
    """A pending input was answered (``accept``), declined or cancelled.

    Attributes:
        call: The call it belongs to (``None``: none).
        input_id: The input answered.
        action: ``accept``, ``decline`` or ``cancel``.
        data: The answer (an accepted input's; ``None`` otherwise).
        by: Who answered (``"user"``, ``"inbox"``, ``"store"``...).
        reason: A decline's reason, if given.
        elsewhere: Answered outside this chat object (a store) and applied here.
    """

    call: ToolCall | None
    input_id: str
    action: str
    data: Any
    by: str
    reason: str | None = None
    elsewhere: bool = False


class SamplingFinished(Event, type="sampling_finished"):
    """An approved sampling request (an MCP server's) ran on the chat's provider.

    Not a step of the chat: its tokens and cost count in the chat's totals
    (``chat.usage``, ``chat.cost_usd``) and budgets, and the log's inputs.

    Attributes:
        call: The call during which the server asked.
        input_id: The sampling request's input id.
        model: The model that answered.
        provider: Its provider.
        usage: Its tokens.
        cost_usd: Its cost (``None``: the model has no known price).
        latency_ms: How long the request took.
        text: The reply sent to the server.
    """

    call: ToolCall | None
    input_id: str
    model: str
    provider: str
    usage: Usage
    cost_usd: float | None
    latency_ms: float
    text: str


EVENT_TYPES: dict[str, type[Event]] = {cls.type: cls for cls in Event.__subclasses__()}
"""Every event type declared above, by its ``type`` (what a store writes)."""


def unawaited(out: Any) -> str | None:
    """What went wrong when a callback returned a coroutine (``lambda call: guard(call)``
    around an ``async def``: registration refuses async functions, not a plain one that
    returns a coroutine): nothing of it ran. The coroutine is closed (no "never awaited"
    warning at some later garbage collection) and this says so; ``None`` for any other
    return value."""
    if out is None or not inspect.iscoroutine(out):  # a Task or Future runs by itself
        return None
    close = getattr(out, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # closing is tidiness; the message matters
            close()
    return (
        f"returned {type(out).__name__} {getattr(out, '__qualname__', '')!s}".rstrip()
        + ", which nothing awaits: its body never ran (callbacks must be plain functions)"
    )


def raised(exc: BaseException) -> str:
    """What a user's code raised, as a warning or a reason says it: its type and text, or
    its type alone when its ``__str__`` itself raises (said, never a crash of the step)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return f"{type(exc).__name__} (its message could not be read)"


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` makes a coroutine or an async generator instead of running it
    (``functools.partial`` and bound methods of such functions too; a class is not)."""

    def is_async(f: Any) -> bool:
        return inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f)

    if isinstance(fn, type):
        return False
    if is_async(fn):
        return True
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return False
    call = inspect.getattr_static(type(fn), "__call__", None)
    return call is not None and is_async(call)


class CallbackWarning(UserWarning):
    """A subscriber raised; the chat carried on."""


Subscriber = Callable[[Event], Any]
_FRAGMENTS: tuple[type[Event], ...] = (TextDelta, ReasoningDelta, ToolCallDelta)


def _key_shapes_hidden(text: str, call: ToolCall | None = None) -> str:
    return redact_keys(text)


class EventBus:
    """Synchronous fan-out of a chat's events to its subscribers.

    A subscriber that raises does not stop the chat: the error is reported as a
    :class:`CallbackWarning`. Subscribing and emitting are thread-safe.
    """

    def __init__(self, chat_id: str):
        self.chat_id = chat_id
        # (type or None for all, subscriber, the types it skips: the fragments or none)
        self._subs: list[tuple[type[Event] | None, Subscriber, tuple[type[Event], ...]]] = []
        self._hears: dict[type[Event], bool] = {}
        self._seq = itertools.count()
        self._lock = threading.RLock()
        self._emit_lock = threading.RLock()
        # a raising subscriber's error as its warning shows it (the chat's: its key, the
        # call's secret-named values hidden); key shapes at least, a bus of its own
        self.shown: Callable[[str, ToolCall | None], str] = _key_shapes_hidden

    def subscribe(
        self, event_type: type[Event] | str | None, fn: Subscriber, *, fragments: bool = True
    ) -> None:
        """Hand ``fn`` every event of ``event_type`` (a class or its name; ``None``: all).

        ``fragments=False``: a subscriber to all events that ignores the streaming
        fragments (:class:`TextDelta`, :class:`ReasoningDelta`, :class:`ToolCallDelta`): it
        is never handed one, and a stream nobody else hears makes none (:meth:`hears`).
        """
        if isinstance(event_type, str):
            try:
                event_type = EVENT_TYPES[event_type]
            except KeyError:
                raise ValueError(
                    f"unknown event type {event_type!r}; known: {sorted(EVENT_TYPES)}"
                ) from None
        if event_type is not None and not (
            isinstance(event_type, type) and issubclass(event_type, Event)
        ):
            raise TypeError(f"not an event type: {event_type!r}")
        if not callable(fn):
            raise TypeError(f"subscriber must be callable, got {fn!r}")
        with self._lock:
            skip = _FRAGMENTS if event_type is None and not fragments else ()
            self._subs = [*self._subs, (event_type, fn, skip)]
            self._hears = {}

    def unsubscribe(self, fn: Subscriber) -> bool:
        with self._lock:
            before = len(self._subs)
            self._subs = [s for s in self._subs if s[1] is not fn and s[1] != fn]
            self._hears = {}
            return len(self._subs) != before

    def subscribers(self) -> tuple[tuple[type[Event] | None, Subscriber, bool], ...]:
        """Every subscription, in order: its event type (``None``: all), the subscriber, and
        whether it is handed the streaming fragments."""
        return tuple((t, fn, not skip) for t, fn, skip in self._subs)

    def hears(self, event_type: type[Event]) -> bool:
        """Whether emitting an ``event_type`` would reach any subscriber that wants it.

        The stream's fragments are made only when someone hears them: a subscriber to
        their type, or to all events unless it said ``fragments=False``.
        """
        known = self._hears.get(event_type)
        if known is None:
            with self._lock:  # a (un)subscription starts a new cache: fill the current one
                known = any(
                    (t is None or issubclass(event_type, t)) and not issubclass(event_type, skip)
                    for t, _, skip in self._subs
                )
                self._hears[event_type] = known
        return known

    def resume_at(self, seq: int) -> None:
        """Number the next event ``seq`` (a chat loaded from a store continues its stream)."""
        with self._emit_lock:
            self._seq = itertools.count(seq)

    def emit(self, event: Event) -> None:
        """Number ``event`` and hand it to every subscriber, in one critical section.

        The number is taken here, under the emission lock, so ``seq`` is the
        order in which subscribers see events, even when a click handler's
        thread and the driving thread emit at once.
        """
        subs = self._subs  # copy-on-write: a snapshot, safe to iterate without the lock
        with self._emit_lock:
            object.__setattr__(event, "seq", next(self._seq))  # frozen for everyone else
            interrupt: KeyboardInterrupt | None = None
            remaining = iter(subs)
            while True:
                # The stop button inside a subscriber (a store's write takes milliseconds)
                # stops that subscriber only: the others still hear the event (the loop
                # goes on where it was), and it is raised once they have. Raised at once, it
                # left the store without the event the chat had recorded (a denial stored
                # as still awaiting approval).
                try:
                    for etype, fn, skip in remaining:
                        if (etype is None or isinstance(event, etype)) and not (
                            skip and isinstance(event, skip)
                        ):
                            try:
                                wrong = unawaited(fn(event))
                            except Exception as exc:
                                wrong = f"raised {raised(exc)}"
                            if wrong is not None:
                                warnings.warn(
                                    f"nbagent subscriber {getattr(fn, '__qualname__', fn)!r} "
                                    f"{self.shown(wrong, getattr(event, 'call', None))} "
                                    f"(on {event.type})",
                                    CallbackWarning,
                                    stacklevel=2,
                                )
                    break
                except KeyboardInterrupt as exc:
                    interrupt = interrupt or exc
            if interrupt is not None:
                raise interrupt
