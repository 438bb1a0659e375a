"""The storage format: how a chat's values and events become rows, and come back.

This module is the one description of what a store holds, used both to write
it (:func:`encode_batch`, :func:`encode`) and to read it back
(:func:`decode_events`, :func:`decode_event`); a store only moves the text.

**Values.** Messages, calls, approvals, decisions, usage and events become
plain JSON objects (``*_out``) and come back as equal values (``*_in``):
datetimes keep their timezone and microseconds, tuples come back as tuples.
``ToolResultMessage.value`` (the tool's Python return value) is not persisted.
A :class:`~nbagent.ToolCall` has two parts: its identity (``id``, ``name``,
``arguments``, ``raw_arguments``, ``parse_error``), which is what messages and
events store, and its lifecycle (status, approval, decision, result, times),
which the store keeps in one row per call. Decoding takes a ``calls`` mapping
so every event of a chat refers to the same rebuilt ``ToolCall`` object, as
live events do.

**Events.** Every event except the streaming fragments (``TextDelta``,
``ToolCallDelta``, ``ReasoningDelta``) is written as an :class:`~nbagent.store._protocol.Entry`:
its ``seq``, ``type``, ``ts``, its own fields as JSON (``data``), and the one
row change it implies. An event is not stored twice:

- a ``MessageAdded`` *is* its message's row (:class:`NewMessage`, with the
  event's ``seq`` and ``ts``; ``data`` is ``None``);
- a ``ToolCallRequested`` *is* its call's row (:class:`NewCall`: ``seq``,
  ``requested_at`` = ``ts``, step, turn, approval; ``data`` is ``None``);
- a ``ToolCallFinished`` leaves out the ``result`` its :class:`CallFinal`
  row holds, except for a denial, which a person may still overrule
  (replacing the row's result);
- an ``ApprovalDecided`` comes with its :class:`DecisionChange`, and a
  ``CallInDoubt`` whose call is rerun with its :class:`CallReset`;
- a ``ModelRequestStarted`` or ``ToolCallStarted`` written in the same batch
  as its finishing event (``ModelRequestFinished``/``ModelRequestFailed``,
  ``ToolCallFinished``) rides in that event's ``data``, under ``"started"``:
  its ``seq``, ``ts`` and the fields whose values differ (:func:`fold`,
  :func:`unfold`).

A call's arguments are stored once, with the call (since version 6): an
assistant message's row names its calls by id and name (:func:`message_row`),
and a ``ToolCallStarted`` leaves out the arguments its call runs with (the
model's, or a person's edit in the call's decision); reading puts them back.

Images and files (a message's ``parts``) are stored by reference: the message
JSON holds each part's kind, media type, SHA-256 (and ``detail`` or
``filename``), and the bytes go to the ``blobs`` table once per hash
(:class:`~nbagent.store._protocol.Blob`, carried by the :class:`NewMessage`
and :class:`CallFinal` changes; since version 8). A store puts the bytes back
under ``"data"`` when it reads a message or rebuilds events (:func:`part_in`,
``decode_events(with_bytes=)``).

Rows written by older versions (an ``events`` row for every event, arguments
in messages and started events) are read as they are.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._events import (
    EVENT_TYPES,
    ApprovalDecided,
    CallbackWarning,
    CallInDoubt,
    Event,
    InputAnswered,
    InputRequested,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
)
from .._json import compact_encoder
from .._types import (
    Approval,
    AssistantToolCallMessage,
    AudioPart,
    ChatMessage,
    Decision,
    FilePart,
    ImagePart,
    Message,
    Part,
    ProviderItem,
    Reasoning,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from .._unicode import clean
from ._protocol import (
    Blob,
    CallFinal,
    CallReset,
    DecisionChange,
    Entry,
    InputAnswer,
    NewCall,
    NewInput,
    NewMessage,
)

if TYPE_CHECKING:
    from ._protocol import StoredCall

Json = dict[str, Any]


_encode: Callable[[Any], str] = compact_encoder()


def dumps(value: Any) -> str:
    """Compact JSON; values JSON cannot hold are stored as their ``str()``."""
    return _encode(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# ------------------------------------------------------------------ scalars
def dt_out(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def dt_in(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def usage_out(u: Usage) -> Json:
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cached_tokens": u.cached_tokens,
        "reasoning_tokens": u.reasoning_tokens,
        "cache_write_tokens": u.cache_write_tokens,
    }


def usage_in(d: Mapping[str, Any]) -> Usage:
    return Usage(
        int(d.get("input_tokens", 0)),
        int(d.get("output_tokens", 0)),
        int(d.get("cached_tokens", 0)),
        int(d.get("reasoning_tokens", 0)),
        int(d.get("cache_write_tokens", 0)),
    )


def approval_out(a: Approval | None) -> Json | None:
    if a is None:
        return None
    return {"required": a.required, "source": a.source, "reason": a.reason}


def approval_in(d: Mapping[str, Any] | None) -> Approval | None:
    if d is None:
        return None
    return Approval(bool(d["required"]), d.get("source", "none"), d.get("reason", ""))


def decision_out(d: Decision | None) -> Json | None:
    if d is None:
        return None
    return {
        "verdict": d.verdict,
        "by": d.by,
        "at": d.at.isoformat(),
        "reason": d.reason,
        "arguments": d.arguments,
    }


def decision_in(d: Mapping[str, Any] | None) -> Decision | None:
    if d is None:
        return None
    return Decision(
        d["verdict"], d["by"], datetime.fromisoformat(d["at"]), d.get("reason"), d.get("arguments")
    )


# ------------------------------------------------------------------- calls
def call_identity_out(c: ToolCall) -> Json:
    out: Json = {"id": c.id, "name": c.name, "arguments": c.arguments}
    if c.raw_arguments is not None:
        out["raw_arguments"] = c.raw_arguments
    if c.parse_error is not None:
        out["parse_error"] = c.parse_error
    if c.server is not None:
        out["server"] = c.server
    if c.hosted:
        out["hosted"] = True
    return out


def call_identity_in(d: Mapping[str, Any]) -> ToolCall:
    return ToolCall(
        d["id"],
        d["name"],
        dict(d.get("arguments") or {}),
        d.get("raw_arguments"),
        d.get("parse_error"),
        server=d.get("server"),
        hosted=bool(d.get("hosted", False)),
    )


# ------------------------------------------------------------ provider items
def item_out(i: ProviderItem) -> Json:
    out: Json = {"api": i.api, "type": i.type, "raw": i.raw}
    for name in ("server", "name", "status"):
        if getattr(i, name) is not None:
            out[name] = getattr(i, name)
    if not i.known:
        out["known"] = False
    if isinstance(i, Reasoning):  # its raw (signature, encrypted content) is kept exactly
        out["reasoning"] = {"text": i.text, "redacted": i.redacted, "resend": i.resend}
    return out


def item_in(d: Mapping[str, Any]) -> ProviderItem:
    common: dict[str, Any] = {
        "server": d.get("server"),
        "name": d.get("name"),
        "status": d.get("status"),
        "known": bool(d.get("known", True)),
    }
    thought = d.get("reasoning")
    if isinstance(thought, Mapping):
        return Reasoning(
            d["api"],
            d["type"],
            dict(d["raw"]),
            **common,
            text=str(thought.get("text") or ""),
            redacted=bool(thought.get("redacted", False)),
            resend=bool(thought.get("resend", True)),
        )
    return ProviderItem(d["api"], d["type"], dict(d["raw"]), **common)


def _with_items(out: Json, m: ChatMessage | AssistantToolCallMessage) -> Json:
    if m.items:
        out["items"] = [item_out(i) for i in m.items]
    return out


def _items_in(d: Mapping[str, Any]) -> tuple[ProviderItem, ...]:
    return tuple(item_in(i) for i in d.get("items") or ())


# ---------------------------------------------------------------- parts
def part_out(p: Part) -> Json:
    """A part's reference: its bytes are a :class:`Blob` (see :func:`blobs_of`)."""
    if isinstance(p, FilePart):
        return {
            "kind": "file",
            "media_type": p.media_type,
            "sha256": p.sha256,
            "filename": p.filename,
        }
    if isinstance(p, AudioPart):
        return {"kind": "audio", "media_type": p.media_type, "sha256": p.sha256}
    out: Json = {"kind": "image", "media_type": p.media_type, "sha256": p.sha256}
    if p.detail is not None:
        out["detail"] = p.detail
    return out


def part_in(d: Mapping[str, Any]) -> Part:
    """A part back; ``d["data"]`` holds its bytes when the store put them back."""
    data = d.get("data")
    raw = bytes(data) if isinstance(data, bytes | bytearray | memoryview) else b""
    if d.get("kind") == "file":
        return FilePart(raw, d["media_type"], d.get("filename") or "document.pdf")
    if d.get("kind") == "audio":
        return AudioPart(raw, d["media_type"])
    return ImagePart(raw, d["media_type"], d.get("detail"))


def blobs_of(m: Message) -> tuple[Blob, ...]:
    """The bytes of a message's parts, one :class:`Blob` per distinct hash."""
    parts = m.parts if isinstance(m, ChatMessage | ToolResultMessage) else ()
    seen: dict[str, Blob] = {}
    for p in parts:
        seen.setdefault(p.sha256, Blob(p.sha256, p.media_type, p.data))
    return tuple(seen.values())


def _parts_in(d: Mapping[str, Any]) -> tuple[Part, ...]:
    return tuple(part_in(p) for p in d.get("parts") or ())


# ---------------------------------------------------------------- messages
def message_out(m: Message) -> Json:
    if isinstance(m, ToolResultMessage):
        out: Json = {
            "role": "tool",
            "tool_call_id": m.tool_call_id,
            "content": m.content,
            "is_error": m.is_error,
            "status": m.status,
            "name": m.name,
            "turn": m.turn,
        }
        if m.hosted:
            out["hosted"] = True
        if m.parts:
            out["parts"] = [part_out(p) for p in m.parts]
        return out
    if isinstance(m, AssistantToolCallMessage):
        out = {
            "role": "assistant",
            "content": m.content,
            "turn": m.turn,
            "stop_reason": m.stop_reason,
            "tool_calls": [call_identity_out(c) for c in m.tool_calls],
        }
        return _with_items(out, m)
    if isinstance(m, ChatMessage):
        out = {"role": m.role, "content": m.content, "turn": m.turn, "stop_reason": m.stop_reason}
        if m.parsed is not None:  # a structured answer: its value as JSON (read back as a dict)
            out["parsed"] = _plain(m.parsed)
        if m.parts:
            out["parts"] = [part_out(p) for p in m.parts]
        return _with_items(out, m)
    raise TypeError(f"cannot store a {type(m).__name__} as a message")


def message_row(m: Message) -> Json:
    """A message as its row holds it: an assistant message names its calls (id and name).

    The calls' arguments are in their own rows (and come back through
    :func:`message_in`'s ``calls``): a large argument is stored once, not again
    with the message that asked for it (since version 6).
    """
    if isinstance(m, AssistantToolCallMessage):
        out = {
            "role": "assistant",
            "content": m.content,
            "turn": m.turn,
            "stop_reason": m.stop_reason,
            "tool_calls": [{"id": c.id, "name": c.name} for c in m.tool_calls],
        }
        return _with_items(out, m)
    return message_out(m)


def message_in(d: Mapping[str, Any], calls: Mapping[str, ToolCall] | None = None) -> Message:
    """Rebuild a message; an assistant message's calls come from ``calls`` when given.

    A message row names its calls without their arguments (:func:`message_row`);
    rows written before version 6 hold them in full, and read the same.
    """
    if d["role"] == "tool":
        return ToolResultMessage(
            d["tool_call_id"],
            d["content"],
            bool(d["is_error"]),
            d["status"],
            d.get("name", ""),
            turn=d.get("turn", 0),
            hosted=bool(d.get("hosted", False)),
            parts=_parts_in(d),
        )
    if "tool_calls" in d:
        tcs = tuple(
            calls[c["id"]] if calls is not None and c["id"] in calls else call_identity_in(c)
            for c in d["tool_calls"]
        )
        return AssistantToolCallMessage(
            d.get("content"),
            tcs,
            turn=d.get("turn", 0),
            stop_reason=d.get("stop_reason", "tool_use"),
            items=_items_in(d),
        )
    return ChatMessage(
        d["role"],
        d["content"],
        turn=d.get("turn", 0),
        stop_reason=d.get("stop_reason", "end"),
        items=_items_in(d),
        parsed=d.get("parsed"),
        parts=_parts_in(d),
    )


def _plain(value: Any) -> Any:
    """A structured answer's value (a pydantic model, a dataclass, a dict) as plain JSON data.

    The type is not stored: a loaded chat's ``reply.parsed`` is this dict.
    """
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)


# ------------------------------------------------------------ event fields
# Event fields holding a value that is not plain JSON, by field name.
_OUT: dict[str, Callable[[Any], Any]] = {
    "call": lambda c: {"id": c.id, "name": c.name},
    # a transcript message; a progress report's or a server log's ``message`` is its text
    "message": lambda m: m if isinstance(m, str) else message_out(m),
    "result": message_out,
    "usage": usage_out,
    "approval": approval_out,
    "decision": decision_out,
    "started_at": dt_out,
    "claimed_at": dt_out,
}


_FIELDS: dict[type[Event], tuple[str, ...]] = {}


def _event_fields(cls: type[Event]) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(
            f.name for f in fields(cls) if f.name not in ("chat_id", "seq", "ts")
        )
    return names


class _EventCodec:
    """How one event class becomes a JSON object, worked out once per class.

    All fields are read with one ``attrgetter`` call and zipped into a dict;
    only the fields listed in ``_OUT`` are converted.
    """

    __slots__ = ("convs", "get", "names")

    def __init__(self, cls: type[Event]):
        self.names = _event_fields(cls)
        self.get: Callable[[Event], Any] | None = (
            operator.attrgetter(*self.names) if self.names else None
        )
        self.convs = tuple((n, _OUT[n]) for n in self.names if n in _OUT)

    def out(self, e: Event, skip: str | None = None) -> Json:
        names, get = self.names, self.get
        if get is None:
            return {}
        out: Json = {names[0]: get(e)} if len(names) == 1 else dict(zip(names, get(e), strict=True))
        for name, conv in self.convs:
            value = out[name]
            if value is not None and name != skip:
                out[name] = conv(value)
        if skip is not None:
            out.pop(skip, None)
        return out


_CODECS: dict[type[Event], _EventCodec] = {}


def _codec(cls: type[Event]) -> _EventCodec:
    codec = _CODECS.get(cls)
    if codec is None:
        codec = _CODECS[cls] = _EventCodec(cls)
    return codec


def event_out(e: Event, skip: str | None = None) -> Json:
    """The event's own fields; ``chat_id``, ``seq`` and ``ts`` are stored as columns."""
    return _codec(type(e)).out(e, skip)


def event_json(e: Event, field: str | None = None, encoded: str | None = None) -> str:
    """The event as JSON text; ``encoded`` is ``field``'s JSON, already encoded (not twice)."""
    if field is None or encoded is None:
        return _encode(event_out(e))
    head = _encode(event_out(e, skip=field))
    sep = "," if len(head) > 2 else ""
    return f'{head[:-1]}{sep}"{field}":{encoded}}}'


# ---------------------------------------------------------- events -> rows
def encode_batch(queued: Iterable[tuple[Event, Any]]) -> list[Entry]:
    """The entries of a batch of queued events (each with what was noted when it came), in order.

    A started event whose finishing event is in the batch is folded into it
    (:func:`fold`): one row, one encoding; a started event left waiting is
    written on its own. A message is encoded once per batch (a tool result is
    also its call's result). An event that cannot be encoded is left out with
    a :class:`~nbagent.CallbackWarning`, as an event whose subscriber raises
    is: writing never stops the chat.
    """
    entries: list[Entry | None] = []
    held: dict[tuple[str, Any], tuple[int, Event]] = {}  # pair -> (slot, started event)
    memo: dict[int, str] = {}
    for e, noted in queued:
        opens: tuple[str, Any] | None = None  # a started event and its finishing one
        closes: tuple[str, Any] | None = None  # are paired by their step or their call
        match e:
            case ModelRequestStarted():
                opens = ("model", e.step)
            case ToolCallStarted():
                opens = ("tool", e.call.id)
            case ModelRequestFinished() | ModelRequestFailed():
                closes = ("model", e.step)
            case ToolCallFinished():
                closes = ("tool", e.call.id)
        if opens is not None:
            earlier = held.get(opens)
            if earlier is not None:  # never finished here: written as it is
                entries[earlier[0]] = _encode_or_warn(earlier[1], None, memo)
            held[opens] = (len(entries), e)
            entries.append(None)  # its slot, if nothing finishes it here
            continue
        entry = _encode_or_warn(e, noted, memo)
        if closes is not None and entry is not None and entry.data is not None:
            started = held.pop(closes, None)
            if started is not None:
                entry = fold(entry, started[1], e)
        entries.append(entry)
    for slot, e in held.values():
        entries[slot] = _encode_or_warn(e, None, memo)
    return [x for x in entries if x is not None]


def _encode_or_warn(e: Event, noted: Any, memo: dict[int, str]) -> Entry | None:
    try:
        return encode(e, noted, memo)
    except Exception as exc:
        warnings.warn(
            f"nbagent store: could not store {e.type} {e.seq} of chat "
            f"{e.chat_id}: {type(exc).__name__}: {exc}",
            CallbackWarning,
            stacklevel=5,
        )
        return None


def encode(e: Event, noted: Any, memo: dict[int, str]) -> Entry:
    """One event's entry: the event and the row change it implies (see the module docstring).

    ``noted`` is what the writer noted when the event came, since a
    ``ToolCall`` keeps changing after its events: for a ``ToolCallFinished``,
    ``(owner, finished_at)``, the claim owner allowed to record the result
    (this process, or the dead owner of an in-doubt call) and when the call
    finished; for a ``CallInDoubt``, the status its call goes back to when it
    is rerun (``None``: not rerun); for an ``ApprovalDecided`` (an ``InputAnswered``),
    whether its decision (answer) is in the store already (written before the chat
    recorded it).
    ``memo`` holds messages already encoded in this batch, by ``id``.
    """
    match e:
        case MessageAdded():
            m = e.message
            ts = e.ts.isoformat()
            data = _message_json(m, memo)
            new_message = NewMessage(e.index, e.turn, m.role, data, e.seq, ts, blobs_of(m))
            return Entry(e.seq, e.type, ts, None, new_message)  # the message's row is the event
        case ToolCallRequested():
            c, approval = e.call, e.approval
            ts = e.ts.isoformat()
            new_call = NewCall(
                c.id,
                e.seq,
                c.name,
                _encode(c.arguments),
                c.raw_arguments,
                c.parse_error,
                "awaiting_approval" if approval.required else "requested",
                approval.required,
                _encode(approval_out(approval)),
                e.turn,
                e.step,
                ts,
                c.server,
                c.hosted,
            )
            return Entry(e.seq, e.type, ts, None, new_call)  # the call's row is the event
        case ToolCallFinished():
            owner, finished_at = noted
            result = _message_json(e.result, memo)
            final = CallFinal(
                e.call.id,
                e.status,
                result,
                dt_out(e.started_at),
                dt_out(finished_at),
                owner,
                blobs_of(e.result),
            )
            if e.status == "denied":  # may be overruled later, replacing the row's result
                data = event_json(e, "result", result)
            else:  # the result is in the call's row, final
                data = _encode(event_out(e, skip="result"))
            return Entry(e.seq, e.type, e.ts.isoformat(), data, final)
        case ApprovalDecided():
            decided = decision_change(e.call.id, e.decision)
            data = event_json(e, "decision", decided.data)
            if noted:  # the chat's decide hook wrote the decision already: the event alone
                return Entry(e.seq, e.type, e.ts.isoformat(), data)
            return Entry(e.seq, e.type, e.ts.isoformat(), data, decided)
        case ToolCallStarted():
            return Entry(e.seq, e.type, e.ts.isoformat(), _encode(_started_out(e)))
        case InputRequested():
            ts = e.ts.isoformat()
            asked = NewInput(
                e.input_id,
                e.call.id if e.call is not None else None,
                e.kind,
                e.call.name if e.call is not None else None,
                e.server,
                e.prompt,
                _encode(e.content),
                None if e.schema is None else _encode(e.schema),
                ts,
                None if e.resume is None else _encode(e.resume),
                noted,
            )
            return Entry(e.seq, e.type, ts, event_json(e), asked)
        case InputAnswered():
            data = event_json(e)
            if noted:  # the chat's answer_input hook wrote the answer already: the event alone
                return Entry(e.seq, e.type, e.ts.isoformat(), data)
            answer = InputAnswer(
                e.input_id, e.action, _encode(e.data), e.by, e.ts.isoformat(), e.reason
            )
            return Entry(e.seq, e.type, e.ts.isoformat(), data, answer)
        case CallInDoubt() if noted is not None:  # rerun: the call is runnable again
            reset = CallReset(e.call.id, noted, e.claimed_by)
            return Entry(e.seq, e.type, e.ts.isoformat(), event_json(e), reset)
        case _:  # the event alone (a CallInDoubt not rerun: the ToolCallFinished after settles it)
            return Entry(e.seq, e.type, e.ts.isoformat(), event_json(e))


def decision_change(call_id: str, d: Decision) -> DecisionChange:
    """The row change recording decision ``d`` on call ``call_id``."""
    return DecisionChange(
        call_id,
        d.verdict,
        d.by,
        d.at.isoformat(),
        d.reason,
        None if d.arguments is None else _encode(d.arguments),
        _encode(decision_out(d)),
        override=not d.automatic,
    )


def _started_out(e: Event) -> Json:
    """A started event's fields; a ``ToolCallStarted`` leaves out the arguments its call holds.

    The call runs with its effective arguments (the model's, in its row, or a
    person's edit, in its decision): :func:`decode_event` takes them from there.
    """
    if isinstance(e, ToolCallStarted):
        arguments = e.call.effective_arguments
        if e.arguments is arguments or e.arguments == arguments:
            return event_out(e, skip="arguments")
    return event_out(e)


def _message_json(m: Message, memo: dict[int, str]) -> str:
    key = id(m)
    data = memo.get(key)
    if data is None:
        data = memo[key] = _encode(message_row(m))
    return data


def fold(entry: Entry, started: Event, finished: Event) -> Entry:
    """``finished``'s entry carrying ``started``: its seq, ts and the fields that differ."""
    own: dict[str, Any] = {"seq": started.seq, "ts": started.ts.isoformat()}
    for name, value in _started_out(started).items():
        mine = getattr(started, name)
        try:
            same = hasattr(finished, name) and (
                getattr(finished, name) is mine or bool(getattr(finished, name) == mine)
            )
        except Exception:
            same = False
        if not same:
            own[name] = value
    head = entry.data or "{}"
    sep = "," if len(head) > 2 else ""
    data = f'{head[:-1]}{sep}"started":{_encode(own)}}}'
    return Entry(entry.seq, entry.type, entry.ts, data, entry.change)


def valid_text(entries: Sequence[Entry]) -> list[Entry]:
    """``entries`` with every string valid UTF-8 (lone surrogates replaced, as the chat does).

    The chat cleans text where it enters, but a lone surrogate can still reach
    an event (a model name a server reported, an exception's message about a
    file name read with ``surrogateescape``); SQLite cannot store it, and one
    such string would fail the whole batch. A store retries with these.
    """
    return [_valid(e) for e in entries]


def _valid(value: Any) -> Any:
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if isinstance(item, str):
            cleaned = clean(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            cleaned = _valid(item)
        else:
            continue
        if cleaned is not item:
            changes[f.name] = cleaned
    return dataclasses.replace(value, **changes) if changes else value


# ---------------------------------------------------------- rows -> events
def decode_event(
    type_: str,
    chat_id: str,
    seq: int,
    ts: str,
    data: Mapping[str, Any],
    calls: dict[str, ToolCall],
) -> Event:
    """Rebuild an event; ``call`` fields resolve through (and extend) ``calls``."""
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        raise ValueError(f"unknown event type {type_!r}")
    kwargs: Json = {"chat_id": chat_id, "seq": seq, "ts": datetime.fromisoformat(ts)}
    for key, value in data.items():
        if value is None:
            kwargs[key] = None
        elif key == "call":
            call = calls.get(value["id"])
            if call is None:
                call = calls[value["id"]] = ToolCall(value["id"], value.get("name", ""))
            kwargs[key] = call
        elif key in ("message", "result") and not isinstance(value, str):
            kwargs[key] = message_in(value, calls)
        elif key == "usage":
            kwargs[key] = usage_in(value)
        elif key == "approval":
            kwargs[key] = approval_in(value)
        elif key == "decision":
            kwargs[key] = decision_in(value)
        elif key in ("started_at", "claimed_at"):
            kwargs[key] = dt_in(value)
        elif key == "ran_before":
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    known = _event_fields(cls)
    for key in [k for k in kwargs if k not in known and k not in ("chat_id", "seq", "ts")]:
        del kwargs[key]  # a field this version does not have
    if cls is ToolCallStarted and "arguments" not in kwargs and "call" in kwargs:
        kwargs["arguments"] = kwargs["call"].effective_arguments  # stored once, in the call
    return cls(**kwargs)


def decode_events(
    chat_id: str,
    events: Iterable[tuple[int, str, str, str]],
    messages: Iterable[tuple[int, int, str, int | None, str | None]],
    calls: Sequence[tuple[int, StoredCall, str | None]],
    known: dict[str, ToolCall] | None = None,
    with_bytes: Callable[[Any], Any] | None = None,
) -> list[Event]:
    """One chat's events, in ``seq`` order, rebuilt from what the store holds.

    Args:
        events: Its ``(seq, type, ts, data)`` event rows, in ``seq`` order.
        messages: Its messages as ``(index, turn, message JSON, seq, ts)``;
            ``seq`` is ``None`` for a message written before version 5, whose
            ``MessageAdded`` has an event row that refers to it.
        calls: Its calls as ``(seq, call, result JSON)``, in ``seq`` order; a
            call without a ``ToolCallRequested`` row (all calls since version
            4) is that event.
        known: The ``ToolCall`` objects for the events to refer to, by id
            (extended with those rebuilt); default: rebuilt from ``calls``.
        with_bytes: Puts a message's part bytes back (the store's blobs);
            without it parts come back with empty ``data``.

    An event row this version cannot read (an unknown type) is skipped.
    """
    cmap = {sc.id: sc.to_tool_call() for _, sc, _ in calls} if known is None else known
    results = {sc.id: result for _, sc, result in calls}
    texts = {index: data for index, _, data, _, _ in messages}
    hydrate = with_bytes or (lambda d: d)

    def message(text: str | None) -> Any:
        return hydrate(loads(text)) if text and '"parts"' in text else loads(text)

    out: list[Event] = []
    requested: set[str] = set()
    for seq, type_, ts, data in events:
        try:
            fields = loads(data)
            if type_ == "message_added" and "message" not in fields:
                fields["message"] = message(texts[fields["index"]])
            elif type_ == "tool_call_finished" and "result" not in fields:
                fields["result"] = message(results[fields["call"]["id"]])
            started = unfold(type_, fields) if "started" in fields else None
            event = decode_event(type_, chat_id, seq, ts, fields, cmap)
            if started is not None:
                out.append(decode_event(started[0], chat_id, *started[1:], cmap))
        except (ValueError, TypeError, KeyError):
            continue  # an event type this process does not know
        if isinstance(event, ToolCallRequested):
            requested.add(event.call.id)
        out.append(event)
    for index, turn, text, message_seq, message_ts in messages:
        if message_seq is None or message_ts is None:  # before version 5: it has an event row
            continue
        try:
            fields = {"message": message(text), "index": index, "turn": turn}
            out.append(
                decode_event("message_added", chat_id, message_seq, message_ts, fields, cmap)
            )
        except (ValueError, TypeError, KeyError):
            continue
    for seq, sc, _ in calls:
        if sc.id in requested or sc.requested_at is None or sc.approval is None:
            continue
        call = cmap.get(sc.id)
        if call is None:
            call = cmap[sc.id] = sc.to_tool_call()
        out.append(
            ToolCallRequested(
                chat_id=chat_id,
                seq=seq,
                ts=sc.requested_at,
                call=call,
                step=sc.step,
                turn=sc.turn,
                approval=sc.approval,
            )
        )
    out.sort(key=lambda e: e.seq)  # stable: a stored event first on a (racing) tie
    return out


FOLDED: dict[str, type[Event]] = {
    ModelRequestFinished.type: ModelRequestStarted,
    ModelRequestFailed.type: ModelRequestStarted,
    ToolCallFinished.type: ToolCallStarted,
}
"""A finishing event's type -> the type of the event it may carry under ``"started"``."""


def unfold(type_: str, data: dict[str, Any]) -> tuple[str, int, str, dict[str, Any]] | None:
    """The started event that a finishing event's stored fields carry, if any.

    Removes ``"started"`` from ``data`` (the finishing event's fields); returns
    the started event's type, ``seq``, ``ts`` and fields (those it shares with
    the finishing event filled in from ``data``), for :func:`decode_event`.
    """
    started = data.pop("started", None)
    cls = FOLDED.get(type_)
    if not isinstance(started, dict) or cls is None:
        return None
    own = dict(started)
    seq, ts = own.pop("seq"), own.pop("ts")
    out = {k: data[k] for k in _event_fields(cls) if k in data and k not in own}
    out.update(own)
    return cls.type, seq, ts, out


__all__ = [
    "FOLDED",
    "approval_in",
    "approval_out",
    "blobs_of",
    "call_identity_in",
    "call_identity_out",
    "decision_change",
    "decision_in",
    "decision_out",
    "decode_event",
    "decode_events",
    "dt_in",
    "dt_out",
    "dumps",
    "encode",
    "encode_batch",
    "event_json",
    "event_out",
    "fold",
    "item_in",
    "item_out",
    "loads",
    "message_in",
    "message_out",
    "message_row",
    "part_in",
    "part_out",
    "unfold",
    "usage_in",
    "usage_out",
    "valid_text",
]
