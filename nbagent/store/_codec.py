"""JSON encoding of nbagent's values, for the store: round-trip exact.

Messages, calls, approvals, decisions, usage and events become plain JSON
objects and come back as equal values (datetimes keep their timezone and
microseconds, tuples come back as tuples). The stored shape of each value is
described here once.

A :class:`~nbagent.ToolCall` has two parts: its identity (``id``, ``name``,
``arguments``, ``raw_arguments``, ``parse_error``), which is what messages and
events store, and its lifecycle (status, approval, decision, result, times),
which the store keeps in one row per call. :func:`decode_event` takes a
``calls`` mapping so every event of a chat refers to the same rebuilt
``ToolCall`` object, as live events do.

``ToolResultMessage.value`` (the tool's Python return value) is not persisted.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any

from .._events import (
    EVENT_TYPES,
    Event,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from .._types import (
    Approval,
    AssistantToolCallMessage,
    ChatMessage,
    Decision,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
)

Json = dict[str, Any]


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def _fast_encoder() -> Callable[[Any], str] | None:
    """``_ENCODER.encode`` without its per-call set-up, or ``None`` if unavailable.

    ``JSONEncoder.encode`` builds a C encoder object on every call (about half
    the time of encoding a small dict). This builds it once, with the same
    settings, and without the circular-reference bookkeeping: stored values
    are JSON data (a cycle would still fail, with ``RecursionError``). It is
    used only if it gives byte-identical output on a probe.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or basestring is None:
        return None
    try:
        encoder = make(None, str, basestring, None, ":", ",", False, False, True)
        join = "".join

        def encode(value: Any) -> str:
            return join(encoder(value, 0))

        probe = {"a": [1, 2.5, None, True, 'é\n"x'], "b": {"c": float("nan")}, "d": object}
        if encode(probe) != _ENCODER.encode(probe) or encode("s") != _ENCODER.encode("s"):
            return None
        return encode
    except Exception:  # another Python's private API: use the public one
        return None


_encode: Callable[[Any], str] = _fast_encoder() or _ENCODER.encode


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
    }


def usage_in(d: Mapping[str, Any]) -> Usage:
    return Usage(
        int(d.get("input_tokens", 0)),
        int(d.get("output_tokens", 0)),
        int(d.get("cached_tokens", 0)),
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
    return out


def call_identity_in(d: Mapping[str, Any]) -> ToolCall:
    return ToolCall(
        d["id"],
        d["name"],
        dict(d.get("arguments") or {}),
        d.get("raw_arguments"),
        d.get("parse_error"),
    )


def call_out(c: ToolCall) -> Json:
    """Identity and lifecycle of a call (what :func:`call_in` rebuilds)."""
    out = call_identity_out(c)
    out.update(
        status=c.status,
        approval=approval_out(c.approval),
        decision=decision_out(c.decision),
        result=message_out(c.result) if c.result is not None else None,
        started_at=dt_out(c.started_at),
        finished_at=dt_out(c.finished_at),
    )
    return out


def call_in(d: Mapping[str, Any]) -> ToolCall:
    """A new call with the identity and lifecycle :func:`call_out` wrote."""
    identity = call_identity_in(d)
    stored = d.get("result")
    result = message_in(stored) if stored is not None else None
    if result is not None and not isinstance(result, ToolResultMessage):
        raise ValueError(f"the stored result of call {identity.id!r} is not a tool result")
    return dataclasses.replace(
        identity,
        status=d.get("status", "requested"),
        approval=approval_in(d.get("approval")),
        decision=decision_in(d.get("decision")),
        result=result,
        started_at=dt_in(d.get("started_at")),
        finished_at=dt_in(d.get("finished_at")),
    )


# ---------------------------------------------------------------- messages
def message_out(m: Message) -> Json:
    if isinstance(m, ToolResultMessage):
        return {
            "role": "tool",
            "tool_call_id": m.tool_call_id,
            "content": m.content,
            "is_error": m.is_error,
            "status": m.status,
            "name": m.name,
            "turn": m.turn,
        }
    if isinstance(m, AssistantToolCallMessage):
        return {
            "role": "assistant",
            "content": m.content,
            "turn": m.turn,
            "stop_reason": m.stop_reason,
            "tool_calls": [call_identity_out(c) for c in m.tool_calls],
        }
    if isinstance(m, ChatMessage):
        return {"role": m.role, "content": m.content, "turn": m.turn, "stop_reason": m.stop_reason}
    raise TypeError(f"cannot store a {type(m).__name__} as a message")


def message_in(d: Mapping[str, Any], calls: Mapping[str, ToolCall] | None = None) -> Message:
    """Rebuild a message; an assistant message's calls come from ``calls`` when given."""
    if d["role"] == "tool":
        return ToolResultMessage(
            d["tool_call_id"],
            d["content"],
            bool(d["is_error"]),
            d["status"],
            d.get("name", ""),
            turn=d.get("turn", 0),
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
        )
    return ChatMessage(
        d["role"], d["content"], turn=d.get("turn", 0), stop_reason=d.get("stop_reason", "end")
    )


# ------------------------------------------------------------------ events
# Event fields holding a value that is not plain JSON, by field name.
_OUT: dict[str, Callable[[Any], Any]] = {
    "call": lambda c: {"id": c.id, "name": c.name},
    "message": message_out,
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
        elif key in ("message", "result"):
            kwargs[key] = message_in(value, calls)
        elif key == "usage":
            kwargs[key] = usage_in(value)
        elif key == "approval":
            kwargs[key] = approval_in(value)
        elif key == "decision":
            kwargs[key] = decision_in(value)
        elif key in ("started_at", "claimed_at"):
            kwargs[key] = dt_in(value)
        else:
            kwargs[key] = value
    known = _event_fields(cls)
    for key in [k for k in kwargs if k not in known and k not in ("chat_id", "seq", "ts")]:
        del kwargs[key]  # a field this version does not have
    return cls(**kwargs)


__all__ = [
    "approval_in",
    "approval_out",
    "call_identity_in",
    "call_identity_out",
    "call_in",
    "call_out",
    "decision_in",
    "decision_out",
    "decode_event",
    "dt_in",
    "dt_out",
    "dumps",
    "event_json",
    "event_out",
    "loads",
    "message_in",
    "message_out",
    "usage_in",
    "usage_out",
]


# ------------------------------------------------------- folded events
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
    the finishing event filled in from ``data``), for
    :func:`nbagent._serde.decode_event`.
    """
    started = data.pop("started", None)
    cls = FOLDED.get(type_)
    if not isinstance(started, dict) or cls is None:
        return None
    own = dict(started)
    seq, ts = own.pop("seq"), own.pop("ts")
    out = {k: data[k] for k in _own_fields(cls) if k in data and k not in own}
    out.update(own)
    return cls.type, seq, ts, out


def _own_fields(cls: type[Event]) -> tuple[str, ...]:
    names = _OWN_FIELDS.get(cls)
    if names is None:
        names = _OWN_FIELDS[cls] = tuple(
            f.name for f in fields(cls) if f.name not in ("chat_id", "seq", "ts")
        )
    return names


_OWN_FIELDS: dict[type[Event], tuple[str, ...]] = {}
