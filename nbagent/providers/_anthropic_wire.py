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
- empty and whitespace-only text blocks are dropped (the API refuses them: a model's
  ``"\n\n"`` before its ``tool_use`` would fail every later request), and a final
  assistant message (the prefix a ``pause_turn`` continues from) loses its trailing
  whitespace; a request whose last message is a user message with nothing to send
  (no text but whitespace, no image or file), or with no messages at all, fails before
  it is sent (:func:`check_sendable`).

Blocks the provider ran itself (the MCP connector's ``mcp_tool_use`` and
``mcp_tool_result``, ``server_tool_use`` and its ``*_tool_result``) and any
block of a type this module does not know become
:class:`~nbagent.ProviderItem` values, sent back unchanged before the
message's text and calls: never dropped. ``thinking`` and
``redacted_thinking`` blocks become :class:`~nbagent.Reasoning` items (a
provider item with readable text) and go back the same way, first in the
assistant message, signature and redacted ``data`` untouched: with thinking
on, the API checks that the assistant turn before a ``tool_result`` starts
with its thinking block, as it came.

Citations (web search, documents, search results): when a text block of a
response cites a source, the response's text blocks are kept as ``text``
:class:`~nbagent.ProviderItem` values in their places among the other blocks
(``message.citations`` reads them; the message's ``content`` is their text
joined) and go back as those blocks, each citation with the fields a request
takes (:data:`CITATION_FIELDS`: a document citation's ``file_id`` is left out).
Streamed citations arrive as ``citations_delta`` events on their text block.

Thinking (``reasoning=``): ``thinking: {"type":"enabled","budget_tokens":N}``,
an effort word meaning a budget (:data:`~nbagent._reasoning.EFFORT_BUDGETS`);
``max_tokens`` must exceed the budget, so when it does not the budget is added
to it (room for the answer). The API refuses thinking with a forced tool choice
(``required`` or a named tool) and with ``temperature``/``top_k`` set or
``top_p`` below 0.95: those fail here, before any request. The MCP connector has no approval
step: its calls run on Anthropic's side as the model makes them. Hosted calls
and answers from another API (OpenAI's approvals) are not sent here.

Tool choice: ``auto``/``none`` -> ``{"type":"auto"|"none"}``, ``required`` ->
``{"type":"any"}``, a name -> ``{"type":"tool","name":X}``; ``calls="one"`` adds
``disable_parallel_tool_use: true`` (never on ``none``). With the MCP connector
and ``none``, each ``mcp_servers`` entry has its tools disabled
(``tool_configuration.enabled: false``): with no tool of the chat's own no
``tool_choice`` can be sent, and ``required`` there fails before any request.

Usage: Anthropic's ``input_tokens`` excludes cache reads and writes; they are
added back so ``input_tokens`` means all input, as everywhere in nbagent. A structured
answer is ``output_config: {format: {type: json_schema, schema}}`` (structured
outputs, GA): the answer is the text block, and tools work beside it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .._errors import ProviderError, ToolDefinitionError, ToolOptionError
from .._hosted import HostedTool
from .._media import audio_not_sent, hears_audio
from .._output import Output
from .._reasoning import budget_of
from .._schema import property_key_ok
from .._types import (
    AssistantToolCallMessage,
    AudioPart,
    ChatMessage,
    FilePart,
    LLMToolResponse,
    Message,
    Part,
    ProviderItem,
    Reasoning,
    StopReason,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from ._base import DeltaSink, StreamDelta, checked_role
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


def _said(text: str | None) -> TypeGuard[str]:
    """Whether ``text`` goes as a text block: the API refuses an empty or whitespace-only one."""
    return bool(text and not text.isspace())


def piece(message: Message) -> Piece:
    """One neutral message -> its role and content blocks."""
    if isinstance(message, ChatMessage):
        if message.role == "system":
            return Piece("system", (), message.content)
        checked_role(message.role, "a message")  # another role was sent as the user's words
        role = message.role
        blocks = _own_blocks(message.items)
        if _said(message.content) and not _cited(message.items):
            blocks.append(_text(message.content))
        if role == "user":
            blocks.extend(Block(dumps(part_block(p, n))) for n, p in enumerate(message.parts, 1))
        return _piece(role, blocks)
    if isinstance(message, AssistantToolCallMessage):
        blocks = _own_blocks(message.items)
        if _said(message.content) and not _cited(message.items):
            blocks.append(_text(message.content))
        blocks.extend(_tool_use(c) for c in message.tool_calls if not c.hosted)
        return _piece("assistant", blocks)
    if isinstance(message, ToolResultMessage):
        if message.hosted:  # another API's approval: nothing to send here
            return _piece("user", [])
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": wire_id(message.tool_call_id),
        }
        if message.parts:
            content = [{"type": "text", "text": message.content}] if _said(message.content) else []
            block["content"] = content + [part_block(p, n) for n, p in enumerate(message.parts, 1)]
        elif message.content:
            block["content"] = message.content
        block["is_error"] = message.is_error
        return _piece("user", [Block(dumps(block))], results=True)
    raise TypeError(f"cannot convert {type(message).__name__} to an Anthropic message")


def part_block(part: Part, n: int = 1) -> dict[str, Any]:
    """An image or PDF as an Anthropic ``image`` / ``document`` block (base64 source); a
    sound (the ``n``-th part) as a text block saying it was not sent (no audio input)."""
    if isinstance(part, AudioPart):
        return {"type": "text", "text": audio_not_sent(n, hears_audio("anthropic", "") or "")}
    kind = "document" if isinstance(part, FilePart) else "image"
    source = {"type": "base64", "media_type": part.media_type, "data": part.base64}
    return {"type": kind, "source": source}


def _own_blocks(items: Sequence[ProviderItem]) -> list[Block]:
    out = []
    for item in items:
        if item.api != "anthropic":
            continue
        if item.type == "text":  # a cited text block: its citations as the API takes them
            if not str(item.raw.get("text") or "").strip():
                continue  # refused as it is, and it says nothing
            block = {**item.raw, "citations": [_citation(c) for c in item.citations] or None}
            out.append(Block(dumps(block), str(item.raw.get("text") or "")))
        else:
            out.append(Block(dumps(item.raw)))
    return out


def _cited(items: Sequence[ProviderItem]) -> bool:
    """Whether the message's text goes back as its own text blocks (it carries citations)."""
    return any(i.type == "text" and i.api == "anthropic" for i in items)


CITATION_FIELDS: dict[str, frozenset[str]] = {
    "char_location": frozenset(
        {"type", "cited_text", "document_index", "document_title"}
        | {"start_char_index", "end_char_index"}
    ),
    "page_location": frozenset(
        {"type", "cited_text", "document_index", "document_title"}
        | {"start_page_number", "end_page_number"}
    ),
    "content_block_location": frozenset(
        {"type", "cited_text", "document_index", "document_title"}
        | {"start_block_index", "end_block_index"}
    ),
    "web_search_result_location": frozenset(
        {"type", "cited_text", "encrypted_index", "title", "url"}
    ),
    "search_result_location": frozenset(
        {"type", "cited_text", "search_result_index", "source", "title"}
        | {"start_block_index", "end_block_index"}
    ),
}
"""The fields a request's citation takes, per type (a response's may carry more: a
document citation's ``file_id`` is refused on the way back)."""


def _citation(citation: dict[str, Any]) -> dict[str, Any]:
    fields = CITATION_FIELDS.get(str(citation.get("type")))
    if fields is None:  # a type unknown here: back as it came
        return citation
    return {k: v for k, v in citation.items() if k in fields}


PROVIDER_RUN = frozenset(
    {
        "mcp_tool_use",
        "mcp_tool_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
        "thinking",
        "redacted_thinking",
    }
)
"""Content blocks the provider made or ran itself: kept and sent back as they came."""


def provider_items(blocks: Sequence[dict[str, Any]]) -> tuple[ProviderItem, ...]:
    """The blocks other than ``tool_use`` (text only when cited), in order, as provider items.

    A ``*_tool_result`` names the server and tool of the ``*_tool_use`` it answers.
    """
    uses: dict[str, dict[str, Any]] = {}
    out: list[ProviderItem] = []
    for block in blocks:
        kind = str(block.get("type"))
        if kind == "text":  # a text block kept whole: the answer carries citations
            out.append(ProviderItem("anthropic", "text", block))
            continue
        server = block.get("server_name")
        name = block.get("name")
        status: str | None = None
        if kind in ("mcp_tool_use", "server_tool_use"):
            uses[str(block.get("id"))] = block
        elif kind.endswith("_tool_result"):
            use = uses.get(str(block.get("tool_use_id")), {})
            server, name = use.get("server_name"), use.get("name")
            content = block.get("content")
            failed = block.get("is_error") is True or (
                isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
            )
            status = "error" if failed else "ok"
        if kind in THINKING:
            out.append(thinking_item(block))
            continue
        out.append(
            ProviderItem(
                "anthropic",
                kind,
                block,
                server=server if isinstance(server, str) else None,
                name=name if isinstance(name, str) else None,
                status=status,
                known=kind in PROVIDER_RUN,
            )
        )
    return tuple(out)


THINKING = frozenset({"thinking", "redacted_thinking"})


def thinking_item(block: dict[str, Any]) -> Reasoning:
    """A ``thinking`` or ``redacted_thinking`` block, kept whole for the wire."""
    kind = str(block.get("type"))
    text = str(block.get("thinking") or "") if kind == "thinking" else ""
    return Reasoning("anthropic", kind, block, text=text, redacted=kind == "redacted_thinking")


def continues_without_thinking(messages: Sequence[Message]) -> bool:
    """Whether the request answers a tool round whose assistant message holds no Anthropic
    thinking block: another provider's response (a fork or a chat given another model
    mid-turn), or a round asked for before ``reasoning=`` was turned on.

    With thinking on, Anthropic refuses such a request ("a final assistant message must
    start with a thinking block"), and a thinking block cannot be made up: the round is
    continued without thinking (the next turn thinks again).
    """
    if not messages or not isinstance(messages[-1], ToolResultMessage):
        return False
    for m in reversed(messages):
        if isinstance(m, AssistantToolCallMessage):
            return not any(
                isinstance(i, Reasoning) and i.api == "anthropic" and i.type in THINKING
                for i in m.items
            )
    return False


def thinking_json(setting: str | int, limit: int, choice: str, extra: dict[str, Any]) -> Any:
    """``(thinking, max_tokens)`` for a ``reasoning=`` setting; refuses what the API refuses.

    Raises:
        ToolOptionError: A forced tool choice (the API allows only ``auto``/``none``).
        ValueError: ``temperature`` or ``top_k`` in ``extra_body``, or ``top_p`` below 0.95.
    """
    if choice not in ("auto", "none"):
        raise ToolOptionError(
            f"anthropic: tool choice {choice!r} forces a tool call, which Anthropic refuses "
            "with thinking on; use choice='auto' or Chat(reasoning=None)"
        )
    for key in ("temperature", "top_k"):
        if key in extra:
            raise ValueError(
                f"anthropic: {key} cannot be set with thinking on (Anthropic refuses it); "
                f"drop it from extra_body or use Chat(reasoning=None)"
            )
    top_p = extra.get("top_p")
    if isinstance(top_p, (int, float)) and top_p < 0.95:
        raise ValueError("anthropic: with thinking on, top_p must be between 0.95 and 1")
    budget = budget_of(setting)
    if limit <= budget:
        limit += budget
    return {"type": "enabled", "budget_tokens": budget}, limit


def _tool_use(call: ToolCall) -> Block:
    return Block(
        dumps(
            {"type": "tool_use", "id": wire_id(call.id), "name": call.name, "input": call.arguments}
        )
    )


_WIRE_ID = re.compile(r"[a-zA-Z0-9_-]+")
"""The ids Anthropic takes for a ``tool_use`` (and its ``tool_result``'s ``tool_use_id``)."""
_NOT_ID = re.compile(r"[^a-zA-Z0-9_-]")


def wire_id(call_id: str) -> str:
    """``call_id`` as Anthropic takes it: as it is when it matches ``^[a-zA-Z0-9_-]+$``.

    Another API's id (Kimi's and vLLM's ``functions.get_weather:0``, a gateway's
    ``call|fc_...``) is refused with a 400, so a chat continued here (a fork with
    another model, a switched provider) could not go on. Such an id is sent as its
    characters with the others made ``_``, at most 40 of them, then ``_`` and 16 hex
    digits of its SHA-256: the same id always maps to the same one, a ``tool_use`` and
    its ``tool_result`` agree, and two ids cleaned alike stay apart. The record keeps
    the original id; only the wire has this one.
    """
    if _WIRE_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{_NOT_ID.sub('_', call_id)[:40]}_{digest}"


def check_sendable(messages: Sequence[Message], pieces: Sequence[Piece]) -> None:
    """Refuse, before sending, a request Anthropic would refuse for having nothing to say.

    Raises:
        ValueError: No message has content (``ask("")``), or the last message is a user
            message with no text but whitespace and no image or file (sent, the request
            would end on the model's own turn: a prefill it continues, not a question).
    """
    if not any(p.blocks for p in pieces if p.system is None):
        raise ValueError(
            "anthropic: nothing to send: the messages hold no text (Anthropic refuses an "
            "empty or whitespace-only message); ask something"
        )
    last = messages[-1]
    if isinstance(last, ChatMessage) and last.role == "user" and not pieces[-1].blocks:
        raise ValueError(
            "anthropic: the last user message is empty or whitespace only, which Anthropic "
            "refuses; ask something"
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


EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
"""A ``cache_control`` breakpoint (the 5-minute cache)."""

_CACHEABLE = frozenset({"text", "image", "document", "tool_use", "tool_result"})
"""Message blocks that may carry ``cache_control`` (thinking blocks may not)."""


def cached_tools(tools: Sequence[ToolSpec]) -> bytes:
    """``tools`` with a breakpoint on the last one (it caches every tool definition)."""
    specs = [t.as_dict() for t in tools]
    specs[-1] = {**specs[-1], "cache_control": EPHEMERAL}
    return dumps(specs)


def cached_system(text: str) -> bytes:
    """``system`` as one text block with a breakpoint."""
    return dumps([{"type": "text", "text": text, "cache_control": EPHEMERAL}])


def cached_messages(body: bytes, breakpoints: int = 2) -> bytes:
    """The ``messages`` array with a breakpoint on the last ``breakpoints`` user messages.

    The last one caches the whole transcript for the next request; the one
    before it is where the previous request wrote, so this request reads it.
    Each goes on the message's last block that may carry one (never a
    thinking block, never an empty text); a message with none is skipped.
    """
    messages = json.loads(body)
    left = breakpoints
    for message in reversed(messages):
        if left == 0:
            break
        if message.get("role") != "user" or not isinstance(message.get("content"), list):
            continue
        for block in reversed(message["content"]):
            if block.get("type") in _CACHEABLE and (block.get("type") != "text" or block["text"]):
                block["cache_control"] = EPHEMERAL
                left -= 1
                break
    return dumps(messages)


def tools_json(tools: Sequence[ToolSpec]) -> bytes:
    """Neutral tool definitions -> Anthropic ``tools``.

    Raises:
        ToolDefinitionError: A tool's parameter name Anthropic refuses (see
            :func:`check_property_keys`), before anything is sent.
    """
    for t in tools:
        check_property_keys(t)
    return dumps([t.as_dict() for t in tools])


def check_property_keys(tool: ToolSpec) -> None:
    """Refuse a tool whose top-level parameter name Anthropic refuses.

    Anthropic answers a whole request with a 400 when one tool's schema has a top-level
    property outside ``^[a-zA-Z0-9_.-]{1,64}$`` (``filter[id]``, ``größe``, ``$top``), so
    every request of the chat would fail. nbagent's own tools are checked when they are
    declared; a tool whose schema comes as it is (an MCP server's, a tool dict) is checked
    here. Raised rather than leaving the tool out: the model would go on without a tool
    you gave it, and nothing would say so where you look.

    Raises:
        ToolDefinitionError: Naming the tool, the key and what to do.
    """
    props = tool.input_schema.get("properties")
    if not isinstance(props, dict):
        return
    for key in props:
        if not property_key_ok(key):
            raise ToolDefinitionError(
                f"anthropic: tool {tool.name!r} has a parameter named {key!r}, which "
                "Anthropic's API refuses (parameter names are 1 to 64 characters from "
                "[a-zA-Z0-9_.-]) with a 400 for every request carrying the tool; nothing "
                f"was sent. Leave the tool out (an MCP server's: "
                f"chat.with_tools(server.tools(exclude=[{tool.name!r}]))), rename the "
                "parameter if the tool is yours, or use a provider that takes it (OpenAI)"
            )


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


def mcp_servers_json(hosted: Sequence[HostedTool], choice: str, own_tools: bool) -> bytes:
    """The MCP connector's ``mcp_servers`` for a request whose tool choice is ``choice``.

    The API takes ``tool_choice`` only beside ``tools`` ("tool_choice may only be
    specified while providing tools"), and the connector has no approval step: with
    ``none`` each server goes with its tools disabled (``tool_configuration.enabled:
    false``, a filter of ``allowed_tools`` kept), so the connector calls none of them
    (beside tools of the chat's own as well, where ``{"type":"none"}`` goes too).

    Raises:
        ToolOptionError: ``required`` with no tool of the chat's own: no ``tool_choice``
            can be sent, and nothing else would make the model call a server's tool.
    """
    if choice == "required" and not own_tools:
        labels = ", ".join(h.server_label for h in hosted)
        raise ToolOptionError(
            f"anthropic: tool choice 'required' cannot be sent with the MCP connector's tools "
            f"({labels}) alone: the API takes tool_choice only beside tools of the chat's own, "
            "so nothing was sent; use choice='auto', or add a tool with chat.with_tools(...)"
        )
    servers = []
    for h in hosted:
        server = h.anthropic_server()
        if choice == "none":
            config = server.get("tool_configuration") or {}
            server["tool_configuration"] = {**config, "enabled": False}
        servers.append(server)
    return dumps(servers)


def output_config(output: Output) -> dict[str, Any]:
    """A structured answer -> ``output_config`` (its ``format``: a JSON Schema)."""
    return {"format": {"type": "json_schema", "schema": output.strict_schema("anthropic")}}


def thinking_tokens(usage: Any) -> int:
    """``output_tokens_details.thinking_tokens`` (part of ``output_tokens``), 0 if absent."""
    details = usage.get("output_tokens_details") if isinstance(usage, dict) else None
    return int(details.get("thinking_tokens") or 0) if isinstance(details, dict) else 0


def usage_of(usage: Any) -> tuple[int, int, int, int]:
    """(input including cache reads and writes, output, cache reads, cache writes)."""
    if not isinstance(usage, dict):
        return 0, 0, 0, 0
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    return (
        int(usage.get("input_tokens") or 0) + read + write,
        int(usage.get("output_tokens") or 0),
        read,
        write,
    )


def _response(
    text: str,
    calls: tuple[ToolCall, ...],
    stop: str | None,
    details: Any,
    usage: Any,
    model: str,
    provider: str,
    items: tuple[ProviderItem, ...] = (),
) -> LLMToolResponse:
    reason = _STOP.get(stop, "other")
    refusal = None
    if reason == "refusal":
        explanation = details.get("explanation") if isinstance(details, dict) else None
        refusal = explanation or text or REFUSED
    i, o, c, w = usage_of(usage)
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
        items=items,
        reasoning_tokens=thinking_tokens(usage),
        cache_write_tokens=w,
        usage_reported=isinstance(usage, dict),
    )


def parse_message(data: dict[str, Any], *, model: str, provider: str) -> LLMToolResponse:
    """A ``message`` body -> neutral response."""
    if not isinstance(data.get("content"), list):  # [] is an answer; none at all is not
        raise ValueError(f"no content in it (keys: {sorted(data)[:8]})")
    calls: list[ToolCall] = []
    others: list[dict[str, Any]] = []
    for block in data.get("content") or ():
        kind = block.get("type")
        if kind == "tool_use":
            calls.append(
                make_call(
                    block.get("id") or new_call_id("toolu_"),
                    str(block.get("name") or ""),
                    block.get("input"),
                )
            )
        else:
            others.append(block)
    text, items = _text_and_items(others)
    return _response(
        text,
        tuple(calls),
        data.get("stop_reason"),
        data.get("stop_details"),
        data.get("usage"),
        str(data.get("model") or model),
        provider,
        items,
    )


def _text_and_items(blocks: list[dict[str, Any]]) -> tuple[str, tuple[ProviderItem, ...]]:
    """The answer's text, and the blocks kept as items: every block but text, and, when any
    text block cites a source, the (non-empty) text blocks too, in their places (they go
    back with their citations)."""
    texts = [b for b in blocks if b.get("type") == "text"]
    text = "".join(str(b.get("text") or "") for b in texts)
    if any(b.get("citations") for b in texts):
        return text, provider_items([b for b in blocks if b.get("type") != "text" or b.get("text")])
    return text, provider_items([b for b in blocks if b.get("type") != "text"])


@dataclass
class _Block:
    kind: str
    call: int = -1
    id: str | None = None
    name: str | None = None
    input: Any = None
    parts: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    thought: list[str] = field(default_factory=list)  # thinking deltas, joined once at the end

    def whole(self) -> dict[str, Any]:
        """A block other than text or ``tool_use``, with what its deltas added."""
        out = dict(self.raw)
        if self.thought:
            out["thinking"] = str(out.get("thinking") or "") + "".join(self.thought)
        if self.parts and "input" in out:
            try:
                out["input"] = json.loads("".join(self.parts))
            except ValueError:
                out["input"] = {}
        return out


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
        elif kind == "text":
            for citation in block.get("citations") or ():
                self._delta(index, {"type": "citations_delta", "citation": citation})
            if block.get("text"):
                self._delta(index, {"type": "text_delta", "text": block["text"]})
        else:
            b.raw = dict(block)
            if kind == "thinking" and block.get("thinking") and self.on_delta is not None:
                self.on_delta(StreamDelta("reasoning", str(block["thinking"])))

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
        elif kind == "citations_delta" and b is not None:
            b.raw.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "input_json_delta" and b is not None:
            fragment = delta.get("partial_json") or ""
            b.parts.append(fragment)
            if fragment and self.on_delta is not None and b.kind == "tool_use":
                self.on_delta(StreamDelta("tool_call", fragment, b.call, b.id, b.name))
        elif b is not None and b.kind not in ("text", "tool_use"):
            if kind == "thinking_delta":
                text = str(delta.get("thinking") or "")
                b.thought.append(text)
                if text and self.on_delta is not None:
                    self.on_delta(StreamDelta("reasoning", text))
            elif kind == "signature_delta":
                b.raw["signature"] = delta.get("signature")

    def finish(self, ended: bool = True) -> LLMToolResponse:
        if self.stop is None:  # no message_delta: not how the stream ended, nor its usage
            raise incomplete_stream(self.provider)
        calls: list[ToolCall] = []
        others: list[dict[str, Any]] = []
        for _, b in sorted(self.blocks.items()):
            if b.kind == "text":
                others.append({"type": "text", "text": "".join(b.parts), **b.raw})
            elif b.kind == "tool_use":
                raw = "".join(b.parts)
                arguments: Any = raw if raw.strip() else (b.input or {})
                calls.append(make_call(b.id or new_call_id("toolu_"), b.name or "", arguments))
            else:
                others.append(b.whole())
        text, items = _text_and_items(others)
        return _response(
            text,
            tuple(calls),
            self.stop,
            self.details,
            self.usage,
            self.model,
            self.provider,
            items,
        )


def _stream_error(error: Any, provider: str) -> ProviderError:
    kind = str(error.get("type")) if isinstance(error, dict) else ""
    message = str(error.get("message")) if isinstance(error, dict) else "stream error"
    return for_error_type(kind)(f"{provider}: {message} ({kind})", provider=provider)


__all__ = [
    "CITATION_FIELDS",
    "EPHEMERAL",
    "PROVIDER_RUN",
    "MessageStream",
    "Piece",
    "cached_messages",
    "cached_system",
    "cached_tools",
    "check_sendable",
    "mcp_servers_json",
    "messages_json",
    "output_config",
    "parse_message",
    "piece",
    "provider_items",
    "thinking_item",
    "thinking_json",
    "thinking_tokens",
    "tool_choice",
    "tools_json",
    "usage_of",
]
