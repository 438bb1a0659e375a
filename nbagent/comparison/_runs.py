"""Runs as rows: each chat's model steps read off its record, aligned, and their differences.

A run is one chat's record (``chat.record``, the core's fold of its events) as
one :class:`StepRecord` per model response (a failed request is no step). Runs
are **aligned by model step**: the k-th response of each run sits in row k,
whatever its step number (a tool round takes a number too, and two runs may
run their rounds differently). For a fork that shares its parent's history, the rows of the
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

from .._record import ChatRecord
from .._types import Decision, ToolCall, ToolResultMessage

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
    """``chat``'s model steps, read off ``chat.record``."""
    model = f"{chat.provider.name}:{chat.model}"
    return Run(name, chat.id, model, chat.parent, records(chat.record))


def records(record: ChatRecord) -> list[StepRecord]:
    """One record per model response, each with its calls' state now."""
    with record.reading():
        messages, core_steps, core_calls = record.messages, record.steps, record.calls
    users = [(m.index, m.content) for m in messages if m.role == "user" and m.kind == "text"]
    steps: list[StepRecord] = []
    by_step: dict[int, StepRecord] = {}
    seen = 0  # the user messages before it are the prompt of the step that answered them
    for s in core_steps:
        if s.usage is None:
            continue  # failed, or in flight
        upto = s.n_messages if s.n_messages is not None else len(messages)
        said = [str(text) for i, text in users if seen <= i < upto]
        seen = max(seen, upto)
        step = StepRecord(
            s.step,
            s.turn,
            s.model or "",
            s.provider or "",
            s.text or "",
            s.stop_reason or "other",
            s.usage.input_tokens,
            s.usage.output_tokens,
            s.cost_usd,
            s.latency_ms or 0.0,
            "\n".join(said) if said else None,
            replayed=bool(s.replayed),
        )
        steps.append(step)
        by_step[s.step] = step
    for c in core_calls:
        owner = by_step.get(c.step) if c.call is not None and c.step is not None else None
        if owner is None or c.call is None:
            continue
        edited = c.edited_arguments is not None
        owner.calls.append(
            CallRecord(
                c.call,
                dict(c.edited_arguments if c.edited_arguments is not None else c.arguments),
                edited=edited,
                gated=bool(c.requires_approval),
                decided=c.decided,
                state=c.status,
                answer=c.result,
            )
        )
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
