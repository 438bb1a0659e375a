"""OpenAI wire formats for the fake server: Chat Completions and Responses.

Renders a neutral :class:`~nbagent.testing.Turn` into the payloads the real
API sends (a JSON body, or the list of SSE chunks/events), and checks request
transcripts the way the real API does in strict mode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._script import (
    ARGUMENT_FRAGMENTS,
    CREATED_EPOCH,
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

_CHAT_FINISH = {
    "end": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "stop",
    "pause_turn": "stop",
    "context_window": "length",
    "content_filter": "content_filter",
}
_INCOMPLETE_REASON = {
    "max_tokens": "max_output_tokens",
    "context_window": "max_output_tokens",
    "content_filter": "content_filter",
}

# -- errors ------------------------------------------------------------------

_ERROR_DEFAULTS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
DEFAULT_MESSAGES: dict[int, str] = {
    400: "Bad request (scripted by FakeLLMServer).",
    401: "Incorrect API key provided. You can find your API key at "
    "https://platform.openai.com/account/api-keys.",
    403: "Country, region, or territory not supported.",
    404: "The model does not exist or you do not have access to it.",
    429: "Rate limit reached for requests (scripted by FakeLLMServer).",
    500: "The server had an error while processing your request. Sorry about that!",
    503: "The engine is currently overloaded, please try again later.",
}


def error_body(err: WireError) -> Payload:
    """``{"error": {"message", "type", "param", "code"}}``, OpenAI's error shape."""
    default_type, default_code = _ERROR_DEFAULTS.get(
        err.status, ("server_error" if err.status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": err.message,
            "type": err.type or default_type,
            "param": err.param,
            "code": err.code if err.code is not None else default_code,
        }
    }


def _invalid(message: str, param: str | None) -> WireError:
    return WireError(status=400, message=message, type="invalid_request_error", param=param)


def inline_error(api: str, err: WireError, *, stream: bool, final: Payload, seq: int) -> Payload:
    """An error inside a 200 answer.

    Chat: the error body (OpenAI-compatible servers send it as a JSON reply or
    as a stream chunk). Responses: a ``failed`` response, or an ``error`` event.
    """
    code = err.code or err.type or "server_error"
    if api == "chat":
        return error_body(WireError(500, err.message, err.type, err.code))
    if stream:
        return {
            "type": "error",
            "code": code,
            "message": err.message,
            "param": None,
            "sequence_number": seq,
        }
    failed = {**final, "status": "failed", "output": [], "usage": None}
    failed.pop("completed_at", None)
    failed["error"] = {"code": err.code or "server_error", "message": err.message}
    return failed


# -- strict checks -----------------------------------------------------------


def _check_limit(body: Mapping[str, Any], name: str, least: int) -> WireError | None:
    """An output token limit: an integer of at least ``least`` (or left out, or null)."""
    limit = body.get(name)
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool):
        kind = {str: "a string", float: "a decimal"}.get(type(limit), type(limit).__name__)
        message = f"Invalid type for '{name}': expected an integer, but got {kind} instead."
        return WireError(400, message, "invalid_request_error", "invalid_type", name)
    if limit < least:
        message = (
            f"Invalid '{name}': integer below minimum value. Expected a value >= {least}, "
            f"but got {limit} instead."
        )
        return WireError(400, message, "invalid_request_error", "integer_below_min_value", name)
    return None


_NO_PARALLEL_SWITCH = re.compile(r"(?:[\w-]+/)?o\d", re.IGNORECASE)
"""The o-series (o1, o3, o3-mini, o4-mini): Chat Completions refuses ``parallel_tool_calls``
for them, whatever its value (their Responses requests take it)."""


def check_chat(body: Mapping[str, Any]) -> WireError | None:
    """The 400s Chat Completions answers for malformed tool transcripts."""
    for name in ("max_tokens", "max_completion_tokens"):
        if error := _check_limit(body, name, 1):
            return error
    model = body.get("model")
    if (
        "parallel_tool_calls" in body
        and isinstance(model, str)
        and _NO_PARALLEL_SWITCH.match(model)
    ):
        return WireError(
            400,
            "Unsupported parameter: 'parallel_tool_calls' is not supported with this model.",
            "invalid_request_error",
            "unsupported_parameter",
            "parallel_tool_calls",
        )
    if error := check_tools("chat", body):
        return error
    tools = body.get("tools")
    for option in ("tool_choice", "parallel_tool_calls"):
        if body.get(option) is not None and not tools:
            return _invalid(
                f"Invalid value for '{option}': '{option}' is only allowed when 'tools' "
                "are specified.",
                option,
            )
    messages = body.get("messages")
    if not isinstance(messages, list):
        return _invalid("Missing required parameter: 'messages'.", "messages")
    open_ids: list[str] = []
    answered: set[str] = set()
    opened_at = -1
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "tool":
            call_id = message.get("tool_call_id")
            if opened_at < 0:
                return _invalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{i}].role",
                )
            if call_id not in open_ids:
                return _invalid(
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                    "'tool_calls' of previous message.",
                    f"messages.[{i}].tool_call_id",
                )
            if call_id in answered:
                return _invalid(
                    f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}' "
                    f"in messages[{i}].",
                    f"messages.[{i}].tool_call_id",
                )
            answered.add(call_id)
            continue
        error = _unanswered_chat(open_ids, answered, opened_at)
        if error:
            return error
        calls = message.get("tool_calls") if role == "assistant" else None
        open_ids = [str(c.get("id")) for c in calls or [] if isinstance(c, Mapping)]
        repeated = _first_repeat(open_ids)
        if repeated is not None:
            return _invalid(
                f"Invalid parameter: Duplicate value for 'id' of '{repeated}' in 'tool_calls' "
                f"of messages[{i}].",
                f"messages.[{i}].tool_calls",
            )
        answered = set()
        opened_at = i if open_ids else -1
    return _unanswered_chat(open_ids, answered, opened_at)


def _unanswered_chat(open_ids: list[str], answered: set[str], opened_at: int) -> WireError | None:
    missing = [call_id for call_id in open_ids if call_id not in answered]
    if not missing:
        return None
    return _invalid(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(missing),
        f"messages.[{opened_at}].role",
    )


def _first_repeat(ids: list[str]) -> str | None:
    seen: set[str] = set()
    for call_id in ids:
        if call_id in seen:
            return call_id
        seen.add(call_id)
    return None


def check_responses(body: Mapping[str, Any]) -> WireError | None:
    """The 400s the Responses API answers for unpaired function calls and approvals."""
    if error := _check_limit(body, "max_output_tokens", 16):  # 16: the API's minimum
        return error
    if error := check_tools("responses", body):
        return error
    items = body.get("input")
    if not isinstance(items, list):
        return None
    calls: list[str] = []
    outputs: list[str] = []
    requests: list[str] = []
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "function_call":
            calls.append(str(item.get("call_id")))
        elif item.get("type") == "function_call_output":
            outputs.append(str(item.get("call_id")))
        elif item.get("type") == "mcp_approval_request":
            requests.append(str(item.get("id")))
        elif item.get("type") == "mcp_approval_response":
            error = _check_approval(item, i, requests, answered, body)
            if error is not None:
                return error
    for kind, ids in (("function_call", calls), ("function_call_output", outputs)):
        repeated = _first_repeat(ids)
        if repeated is not None:
            return _invalid(
                f"Duplicate value for 'call_id' of '{repeated}' in '{kind}' items.", "input"
            )
    if body.get("previous_response_id") is None:
        for call_id in outputs:
            if call_id not in calls:
                return _invalid(
                    f"No tool call found for function call output with call_id {call_id}.",
                    "input",
                )
    for call_id in calls:
        if call_id not in outputs:
            return _invalid(f"No tool output found for function call {call_id}.", "input")
    return None


def _check_approval(
    item: Mapping[str, Any],
    i: int,
    requests: list[str],
    answered: set[str],
    body: Mapping[str, Any],
) -> WireError | None:
    """An ``mcp_approval_response`` answers, once, an approval request sent before it.

    Stateless (no ``previous_response_id``) the request item itself must be in
    the input, before its response; answering one twice is refused.
    """
    request_id = item.get("approval_request_id")
    if not isinstance(item.get("approve"), bool):
        return _invalid(
            f"Invalid type for 'input[{i}].approve': expected a boolean.", f"input[{i}].approve"
        )
    if not isinstance(request_id, str) or not request_id:
        return _invalid(
            f"Missing required parameter: 'input[{i}].approval_request_id'.",
            f"input[{i}].approval_request_id",
        )
    if request_id in answered:
        return _invalid(
            f"Duplicate mcp_approval_response for approval request '{request_id}'.", "input"
        )
    if body.get("previous_response_id") is None and request_id not in requests:
        return _invalid(
            f"No approval request found with id '{request_id}' for the mcp_approval_response "
            f"in input[{i}]; without previous_response_id the mcp_approval_request item must "
            "be sent in the input before it.",
            "input",
        )
    answered.add(request_id)
    return None


def check_reasoning(body: Mapping[str, Any], issued: Mapping[str, str]) -> WireError | None:
    """Stateless (``store`` false) reasoning must come back whole, before what followed it.

    ``issued`` maps what the server sent after a reasoning item (see
    :func:`issued_reasoning`) to that item's id. A reasoning item in the input
    needs its intact ``encrypted_content`` (nothing is stored to find it by
    id); an item sent back under its output id (``mcp_list_tools``,
    ``mcp_call``, ``mcp_approval_request``, ``message``...) and a function call
    the server sent after encrypted reasoning need that reasoning item before
    them.
    """
    if body.get("store") is not False or body.get("previous_response_id") is not None:
        return None
    items = body.get("input")
    if not isinstance(items, list):
        return None
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            if unseal(item.get("encrypted_content")) is None:
                return _invalid(
                    f"Item with id '{item.get('id')}' not found. Items are not persisted when "
                    "`store` is set to false. Try again with `store` set to true, or remove "
                    "this item from your input (or send it with its encrypted_content).",
                    f"input[{i}]",
                )
            seen.add(str(item.get("id")))
            continue
        if kind == "function_call":
            key, name = f"call:{item.get('call_id')}", f"call_id '{item.get('call_id')}'"
        else:
            key, name = f"item:{item.get('id')}", f"id '{item.get('id')}'"
        needed = issued.get(key)
        if needed is not None and needed not in seen:
            return _invalid(
                f"Item '{kind or 'message'}' with {name} was provided without its required "
                f"'reasoning' item: '{needed}'.",
                f"input[{i}]",
            )
    return None


def issued_reasoning(payload: Mapping[str, Any]) -> dict[str, str]:
    """What a final response sent after a reasoning item, mapped to that item's id.

    ``item:<id>`` for every output item after reasoning (sent back under its
    id, the API finds the reasoning it followed and wants it too: a client
    that did not ask for ``encrypted_content`` cannot send it, and is refused);
    ``call:<call_id>`` for a function call after reasoning sent with
    ``encrypted_content`` (a function call goes back without its item id).
    """
    out: dict[str, str] = {}
    reasoning: str | None = None
    sealed = False
    for item in payload.get("output") or ():
        if item.get("type") == "reasoning":
            reasoning, sealed = str(item.get("id")), bool(item.get("encrypted_content"))
            continue
        if reasoning is None:
            continue
        if item.get("id") is not None:
            out[f"item:{item.get('id')}"] = reasoning
        if item.get("type") == "function_call" and sealed:
            out[f"call:{item.get('call_id')}"] = reasoning
    return out


# -- Chat Completions --------------------------------------------------------


def _chat_usage(usage: Usage) -> Payload:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def render_chat(
    turn: Turn, request: Mapping[str, Any], *, stream: bool, seq: int, first_call: int
) -> list[Payload]:
    """Render a turn as a ``chat.completion`` body or its ``chat.completion.chunk`` list."""
    if turn.hosted:
        raise ValueError("Chat Completions has no hosted tools: Turn.hosted needs Responses")
    if turn.commentary is not None:
        raise ValueError("Chat Completions has no message phase: Turn.commentary needs Responses")
    if turn.citations is not None:
        raise ValueError("Turn.citations are Anthropic's text block citations")
    ids = [c.id or f"call_{first_call + i}" for i, c in enumerate(turn.tool_calls)]
    refusal = turn.refusal_text
    finish = _CHAT_FINISH[turn.resolved_stop]
    usage = _chat_usage(resolve_usage(turn, request))
    head: Payload = {
        "id": f"chatcmpl-fake{seq}",
        "object": "chat.completion.chunk" if stream else "chat.completion",
        "created": CREATED_EPOCH + seq,
        "model": request_model(request),
        "service_tier": "default",
        "system_fingerprint": None,
    }
    if not stream:
        has_content = bool(turn.text) or not (turn.tool_calls or refusal)
        message: Payload = {
            "role": "assistant",
            "content": turn.text if has_content else None,
            "refusal": refusal,
            "annotations": [],
        }
        if turn.reasoning is not None:
            message["reasoning_content"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.argument_text},
                }
                for call_id, call in zip(ids, turn.tool_calls, strict=True)
            ]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        if not turn.usage_reported:  # a compatible server that counts nothing
            return [{**head, "choices": [choice]}]
        return [{**head, "choices": [choice], "usage": usage}]

    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
    include_usage = include_usage and turn.usage_reported
    extra: Payload = {"usage": None} if include_usage else {}

    def chunk(delta: Payload, finish_reason: str | None = None) -> Payload:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**head, "choices": [choice], **extra}

    content_start = "" if turn.text or not (turn.tool_calls or refusal) else None
    chunks = [chunk({"role": "assistant", "content": content_start, "refusal": None})]
    thought = fragments(turn.reasoning or "", TEXT_FRAGMENTS)
    chunks += [chunk({"reasoning_content": piece}) for piece in thought]
    chunks += [chunk({"content": piece}) for piece in fragments(turn.text, TEXT_FRAGMENTS)]
    chunks += [chunk({"refusal": piece}) for piece in fragments(refusal or "", TEXT_FRAGMENTS)]
    for index, (call_id, call) in enumerate(zip(ids, turn.tool_calls, strict=True)):
        ident = {"id": call_id, "type": "function"}
        first = {"index": index, **ident, "function": {"name": call.name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [first]}))
        for piece in fragments(call.argument_text, ARGUMENT_FRAGMENTS):
            fragment: Payload = {"index": index, "function": {"arguments": piece}}
            if turn.repeat_ids_in_stream:
                fragment = {**fragment, **ident}
                fragment["function"] = {"name": call.name, "arguments": piece}
            chunks.append(chunk({"tool_calls": [fragment]}))
    chunks.append(chunk({}, finish))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": usage})
    return chunks


# -- Responses ---------------------------------------------------------------


def _responses_usage(usage: Usage) -> Payload:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _echo_tools(request: Mapping[str, Any]) -> list[Any]:
    tools = []
    for tool in request.get("tools") or []:
        if isinstance(tool, Mapping) and tool.get("type") == "function":
            tools.append(
                {
                    "type": "function",
                    "name": tool.get("name"),
                    "description": tool.get("description"),
                    "parameters": tool.get("parameters"),
                    "strict": tool.get("strict", True),
                }
            )
        else:
            tools.append(tool)
    return tools


def _response_object(
    request: Mapping[str, Any], seq: int, status: str, output: list[Payload]
) -> Payload:
    instructions = request.get("instructions")
    return {
        "id": f"resp_fake{seq}",
        "object": "response",
        "created_at": CREATED_EPOCH + seq,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": instructions if isinstance(instructions, str) else None,
        "max_output_tokens": request.get("max_output_tokens"),
        "model": request_model(request),
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "temperature": request.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": _echo_tools(request),
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": {},
    }


def _hosted_item(item: FakeHostedItem, n: str, request: Mapping[str, Any]) -> Payload:
    """One hosted item as the Responses API sends it (``mcp_*``, reasoning, or a raw item)."""
    if item.kind == "reasoning":
        return _reasoning(item.output or "", f"rs_{n}" if item.id is None else item.id, request)
    if item.kind == "raw":
        assert item.raw is not None
        return dict(item.raw)
    head = {"server_label": item.server}
    if item.kind == "list_tools":
        tools = [{"annotations": None, "description": None, **t} for t in item.tools]
        return {
            "id": item.id or f"mcpl_{n}",
            "type": "mcp_list_tools",
            **head,
            "tools": tools,
            "error": None,
        }
    if item.kind == "approval_request":
        return {
            "id": item.id or f"mcpr_{n}",
            "type": "mcp_approval_request",
            **head,
            "name": item.name,
            "arguments": item.argument_text,
        }
    error = (
        None
        if item.error is None
        else {"type": "mcp_protocol_error", "code": -32000, "message": item.error}
    )
    return {
        "id": item.id or f"mcp_{n}",
        "type": "mcp_call",
        **head,
        "name": item.name,
        "arguments": item.argument_text,
        "approval_request_id": item.approval_request_id,
        "output": item.output if item.error is None else None,
        "error": error,
        "status": "failed" if item.error is not None else "completed",
    }


def _reasoning_item(turn: Turn, request: Mapping[str, Any], seq: int) -> Payload:
    """The turn's ``reasoning`` item (first in its output)."""
    return _reasoning(turn.reasoning or "", f"rs_fake{seq}", request, turn.reasoning_redacted)


def _reasoning(
    thought: str, ident: str, request: Mapping[str, Any], redacted: bool = False
) -> Payload:
    """A ``reasoning`` item: the summary, and ``encrypted_content`` when the request asks."""
    summary = [] if redacted else [{"type": "summary_text", "text": thought}]
    item: Payload = {"id": ident, "type": "reasoning", "summary": summary}
    if "reasoning.encrypted_content" in (request.get("include") or ()):
        item["encrypted_content"] = seal(thought)
    return item


def _message(ident: str, parts: list[Payload], phase: str | None) -> Payload:
    """An assistant ``message`` output item (with its ``phase`` when it has one)."""
    item: Payload = {
        "id": ident,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": parts,
    }
    if phase is not None:
        item["phase"] = phase
    return item


def render_responses(
    turn: Turn, request: Mapping[str, Any], *, stream: bool, seq: int, first_call: int
) -> list[Payload]:
    """Render a turn as a ``response`` body or its list of ``response.*`` events."""
    if turn.citations is not None:
        raise ValueError("Turn.citations are Anthropic's text block citations")
    stop = turn.resolved_stop
    reason = _INCOMPLETE_REASON.get(stop)
    refusal = turn.refusal_text
    parts: list[Payload] = []
    asks = any(h.kind == "approval_request" for h in turn.hosted)
    if turn.text or not (turn.tool_calls or refusal or asks):
        parts.append({"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []})
    if refusal:
        parts.append({"type": "refusal", "refusal": refusal})
    items: list[Payload] = []
    if turn.reasoning is not None:
        items.append(_reasoning_item(turn, request, seq))
    items += [_hosted_item(h, f"{seq}_{i}", request) for i, h in enumerate(turn.hosted)]
    phased = turn.commentary is not None
    if phased:
        said: list[Payload] = [
            {"type": "output_text", "text": turn.commentary, "annotations": [], "logprobs": []}
        ]
        items.append(_message(f"msg_fake{seq}_c", said, "commentary"))
        parts = parts if turn.text or refusal else []
    if parts:
        items.append(_message(f"msg_fake{seq}", parts, "final_answer" if phased else None))
    for i, call in enumerate(turn.tool_calls):
        items.append(
            {
                "id": f"fc_{first_call + i}",
                "type": "function_call",
                "status": "completed",
                "arguments": call.argument_text,
                "call_id": call.id or f"call_{first_call + i}",
                "name": call.name,
            }
        )
    if reason and items:
        items[-1]["status"] = "incomplete"
    final = _response_object(request, seq, "incomplete" if reason else "completed", items)
    final["usage"] = _responses_usage(resolve_usage(turn, request)) if turn.usage_reported else None
    if reason:
        final["incomplete_details"] = {"reason": reason}
    else:
        final["completed_at"] = CREATED_EPOCH + seq
    if not stream:
        return [final]
    return _responses_events(turn, request, seq, items, final)


def _responses_events(
    turn: Turn, request: Mapping[str, Any], seq: int, items: list[Payload], final: Payload
) -> list[Payload]:
    events: list[Payload] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response=_response_object(request, seq, "in_progress", []))
    emit("response.in_progress", response=_response_object(request, seq, "in_progress", []))
    for index, item in enumerate(items):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            for part_index, part in enumerate(item["content"]):
                at = {**where, "content_index": part_index}
                if part["type"] == "output_text":
                    emit("response.content_part.added", **at, part={**part, "text": ""})
                    for piece in fragments(part["text"], TEXT_FRAGMENTS):
                        emit("response.output_text.delta", **at, delta=piece, logprobs=[])
                    emit("response.output_text.done", **at, text=part["text"], logprobs=[])
                else:
                    emit("response.content_part.added", **at, part={**part, "refusal": ""})
                    for piece in fragments(part["refusal"], TEXT_FRAGMENTS):
                        emit("response.refusal.delta", **at, delta=piece)
                    emit("response.refusal.done", **at, refusal=part["refusal"])
                emit("response.content_part.done", **at, part=part)
        elif item["type"] == "function_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in fragments(item["arguments"], ARGUMENT_FRAGMENTS):
                emit("response.function_call_arguments.delta", **where, delta=piece)
            emit("response.function_call_arguments.done", **where, arguments=item["arguments"])
        elif item["type"] == "reasoning":
            emit("response.output_item.added", output_index=index, item={**item, "summary": []})
            for n, part in enumerate(item["summary"]):
                at = {**where, "summary_index": n}
                emit("response.reasoning_summary_part.added", **at, part={**part, "text": ""})
                for piece in fragments(part["text"], TEXT_FRAGMENTS):
                    emit("response.reasoning_summary_text.delta", **at, delta=piece)
                emit("response.reasoning_summary_text.done", **at, text=part["text"])
                emit("response.reasoning_summary_part.done", **at, part=part)
        elif item["type"] == "mcp_list_tools":
            emit("response.output_item.added", output_index=index, item={**item, "tools": []})
            emit("response.mcp_list_tools.in_progress", **where)
            emit("response.mcp_list_tools.completed", **where)
        elif item["type"] == "mcp_call":
            started = {**item, "status": "in_progress", "arguments": "", "output": None}
            emit("response.output_item.added", output_index=index, item={**started, "error": None})
            emit("response.mcp_call.in_progress", **where)
            for piece in fragments(item["arguments"], ARGUMENT_FRAGMENTS):
                emit("response.mcp_call_arguments.delta", **where, delta=piece)
            emit("response.mcp_call_arguments.done", **where, arguments=item["arguments"])
            failed = item["status"] == "failed"
            emit("response.mcp_call.failed" if failed else "response.mcp_call.completed", **where)
        else:  # an approval request, or a raw item: whole when added
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    final_kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    emit(final_kind, response=final)
    return events


# -- what some servers do that the API does not ------------------------------------


def thought_signature(call_id: str) -> str:
    """The signature the fake gives a call (``thought_signatures`` quirk): opaque, stable."""
    import hashlib

    return "sig_" + hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _signed(payloads: list[Payload]) -> list[Payload]:
    """Each Chat tool call with ``extra_content.google.thought_signature``, as Gemini 3's
    OpenAI-compatible endpoint sends it (a stream: on the fragment carrying the call's id)."""
    out = []
    for payload in payloads:
        choices = payload.get("choices") or []
        if not choices:
            out.append(payload)
            continue
        choice = dict(choices[0])
        key = "delta" if "delta" in choice else "message"
        inner = dict(choice.get(key) or {})
        calls = inner.get("tool_calls")
        if calls:
            inner["tool_calls"] = [
                {
                    **c,
                    "extra_content": {"google": {"thought_signature": thought_signature(c["id"])}},
                }
                if c.get("id")
                else c
                for c in calls
            ]
            choice[key] = inner
            payload = {**payload, "choices": [choice, *choices[1:]]}
        out.append(payload)
    return out


def signed_calls(payloads: list[Payload]) -> dict[str, str]:
    """The call ids the answer signed (``thought_signatures``), with their signatures."""
    out: dict[str, str] = {}
    for payload in payloads:
        for choice in payload.get("choices") or ():
            inner = choice.get("delta") or choice.get("message") or {}
            for call in inner.get("tool_calls") or ():
                google = (call.get("extra_content") or {}).get("google") or {}
                if call.get("id") and google.get("thought_signature"):
                    out[call["id"]] = google["thought_signature"]
    return out


def check_signatures(body: Mapping[str, Any], signed: Mapping[str, str]) -> WireError | None:
    """Every call the server signed comes back with its signature (Gemini 3 refuses one
    without, in the turn being answered; the fake asks it of every turn)."""
    for i, message in enumerate(body.get("messages") or ()):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping) or call.get("id") not in signed:
                continue
            extra = call.get("extra_content")
            google = extra.get("google") if isinstance(extra, Mapping) else None
            given = google.get("thought_signature") if isinstance(google, Mapping) else None
            if given != signed[call["id"]]:
                name = (call.get("function") or {}).get("name")
                return _invalid(
                    "Function call is missing a thought_signature in functionCall parts. This "
                    "is required for tools to work correctly, and missing thought_signature "
                    f"may lead to degraded model performance. Additional data, function call "
                    f"`default_api:{name}` , position {i + 1}.",
                    f"messages.[{i}].tool_calls",
                )
    return None


def with_quirks(quirks: list[str], payloads: list[Payload], *, stream: bool) -> list[Payload]:
    """``payloads`` as a server with these quirks sends them (see ``FakeLLMServer``)."""
    for quirk in quirks:
        if quirk == "empty_final_output":
            payloads = _empty_final_output(payloads, stream)
        elif quirk == "thought_signatures":
            payloads = _signed(payloads)
        elif stream:  # a Chat stream's calls, each whole in its own chunk
            payloads = _whole_calls(
                payloads, index=quirk == "calls_at_index_0", ids=quirk != "calls_without_ids"
            )
    return payloads


def _empty_final_output(payloads: list[Payload], stream: bool) -> list[Payload]:
    """The final response with ``output: []``: its items only in the stream's events."""
    if not stream:
        return [{**payloads[0], "output": []}]
    last = payloads[-1]
    return [*payloads[:-1], {**last, "response": {**last["response"], "output": []}}]


def _whole_calls(chunks: list[Payload], *, index: bool, ids: bool = True) -> list[Payload]:
    """A Chat stream whose tool calls come whole, one chunk each, where their first
    fragment was: with ``index`` 0 for every call (``index``) or with none; with their
    ids, or with none (not ``ids``)."""
    calls: dict[int, Payload] = {}
    out: list[Payload] = []
    at: int | None = None
    for chunk in chunks:
        choices = chunk.get("choices") or []
        fragments_ = (choices[0].get("delta") or {}).get("tool_calls") if choices else None
        if not fragments_:
            out.append(chunk)
            continue
        at = len(out) if at is None else at
        for fragment in fragments_:
            call = calls.setdefault(
                fragment["index"],
                {"id": fragment.get("id"), "type": "function", "name": None, "arguments": ""},
            )
            function = fragment.get("function") or {}
            call["name"] = call["name"] or function.get("name")
            call["arguments"] += function.get("arguments") or ""
    if at is None:
        return chunks
    head = chunks[0]
    whole = []
    for call in calls.values():
        tool_call: Payload = {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        if not ids:
            del tool_call["id"]
        if index:
            tool_call = {"index": 0, **tool_call}
        choice = {"index": 0, "delta": {"tool_calls": [tool_call]}, "finish_reason": None}
        whole.append({**head, "choices": [{**head["choices"][0], **choice}]})
    return [*out[:at], *whole, *out[at:]]
