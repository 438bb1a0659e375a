"""The tool-call log: a chat's event stream projected into pandas DataFrames.

:class:`CallLog` subscribes to one chat's events (``Chat.__init__`` does it).
Each event costs O(1): it writes a few fields of one row of a column-major
table (one Python list per column, a row number per call id or step). Nothing
is converted while the chat runs; a DataFrame is built only when asked for
(``chat.log``, ``chat.steps``, ``chat.messages``) and cached until the next
event. pandas is imported then, never by ``import nbagent``.

Every frame has fixed columns in a fixed order, with pandas nullable dtypes,
so an empty chat gives an empty frame with the same dtypes. Times are
``datetime64[ns, UTC]``.

``chat.log``: one row per tool call, in request order. The columns a glance
needs come first (``tool``, ``status``, ``decision``, ``duration_ms``, then
arguments, result, error, who decided and why: the first ten, which a
notebook shows of a wide frame), the ids last.

=================  ==============  =====================================================
column             dtype           meaning
=================  ==============  =====================================================
tool               string          tool name
status             category        ``requested``, ``awaiting_approval``, ``approved``,
                                   ``denied``, ``running``, ``ok``, ``error``,
                                   ``cancelled``, ``skipped``, ``timed_out``, ``in_doubt``;
                                   for a hosted ``mcp_call`` also ``ran_despite_denial``,
                                   ``ran_unapproved`` (see below)
decision           category        see below
duration_ms        Float64         run time of the tool itself
arguments          object          the model's arguments (a dict)
result_preview     string          first 200 characters of the result sent to the model
result_type        string          what an ``ok`` result holds: ``text``, ``json``, ``image``,
                                   ``text+image``, ``file``... (NA otherwise)
error              string          why it did not succeed (error, timed_out, cancelled,
                                   skipped, rejected arguments); NA for ok and denied
decided_by         string          ``user``, ``resolver``, ``policy:always_allow:<tool>``,
                                   ``store``...; NA when nobody decided
reason             string          the decision's reason (a denial's is sent to the model)
edited_arguments   object          arguments a human approved instead (dict) or None
decided_at         datetime64 UTC  when it was decided
requires_approval  boolean         gated (decided once, when the call was requested)
approval_source    string          why gated: ``none``, ``tool``, ``resolver``
approval_reason    string          the gate's sentence (what the approval card shows)
server             string          the MCP server label, when the tool is on one
hosted             boolean         the provider runs it (a hosted MCP approval, or a
                                   provider item); never run by nbagent
replayed           boolean         its result is a recorded one (``replay_tools``): the
                                   tool did not run again; NA until it finishes
shared             boolean         a fork's copy of its parent's outcome (``chat.fork``):
                                   it ran, or was answered, in the parent; NA until final
ran_before         string          the earlier gated calls of its response still awaiting
                                   a decision when it ran (``insert (c1)``; the default
                                   ``order="ready"``): its result cannot reflect them;
                                   NA otherwise
item_type          string          a provider item's wire type (``mcp_call``,
                                   ``mcp_list_tools``, ``web_search_call``...) or
                                   ``mcp_approval_request``; NA for a local call
turn               Int64           user turn (1 for the first ``ask``)
step               Int64           the model request that asked for the call
run_step           Int64           the step (tool round) that ran it; NA if it never ran
concurrency        category        ``sequential``, ``threads``, ``async``; NA if not run
requested_at       datetime64 UTC  the model's response arrived
started_at         datetime64 UTC  the call was about to run
finished_at        datetime64 UTC  it reached a final status
model              string          model that asked for the call
provider           string          its provider
arguments_json     string          ``arguments`` as JSON text (export, string search)
chat_id            string          the chat
call_id            string          provider call id (unique within a chat)
=================  ==============  =====================================================

``decision`` is one of:

- ``auto``: the call was not gated; it ran (or was rejected) without a decision;
- ``pending``: gated and awaiting a decision (``chat.log.query("decision == 'pending'")``
  is the to-do list);
- ``approved`` / ``denied``: decided by a human (``decided_by == "user"``), the
  tool's resolver (``"resolver"``) or another process (``"store"``);
- ``policy``: approved by a session policy such as ``chat.always_allow(tool)``;
- ``none``: gated, but never needed a decision (rejected before approval:
  unknown tool, invalid arguments, over the call limit, cut-off response).

The latest decision wins: a human overruling a resolver shows the human's.

Hosted tools have rows too (``hosted`` true): an approval the provider asked
for is a gated call (``item_type`` ``mcp_approval_request``; ``ok`` once the
approval was sent, ``denied`` when denied); what the provider ran or listed
(:class:`~nbagent.ProviderItem`) is a row per item, with its status (``ok`` or
``error``; NA for an item type nbagent does not know) and, for an ``mcp_call``
that followed an approval, that approval's decision (else ``auto``). An
``mcp_call`` the provider ran against the chat's decision has its own status:
``ran_despite_denial`` (its approval was denied: ``decision`` says ``denied``)
or ``ran_unapproved`` (``require_approval`` asked for an approval the chat
had not given when it ran; ``decision`` ``none``, or that of an earlier
request it names); its ``error`` column holds the call's own error, if it failed.
``chat.log.query("status.str.startswith('ran_')")`` lists them. Thinking
(:class:`~nbagent.Reasoning` items) is no call and has no row; its tokens are
in ``chat.steps`` (``reasoning_tokens``).

``chat.steps``: one row per model request (a failed request is a row with its
error; its retry reuses the step number, so ``step`` is not unique).

=================  ==============  =====================================================
chat_id            string
turn               Int64
step               Int64
model              string          the model that answered (else the one asked)
provider           string
tool_choice        string          as sent: ``auto``, ``required``, ``none`` or a tool
n_messages         Int64           transcript length sent
input_tokens       Int64           includes cached tokens
output_tokens      Int64
cached_tokens      Int64
reasoning_tokens   Int64           output tokens spent thinking (part of output_tokens)
cache_write_tokens Int64           input tokens written to the prompt cache (Anthropic)
cost_usd           Float64         NA when the model's prices are unknown; 0 when replayed
replayed           boolean         answered from a recording (``Chat(replay=...)``): the
                                   tokens are the recorded ones, nothing was spent now
shared             boolean         a fork's copy of its parent's request (``chat.fork``):
                                   its tokens and cost were spent by the parent
latency_ms         Float64
stop_reason        category        ``end``, ``tool_use``, ``max_tokens``, ``refusal``,
                                   ``pause_turn``, ``context_window``, ``other``
raw_stop_reason    string          the provider's own
n_tool_calls       Int64
started_at         datetime64 UTC
finished_at        datetime64 UTC  NA while in flight
error_type         string          exception class of a failed request
error              string          its message
=================  ==============  =====================================================

``chat.messages``: one row per transcript message.

=================  ==============  =====================================================
chat_id            string
index              Int64           position in ``chat.transcript``
turn               Int64
role               category        ``system``, ``user``, ``assistant``, ``tool``
kind               category        ``text``, ``tool_calls``, ``tool_result``
content            string          full text (NA for tool calls without text)
n_tool_calls       Int64           calls asked for (``tool_calls`` messages), else 0
tool_call_id       string          the call a result answers
tool               string          its tool
status             category        a result's status (same categories as ``chat.log``)
is_error           boolean         sent as an error result
stop_reason        category        assistant messages
added_at           datetime64 UTC
=================  ==============  =====================================================
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
)
from .._extension import Extension
from .._hosted import BREACHES, RAN_UNAPPROVED
from .._optional import require
from .._result_text import result_type, without_edit_note
from .._types import (
    CALL_STATUSES,
    CONCURRENCY_MODES,
    FINAL_STATUSES,
    ROLES,
    STOP_REASONS,
    AssistantToolCallMessage,
    ProviderItem,
    Reasoning,
    ToolResultMessage,
)

if TYPE_CHECKING:
    import pandas as pd

PREVIEW_CHARS = 200
ERROR_CHARS = 1000

DECISIONS = ("auto", "pending", "approved", "denied", "policy", "none")
LOG_STATUSES = (*CALL_STATUSES, *BREACHES)
"""A row's status: a call's, or a hosted call the provider ran against the chat's decision."""
MODES = CONCURRENCY_MODES
MESSAGE_KINDS = ("text", "tool_calls", "tool_result")

# A column kind is "string", "Int64", "Float64", "boolean", "datetime", "json"
# (a dict column, object dtype) or a tuple of categories.
ColumnKind = str | tuple[str, ...]

CALL_COLUMNS: dict[str, ColumnKind] = {
    # what happened: the columns a glance at ``chat.log.head()`` needs
    "tool": "string",
    "status": LOG_STATUSES,
    "decision": DECISIONS,
    "duration_ms": "Float64",
    "arguments": "json",
    "result_preview": "string",
    "result_type": "string",
    "error": "string",
    # the decision (who, why, what they changed, when), then the gate that asked for it
    "decided_by": "string",
    "reason": "string",
    "edited_arguments": "json",
    "decided_at": "datetime",
    "requires_approval": "boolean",
    "approval_source": "string",
    "approval_reason": "string",
    "server": "string",
    "hosted": "boolean",
    "replayed": "boolean",
    "shared": "boolean",
    "ran_before": "string",
    "item_type": "string",
    # where and when it ran
    "turn": "Int64",
    "step": "Int64",
    "run_step": "Int64",
    "concurrency": MODES,
    "requested_at": "datetime",
    "started_at": "datetime",
    "finished_at": "datetime",
    "model": "string",
    "provider": "string",
    # for machines: JSON text and the ids
    "arguments_json": "string",
    "chat_id": "string",
    "call_id": "string",
}

STEP_COLUMNS: dict[str, ColumnKind] = {
    "chat_id": "string",
    "turn": "Int64",
    "step": "Int64",
    "model": "string",
    "provider": "string",
    "tool_choice": "string",
    "n_messages": "Int64",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "cached_tokens": "Int64",
    "reasoning_tokens": "Int64",
    "cache_write_tokens": "Int64",
    "cost_usd": "Float64",
    "replayed": "boolean",
    "shared": "boolean",
    "latency_ms": "Float64",
    "stop_reason": STOP_REASONS,
    "raw_stop_reason": "string",
    "n_tool_calls": "Int64",
    "started_at": "datetime",
    "finished_at": "datetime",
    "error_type": "string",
    "error": "string",
}

MESSAGE_COLUMNS: dict[str, ColumnKind] = {
    "chat_id": "string",
    "index": "Int64",
    "turn": "Int64",
    "role": ROLES,
    "kind": MESSAGE_KINDS,
    "content": "string",
    "n_tool_calls": "Int64",
    "tool_call_id": "string",
    "tool": "string",
    "status": LOG_STATUSES,  # one vocabulary for every status column (exports read by name)
    "is_error": "boolean",
    "stop_reason": STOP_REASONS,
    "added_at": "datetime",
}

SCHEMAS: dict[str, dict[str, ColumnKind]] = {
    "calls": CALL_COLUMNS,
    "steps": STEP_COLUMNS,
    "messages": MESSAGE_COLUMNS,
}


def _recorded(schema: dict[str, ColumnKind]) -> list[str]:
    """The columns a log records per row: all but ``chat_id`` (one per log, added when built)."""
    return [name for name in schema if name != "chat_id"]


# ---------------------------------------------------------------- tables
class _Table:
    """Column-major records: one Python list per column, a row number per key.

    Updating a field is a list item assignment; materialising copies whole
    lists (no per-row work), which is what keeps 100,000 calls under a second.
    """

    __slots__ = ("cols", "n", "names")

    def __init__(self, names: Iterable[str]):
        self.names: tuple[str, ...] = tuple(names)
        self.cols: dict[str, list[Any]] = {name: [] for name in self.names}
        self.n = 0

    def append(self) -> int:
        for col in self.cols.values():
            col.append(None)
        self.n += 1
        return self.n - 1

    def snapshot(self) -> list[list[Any]]:
        return [list(self.cols[name]) for name in self.names]


_FINAL_NOT_OK = FINAL_STATUSES - {"ok", "denied"}


def _decision_kind(by: str, verdict: str) -> str:
    return "policy" if by.startswith("policy") else verdict


class CallLog(Extension):
    """The chat extension that keeps one chat's calls, steps and messages as compact columns.

    Args:
        chat: The chat (anything with an ``id``) or a chat id. Each log holds
            one chat; :func:`nbagent.read_log` keeps one per chat and combines them.
    """

    def __init__(self, chat: Any):
        self.chat_id: str = chat if isinstance(chat, str) else chat.id
        self._lock = threading.Lock()
        self._calls = _Table(_recorded(CALL_COLUMNS))
        self._call_row: dict[str, int] = {}
        self._json_done = 0  # rows whose arguments_json is filled in
        self._steps = _Table(_recorded(STEP_COLUMNS))
        self._open_steps: dict[int, int] = {}
        self._messages: list[tuple[Any, ...]] = []
        self._model: str | None = None
        self._provider: str | None = None
        self._cache: dict[str, pd.DataFrame] = {}
        self._version = 0

    def __repr__(self) -> str:
        return (
            f"CallLog(chat_id={self.chat_id[:8]!r}, calls={self._calls.n}, "
            f"steps={self._steps.n}, messages={len(self._messages)})"
        )

    def __len__(self) -> int:
        return self._calls.n

    def requested_at(self, call_id: str) -> datetime | None:
        """When the model asked for the call (its ``requested_at``), without building a frame."""
        with self._lock:
            i = self._call_row.get(call_id)
            value = None if i is None else self._calls.cols["requested_at"][i]
        return value if isinstance(value, datetime) else None

    @property
    def title(self) -> str | None:
        """The chat's first user message (what a store calls its title), or None."""
        with self._lock:
            for row in self._messages:
                if row[2] == "user" and isinstance(row[4], str) and row[4].strip():
                    return row[4]
        return None

    # ------------------------------------------------------------ events
    def on_event(self, event: Event) -> None:
        """Record one event (O(1)); other event types are ignored."""
        with self._lock:
            match event:
                case ToolCallRequested():
                    self._on_requested(event)
                case ApprovalRequested():
                    self._on_approval_requested(event)
                case ApprovalDecided():
                    self._on_decided(event)
                case ToolCallStarted():
                    self._on_started(event)
                case ToolCallFinished():
                    self._on_finished(event)
                case ModelRequestStarted():
                    self._on_request_started(event)
                case ModelRequestFinished():
                    self._on_request_finished(event)
                case ModelRequestFailed():
                    self._on_request_failed(event)
                case MessageAdded():
                    self._on_message(event)
                case _:
                    return
            self._version += 1
            if self._cache:
                self._cache.clear()

    def on_history(self, events: Iterable[Event]) -> None:
        """A chat loaded from a store: record its stored events first."""
        self.feed(events)

    def feed(self, events: Iterable[Event]) -> CallLog:
        """Record many events (a replay, e.g. from a store); returns the log."""
        for e in events:
            self.on_event(e)
        return self

    def _row(self, call: Any, step: int | None, turn: int | None) -> int:
        i = self._call_row.get(call.id)
        if i is None:
            i = self._call_row[call.id] = self._calls.append()
            c = self._calls.cols
            c["call_id"][i] = call.id
            c["tool"][i] = call.name
            c["arguments"][i] = call.arguments
            c["step"][i] = step
            c["turn"][i] = turn
            c["decision"][i] = "auto"
            c["status"][i] = "requested"
            c["model"][i] = self._model
            c["provider"][i] = self._provider
            c["server"][i] = call.server
            c["hosted"][i] = call.hosted
            c["item_type"][i] = "mcp_approval_request" if call.hosted else None
        return i

    def _on_requested(self, e: ToolCallRequested) -> None:
        i = self._row(e.call, e.step, e.turn)
        c = self._calls.cols
        c["step"][i] = e.step
        c["turn"][i] = e.turn
        c["requested_at"][i] = e.ts
        approval = e.approval
        c["requires_approval"][i] = approval.required
        c["approval_source"][i] = approval.source
        c["approval_reason"][i] = approval.reason or None
        c["decision"][i] = "none" if approval.required else "auto"

    def _on_approval_requested(self, e: ApprovalRequested) -> None:
        i = self._row(e.call, e.step, e.turn)
        c = self._calls.cols
        c["status"][i] = "awaiting_approval"
        c["decision"][i] = "pending"
        c["requires_approval"][i] = True
        if e.reason:
            c["approval_reason"][i] = e.reason
        if c["approval_source"][i] is None:
            c["approval_source"][i] = e.source

    def _on_decided(self, e: ApprovalDecided) -> None:
        i = self._row(e.call, None, e.turn)
        c = self._calls.cols
        d = e.decision
        c["decision"][i] = _decision_kind(d.by, d.verdict)
        c["decided_by"][i] = d.by
        c["decided_at"][i] = d.at
        c["reason"][i] = d.reason
        c["edited_arguments"][i] = d.arguments
        c["requires_approval"][i] = True
        if d.verdict == "approved":
            if c["status"][i] == "denied":  # a human overruled an automatic denial
                c["finished_at"][i] = c["result_preview"][i] = c["error"][i] = None
                c["result_type"][i] = None
            c["status"][i] = "approved"
        else:
            c["status"][i] = "denied"

    def _on_started(self, e: ToolCallStarted) -> None:
        i = self._row(e.call, None, e.turn)
        c = self._calls.cols
        c["status"][i] = "running"
        c["run_step"][i] = e.step
        c["started_at"][i] = e.ts
        c["concurrency"][i] = e.mode

    def _on_finished(self, e: ToolCallFinished) -> None:
        i = self._row(e.call, e.step, e.turn)
        c = self._calls.cols
        status = e.status
        c["status"][i] = status
        if e.started_at is not None:
            c["started_at"][i] = e.started_at
        c["finished_at"][i] = getattr(e.call, "finished_at", None) or e.ts
        c["duration_ms"][i] = e.duration_ms
        c["replayed"][i] = e.replayed
        c["shared"][i] = e.shared
        if e.ran_before:
            c["ran_before"][i] = self._named(e.ran_before)
        # The model reads a note before an edited call's result; the preview shows the result.
        content = without_edit_note(e.result.content, c["edited_arguments"][i] is not None)
        c["result_preview"][i] = content[:PREVIEW_CHARS]
        c["result_type"][i] = result_type(content, e.result.parts) if status == "ok" else None
        if status in _FINAL_NOT_OK:
            c["error"][i] = (e.error or content)[:ERROR_CHARS]
        if c["decision"][i] == "pending":
            c["decision"][i] = "none"

    def _named(self, call_ids: tuple[str, ...]) -> str:
        """``insert (c1), delete (c2)``: the calls' tools, with their ids."""
        tools = self._calls.cols["tool"]
        out = []
        for cid in call_ids:
            row = self._call_row.get(cid)
            out.append(f"{tools[row]} ({cid})" if row is not None else cid)
        return ", ".join(out)

    def _new_step(self, step: int, turn: int, model: str, provider: str) -> int:
        i = self._steps.append()
        c = self._steps.cols
        c["step"][i] = step
        c["turn"][i] = turn
        c["model"][i] = model
        c["provider"][i] = provider
        return i

    def _on_request_started(self, e: ModelRequestStarted) -> None:
        i = self._new_step(e.step, e.turn, e.model, e.provider)
        c = self._steps.cols
        c["tool_choice"][i] = e.tool_choice
        c["n_messages"][i] = e.n_messages
        c["started_at"][i] = e.ts
        self._open_steps[e.step] = i

    def _step_row(self, e: ModelRequestFinished | ModelRequestFailed) -> int:
        i = self._open_steps.pop(e.step, None)
        if i is None:
            i = self._new_step(e.step, e.turn, e.model, e.provider)
        return i

    def _on_request_finished(self, e: ModelRequestFinished) -> None:
        i = self._step_row(e)
        c = self._steps.cols
        c["model"][i] = e.model
        c["provider"][i] = e.provider
        self._model, self._provider = e.model, e.provider
        u = e.usage
        c["input_tokens"][i] = u.input_tokens
        c["output_tokens"][i] = u.output_tokens
        c["cached_tokens"][i] = u.cached_tokens
        c["reasoning_tokens"][i] = u.reasoning_tokens
        c["cache_write_tokens"][i] = u.cache_write_tokens
        c["cost_usd"][i] = e.cost_usd
        c["replayed"][i] = e.replayed
        c["shared"][i] = e.shared
        c["latency_ms"][i] = e.latency_ms
        c["stop_reason"][i] = e.stop_reason
        c["raw_stop_reason"][i] = e.raw_stop_reason
        c["n_tool_calls"][i] = e.n_tool_calls
        c["finished_at"][i] = e.ts

    def _on_request_failed(self, e: ModelRequestFailed) -> None:
        i = self._step_row(e)
        c = self._steps.cols
        c["latency_ms"][i] = e.latency_ms
        c["error_type"][i] = e.error_type
        c["error"][i] = e.error[:ERROR_CHARS]
        c["n_tool_calls"][i] = 0
        c["finished_at"][i] = e.ts

    def _on_message(self, e: MessageAdded) -> None:
        self._messages.append(_message_row(e.index, e.turn, e.message, e.ts))
        for n, item in enumerate(getattr(e.message, "items", ())):
            if not isinstance(item, Reasoning):  # thinking is no call: see chat.steps
                self._on_item(item, f"{e.index}.{n}", e)

    def _on_item(self, item: ProviderItem, key: str, e: MessageAdded) -> None:
        """A row for what the provider did on its side (never run here)."""
        ident = item.call_id or key
        if ident in self._call_row:
            return  # a replay
        i = self._call_row[ident] = self._calls.append()
        c = self._calls.cols
        raw = item.raw
        c["call_id"][i] = ident
        c["tool"][i] = item.name or item.type
        c["server"][i] = item.server
        c["hosted"][i] = True
        c["item_type"][i] = item.type
        c["status"][i] = item.status
        c["turn"][i] = e.turn
        c["requested_at"][i] = c["finished_at"][i] = e.ts
        c["model"][i] = self._model
        c["provider"][i] = self._provider
        c["requires_approval"][i] = False
        c["arguments"][i] = _arguments_of(raw)
        c["decision"][i] = "auto"
        approval = raw.get("approval_request_id")
        j = self._call_row.get(approval) if isinstance(approval, str) else None
        if j is not None:  # it ran after an approval: that approval's decision
            for name in ("decision", "decided_by", "decided_at", "reason"):
                c[name][i] = c[name][j]
            c["requires_approval"][i] = True
        elif item.status == RAN_UNAPPROVED:  # an approval was due and nobody gave one
            c["requires_approval"][i] = True
            c["decision"][i] = "none"
        output = _item_output(raw)
        failed = item.status == "error" or (item.status in BREACHES and bool(raw.get("error")))
        if output is not None:
            c["result_preview"][i] = output[:PREVIEW_CHARS]
            if not failed:
                c["result_type"][i] = result_type(output)
        if failed:
            c["error"][i] = (output or "failed")[:ERROR_CHARS]

    # ------------------------------------------------------------ frames
    def frame(self, kind: str = "calls") -> pd.DataFrame:
        """The ``calls``, ``steps`` or ``messages`` DataFrame (cached until the next event)."""
        cached = self._cache.get(kind)
        if cached is None:
            version = self._version
            cached = build_frame([self], kind)
            with self._lock:
                if self._version == version:  # no event arrived while building
                    self._cache[kind] = cached
        return cached.copy(deep=False)

    def calls(self) -> pd.DataFrame:
        """One row per tool call (see the module docstring for the columns)."""
        return self.frame("calls")

    def steps(self) -> pd.DataFrame:
        """One row per model request."""
        return self.frame("steps")

    def messages(self) -> pd.DataFrame:
        """One row per transcript message."""
        return self.frame("messages")

    def _columns(self, kind: str) -> list[list[Any]]:
        """Snapshot of the records, one list per column in schema order, without ``chat_id``."""
        with self._lock:
            if kind == "calls":
                c = self._calls.cols
                args, text = c["arguments"], c["arguments_json"]
                for i in range(self._json_done, self._calls.n):
                    text[i] = _to_json(args[i])
                self._json_done = self._calls.n
                return self._calls.snapshot()
            if kind == "steps":
                return self._steps.snapshot()
            if kind == "messages":
                rows = self._messages
                return [[row[i] for row in rows] for i in range(len(_recorded(MESSAGE_COLUMNS)))]
        raise ValueError(f"kind must be 'calls', 'steps' or 'messages', got {kind!r}")


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _to_json(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError):  # e.g. circular structures
        return json.dumps(repr(value))


def _arguments_of(raw: dict[str, Any]) -> Any:
    arguments = raw.get("arguments", raw.get("input"))
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return {"_raw": arguments}
    return arguments if isinstance(arguments, dict) else None


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
        return _to_json(value)
    return None


def _message_row(index: int, turn: int, m: Any, ts: datetime) -> tuple[Any, ...]:
    if isinstance(m, ToolResultMessage):
        return (
            index,
            turn,
            "tool",
            "tool_result",
            m.content,
            0,
            m.tool_call_id,
            m.name or None,
            m.status,
            m.is_error,
            None,
            ts,
        )
    if isinstance(m, AssistantToolCallMessage):
        return (
            index,
            turn,
            "assistant",
            "tool_calls",
            m.content,
            len(m.tool_calls),
            None,
            None,
            None,
            None,
            m.stop_reason,
            ts,
        )
    role = getattr(m, "role", None)
    stop = getattr(m, "stop_reason", None) if role == "assistant" else None
    return (
        index,
        turn,
        role,
        "text",
        getattr(m, "content", None),
        0,
        None,
        None,
        None,
        None,
        stop,
        ts,
    )


# ------------------------------------------------------------ materialise
def build_frame(logs: Sequence[CallLog], kind: str) -> pd.DataFrame:
    """One DataFrame of ``kind`` over several logs, with the schema's dtypes."""
    require("pandas", "chat.log (and every nbagent.log frame)")
    import pandas as pd

    try:
        schema = SCHEMAS[kind]
    except KeyError:
        raise ValueError(f"kind must be 'calls', 'steps' or 'messages', got {kind!r}") from None
    names = list(schema)
    parts = [(log.chat_id, log._columns(kind)) for log in logs]
    ids: list[Any] = []
    for chat_id, part in parts:
        ids += [chat_id] * len(part[0])
    if len(parts) == 1:
        columns: list[list[Any]] = list(parts[0][1])
    else:
        columns = [[] for _ in range(len(names) - 1)]
        for _, part in parts:
            for dest, values in zip(columns, part, strict=True):
                dest.extend(values)
    columns.insert(names.index("chat_id"), ids)  # the logs record every column but this one
    data = {name: column(values, schema[name]) for name, values in zip(names, columns, strict=True)}
    return pd.DataFrame(data, index=pd.RangeIndex(len(ids)))


def column(values: Sequence[Any], kind: ColumnKind) -> Any:
    """A pandas array of ``kind`` (see :data:`CALL_COLUMNS`) from Python values (None = NA)."""
    import numpy as np
    import pandas as pd

    if isinstance(kind, tuple):
        codes = _codes(kind)
        missing = -1 if kind is not STOP_REASONS else codes["other"]  # unknown stop reasons
        arr = np.fromiter(
            (-1 if v is None else codes.get(v, missing) for v in values), np.int8, len(values)
        )
        return pd.Categorical.from_codes(arr, dtype=pd.CategoricalDtype(list(kind)))
    if kind == "string":
        return _strings(values)
    if kind == "datetime":
        idx = pd.DatetimeIndex(list(values))
        idx = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
        return idx.as_unit("ns").array
    if kind == "json":
        return np.fromiter(values, dtype=object, count=len(values))
    dtype: Any = kind
    return pd.array(list(values), dtype=dtype)


def _strings(values: Sequence[Any]) -> Any:
    import numpy as np
    import pandas as pd

    dtype = pd.StringDtype()
    if dtype.storage == "pyarrow":  # build the Arrow array directly: 2-10x faster
        import pyarrow as pa

        try:
            return pd.array(pa.array(values, type=pa.large_string()), dtype=dtype)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass  # not all str: let pandas convert
    return pd.array(np.array(values, dtype=object), dtype=dtype)


@functools.cache
def _codes(categories: tuple[str, ...]) -> dict[str, int]:
    return {c: i for i, c in enumerate(categories)}


def dtypes(kind: str) -> dict[str, Any]:
    """The pandas dtype of every column of the ``calls``, ``steps`` or ``messages`` frame."""
    import numpy as np
    import pandas as pd

    out: dict[str, Any] = {}
    for name, k in SCHEMAS[kind].items():
        if isinstance(k, tuple):
            out[name] = pd.CategoricalDtype(list(k))
        elif k == "datetime":
            out[name] = pd.DatetimeTZDtype("ns", "UTC")
        elif k == "json":
            out[name] = np.dtype(object)
        else:
            out[name] = pd.api.types.pandas_dtype(k)
    return out
