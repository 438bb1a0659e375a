"""Provider-neutral script values for the fake LLM server.

A :class:`Turn` says what the fake model answers to one request; the wire
modules (``_wire_openai``, ``_wire_anthropic``) translate it into each API's
JSON or SSE payloads. Nothing here knows about HTTP or about any SDK.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

Api = Literal["chat", "responses", "anthropic"]
"""Which wire format a request used: OpenAI Chat Completions, OpenAI Responses
or Anthropic Messages."""

Stop = Literal[
    "end", "tool_use", "max_tokens", "refusal", "pause_turn", "context_window", "content_filter"
]
"""Stop reasons the fake model can give; each API maps them to its own vocabulary.

nbagent's :data:`~nbagent._types.StopReason` values except ``"other"`` (the
adapters' name for a stop they do not know, which no script needs to send),
plus ``"content_filter"`` (OpenAI's filter stop; the adapters read it as a
refusal). A test keeps the two in step."""

STOPS: frozenset[str] = frozenset(get_args(Stop))
USAGE_KEYS: frozenset[str] = frozenset(
    {"input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens"}
)
DEFAULT_REFUSAL = "I'm sorry, but I can't help with that."
REDACTED = "REDACTED"
SECRET_HEADERS: frozenset[str] = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"}
)
CREATED_EPOCH = 1_750_000_000
"""Fixed base for `created` timestamps, so payloads are deterministic."""


@dataclass
class FakeToolCall:
    """One tool call the fake model makes.

    Args:
        name: Tool name.
        arguments: Arguments as a JSON object; serialised compactly on the wire.
        id: Call id to use instead of the generated one (``call_N`` for
            OpenAI, ``toolu_N`` for Anthropic).
        raw_arguments: Exact argument text to send instead of ``arguments``,
            e.g. ``""``, invalid JSON, or a prefix cut short by ``stop="max_tokens"``.
            Anthropic's non-streaming ``input`` must be an object, so there it
            becomes the parsed object when the text is a JSON object, else ``{}``;
            an object too deeply nested for Python's ``json`` is sent as written.
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    raw_arguments: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("FakeToolCall.name must be a non-empty string")
        if not isinstance(self.arguments, Mapping):
            raise TypeError("FakeToolCall.arguments must be a dict (a JSON object)")
        self.arguments = dict(self.arguments)

    @property
    def argument_text(self) -> str:
        """The argument string as it goes on the wire."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)

    @property
    def input_object(self) -> dict[str, Any] | RawJSON:
        """The arguments as an object (Anthropic's ``input``)."""
        if self.raw_arguments is None:
            return dict(self.arguments)
        try:
            parsed = json.loads(self.raw_arguments)
        except RecursionError:  # an object nested too deeply to parse: sent as written
            return RawJSON(self.raw_arguments) if self.raw_arguments.startswith("{") else {}
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}


HostedKind = Literal["list_tools", "approval_request", "call", "raw", "reasoning"]


@dataclass
class FakeHostedItem:
    """Something the fake provider does on its side (a hosted MCP server), before its answer.

    Responses: ``list_tools`` is an ``mcp_list_tools`` item, ``approval_request``
    an ``mcp_approval_request`` (the chat must answer it with an
    ``mcp_approval_response``), ``call`` an ``mcp_call`` (with ``output``, or
    ``error``). Anthropic (the MCP connector): ``call`` is an ``mcp_tool_use``
    block and its ``mcp_tool_result``; it has no listing or approval items.
    ``raw`` is sent as it is (``raw``): an item or block of a type no adapter
    knows. ``reasoning`` is the model thinking between them (its text in
    ``output``): a Responses ``reasoning`` item (``encrypted_content`` when the
    request includes ``reasoning.encrypted_content``), an Anthropic signed
    ``thinking`` block. Build them with :func:`mcp_list_tools`,
    :func:`mcp_approval_request`, :func:`mcp_call`, :func:`raw_item` and
    :func:`reasoning_item`.

    Args:
        kind: ``"list_tools"``, ``"approval_request"``, ``"call"``, ``"raw"`` or
            ``"reasoning"``.
        server: The MCP server's label.
        name: The tool (approval requests and calls).
        arguments: The tool's arguments.
        id: The item id (default ``mcpl_N``, ``mcpr_N``, ``mcp_N``, ``mcptoolu_N``).
        output: A call's output text (a reasoning item's thought).
        error: A call's error message (the call failed).
        approval_request_id: The approval request a call runs after.
        tools: A listing's tools (``{"name", "input_schema", "description"}``).
        raw: The item sent as it is (``kind="raw"``).
    """

    kind: HostedKind
    server: str = "mcp"
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    output: str | None = None
    error: str | None = None
    approval_request_id: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in get_args(HostedKind):
            raise ValueError(f"FakeHostedItem.kind must be one of {get_args(HostedKind)}")
        if self.kind == "raw" and not isinstance(self.raw, dict):
            raise ValueError("FakeHostedItem(kind='raw') needs raw= (a dict with a 'type')")
        if self.kind in ("approval_request", "call") and not self.name:
            raise ValueError(f"FakeHostedItem(kind={self.kind!r}) needs name=")

    @property
    def argument_text(self) -> str:
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)


def mcp_list_tools(server: str, *tools: str, id: str | None = None) -> FakeHostedItem:
    """The provider listed a hosted MCP server's tools (named; empty schemas)."""
    listed = [
        {"name": t, "input_schema": {"type": "object", "properties": {}}, "description": t}
        for t in tools
    ]
    return FakeHostedItem("list_tools", server, tools=listed, id=id)


def mcp_approval_request(
    server: str, name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None
) -> FakeHostedItem:
    """The provider asks for approval before it calls ``name`` on ``server``."""
    return FakeHostedItem("approval_request", server, name, dict(arguments or {}), id=id)


def mcp_call(
    server: str,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    output: str | None = None,
    error: str | None = None,
    approval_request_id: str | None = None,
    id: str | None = None,
) -> FakeHostedItem:
    """The provider called ``name`` on ``server`` (after an approval, when given)."""
    return FakeHostedItem(
        "call",
        server,
        name,
        dict(arguments or {}),
        id=id,
        output=output,
        error=error,
        approval_request_id=approval_request_id,
    )


def raw_item(raw: dict[str, Any]) -> FakeHostedItem:
    """An output item (or content block) sent as it is: e.g. a type no adapter knows."""
    return FakeHostedItem("raw", raw=dict(raw))


def reasoning_item(text: str, *, id: str | None = None) -> FakeHostedItem:
    """The model thinks ``text`` here, between the other hosted items (``rs_N`` by default).

    Real reasoning models do this around hosted MCP items: a reasoning item
    before the listing, another before the call, another before the answer.
    """
    return FakeHostedItem("reasoning", output=text, id=id)


@dataclass(frozen=True)
class RawJSON:
    """JSON text put into a payload as it is (a value Python's ``json`` cannot build or hold)."""

    text: str


@dataclass
class Turn:
    """What the fake model answers to one request.

    Args:
        text: Assistant text.
        tool_calls: Tool calls, in order (several make a parallel round).
        stop: Neutral stop reason: ``"end"``, ``"tool_use"``, ``"max_tokens"``,
            ``"refusal"``, ``"pause_turn"``, ``"context_window"`` or
            ``"content_filter"``. Default: ``"refusal"`` if ``refusal`` is set,
            ``"tool_use"`` if there are tool calls, else ``"end"``.
        usage: Neutral token counts: ``input_tokens`` (all input, cached
            included), ``output_tokens``, ``cached_tokens`` (cache reads),
            ``cache_write_tokens``, ``reasoning_tokens``. Missing keys get
            deterministic defaults derived from the request and reply sizes.
        refusal: Refusal text (Chat: ``message.refusal``; Responses: a
            ``refusal`` content part; Anthropic: ``stop_reason="refusal"`` with
            the text in ``stop_details.explanation``).
        status: HTTP status; 400 and above answers an error in the API's own
            error shape instead of a completion.
        error: Overrides for the error object (``message``, ``type``,
            ``code``, ``param``); only with ``status >= 400``.
        retry_after: Seconds sent as the error's ``retry-after`` header (a
            rate limit that says how long to wait); only with ``status >= 400``.
            Without it a 429/5xx says ``retry-after-ms: 10``.
        inline_error: An error reported with a 200 status instead of a
            completion (``message``, ``type``, ``code``): a JSON reply is the
            API's error body, a stream sends its first events and then the
            API's error event (Anthropic's ``error``, Responses' ``error``, a
            Chat chunk carrying ``error`` as OpenAI-compatible servers do).
        raw_body: Text sent as it is instead of a rendered reply: the whole
            JSON body, or the ``data`` of a stream's only event (a gateway's
            HTML page, a broken event).
        repeat_ids_in_stream: Repeat the tool call id and name in every
            streamed fragment, like some OpenAI-compatible servers do.
        fail_mid_stream: Drop the connection part-way through the body.
        end_stream_after: End a stream cleanly after this many of its events (a server
            that stops early: no error, no connection dropped, the rest never sent).
        delay: Seconds to wait before answering.
        chunk_delay: Seconds to wait between streamed events.
        hosted: What the provider did on its side before answering
            (:class:`FakeHostedItem`), in order, before the text and calls.
        reasoning: What the model thought, first in its answer: an Anthropic
            ``thinking`` block (with a signature the strict server checks), a
            Responses ``reasoning`` item (its summary; ``encrypted_content``
            when the request includes ``reasoning.encrypted_content``), a Chat
            ``reasoning_content`` (DeepSeek, vLLM). Streamed as thinking deltas.
        reasoning_redacted: Send the thinking unreadable: an Anthropic
            ``redacted_thinking`` block, a Responses item with an empty summary.
        commentary: What the model says on the way, before its calls (Responses
            only, as newer models do): an assistant ``message`` with
            ``"phase": "commentary"`` after the hosted items; the answer's message,
            if any, then has ``"phase": "final_answer"``.
        citations: The sources the text cites (Anthropic only): the text block's
            ``citations`` as the API sends them (``web_search_result_location``,
            ``char_location``...), streamed as ``citations_delta`` events.
        usage_reported: ``False`` sends no token usage, as some OpenAI-compatible
            servers do: Chat Completions leaves ``usage`` out (a stream sends no
            usage chunk), Responses sends ``"usage": null``. Anthropic's API always
            reports it (a turn without it is refused there).
    """

    text: str = ""
    tool_calls: list[FakeToolCall] = field(default_factory=list)
    stop: Stop | None = None
    usage: dict[str, int] | None = None
    refusal: str | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    retry_after: float | None = None
    inline_error: dict[str, Any] | None = None
    raw_body: str | None = None
    repeat_ids_in_stream: bool = False
    fail_mid_stream: bool = False
    end_stream_after: int | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    hosted: list[FakeHostedItem] = field(default_factory=list)
    reasoning: str | None = None
    reasoning_redacted: bool = False
    commentary: str | None = None
    citations: list[dict[str, Any]] | None = None
    usage_reported: bool = True

    def __post_init__(self) -> None:
        self.hosted = list(self.hosted)
        for item in self.hosted:
            if not isinstance(item, FakeHostedItem):
                raise TypeError(f"Turn.hosted items must be FakeHostedItem, got {item!r}")
        self.tool_calls = list(self.tool_calls)
        for call in self.tool_calls:
            if not isinstance(call, FakeToolCall):
                raise TypeError(f"Turn.tool_calls items must be FakeToolCall, got {call!r}")
        if self.stop is not None and self.stop not in STOPS:
            raise ValueError(f"Turn.stop must be one of {sorted(STOPS)}, got {self.stop!r}")
        if self.usage is not None:
            unknown = set(self.usage) - USAGE_KEYS
            if unknown:
                raise ValueError(
                    f"unknown Turn.usage keys {sorted(unknown)}; use {sorted(USAGE_KEYS)}"
                )
        if not 100 <= self.status <= 599:
            raise ValueError(f"Turn.status must be an HTTP status, got {self.status}")
        if self.error is not None and self.status < 400:
            raise ValueError("Turn.error needs an error status, e.g. Turn(status=429, error=...)")
        if self.retry_after is not None and (self.status < 400 or self.retry_after < 0):
            raise ValueError("Turn.retry_after needs an error status and seconds >= 0")
        if (self.inline_error is not None or self.raw_body is not None) and self.status != 200:
            raise ValueError("Turn.inline_error and Turn.raw_body are answered with status 200")
        if self.citations is not None and not self.text:
            raise ValueError("Turn.citations needs text= (the text block that cites them)")
        if self.delay < 0 or self.chunk_delay < 0:
            raise ValueError("Turn.delay and Turn.chunk_delay must be >= 0")

    @property
    def resolved_stop(self) -> Stop:
        """The stop reason, inferred when not given."""
        if self.stop is not None:
            return self.stop
        if self.refusal is not None:
            return "refusal"
        asks = any(h.kind == "approval_request" for h in self.hosted)
        return "tool_use" if self.tool_calls or asks else "end"

    @property
    def refusal_text(self) -> str | None:
        """The refusal text, defaulted when ``stop="refusal"`` has none."""
        if self.refusal is not None:
            return self.refusal
        return DEFAULT_REFUSAL if self.stop == "refusal" else None

    @property
    def is_error(self) -> bool:
        """Whether this turn answers an HTTP error."""
        return self.status >= 400


def as_turn(value: Turn | str) -> Turn:
    """Accept a plain string as shorthand for ``Turn(text=...)``."""
    if isinstance(value, Turn):
        return value
    if isinstance(value, str):
        return Turn(text=value)
    raise TypeError(f"a script step must be a Turn or a str, got {type(value).__name__}")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake server received.

    Attributes:
        path: Request path without the query string, e.g. ``/v1/messages``.
        headers: Lower-cased header names; credentials are ``"REDACTED"``.
        body: The parsed JSON body.
        api: ``"chat"``, ``"responses"`` or ``"anthropic"``.
    """

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    api: Api

    @property
    def stream(self) -> bool:
        """Whether the request asked for SSE streaming."""
        return bool(self.body.get("stream"))

    @property
    def model(self) -> str | None:
        """The requested model."""
        model = self.body.get("model")
        return model if isinstance(model, str) else None


@dataclass(frozen=True)
class WireError:
    """An HTTP error to answer; each API renders it in its own JSON shape."""

    status: int
    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None
    retry: bool | None = None
    """Sent as ``x-should-retry`` when not None (both SDKs honour it)."""
    retry_after: float | None = None
    """Sent as ``retry-after`` (seconds) when not None."""

    @classmethod
    def from_turn(cls, turn: Turn, default_message: str) -> WireError:
        """Build the error a scripted error turn asks for."""
        err = turn.error or {}
        return cls(
            status=turn.status,
            message=str(err.get("message", default_message)),
            type=err.get("type"),
            code=err.get("code"),
            param=err.get("param"),
            retry_after=turn.retry_after,
        )


@dataclass(frozen=True)
class Usage:
    """Resolved neutral token counts."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int


def resolve_usage(turn: Turn, request: Mapping[str, Any]) -> Usage:
    """Fill in the token counts a turn leaves out, deterministically.

    Input defaults to about one token per four characters of the compact JSON
    request; output to one per four characters of text, refusal and arguments.
    """
    given = turn.usage or {}
    if "input_tokens" in given:
        input_tokens = given["input_tokens"]
    else:
        size = len(json.dumps(request, separators=(",", ":"), ensure_ascii=False, default=str))
        input_tokens = size // 4 + 1
    if "output_tokens" in given:
        output_tokens = given["output_tokens"]
    else:
        chars = len(turn.text) + len(turn.refusal_text or "")
        chars += sum(len(c.name) + len(c.argument_text) for c in turn.tool_calls)
        output_tokens = chars // 4 + 1
    thought = len(turn.reasoning or "") // 4 + (1 if turn.reasoning is not None else 0)
    if "output_tokens" not in given:
        output_tokens += given.get("reasoning_tokens", thought)
    cached, written = given.get("cached_tokens", 0), given.get("cache_write_tokens", 0)
    if "input_tokens" not in given:
        input_tokens = max(input_tokens, cached + written)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=given.get("cached_tokens", 0),
        cache_write_tokens=given.get("cache_write_tokens", 0),
        reasoning_tokens=given.get("reasoning_tokens", thought),
    )


_SEAL_KEY = b"nbagent-fake-llm-server"


def seal(text: str) -> str:
    """Opaque, tamper-evident text for a thinking signature or encrypted reasoning.

    ``base64(text).base64(mac)``: :func:`unseal` gives the text back, or None
    when a byte was changed (the strict server then answers 400, as the APIs do).
    """
    body = base64.b64encode(text.encode()).decode()
    mac = hashlib.sha256(_SEAL_KEY + body.encode()).digest()[:12]
    return f"{body}.{base64.b64encode(mac).decode()}"


def unseal(value: Any) -> str | None:
    """The text :func:`seal` sealed, or None when ``value`` is not an intact seal."""
    if not isinstance(value, str) or value.count(".") != 1:
        return None
    body, mac = value.split(".")
    expected = base64.b64encode(hashlib.sha256(_SEAL_KEY + body.encode()).digest()[:12])
    if mac.encode() != expected:
        return None
    try:
        return base64.b64decode(body, validate=True).decode()
    except ValueError:
        return None


def fragments(text: str, parts: int) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty pieces, in order."""
    if not text:
        return []
    count = min(parts, len(text))
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


TEXT_FRAGMENTS = 3
ARGUMENT_FRAGMENTS = 4


def request_model(request: Mapping[str, Any]) -> str:
    """The model to echo back."""
    model = request.get("model")
    return model if isinstance(model, str) and model else "fake-model"
