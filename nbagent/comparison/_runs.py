"""Runs as rows: each chat's model steps read off its record, aligned, and their differences.

A run is one chat's record (``chat.record``, the core's fold of its events) as
one :class:`Step` per model response (a failed request is no step). Runs
are **aligned by model step**: the k-th response of each run sits in row k,
whatever its step number (a tool round takes a number too, and two runs may
run their rounds differently). For a fork that shares its parent's history, the rows of the
shared history are equal field for field (the fork's events are copies of its
parent's), so they fold away as shared.

Every text a step holds is as it may be shown: anything shaped like an API key, URL
credentials or a password is ``***`` (:func:`shown`), in the comparison's HTML, its text
and its differences frame alike (a call ran with its real arguments; the record keeps them).

Each step has the same fields, in the same order (:data:`FIELDS`, then per
call ``call i``, ``call i decision``, ``call i result``, then :data:`COST_FIELDS`:
:func:`field_names`); a call is the record's own
:class:`~nbagent._record.CallRecord`. A field a run does not have (a call it
did not make, a step it did not take) is ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._errors import redact_keys, redacted
from .._record import CallRecord, ChatRecord, StepRecord

if TYPE_CHECKING:
    import pandas as pd

    from .._base_chat import BaseChat

FIELDS = ("prompt", "model", "text", "stop_reason")
"""The fields before a step's calls."""
COST_FIELDS = ("replayed", "input_tokens", "output_tokens", "cost_usd", "latency_ms")
"""The fields after them: what the step cost."""


def shown(value: Any) -> Any:
    """A text as it may be shown (secrets as ``***``); anything else as it is."""
    return redact_keys(value) if isinstance(value, str) else value


def call_label(c: CallRecord) -> str:
    """``name({"arg": ...})`` with the arguments it ran (or will run) with, secrets as ``***``
    (a value shaped like a key or a DSN with a password, and a ``password`` key's value)."""
    edited = c.edited_arguments is not None
    arguments = c.edited_arguments if edited else c.arguments
    text = json.dumps(redacted(arguments), ensure_ascii=False, sort_keys=True, default=str)
    return f"{c.tool}({redact_keys(text)})" + (" [edited]" if edited else "")


def decision_words(c: CallRecord) -> str:
    """``denied by user: keep it``, ``pending`` or ``auto``."""
    d = c.decided
    if d is None:
        return "pending" if c.status == "awaiting_approval" else "auto"
    words = f"{d.verdict} by {d.by}"
    return f"{words}: {d.reason}" if d.reason else words


def result_words(c: CallRecord) -> str | None:
    """The result the model read, after ``[status]`` unless it is ``ok``."""
    if c.result is None:
        return None
    prefix = "" if c.status == "ok" else f"[{c.status}] "
    return prefix + c.result.content


@dataclass
class Step:
    """One model response of a run (its record), its fields by name and its calls."""

    record: StepRecord
    values: dict[str, Any]
    """The step's fields by name (the names of the differences' ``field`` column)."""
    calls: list[CallRecord] = field(default_factory=list)
    chat_id: str | None = None
    """The chat that asked it (a chat and its copy loaded from a store: one chat)."""

    def add(self, c: CallRecord) -> None:
        """One more call the response asked for, with its three fields."""
        self.calls.append(c)
        key = f"call {len(self.calls)}"
        self.values.update(
            {
                key: call_label(c),
                f"{key} decision": shown(decision_words(c)),
                f"{key} result": shown(result_words(c)),
            }
        )


@dataclass
class Run:
    """One chat as rows: its name, where it came from, and one record per model step."""

    name: str
    chat_id: str
    model: str
    parent: Any
    steps: list[Step]

    @property
    def totals(self) -> dict[str, Any]:
        records = [s.record for s in self.steps]
        costs = [r.cost_usd for r in records]
        return {
            "steps": len(records),
            "input_tokens": sum(s.values["input_tokens"] for s in self.steps),
            "output_tokens": sum(s.values["output_tokens"] for s in self.steps),
            "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 8),  # type: ignore[arg-type]
            "latency_ms": round(sum(r.latency_ms or 0.0 for r in records)),
        }


def run_of(chat: BaseChat, name: str) -> Run:
    """``chat``'s model steps, read off ``chat.record``."""
    model = f"{chat.provider.name}:{chat.model}"
    return Run(name, chat.id, model, chat.parent, records(chat.record))


def records(record: ChatRecord) -> list[Step]:
    """One step per model response, each with its calls' state now."""
    with record.reading():
        messages, core_steps, core_calls = record.messages, record.steps, record.calls
    users = [(m.index, m.content) for m in messages if m.role == "user" and m.kind == "text"]
    steps: list[Step] = []
    by_step: dict[int, Step] = {}
    seen = 0  # the user messages before it are the prompt of the step that answered them
    for s in core_steps:
        if s.usage is None:
            continue  # failed, or in flight
        upto = s.n_messages if s.n_messages is not None else len(messages)
        said = [str(text) for i, text in users if seen <= i < upto]
        seen = max(seen, upto)
        values = {
            "prompt": shown("\n".join(said)) if said else None,
            "model": f"{s.provider or ''}:{s.model or ''}",
            "text": shown(s.text or ""),
            "stop_reason": s.stop_reason or "other",
            "replayed": bool(s.replayed),  # answered from a recording, not by the model
            "input_tokens": s.usage.input_tokens,
            "output_tokens": s.usage.output_tokens,
            "cost_usd": None if s.cost_usd is None else round(s.cost_usd, 8),
            "latency_ms": round(s.latency_ms or 0.0),  # whole ms: below that is noise
        }
        step = by_step[s.step] = Step(s, values, chat_id=record.chat_id)
        steps.append(step)
    for c in core_calls:
        owner = by_step.get(c.step) if c.call is not None and c.step is not None else None
        if owner is not None:
            owner.add(c)
    return steps


def aligned(runs: Sequence[Run]) -> list[list[Step | None]]:
    """Row k holds each run's k-th model step (``None`` where a run has fewer)."""
    n = max((len(r.steps) for r in runs), default=0)
    return [[r.steps[k] if k < len(r.steps) else None for r in runs] for k in range(n)]


def field_names(row: Sequence[Step | None]) -> list[str]:
    """The fields of one aligned row, in order: the calls of the run with the most."""
    most = max((len(s.calls) for s in row if s is not None), default=0)
    names = list(FIELDS)
    for i in range(1, most + 1):
        names += [f"call {i}", f"call {i} decision", f"call {i} result"]
    return names + list(COST_FIELDS)


def row_values(row: Sequence[Step | None]) -> list[dict[str, Any]]:
    return [s.values if s is not None else {} for s in row]


def differing(row: Sequence[Step | None]) -> list[str]:
    """The fields whose values are not the same in every run (in field order)."""
    values = row_values(row)
    return [
        name
        for name in field_names(row)
        if any(v.get(name) != values[0].get(name) for v in values[1:])
    ]


def same_prefix(rows: Sequence[Sequence[Step | None]]) -> int:
    """How many leading rows are the same in every run (folded away when shown): a fork's
    shared history (:func:`shared_prefix`), then any steps each run asked and got the same
    answer to (a deterministic model sampled again, two chats of one prompt)."""
    n = 0
    for row in rows:
        if any(s is None for s in row) or differing(row):
            break
        n += 1
    return n


def one_request(row: Sequence[Step | None]) -> bool:
    """Whether a row's steps are one request, asked and paid once: a fork's copy of its
    parent's (``shared``, with the very times of the original), or one chat compared with
    itself (or with its copy loaded from a store: the same chat's same step); not two
    requests that got the same answer."""
    steps = [s for s in row if s is not None]
    if len(steps) < len(row) or not steps:
        return False
    records = [s.record for s in steps]
    first = records[0]
    if all(r is first for r in records):
        return True
    chat = steps[0].chat_id
    if chat is not None and all((s.chat_id, s.record.step) == (chat, first.step) for s in steps):
        return True
    copied = any(r.shared for r in records)
    return (
        copied
        and first.started_at is not None
        and all(
            (r.started_at, r.finished_at) == (first.started_at, first.finished_at) for r in records
        )
    )


def shared_prefix(rows: Sequence[Sequence[Step | None]]) -> int:
    """How many leading rows are a fork's shared history: the same in every run, and one
    request (:func:`one_request`), not steps each run asked and got the same answer to."""
    n = 0
    for row in rows[: same_prefix(rows)]:
        if not one_request(row):
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
    "Run",
    "Step",
    "aligned",
    "call_label",
    "decision_words",
    "differences",
    "differing",
    "field_names",
    "one_request",
    "records",
    "result_words",
    "run_of",
    "same_prefix",
    "shared_prefix",
]
