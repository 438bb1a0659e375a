"""What the chat's parts share: step results, tool results, effects, and the chat's core.

:class:`ChatCore` declares the chat's state (one place to read it) and the small
helpers every part uses: emitting events, finding calls, appending messages.
The loop (``_loop.py``), the decisions (``_decisions.py``) and the public
:class:`~nbagent.Chat` (``_chat.py``) build on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._approvals import Policy, denial_content
from ._errors import (
    DecisionError,
)
from ._events import (
    ApprovalDecided,
    Event,
    EventBus,
    MessageAdded,
    ToolCallFinished,
    utcnow,
)
from ._options import ToolOptions
from ._runner import Job, Mode, ToolRunner
from ._tools import Tool
from ._types import (
    AssistantToolCallMessage,
    Decision,
    LLMToolResponse,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from .providers._base import ModelRequest, Provider

StepKind = Literal[
    "generated", "ran_tools", "awaiting_approval", "complete", "budget_exhausted", "busy"
]
RUNNABLE = ("requested", "approved")
_ALREADY = "\x00already-decided"


class SkipToolCall(Exception):
    """Raise in a ``before_tool_call`` callback to skip that call.

    The model receives the message as the call's (error) result.
    """


@dataclass(frozen=True)
class StepResult:
    """What one ``step()`` did.

    Attributes:
        kind: ``generated`` (one model request), ``ran_tools`` (one round of
            runnable calls), ``awaiting_approval`` (nothing runnable until
            someone decides), ``complete`` (the model answered),
            ``budget_exhausted`` (``complete(max_steps=)`` ran out), or ``busy``
            (another thread is driving this chat; it will pick up decisions; or,
            with a store, another process is: ``Chat.load`` the chat again).
        message: The assistant message generated, or the chat's last one.
        calls: The calls run (``ran_tools``) or waiting (``awaiting_approval``).
        response: The provider's response (``generated``).
    """

    kind: StepKind
    message: Message | None = None
    calls: tuple[ToolCall, ...] = ()
    response: LLMToolResponse | None = None


@dataclass(frozen=True)
class ToolResult:
    """What ``after_tool_result`` callbacks receive.

    Attributes:
        call: The call answered.
        content: The text sent to the model.
        status: ``ok``, ``error``, ``denied``, ``cancelled``, ``skipped``, ``timed_out``.
        value: The tool's return value (``None`` unless it ran and returned).
        error: The exception, when the tool raised.
        duration_ms: Run time, when it ran.
    """

    call: ToolCall
    content: str
    status: str
    value: Any = None
    error: BaseException | None = None
    duration_ms: float | None = None

    @property
    def is_error(self) -> bool:
        return self.status != "ok"


@dataclass
class _ModelRequest:
    step: int
    request: ModelRequest
    t0: float = 0.0


@dataclass
class _RunRound:
    step: int
    jobs: list[Job]
    mode: Mode
    errors: list[tuple[ToolCall, BaseException]] = field(default_factory=list)


_Effect = _ModelRequest | _RunRound


class ChatCore:
    """The chat's state and shared helpers (see the module docstring)."""

    id: str
    provider: Provider
    system: str | None
    max_steps: int | None
    on_tool_error: Literal["result", "raise"]
    stream: bool | None
    display: bool | None
    _messages: list[Message]
    _tools: dict[str, Tool]
    _options: ToolOptions
    _bus: EventBus
    _lock: threading.RLock
    _before: list[Callable[[ToolCall], Any]]
    _after: list[Callable[[ToolResult], Any]]
    _policies: list[Policy]
    _calls: dict[str, ToolCall]
    _call_turn: dict[str, int]
    _call_step: dict[str, int]
    _open: AssistantToolCallMessage | None
    _turn: int
    _step: int
    _forced_spent: bool
    _cancel: threading.Event
    _drive_lock: threading.Lock
    _rerun: bool
    _last_step: StepResult | None
    _usage: Usage
    _runner: ToolRunner
    _claim: Callable[[ToolCall], bool] | None
    _step_hooks: list[Callable[[Any], Any]]
    _deferred: list[Event]
    _deferred_after: list[ToolResult]

    @property
    def model(self) -> str:
        return self.provider.model

    def _emit(self, event: Event) -> None:
        self._bus.emit(event)

    def _emit_all(self, events: Iterable[Event]) -> None:
        for e in events:
            self._bus.emit(e)

    @property
    def open_calls(self) -> tuple[ToolCall, ...]:
        """Calls of the last response that are not answered yet."""
        with self._lock:
            if self._open is None:
                return ()
            return tuple(c for c in self._open.tool_calls if not c.is_final)

    @property
    def pending_approvals(self) -> list[ToolCall]:
        """Gated calls waiting for a decision."""
        return [c for c in self.open_calls if c.status == "awaiting_approval"]

    def get_call(self, call_or_id: ToolCall | str) -> ToolCall:
        """The chat's call for a :class:`ToolCall` or its id."""
        cid = call_or_id.id if isinstance(call_or_id, ToolCall) else call_or_id
        try:
            return self._calls[cid]
        except KeyError:
            raise DecisionError(
                f"no tool call {cid!r} in this chat"
                + (f"; pending: {[c.id for c in self.pending_approvals]}" if self._calls else "")
            ) from None

    @property
    def last_assistant_message(self) -> Message | None:
        for m in reversed(self._messages):
            if getattr(m, "role", None) == "assistant":
                return m
        return None

    def _finished_event(
        self,
        c: ToolCall,
        result: ToolResultMessage,
        error: str | None,
        duration_ms: float | None,
        mode: str | None,
    ) -> ToolCallFinished:
        return ToolCallFinished(
            chat_id=self.id,
            seq=self._bus.next_seq(),
            call=c,
            step=self._call_step.get(c.id, self._step),
            turn=self._call_turn.get(c.id, self._turn),
            status=c.status,
            result=result,
            error=error,
            duration_ms=duration_ms,
            started_at=c.started_at,
            mode=mode,
        )

    def _append(self, message: Message) -> list[Event]:
        self._messages.append(message)
        return [
            MessageAdded(
                chat_id=self.id,
                seq=self._bus.next_seq(),
                message=message,
                index=len(self._messages) - 1,
                turn=getattr(message, "turn", self._turn),
            )
        ]

    def _run_after(self, results: Iterable[ToolResult]) -> None:
        for r in results:
            for fn in list(self._after):
                fn(r)

    def _record_decision(
        self, c: ToolCall, decision: Decision, after: list[ToolResult]
    ) -> list[Event]:
        """Put a decision on a call (under the lock); a denial answers the call at once."""
        c.decision = decision
        events: list[Event] = [
            ApprovalDecided(
                chat_id=self.id,
                seq=self._bus.next_seq(),
                call=c,
                decision=decision,
                turn=self._call_turn.get(c.id, self._turn),
            )
        ]
        if decision.verdict == "approved":
            c.result = None  # a human may overrule an automatic denial before the call ran
            c.status = "approved"
            return events
        c.status = "denied"
        result = ToolResultMessage(
            c.id,
            denial_content(c, decision.reason, decision.by),
            True,
            "denied",
            c.name,
            turn=self._call_turn.get(c.id, self._turn),
        )
        c.result = result
        c.finished_at = utcnow()
        events.append(self._finished_event(c, result, None, None, None))
        after.append(ToolResult(c, result.content, "denied"))
        return events
