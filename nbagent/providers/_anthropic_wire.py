"""Neutral <-> Anthropic Messages wire format.

A neutral message becomes one *piece*: a role and its content blocks (JSON
bytes, built once and cached). The request merges consecutive pieces of the
same role into one message, which is how Anthropic's rules hold:

- every ``tool_use`` is answered by a ``tool_result`` in the **next** user
  message, and all results of a round sit in **one** user message (the neutral
  transcript keeps a round's results together; merging joins them);
- ``tool_result`` blocks come **before** any text in that message (merged
  blocks are ordered results first);
- consecutive assistant messages (a ``pause_turn`` continuation) or user
  messages are merged, since roles must alternate;
- empty text blocks are dropped, and a final assistant message (the prefix a
  ``pause_turn`` continues from) loses its trailing whitespace.

Tool choice: ``auto``/``none`` -> ``{"type":"auto"|"none"}``, ``required`` ->
``{"type":"any"}``, a name -> ``{"type":"tool","name":X}``; ``calls="one"`` adds
``disable_parallel_tool_use: true`` (never on ``none``). Usage: Anthropic's
``input_tokens`` excludes cache reads and writes; they are added back so
``input_tokens`` means all input, as everywhere in nbagent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import ProviderError
from .._types import (
    AssistantToolCallMessage,
    ChatMessage,
    LLMToolResponse,
    Message,
    StopReason,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from ._base import DeltaSink, StreamDelta
from ._errors import for_error_type
from ._sdk import dumps, incomplete_stream, make_call, new_call_id

_STOP: dict[str | None, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    "model_context_window_exceeded": "context_window",
    None: "end",
}
REFUSED = "The model declined to answer."


@dataclass(frozen=True)
class Block:
    """One content block: its JSON, and its text when it is a text block."""

    json: bytes
    text: str | None = None
    is_result: bool = False


@dataclass(frozen=True)
class Piece:
    """A neutral message in Anthropic terms: a role and content blocks.

    ``joined`` is the blocks' JSON joined with commas, ready to be spliced
    into a merged message; ``results`` says the blocks are ``tool_result``s.
    """

    role: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)
    system: str | None = None
    joined: bytes = b""
    results: bool = False


def _piece(role: str, blocks: Sequence[Block], results: bool = False) -> Piece:
    return Piece(role, tuple(blocks), None, b",".join(b.json for b in blocks), results)


def _text(text: str) -> Block:
    return Block(dumps({"type": "text", "text": text}), text)


def piece(message: Message) -> Piece:
    """One neutral message -> its role and content blocks."""
    if isinstance(message, ChatMessage):
        if message.role == "system":
            return Piece("system", (), message.content)
        role = "assistant" if message.role == "assistant" else "user"
        return _piece(role, [_text(message.content)] if message.content else [])
    if isinstance(message, AssistantToolCallMessage):
        blocks = [_text(message.content)] if message.content else []
        blocks.extend(_tool_use(c) for c in message.tool_calls)
        return _piece("assistant", blocks)
    if isinstance(message, ToolResultMessage):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        if message.content:
            block["content"] = message.content
        block["is_error"] = message.is_error
        return _piece("user", [Block(dumps(block), None, True)], results=True)
    raise TypeError(f"cannot convert {type(message).__name__} to an Anthropic message")


def _tool_use(call: ToolCall) -> Block:
    return Block(
        dumps({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    )


_OPEN = {"user": b'{"role":"user","content":[', "assistant": b'{"role":"assistant","content":['}


def messages_json(pieces: Sequence[Piece]) -> tuple[bytes, list[str]]:
    """Merge pieces into alternating messages; returns the ``messages`` array and system texts."""
    systems: list[str] = []
    runs: list[list[Piece]] = []
    for p in pieces:
        if p.system is not None:
            systems.append(p.system)
        elif p.blocks:
            if runs and runs[-1][0].role == p.role:
                runs[-1].append(p)
            else:
                runs.append([p])
    if runs and runs[-1][0].role == "assistant":
        _strip_final(runs)
    out = []
    for run in runs:
        if len(run) == 1:
            joined = run[0].joined
        else:
            if run[0].role == "user" and not _results_first(run):
                run = [p for p in run if p.results] + [p for p in run if not p.results]
            joined = b",".join(p.joined for p in run)
        out.append(_OPEN[run[0].role] + joined + b"]}")
    return b"[" + b",".join(out) + b"]", systems


def _strip_final(runs: list[list[Piece]]) -> None:
    """A final assistant message may not end in whitespace (the API answers 400)."""
    run = runs[-1]
    last = run[-1].blocks[-1]
    if last.text is None or last.text == last.text.rstrip():
        return
    stripped = last.text.rstrip()
    blocks = [*run[-1].blocks[:-1], *([_text(stripped)] if stripped else [])]
    if blocks:
        run[-1] = _piece("assistant", blocks)
    else:
        run.pop()
        if not run:
            runs.pop()


def _results_first(run: list[Piece]) -> bool:
    seen_other = False
    for p in run:
        if not p.results:
            seen_other = True
        elif seen_other:
            return False
    return True


def tools_json(tools: Sequence[ToolSpec]) -> bytes:
    """Neutral tool definitions -> Anthropic ``tools``."""
    return dumps([t.as_dict() for t in tools])


def tool_choice(choice: str, calls: str) -> dict[str, Any]:
    """Neutral choice and calls -> Anthropic ``tool_choice``."""
    if choice == "none":
        return {"type": "none"}
    if choice == "auto":
        out: dict[str, Any] = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    else:
        out = {"type": "tool", "name": choice}
    if calls == "one":
        out["disable_parallel_tool_use"] = True
    return out


def usage_of(usage: Any) -> tuple[int, int, int]:
    """(input including cache reads and writes, output, cache reads)."""
    if not isinstance(usage, dict):
        return 0, 0, 0
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    return (
        int(usage.get("input_tokens") or 0) + read + write,
        int(usage.get("output_tokens") or 0),
        read,
    )


def _response(
    text: str,
    calls: tuple[ToolCall, ...],
    stop: str | None,
    details: Any,
    usage: Any,
    model: str,
    provider: str,
) -> LLMToolResponse:
    reason = _STOP.get(stop, "other")
    refusal = None
    if reason == "refusal":
        explanation = details.get("explanation") if isinstance(details, dict) else None
        refusal = explanation or text or REFUSED
    i, o, c = usage_of(usage)
    return LLMToolResponse(
        text=text,
        tool_calls=calls,
        input_tokens=i,
        output_tokens=o,
        cached_tokens=c,
        model=model,
        provider=provider,
        stop_reason=reason,
        raw_stop_reason=stop,
        refusal=refusal,
    )


def parse_message(data: dict[str, Any], *, model: str, provider: str) -> LLMToolResponse:
    """A ``message`` body -> neutral response."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in data.get("content") or ():
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            calls.append(
                make_call(
                    block.get("id") or new_call_id("toolu_"),
                    str(block.get("name") or ""),
                    block.get("input"),
                )
            )
    return _response(
        "".join(text),
        tuple(calls),
        data.get("stop_reason"),
        data.get("stop_details"),
        data.get("usage"),
        str(data.get("model") or model),
        provider,
    )


@dataclass
class _Block:
    kind: str
    call: int = -1
    id: str | None = None
    name: str | None = None
    input: Any = None
    parts: list[str] = field(default_factory=list)


class MessageStream:
    """Folds Messages stream events into a response.

    ``message_start`` carries the input usage, ``content_block_*`` the text and
    the ``input_json_delta`` fragments of each ``tool_use`` block,
    ``message_delta`` the stop reason and the final (cumulative) usage.
    """

    def __init__(self, on_delta: DeltaSink | None, *, model: str, provider: str):
        self.on_delta = on_delta
        self.model = model
        self.provider = provider
        self.blocks: dict[int, _Block] = {}
        self.text: list[str] = []
        self.usage: dict[str, Any] = {}
        self.stop: str | None = None
        self.details: Any = None
        self.done = False
        self.ncalls = 0

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "content_block_delta":
            self._delta(event.get("index", 0), event.get("delta") or {})
        elif kind == "content_block_start":
            self._start(event.get("index", 0), event.get("content_block") or {})
        elif kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self._add_usage(message.get("usage"))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self.stop = delta.get("stop_reason") or self.stop
            self.details = delta.get("stop_details") or self.details
            self._add_usage(event.get("usage"))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise _stream_error(event.get("error"), self.provider)

    def _add_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def _start(self, index: int, block: dict[str, Any]) -> None:
        kind = str(block.get("type"))
        b = self.blocks[index] = _Block(kind)
        if kind == "tool_use":
            b.call, b.id, b.name, b.input = (
                self.ncalls,
                block.get("id"),
                block.get("name"),
                block.get("input"),
            )
            self.ncalls += 1
            if self.on_delta is not None:
                self.on_delta(StreamDelta("tool_call", "", b.call, b.id, b.name))
        elif kind == "text" and block.get("text"):
            self._delta(index, {"type": "text_delta", "text": block["text"]})

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        kind = delta.get("type")
        b = self.blocks.get(index)
        if kind == "text_delta":
            text = delta.get("text") or ""
            if b is None:
                b = self.blocks[index] = _Block("text")
            b.parts.append(text)
            if text and self.on_delta is not None:
                self.on_delta(StreamDelta("text", text))
        elif kind == "input_json_delta" and b is not None:
            fragment = delta.get("partial_json") or ""
            b.parts.append(fragment)
            if fragment and self.on_delta is not None:
                self.on_delta(StreamDelta("tool_call", fragment, b.call, b.id, b.name))

    def finish(self) -> LLMToolResponse:
        if not self.done and self.stop is None:
            raise incomplete_stream(self.provider)
        text: list[str] = []
        calls: list[ToolCall] = []
        for _, b in sorted(self.blocks.items()):
            if b.kind == "text":
                text.append("".join(b.parts))
            elif b.kind == "tool_use":
                raw = "".join(b.parts)
                arguments: Any = raw if raw.strip() else (b.input or {})
                calls.append(make_call(b.id or new_call_id("toolu_"), b.name or "", arguments))
        return _response(
            "".join(text),
            tuple(calls),
            self.stop,
            self.details,
            self.usage,
            self.model,
            self.provider,
        )


def _stream_error(error: Any, provider: str) -> ProviderError:
    kind = str(error.get("type")) if isinstance(error, dict) else ""
    message = str(error.get("message")) if isinstance(error, dict) else "stream error"
    return for_error_type(kind)(f"{provider}: {message} ({kind})", provider=provider)


__all__ = [
    "MessageStream",
    "Piece",
    "messages_json",
    "parse_message",
    "piece",
    "tool_choice",
    "tools_json",
    "usage_of",
]
