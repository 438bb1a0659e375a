"""Anthropic Messages wire format for the fake server.

Renders a neutral :class:`~nbagent.testing.Turn` into a ``message`` body or
the list of stream events (``message_start`` ... ``message_stop``), and checks
request transcripts the way the real API does in strict mode.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from ._script import (
    ARGUMENT_FRAGMENTS,
    TEXT_FRAGMENTS,
    FakeHostedItem,
    Turn,
    Usage,
    WireError,
    fragments,
    request_model,
    resolve_usage,
    seal,
    unseal,
)
from ._wire_schema import check_tools

Payload = dict[str, Any]

_STOP_REASON = {
    "end": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    "context_window": "model_context_window_exceeded",
    "content_filter": "refusal",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
DEFAULT_MESSAGES: dict[int, str] = {
    400: "Bad request (scripted by FakeLLMServer).",
    401: "invalid x-api-key",
    403: "Your API key does not have permission to use the specified resource.",
    404: "The requested resource could not be found.",
    429: "Number of request tokens has exceeded your per-minute rate limit "
    "(scripted by FakeLLMServer).",
    500: "Internal server error",
    529: "Overloaded",
}


def error_body(err: WireError, request_id: str) -> Payload:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    default = "api_error" if err.status >= 500 else "invalid_request_error"
    kind = err.type or _ERROR_TYPES.get(err.status, default)
    return {
        "type": "error",
        "error": {"type": kind, "message": err.message},
        "request_id": request_id,
    }


_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _invalid(message: str) -> WireError:
    return WireError(status=400, message=message, type="invalid_request_error")


def inline_error(err: WireError) -> Payload:
    """An error inside a 200 answer: the ``error`` event of a stream, or an error body."""
    kind = err.type or "api_error"
    return {"type": "error", "error": {"type": kind, "message": err.message}}


def _blocks(message: Any) -> list[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, Mapping)]


_CITATION_FIELDS: dict[str, frozenset[str]] = {
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
"""What a request's text block citation may hold, per type (the SDK's ``*_param`` types)."""


def _check_citations(messages: list[Any]) -> WireError | None:
    """A text block's ``citations``: a list of known citation types with their fields only
    (a response's ``file_id`` is not a request field)."""
    for i, message in enumerate(messages):
        for j, block in enumerate(_blocks(message)):
            cited = block.get("citations") if block.get("type") == "text" else None
            if cited is None:
                continue
            if not isinstance(cited, list):
                return _invalid(f"messages.{i}.content.{j}.text.citations: Input should be a list")
            for k, citation in enumerate(cited):
                kind = citation.get("type") if isinstance(citation, Mapping) else None
                fields = _CITATION_FIELDS.get(str(kind))
                where = f"messages.{i}.content.{j}.text.citations.{k}"
                if fields is None:
                    return _invalid(f"{where}: Input tag {kind!r} does not match any expected tag")
                extra = sorted(set(citation) - fields)
                if extra:
                    return _invalid(f"{where}.{kind}.{extra[0]}: Extra inputs are not permitted")
    return None


def check_messages(body: Mapping[str, Any]) -> WireError | None:
    """The 400s the Messages API answers for malformed tool transcripts."""
    choice = body.get("tool_choice")
    if choice is not None and not body.get("tools"):
        return _invalid("tool_choice: tool_choice may only be specified while providing tools.")
    if (
        isinstance(choice, Mapping)
        and choice.get("type") == "none"
        and "disable_parallel_tool_use" in choice
    ):
        return _invalid(
            "tool_choice.none.disable_parallel_tool_use: Extra inputs are not permitted"
        )
    messages = body.get("messages")
    if not isinstance(messages, list):
        return _invalid("messages: Field required")
    error = (
        _check_max_tokens(body)
        or check_tools("anthropic", body)
        or check_cache(body)
        or _check_text(messages)
        or _check_ids(messages)
        or _check_thinking(body, messages)
        or _check_citations(messages)
    )
    if error is not None:
        return error
    previous_uses: list[str] = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        blocks = _blocks(message)
        if role == "user":
            seen_other = False
            results: set[Any] = set()
            for j, block in enumerate(blocks):
                if block.get("type") != "tool_result":
                    seen_other = True
                    continue
                use_id = block.get("tool_use_id")
                if use_id in results:
                    return _invalid(
                        f"messages.{i}.content.{j}: each tool_use must have a single result. "
                        f"Found multiple `tool_result` blocks with id: {use_id}"
                    )
                results.add(use_id)
                if use_id not in previous_uses:
                    return _invalid(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {use_id}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                if seen_other:
                    return _invalid(
                        f"messages.{i}.content.{j}: `tool_result` blocks must come first in the "
                        "user message that answers `tool_use` blocks, before any other content."
                    )
        uses = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        if role == "assistant" and uses:
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = (
                {b.get("tool_use_id") for b in _blocks(following) if b.get("type") == "tool_result"}
                if isinstance(following, Mapping) and following.get("role") == "user"
                else set()
            )
            missing = [use_id for use_id in uses if use_id not in answered]
            if missing:
                return _invalid(
                    f"messages.{i + 1 if following is not None else i}: `tool_use` ids were "
                    "found without `tool_result` blocks immediately after: "
                    + ", ".join(missing)
                    + ". Each `tool_use` block must have a corresponding `tool_result` block "
                    "in the next message."
                )
        previous_uses = uses if role == "assistant" else []
    return None


def _check_max_tokens(body: Mapping[str, Any]) -> WireError | None:
    """``max_tokens``: required, an integer of at least 1."""
    if "max_tokens" not in body:
        return _invalid("max_tokens: Field required")
    limit = body["max_tokens"]
    if not isinstance(limit, int) or isinstance(limit, bool):
        return _invalid("max_tokens: Input should be a valid integer")
    if limit < 1:
        return _invalid("max_tokens: Input should be greater than or equal to 1")
    return None


def _check_text(messages: list[Any]) -> WireError | None:
    """No messages, a message with no content, an empty or whitespace-only text block
    (in a message or a ``tool_result``'s content): the API's 400s."""
    if not messages:
        return _invalid("messages: at least one message is required")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        final = i == len(messages) - 1 and message.get("role") == "assistant"
        if content in ("", []) and not final:
            return _invalid(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        blocks = _blocks(message)
        for block in list(blocks):
            inner = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(inner, list):
                blocks += [b for b in inner if isinstance(b, Mapping)]
        texts: list[Any] = [content] if isinstance(content, str) else []
        texts += [b.get("text") for b in blocks if b.get("type") == "text"]
        for text in texts:
            if text == "" and not final:
                return _invalid("messages: text content blocks must be non-empty")
            if isinstance(text, str) and text and text.isspace():
                return _invalid("messages: text content blocks must contain non-whitespace text")
    return None


MAX_CACHE_BREAKPOINTS = 4
"""The Messages API takes at most 4 ``cache_control`` breakpoints per request."""

_NO_CACHE_CONTROL = ("thinking", "redacted_thinking")
"""Blocks that cannot carry ``cache_control`` (their params have no such field)."""


def check_cache(body: Mapping[str, Any]) -> WireError | None:
    """Prompt-caching 400s: more than 4 breakpoints, or one where the API takes none.

    Breakpoints are counted on tools, system blocks and message content
    blocks; a thinking block, an empty text block, or a message's string
    content cannot carry one.
    """
    found = 0
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        found += isinstance(tool, Mapping) and "cache_control" in tool
    system = body.get("system")
    for j, block in enumerate(system if isinstance(system, list) else []):
        if isinstance(block, Mapping) and "cache_control" in block:
            found += 1
            if block.get("type") == "text" and not block.get("text"):
                return _invalid(
                    f"system.{j}.cache_control: cache_control cannot be set for empty text blocks"
                )
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        if isinstance(message, Mapping) and "cache_control" in message:
            return _invalid(f"messages.{i}.cache_control: Extra inputs are not permitted")
        for j, block in enumerate(_blocks(message)):
            if "cache_control" not in block:
                continue
            found += 1
            kind = block.get("type")
            if kind in _NO_CACHE_CONTROL:
                return _invalid(
                    f"messages.{i}.content.{j}.{kind}.cache_control: Extra inputs are not permitted"
                )
            if kind == "text" and not block.get("text"):
                return _invalid(
                    f"messages.{i}.content.{j}.text: cache_control cannot be set for empty "
                    "text blocks"
                )
            control = block.get("cache_control")
            if not isinstance(control, Mapping) or control.get("type") != "ephemeral":
                return _invalid(
                    f"messages.{i}.content.{j}.cache_control.type: Input should be 'ephemeral'"
                )
    if found > MAX_CACHE_BREAKPOINTS:
        return _invalid(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )
    return None


def cache_prefixes(body: Mapping[str, Any]) -> list[tuple[str, int]]:
    """For each ``cache_control`` breakpoint, in order: (key of the prefix up to it, its tokens).

    The prefix runs tools, then system, then messages (the API's cache order);
    a block's ``cache_control`` is left out of the key, and tokens are one per
    four characters of the prefix's compact JSON, as :func:`resolve_usage` counts.
    """
    parts: list[Any] = []
    marks: list[int] = []

    def add(part: Any) -> None:
        parts.append({k: v for k, v in part.items() if k != "cache_control"})
        if "cache_control" in part:
            marks.append(len(parts))

    tools, system, messages = body.get("tools"), body.get("system"), body.get("messages")
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, Mapping):
            add(tool)
    if isinstance(system, str):
        parts.append({"type": "text", "text": system})
    for block in system if isinstance(system, list) else []:
        if isinstance(block, Mapping):
            add(block)
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, Mapping):
            parts.append({"role": message.get("role")})
            for block in _blocks(message):
                add(block)
    out = []
    for mark in marks:
        text = json.dumps(parts[:mark], separators=(",", ":"), ensure_ascii=False, default=str)
        out.append((hashlib.sha256(text.encode()).hexdigest(), len(text) // 4))
    return out


def _thinking_on(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") == "enabled"


def _check_thinking(body: Mapping[str, Any], messages: list[Any]) -> WireError | None:
    """Extended thinking's rules: the settings, intact blocks, thinking before a tool round.

    Every ``thinking`` block's signature and ``redacted_thinking`` block's data
    must be as the server sent them. With thinking on, the budget is at least
    1024 and below ``max_tokens``, no tool use is forced, ``temperature`` and
    ``top_k`` are unset, and when the request answers tool calls (its last
    message holds ``tool_result`` blocks) the assistant message asking for them
    starts with its thinking block.
    """
    for i, message in enumerate(messages):
        for j, block in enumerate(_blocks(message)):
            kind = block.get("type")
            if kind == "thinking" and unseal(block.get("signature")) != block.get("thinking"):
                return _invalid(
                    f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                )
            if kind == "redacted_thinking" and unseal(block.get("data")) is None:
                return _invalid(
                    f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block"
                )
    if not _thinking_on(body):
        return None
    budget = body["thinking"].get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return _invalid(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        )
    limit = body.get("max_tokens")
    if isinstance(limit, int) and budget >= limit:
        return _invalid("`max_tokens` must be greater than `thinking.budget_tokens`.")
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
        return _invalid("Thinking may not be enabled when tool_choice forces tool use.")
    for key in ("temperature", "top_k"):
        if key in body and not (key == "temperature" and body[key] == 1):
            return _invalid(f"`{key}` may only be set to 1 when thinking is enabled.")
    last = messages[-1] if messages else None
    if not any(b.get("type") == "tool_result" for b in _blocks(last)):
        return None
    i = len(messages) - 2
    blocks = _blocks(messages[i]) if i >= 0 else []
    first = blocks[0].get("type") if blocks else None
    if first not in ("thinking", "redacted_thinking"):
        return _invalid(
            f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{first}`. When `thinking` is enabled, a final `assistant` message must "
            "start with a thinking block (preceeding the lastmost set of `tool_use` and "
            "`tool_result` blocks)."
        )
    return None


def _check_ids(messages: list[Any]) -> WireError | None:
    """Ids match the API's pattern, and no two ``tool_use`` blocks of a request share one."""
    uses: set[str] = set()
    for i, message in enumerate(messages):
        for j, block in enumerate(_blocks(message)):
            kind = block.get("type")
            field = {"tool_use": "id", "tool_result": "tool_use_id"}.get(str(kind))
            if field is None:
                continue
            value = block.get(field)
            if not isinstance(value, str) or not _ID.match(value):
                return _invalid(
                    f"messages.{i}.content.{j}.{kind}.{field}: String should match pattern "
                    "'^[a-zA-Z0-9_-]+$'"
                )
            if kind == "tool_use":
                if value in uses:
                    return _invalid(f"messages.{i}.content.{j}: `tool_use` ids must be unique")
                uses.add(value)
    return None


def _hosted_blocks(item: FakeHostedItem, n: str) -> list[Payload]:
    if item.kind == "raw":
        assert item.raw is not None
        return [dict(item.raw)]
    if item.kind == "reasoning":
        thought = item.output or ""
        return [{"type": "thinking", "thinking": thought, "signature": seal(thought)}]
    if item.kind != "call":
        raise ValueError(
            f"Anthropic's MCP connector has no {item.kind!r} item (only calls: "
            "mcp_tool_use and mcp_tool_result)"
        )
    use_id = item.id or f"mcptoolu_{n}"
    text = item.error if item.error is not None else (item.output or "")
    return [
        {
            "type": "mcp_tool_use",
            "id": use_id,
            "name": item.name,
            "server_name": item.server,
            "input": dict(item.arguments),
        },
        {
            "type": "mcp_tool_result",
            "tool_use_id": use_id,
            "is_error": item.error is not None,
            "content": [{"type": "text", "text": text, "citations": None}],
        },
    ]


def _usage(usage: Usage) -> Payload:
    return {
        "input_tokens": max(0, usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens),
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": usage.output_tokens,
        "service_tier": "standard",
    }


def render_messages(
    turn: Turn, request: Mapping[str, Any], *, stream: bool, seq: int, first_call: int
) -> list[Payload]:
    """Render a turn as a ``message`` body or its list of stream events.

    Hosted items come first: a ``call`` is the MCP connector's ``mcp_tool_use``
    and ``mcp_tool_result`` blocks (a beta: validate with ``BetaMessage``).
    """
    if not turn.usage_reported:
        raise ValueError(
            "Anthropic's API always reports usage: Turn.usage_reported=False is "
            "an OpenAI-compatible server's habit"
        )
    if turn.commentary is not None:
        raise ValueError("Anthropic has no message phase: Turn.commentary needs Responses")
    content: list[Payload] = []
    if turn.reasoning is not None:
        if turn.reasoning_redacted:
            content.append(
                {"type": "redacted_thinking", "data": seal(f"redacted:{turn.reasoning}")}
            )
        else:
            thought = turn.reasoning
            content.append({"type": "thinking", "thinking": thought, "signature": seal(thought)})
    for i, item in enumerate(turn.hosted):
        content.extend(_hosted_blocks(item, f"{seq}_{i}"))
    first_own = len(content)
    if turn.text:
        said: Payload = {"type": "text", "text": turn.text}
        if turn.citations is not None:
            said["citations"] = [dict(c) for c in turn.citations]
        content.append(said)
    for i, call in enumerate(turn.tool_calls):
        content.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{first_call + i}",
                "name": call.name,
                "input": call.input_object,
            }
        )
    resolved = resolve_usage(turn, request)
    usage = _usage(resolved)
    if resolved.reasoning_tokens:
        usage["output_tokens_details"] = {"thinking_tokens": resolved.reasoning_tokens}
    stop: Payload = {"stop_reason": _STOP_REASON[turn.resolved_stop], "stop_sequence": None}
    refusal = turn.refusal_text
    if refusal is not None:
        stop["stop_details"] = {"type": "refusal", "category": None, "explanation": refusal}
    message: Payload = {
        "id": f"msg_fake{seq}",
        "type": "message",
        "role": "assistant",
        "model": request_model(request),
        "content": content,
        **stop,
        "usage": usage,
    }
    if not stream:
        return [message]

    start_usage = {**usage, "output_tokens": 1}
    start_usage.pop("output_tokens_details", None)
    events: list[Payload] = [
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        }
    ]
    events[0]["message"].pop("stop_details", None)
    for index, block in enumerate(content):
        at: Payload = {"index": index}
        if block["type"] == "text":
            events.append(
                {"type": "content_block_start", **at, "content_block": {"type": "text", "text": ""}}
            )
            pieces = fragments(block["text"], TEXT_FRAGMENTS)
            deltas = [
                {"type": "citations_delta", "citation": c} for c in block.get("citations", ())
            ]
            deltas += [{"type": "text_delta", "text": p} for p in pieces]
        elif block["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            events.append({"type": "content_block_start", **at, "content_block": start})
            pieces = fragments(block["thinking"], TEXT_FRAGMENTS)
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "mcp_tool_use":
            events.append(
                {"type": "content_block_start", **at, "content_block": {**block, "input": {}}}
            )
            text = json.dumps(block["input"], separators=(",", ":"), ensure_ascii=False)
            pieces = fragments(text, ARGUMENT_FRAGMENTS)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        elif block["type"] != "tool_use":  # a result, or a raw block: whole at the start
            events.append({"type": "content_block_start", **at, "content_block": block})
            deltas = []
        else:
            events.append(
                {"type": "content_block_start", **at, "content_block": {**block, "input": {}}}
            )
            call = turn.tool_calls[index - first_own - (1 if turn.text else 0)]
            pieces = fragments(call.argument_text, ARGUMENT_FRAGMENTS)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *pieces]]
        if index == 0:
            events.append({"type": "ping"})
        events += [{"type": "content_block_delta", **at, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", **at})
    if not content:
        events.append({"type": "ping"})
    delta_usage = {k: v for k, v in usage.items() if k not in ("cache_creation", "service_tier")}
    events.append({"type": "message_delta", "delta": stop, "usage": delta_usage})
    events.append({"type": "message_stop"})
    return events


def with_quirks(quirks: list[str], payloads: list[Payload], *, stream: bool) -> list[Payload]:
    """``payloads`` as a server with these quirks sends them (see ``FakeLLMServer``)."""
    if "no_message_delta" in quirks and stream:
        payloads = [p for p in payloads if p.get("type") != "message_delta"]
    return payloads
