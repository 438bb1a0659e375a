"""Provider-neutral values: messages, tool calls, results, usage, responses.

Messages are plain frozen values. The one exception is :class:`ToolCall`,
whose identity (``id``, ``name``, ``arguments``) is fixed but which carries the
call's *lifecycle* (status, approval requirement, decision, result) so a user
can look at ``chat.pending_approvals[0].status``. Only the chat changes that
lifecycle, always under its lock, and always together with an event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

Role = Literal["system", "user", "assistant", "tool"]

CallStatus = Literal[
    "requested",
    "awaiting_approval",
    "approved",
    "denied",
    "running",
    "ok",
    "error",
    "cancelled",
    "skipped",
    "timed_out",
    "in_doubt",
]
"""Lifecycle of a call:
``requested -> (awaiting_approval -> approved | denied) -> running -> ok | error``,
plus ``cancelled`` (stopped before or while running), ``skipped`` (never run: over
the per-response call limit, or the response was cut off), ``timed_out``, and
``in_doubt`` (found running after a crash; see the store).
"""

ResultStatus = Literal["ok", "error", "denied", "cancelled", "skipped", "timed_out", "in_doubt"]
"""The final statuses: a call with one of them has its result."""

RunStatus = Literal["ok", "error", "timed_out", "cancelled", "skipped"]
"""How a run that the runner started (or declined to start) ended."""

CALL_STATUSES: tuple[CallStatus, ...] = get_args(CallStatus)
FINAL_STATUSES: frozenset[str] = frozenset(get_args(ResultStatus))
RUNNABLE_STATUSES: tuple[CallStatus, ...] = ("requested", "approved")
"""A call in one of these may start (ungated, or approved)."""

ConcurrencyMode = Literal["sequential", "threads", "async"]
"""How the calls of one round run: one after another, on threads, or as tasks."""
CONCURRENCY_MODES: tuple[ConcurrencyMode, ...] = get_args(ConcurrencyMode)

StopReason = Literal[
    "end", "tool_use", "max_tokens", "refusal", "pause_turn", "context_window", "other"
]
"""Normalised stop reasons. ``max_tokens`` with tool calls means the arguments may
be partial: such calls are never executed."""
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
ROLES: tuple[Role, ...] = get_args(Role)

DecisionVerdict = Literal["approved", "denied"]


@dataclass(frozen=True)
class Usage:
    """Token usage of one model request, normalised across providers.

    ``input_tokens`` always *includes* cached tokens (OpenAI's convention);
    Anthropic's cache reads and writes are added in by its adapter.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
        )


@dataclass(frozen=True)
class Approval:
    """Why a call is (or is not) gated, decided once, when the call is requested.

    Attributes:
        required: Whether a decision is needed before the call may run.
        source: What said so: ``"none"``, ``"tool"`` (static ``requires_approval``),
            ``"resolver"`` (the tool's ``approval`` function), or ``"unknown_tool"``.
        reason: A human-readable sentence for the approval card and the log.
    """

    required: bool
    source: str = "none"
    reason: str = ""


@dataclass(frozen=True)
class Decision:
    """A recorded decision on a gated call.

    Attributes:
        verdict: ``"approved"`` or ``"denied"``.
        by: Who or what decided: ``"user"`` (code or click), ``"resolver"``,
            ``"policy:<name>"``, ``"store"`` (another process), ...
        at: When (timezone-aware UTC).
        reason: Optional reason; a denial's reason is sent to the model.
        arguments: Edited arguments a human approved instead of the model's.
    """

    verdict: DecisionVerdict
    by: str
    at: datetime
    reason: str | None = None
    arguments: dict[str, Any] | None = None

    @property
    def automatic(self) -> bool:
        return self.by == "resolver" or self.by.startswith("policy")


@dataclass(eq=False)
class ToolCall:
    """One tool call the model asked for.

    ``id``, ``name`` and ``arguments`` (parsed JSON, a dict) are the call's
    identity and compare equal by value. The remaining attributes are its
    lifecycle, kept up to date by the chat.

    Attributes:
        id: Provider call id (OpenAI ``call_...``, Anthropic ``toolu_...``).
        name: Tool name.
        arguments: Parsed arguments. ``{}`` when the model sent ``""``.
        raw_arguments: The argument text as sent, when it was not valid JSON.
        parse_error: Why ``raw_arguments`` could not be parsed.
        status: Current :data:`CallStatus`.
        approval: Whether the call is gated and why (set when requested).
        decision: The decision, once made.
        result: The :class:`ToolResultMessage` once the call is answered.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    parse_error: str | None = None
    status: CallStatus = "requested"
    approval: Approval | None = None
    decision: Decision | None = None
    result: ToolResultMessage | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return (self.id, self.name, self.arguments) == (other.id, other.name, other.arguments)

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        args = json.dumps(self.arguments, ensure_ascii=False, default=str)
        if len(args) > 80:
            args = args[:77] + "..."
        return (
            f"ToolCall(id={self.id!r}, name={self.name!r}, arguments={args}, "
            f"status={self.status!r})"
        )

    @property
    def effective_arguments(self) -> dict[str, Any]:
        """The arguments the tool runs with: a human's edit wins over the model's."""
        if self.decision is not None and self.decision.arguments is not None:
            return self.decision.arguments
        return self.arguments

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def pending_approval(self) -> bool:
        return self.status == "awaiting_approval"

    def copy_identity(self) -> ToolCall:
        """A fresh call with the same identity and no lifecycle."""
        return ToolCall(
            self.id, self.name, dict(self.arguments), self.raw_arguments, self.parse_error
        )


@dataclass(frozen=True)
class ChatMessage:
    """A plain text message: ``system``, ``user`` or ``assistant``."""

    role: Role
    content: str
    turn: int = 0
    stop_reason: StopReason = "end"


@dataclass(frozen=True)
class AssistantToolCallMessage:
    """An assistant message that asks for tool calls (with optional text)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    turn: int = 0
    stop_reason: StopReason = "tool_use"
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True)
class ToolResultMessage:
    """The answer to one tool call, as sent back to the model.

    Attributes:
        tool_call_id: The id of the call answered.
        content: Text sent to the model.
        is_error: Sent as an error (Anthropic ``is_error``); true for every
            status but ``ok``.
        status: ``ok``, ``error``, ``denied``, ``cancelled``, ``skipped``,
            ``timed_out`` or ``in_doubt``.
        name: Tool name (some wire formats want it).
        value: The tool's return value before serialisation (not persisted).
    """

    tool_call_id: str
    content: str
    is_error: bool = False
    status: ResultStatus = "ok"
    name: str = ""
    turn: int = 0
    value: Any = field(default=None, compare=False, repr=False)
    role: Literal["tool"] = "tool"

    @property
    def is_denial(self) -> bool:
        return self.status == "denied"


Message = ChatMessage | AssistantToolCallMessage | ToolResultMessage


@dataclass(frozen=True)
class LLMToolResponse:
    """What a provider answered to one request, SDK objects already converted.

    Attributes:
        text: Assistant text (may be empty when only tools were called).
        tool_calls: The calls asked for, in order.
        input_tokens / output_tokens / cached_tokens: Normalised usage.
        model: The model that answered.
        provider: Provider name (``openai``, ``anthropic``, ``demo``...).
        stop_reason: Normalised :data:`StopReason`.
        raw_stop_reason: The provider's own stop reason string.
        refusal: The refusal text when the model refused.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    provider: str = ""
    stop_reason: StopReason = "end"
    cached_tokens: int = 0
    raw_stop_reason: str | None = None
    refusal: str | None = None

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cached_tokens)


ToolChoice = Literal["auto", "required", "none"] | str
"""Neutral tool choice after resolution: ``auto``, ``required``, ``none`` or a tool name."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool definition as providers see it (``{"name", "description", "input_schema"}``)."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }
