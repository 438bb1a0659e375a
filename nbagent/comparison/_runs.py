"""Runs as rows: each chat's model steps read off its events, aligned, and their differences.

A run is one chat's ``chat.events`` folded into one :class:`StepRecord` per
model response (a failed request is no step). Runs are **aligned by model
step**: the k-th response of each run sits in row k, whatever its step number
(a tool round takes a number too, and two runs may run their rounds
differently). For a fork that shares its parent's history, the rows of the
shared history are equal field for field (the fork's events are copies of its
parent's), so they fold away as shared.

Each record has the same fields, in the same order (:data:`FIELDS`, then per
call ``call i``, ``call i decision``, ``call i result``); a field a run does not
have (a call it did not make, a step it did not take) is ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    MessageAdded,
    ModelRequestFinished,
    ToolCallFinished,
    ToolCallRequested,
)
from .._types import ChatMessage, Decision, ToolCall, ToolResultMessage

if TYPE_CHECKING:
    import pandas as pd

    from .._base_chat import BaseChat

FIELDS = ("prompt", "model", "text", "stop_reason")
"""The fields before a step's calls."""
COST_FIELDS = ("replayed", "input_tokens", "output_tokens", "cost_usd", "latency_ms")
"""The fields after them: what the step cost."""


@dataclass
class CallRecord:
    """One call of a step as its run ended: what was asked, decided and answered."""

    call: ToolCall
    arguments: dict[str, Any]
    edited: bool = False
    gated: bool = False
    decided: Decision | None = None
    state: str = "requested"  # the call's status as its run ended
    answer: ToolResultMessage | None = None  # its result, once answered

    @property
    def label(self) -> str:
        """``name({"arg": ...})`` with the arguments it ran (or will run) with."""
        args = json.dumps(self.arguments, ensure_ascii=False, sort_keys=True, default=str)
        return f"{self.call.name}({args})" + (" [edited]" if self.edited else "")

    @property
    def decision_words(self) -> str:
        d = self.decided
        if d is None:
            return "pending" if self.state == "awaiting_approval" else "auto"
        words = f"{d.verdict} by {d.by}"
        return f"{words}: {d.reason}" if d.reason else words

    @property
    def result_words(self) -> str | None:
        if self.answer is None:
            return None
        prefix = "" if self.state == "ok" else f"[{self.state}] "
        return prefix + self.answer.content


@dataclass
class StepRecord:
    """One model response of a run and what came of it."""

    step: int
    turn: int
    model: str
    provider: str
    text: str
    stop_reason: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    latency_ms: float
    prompt: str | None = None
    calls: list[CallRecord] = field(default_factory=list)
    replayed: bool = False  # answered from a recording (record and replay), not by the model

    def values(self) -> dict[str, Any]:
        """The step's fields by name (the names of the differences' ``field`` column)."""
        out: dict[str, Any] = {
            "prompt": self.prompt,
            "model": f"{self.provider}:{self.model}",
            "text": self.text,
            "stop_reason": self.stop_reason,
        }
        for i, c in enumerate(self.calls, 1):
            out[f"call {i}"] = c.label
            out[f"call {i} decision"] = c.decision_words
            out[f"call {i} result"] = c.result_words
        out.update(
            replayed=self.replayed,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=None if self.cost_usd is None else round(self.cost_usd, 8),
            latency_ms=round(self.latency_ms),  # whole ms: below that is noise
        )
        return out


@dataclass
class Run:
    """One chat as rows: its name, where it came from, and one record per model step."""

    name: str
    chat_id: str
    model: str
    parent: Any
    steps: list[StepRecord]

    @property
    def totals(self) -> dict[str, Any]:
        costs = [s.cost_usd for s in self.steps]
        return {
            "steps": len(self.steps),
            "input_tokens": sum(s.input_tokens for s in self.steps),
            "output_tokens": sum(s.output_tokens for s in self.steps),
            "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 8),  # type: ignore[arg-type]
            "latency_ms": round(sum(s.latency_ms for s in self.steps)),
        }


def run_of(chat: BaseChat, name: str) -> Run:
    """``chat``'s model steps, read off ``chat.events``."""
    events = chat.events
    return Run(name, chat.id, f"{chat.provider.name}:{chat.model}", chat.parent, records(events))


def records(events: Sequence[Event]) -> list[StepRecord]:
    """One record per model response, each with its calls' final state."""
    steps: list[StepRecord] = []
    by_step: dict[int, StepRecord] = {}
    calls: dict[str, CallRecord] = {}
    prompt: str | None = None
    for e in events:
        match e:
            case MessageAdded():
                m = e.message
                if isinstance(m, ChatMessage) and m.role == "user":
                    prompt = m.content if prompt is None else f"{prompt}\n{m.content}"
            case ModelRequestFinished():
                usage = e.usage
                record = StepRecord(
                    e.step,
                    e.turn,
                    e.model,
                    e.provider,
                    e.text,
                    e.stop_reason,
                    usage.input_tokens,
                    usage.output_tokens,
                    e.cost_usd,
                    e.latency_ms,
                    prompt,
                    replayed=bool(getattr(e, "replayed", False)),
                )
                prompt = None
                steps.append(record)
                by_step[e.step] = record
            case ToolCallRequested():
                c = CallRecord(e.call, dict(e.call.arguments), gated=e.approval.required)
                calls[e.call.id] = c
                owner = by_step.get(e.step)
                if owner is not None:
                    owner.calls.append(c)
            case ApprovalRequested():
                calls[e.call.id].state = "awaiting_approval"
            case ApprovalDecided():
                c = calls[e.call.id]
                c.decided, c.state, c.answer = e.decision, e.decision.verdict, None
                if e.decision.arguments is not None:
                    c.arguments, c.edited = dict(e.decision.arguments), True
                else:
                    c.arguments, c.edited = dict(e.call.arguments), False
            case ToolCallFinished():
                c = calls[e.call.id]
                c.state, c.answer = e.status, e.result
    return steps


def aligned(runs: Sequence[Run]) -> list[list[StepRecord | None]]:
    """Row k holds each run's k-th model step (``None`` where a run has fewer)."""
    n = max((len(r.steps) for r in runs), default=0)
    return [[r.steps[k] if k < len(r.steps) else None for r in runs] for k in range(n)]


def field_names(row: Sequence[StepRecord | None]) -> list[str]:
    """The fields of one aligned row, in order: the calls of the run with the most."""
    most = max((len(s.calls) for s in row if s is not None), default=0)
    names = list(FIELDS)
    for i in range(1, most + 1):
        names += [f"call {i}", f"call {i} decision", f"call {i} result"]
    return names + list(COST_FIELDS)


def row_values(row: Sequence[StepRecord | None]) -> list[dict[str, Any]]:
    return [s.values() if s is not None else {} for s in row]


def differing(row: Sequence[StepRecord | None]) -> list[str]:
    """The fields whose values are not the same in every run (in field order)."""
    values = row_values(row)
    return [
        name
        for name in field_names(row)
        if any(v.get(name) != values[0].get(name) for v in values[1:])
    ]


def shared_prefix(rows: Sequence[Sequence[StepRecord | None]]) -> int:
    """How many leading rows are the same in every run (a fork's shared history)."""
    n = 0
    for row in rows:
        if any(s is None for s in row) or differing(row):
            break
        n += 1
    return n


def differences(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per (step, field) whose values differ between the runs.

    Columns: ``step`` (the model step, 1-based: the k-th response of each run),
    ``field``, then one column per run, named by the runs' names.
    """
    import pandas as pd

    names = [r.name for r in runs]
    rows: list[dict[str, Any]] = []
    for k, row in enumerate(aligned(runs), 1):
        values = row_values(row)
        for name in differing(row):
            rows.append(
                {
                    "step": k,
                    "field": name,
                    **{n: v.get(name) for n, v in zip(names, values, strict=True)},
                }
            )
    frame = pd.DataFrame(rows, columns=["step", "field", *names], dtype=object)
    frame["step"] = frame["step"].astype("Int64")
    frame["field"] = frame["field"].astype("string")
    return frame


__all__ = [
    "COST_FIELDS",
    "FIELDS",
    "CallRecord",
    "Run",
    "StepRecord",
    "aligned",
    "differences",
    "differing",
    "field_names",
    "records",
    "run_of",
    "shared_prefix",
]
