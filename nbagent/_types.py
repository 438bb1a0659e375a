"""Provider-neutral values: messages, tool calls, results, usage, responses.

Messages are plain frozen values. The one exception is :class:`ToolCall`,
whose identity (``id``, ``name``, ``arguments``) is fixed but which carries the
call's *lifecycle* (status, approval requirement, decision, result) so a user
can look at ``chat.pending_approvals[0].status``. Only the chat changes that
lifecycle, always under its lock, and always together with an event.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, get_args

from ._frozen import READ_ONLY, FrozenDict, frozen, sent
from ._secrets import redact_keys, redacted

Role = Literal["system", "user", "assistant", "tool"]

CallStatus = Literal[
    "requested",
    "awaiting_approval",
    "approved",
    "awaiting_input",
    "denied",
    "running",
    "ok",
    "error",
    "cancelled",
    "skipped",
    "timed_out",
    "in_doubt",
]
"""Lifecycle of a call:
``requested -> (awaiting_approval -> approved | denied) -> running -> ok | error``,
plus ``awaiting_input`` (an external tool's call, or ``ask_user``'s, waiting for a
person or another system to give its result: ``chat.answer``), ``cancelled`` (stopped
before or while running), ``skipped`` (never run: over
the per-response call limit, or the response was cut off), ``timed_out``, and
``in_doubt`` (found running after a crash; see the store).
"""

ResultStatus = Literal["ok", "error", "denied", "cancelled", "skipped", "timed_out", "in_doubt"]
"""The final statuses: a call with one of them has its result."""

RunStatus = Literal["ok", "error", "timed_out", "cancelled", "skipped"]
"""How a run that the runner started (or declined to start) ended."""

CALL_STATUSES: tuple[CallStatus, ...] = get_args(CallStatus)
FINAL_STATUSES: frozenset[str] = frozenset(get_args(ResultStatus))
RUNNABLE_STATUSES: tuple[CallStatus, ...] = ("requested", "approved")
"""A call in one of these may start (ungated, or approved)."""


def short_id(chat_id: str) -> str:
    """A chat id where space is short (a repr, a label): the random last 8 digits of
    nbagent's own ids (32 hex digits whose first 12 are the creation time, so their first
    8 are the same for every chat made within a minute); an id you chose, whole."""
    if len(chat_id) == 32 and all(c in "0123456789abcdef" for c in chat_id):
        return chat_id[-8:]
    return chat_id


ConcurrencyMode = Literal["sequential", "threads", "async"]
"""How the calls of one round run: one after another, on threads, or as tasks."""
CONCURRENCY_MODES: tuple[ConcurrencyMode, ...] = get_args(ConcurrencyMode)

StopReason = Literal[
    "end", "tool_use", "max_tokens", "refusal", "pause_turn", "context_window", "other"
]
"""Normalised stop reasons. ``max_tokens`` with tool calls means the arguments may
be partial: such calls are never executed."""
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
ROLES: tuple[Role, ...] = get_args(Role)

DecisionVerdict = Literal["approved", "denied"]

InputKind = Literal["elicitation", "elicitation_url", "sampling", "ask_user", "external"]
"""What a pending input asks for: a form (an MCP server's elicitation), a URL to visit
(URL-mode elicitation), a model reply (an MCP server's sampling request), an answer to
the model's question (``ask_user``), or an external tool's result."""
InputAction = Literal["accept", "decline", "cancel"]
"""How a pending input was answered: given (``accept``), refused (``decline``), or
dismissed (``cancel``)."""
INPUT_ACTIONS: tuple[InputAction, ...] = get_args(InputAction)


@dataclass(frozen=True)
class PendingInput:
    """Something the chat waits for from a person (or another system), parked like an approval.

    ``chat.pending_inputs`` lists them; ``chat.answer(request, data)`` or
    ``chat.decline(request, reason)`` settles one.

    Attributes:
        id: Its id (``in_...``); an external tool's or ``ask_user``'s is its call's id.
        kind: ``elicitation`` (a form), ``elicitation_url`` (a URL to visit),
            ``sampling`` (messages a server wants a model to answer), ``ask_user``
            (the model's question) or ``external`` (an external tool's result).
        call_id: The tool call it belongs to (``None``: none).
        tool: That call's tool name.
        message: What the person reads (the question, the server's message).
        content: The request as it came (JSON): the form's schema, the URL, the
            sampling messages, the choices, an external call's arguments.
        schema: The JSON Schema an answer's ``data`` must match (``None``: any value).
        server: The MCP server's label, when a server asked.
        requested_at: When it was asked (UTC).
    """

    id: str
    kind: InputKind
    call_id: str | None = None
    tool: str | None = None
    message: str = ""
    content: dict[str, Any] = field(default_factory=dict, hash=False)
    schema: dict[str, Any] | None = field(default=None, hash=False)
    server: str | None = None
    requested_at: datetime | None = None

    @property
    def choices(self) -> tuple[Any, ...]:
        """The allowed answers when the answer is one of a list (``ask_user`` with choices)."""
        enum = (self.schema or {}).get("enum")
        return tuple(enum) if isinstance(enum, list) else ()

    def __repr__(self) -> str:
        where = f" on {self.server}" if self.server else ""
        call = f", call={self.call_id!r}" if self.call_id else ""
        message = redact_keys(self.message)  # a key in the question never reaches the screen
        text = message if len(message) <= 60 else message[:57] + "..."
        return f"PendingInput({self.kind}{where}: {text!r}{call})"


@dataclass(frozen=True)
class Usage:
    """Token usage of one model request, normalised across providers.

    ``input_tokens`` always *includes* cached tokens (OpenAI's convention);
    Anthropic's cache reads and writes are added in by its adapter.
    ``cached_tokens`` are cache reads (OpenAI's ``cached_tokens``, Anthropic's
    ``cache_read_input_tokens``); ``cache_write_tokens`` are Anthropic's
    ``cache_creation_input_tokens`` (billed above the input price).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    """Output tokens spent thinking (already counted in ``output_tokens``)."""
    cache_write_tokens: int = 0
    """Input tokens written to the prompt cache (already counted in ``input_tokens``)."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (what ``max_total_tokens`` counts)."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Approval:
    """Why a call is (or is not) gated, decided once, when the call is requested.

    Attributes:
        required: Whether a decision is needed before the call may run.
        source: What said so: ``"none"``, ``"tool"`` (static ``requires_approval``),
            ``"resolver"`` (the tool's ``approval`` function), or ``"unknown_tool"``.
        reason: A human-readable sentence for the approval card and the log.
    """

    required: bool
    source: str = "none"
    reason: str = ""


POLICY_PREFIX = "policy:"
"""``by`` of a chat policy's decision: ``policy:<name>``."""
MACHINE_DECIDERS = frozenset({"resolver", "rule", "fallback", "evaluate"})
"""Every decider that is nbagent's machinery, not a person (with every ``policy:<name>``): a
chat's resolver, its rules and its policies, the notebook's fallback denial
(``approval_fallback="deny"``) and ``nbagent.evaluate``'s ``decide=`` and sweeps. Their
decisions teach nothing about what people decide (``suggest_policies`` skips them), and a
person's decision cannot take their names (``store.approve``, ``store.deny`` and the inbox's
``by=`` refuse them)."""


def by_machine(by: str) -> bool:
    """Whether ``by`` names nbagent's machinery rather than a person (:data:`MACHINE_DECIDERS`)."""
    return by in MACHINE_DECIDERS or by.startswith(POLICY_PREFIX)


def automatic_decider(by: str) -> bool:
    """Whether ``by`` names a chat's resolver or one of its policies
    (:attr:`Decision.automatic`)."""
    return by == "resolver" or by.startswith(POLICY_PREFIX)


@dataclass(frozen=True)
class Decision:
    """A recorded decision on a gated call.

    Attributes:
        verdict: ``"approved"`` or ``"denied"``.
        by: Who or what decided: ``"user"`` (code or click), ``"resolver"``,
            ``"policy:<name>"``, ``"store"`` (another process), ...
        at: When (timezone-aware UTC).
        reason: Optional reason; a denial's reason is sent to the model.
        arguments: Edited arguments a human approved instead of the model's.
    """

    verdict: DecisionVerdict
    by: str
    at: datetime
    reason: str | None = None
    arguments: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.arguments is not None:  # the record of an edit: read-only, as a call's are
            object.__setattr__(self, "arguments", frozen(self.arguments))

    @property
    def automatic(self) -> bool:
        """Made by a chat's resolver (``"resolver"``) or one of its policies (``"policy:<name>"``):
        a person may overrule it before the call starts. ``by="policy-team"`` is a person's;
        ``store.approve``/``store.deny`` refuse the reserved names, and the store never lets a
        decision made through it be overruled, whatever its ``by``."""
        return automatic_decider(self.by)


@dataclass(eq=False)
class ToolCall:
    """One tool call the model asked for.

    ``id``, ``name`` and ``arguments`` (parsed JSON, a dict) are the call's
    identity and compare equal by value. The remaining attributes are its
    lifecycle, kept up to date by the chat.

    Attributes:
        id: Provider call id (OpenAI ``call_...``, Anthropic ``toolu_...``).
        name: Tool name.
        arguments: Parsed arguments. ``{}`` when the model sent ``""``. Read-only
            once a chat has recorded the call, in place and as a whole (they are what
            the model asked):
            ``chat.approve(call, arguments=...)`` runs it with others.
        raw_arguments: The argument text as sent, when it was not valid JSON.
        parse_error: Why ``raw_arguments`` could not be parsed.
        status: Current :data:`CallStatus`.
        approval: Whether the call is gated and why (set when requested).
        decision: The decision, once made.
        result: The :class:`ToolResultMessage` once the call is answered.
        server: The label of the MCP server the tool belongs to, if any.
        hosted: The provider runs the tool (a hosted MCP server asking for
            approval, e.g. OpenAI's ``mcp_approval_request``): the chat never
            runs it; a decision is sent back to the provider instead.
        chat_id: The chat the call belongs to, set when that chat records it
            (``None`` for a call no chat has recorded): a decision given a call
            object from another chat is refused, never applied to a call of
            this chat that happens to have the same id.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    parse_error: str | None = None
    status: CallStatus = "requested"
    approval: Approval | None = None
    decision: Decision | None = None
    result: ToolResultMessage | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    server: str | None = None
    hosted: bool = False
    chat_id: str | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        # A recorded call's arguments are replaced no more than changed in place: a
        # callback doing `call.arguments = {...}` ran one value while the record kept another.
        if name == "arguments":
            held = self.__dict__.get("arguments")
            if isinstance(held, FrozenDict) and value is not held:
                raise TypeError(READ_ONLY)
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return (self.id, self.name, self.arguments) == (other.id, other.name, other.arguments)

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        # a key, URL credentials or a password in the arguments shows as ***, hidden
        # before the cut (no start of one shows): what the cards and the log show too
        args = json.dumps(redacted(self.arguments), ensure_ascii=False, default=str)
        if len(args) > 80:
            args = args[:77] + "..."
        where = f", server={self.server!r}" if self.server is not None else ""
        where += ", hosted=True" if self.hosted else ""
        return (
            f"ToolCall(id={self.id!r}, name={self.name!r}, arguments={args}, "
            f"status={self.status!r}{where})"
        )

    @property
    def effective_arguments(self) -> dict[str, Any]:
        """The arguments the tool runs with: a human's edit wins over the model's."""
        if self.decision is not None and self.decision.arguments is not None:
            return self.decision.arguments
        return self.arguments

    def as_run(self) -> ToolCall:
        """The call as its tool runs it: ``arguments`` are those it runs with (a person's
        edit at approval wins over the model's). What ``before_tool_call`` and
        ``after_tool_result`` callbacks are given: a guard reading ``call.arguments`` sees
        what runs (given the model's, an edit from 50 to 5,000 went past a guard's
        limit). The call itself when nothing was edited, else a copy (equal to it)."""
        edited = self.decision.arguments if self.decision is not None else None
        if edited is None:
            return self
        view = copy.copy(self)
        object.__setattr__(view, "arguments", edited)
        return view

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def pending_approval(self) -> bool:
        return self.status == "awaiting_approval"

    def copy_identity(self) -> ToolCall:
        """A fresh call with the same identity and no lifecycle."""
        return ToolCall(
            self.id,
            self.name,
            dict(self.arguments),
            self.raw_arguments,
            self.parse_error,
            server=self.server,
            hosted=self.hosted,
        )


_TEXT_ITEMS = frozenset({("responses", "message"), ("anthropic", "text")})


@dataclass(frozen=True)
class ProviderItem:
    """Something the provider did on its side, kept in the transcript as it came.

    Provider-run tools (OpenAI Responses ``mcp_list_tools``, ``mcp_call``,
    ``web_search_call``, ``code_interpreter_call``...; Anthropic
    ``mcp_tool_use``, ``mcp_tool_result``, ``server_tool_use``...) and any
    output item or content block of a type the adapter does not know. Never
    run here; sent back to the same API as it came (``raw``), so a stateless
    request keeps every item the API needs.

    Attributes:
        api: The wire format it came from (``"responses"``, ``"anthropic"``):
            only that API gets it back.
        type: The item's wire type (``"mcp_call"``, ...).
        raw: The item as the API sent it (JSON), sent back unchanged.
        server: The MCP server label, when there is one.
        name: The tool the item is about, when there is one.
        status: ``"ok"``, ``"error"`` or ``None`` (a listing, an unknown item);
            for an ``mcp_call`` the provider ran against the chat's decision,
            ``"ran_despite_denial"`` or ``"ran_unapproved"`` (set by the chat
            when the response arrives: ``nbagent._hosted.audit_items``).
        known: False for an item type the adapter does not know.
    """

    api: str
    type: str
    raw: dict[str, Any] = field(compare=True, hash=False, repr=False)
    server: str | None = None
    name: str | None = None
    status: str | None = None
    known: bool = True

    def __post_init__(self) -> None:
        # what goes back to the API as it came: read-only, so an edit through the transcript
        # cannot change what the next request sends while the store keeps the original
        object.__setattr__(self, "raw", sent(self.raw))

    @property
    def call_id(self) -> str | None:
        """The wire id (``mcp_...``, ``ws_...``, ``mcptoolu_...``) when it has one."""
        ident = self.raw.get("id")
        return ident if isinstance(ident, str) else None

    @property
    def is_text(self) -> bool:
        """Whether it is text the model wrote, kept whole for what rides on it: a Responses
        assistant ``message`` with a ``phase`` (its id and phase go back with it), an Anthropic
        ``text`` block with ``citations``. Not something the provider ran: no log row."""
        return (self.api, self.type) in _TEXT_ITEMS

    @property
    def commentary(self) -> str:
        """A commentary message's text (a Responses ``message`` with ``phase: "commentary"``:
        what the model said on the way, between tool calls; not the answer), else ``""``."""
        if self.type != "message" or self.raw.get("phase") != "commentary":
            return ""
        parts = self.raw.get("content")
        parts = parts if isinstance(parts, list) else []
        return "".join(
            str(p.get("text") or "")
            for p in parts
            if isinstance(p, dict) and p.get("type") == "output_text"
        )

    @property
    def citations(self) -> tuple[dict[str, Any], ...]:
        """The sources an Anthropic ``text`` block cites, each as the API sent it (else ``()``)."""
        found = self.raw.get("citations") if self.type == "text" else None
        return tuple(c for c in found if isinstance(c, dict)) if isinstance(found, list) else ()

    @property
    def summary(self) -> str:
        """One line for a log or a screen: what the provider did."""
        where = f"{self.server}: " if self.server else ""
        what = self.name or self.type
        state = f" ({self.status})" if self.status else ""
        unknown = "" if self.known else " [item type unknown to nbagent, kept as sent]"
        return f"{where}{what}{state}{unknown}"


@dataclass(frozen=True)
class Reasoning(ProviderItem):
    """What a model thought before answering: a provider item with readable text.

    Anthropic ``thinking`` / ``redacted_thinking`` blocks, OpenAI Responses
    ``reasoning`` items and the ``reasoning_content`` of OpenAI-compatible
    servers (DeepSeek, vLLM). Like every :class:`ProviderItem` it stays in
    the transcript in the order it came and ``raw`` (with its ``signature``,
    ``encrypted_content`` or redacted ``data``) goes back to the API it came
    from unchanged; ``text`` is what a person can read of it.

    Attributes:
        text: The thinking text (Anthropic), the reasoning summary (Responses)
            or the ``reasoning_content`` (compatible servers); ``""`` when the
            provider sent it only encrypted or redacted.
        redacted: The provider sent none of it readable (``redacted_thinking``,
            or a Responses item with only ``encrypted_content``).
        resend: Whether ``raw`` goes back on the wire (false for
            ``reasoning_content``, which compatible servers do not take back,
            and for a Responses item with nothing to send back statelessly).
    """

    text: str = ""
    redacted: bool = False
    resend: bool = True

    @property
    def summary(self) -> str:
        if self.redacted and not self.text:
            return "thinking (redacted)"
        return f"thinking ({len(self.text)} characters)"


class _Encoded:
    """What an image or a file part derives from its bytes (the wire's and the store's forms)."""

    data: bytes
    media_type: str

    @property
    def sha256(self) -> str:
        """The bytes' SHA-256 (hex): the store keeps each part's bytes once per hash."""
        import hashlib  # (OpenSSL) when a part is first digested, not at import

        return hashlib.sha256(self.data).hexdigest()

    @property
    def base64(self) -> str:
        import base64

        return base64.b64encode(self.data).decode("ascii")

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64}"


@dataclass(frozen=True)
class ImagePart(_Encoded):
    """An image sent to (or returned by a tool for) the model.

    Built by :func:`nbagent.image` or from ``chat.ask(text, images=[...])``;
    ``data`` are the encoded bytes (PNG, JPEG, GIF or WebP, sniffed by their
    magic number), ``media_type`` their MIME type.

    Attributes:
        data: The image file's bytes.
        media_type: ``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``.
        detail: OpenAI's ``detail`` (``"low"``, ``"high"``, ``"auto"``); ``None``
            leaves the API default (Anthropic has no such switch).
    """

    data: bytes = field(repr=False)
    media_type: str
    detail: str | None = None

    kind: ClassVar[str] = "image"

    def __repr__(self) -> str:
        return f"ImagePart({self.media_type}, {len(self.data)} bytes)"


@dataclass(frozen=True)
class FilePart(_Encoded):
    """A document (PDF) sent to the model: Anthropic ``document``, OpenAI ``file``.

    Attributes:
        data: The file's bytes.
        media_type: ``application/pdf`` (the one type all three APIs take).
        filename: The name the model sees (OpenAI asks for one).
    """

    data: bytes = field(repr=False)
    media_type: str = "application/pdf"
    filename: str = "document.pdf"

    kind: ClassVar[str] = "file"

    def __repr__(self) -> str:
        return f"FilePart({self.media_type}, {self.filename!r}, {len(self.data)} bytes)"


@dataclass(frozen=True)
class AudioPart(_Encoded):
    """A sound returned by a tool (an MCP server's ``audio`` content) for the model.

    Sent as an ``input_audio`` part where the API takes one (Chat Completions, to an
    audio model such as ``gpt-audio``); elsewhere the model reads a line saying it was
    not sent and why. The notebook shows a player on the call's card.

    Attributes:
        data: The sound file's bytes.
        media_type: ``audio/wav`` or ``audio/mpeg`` (MP3), sniffed from the bytes.
    """

    data: bytes = field(repr=False)
    media_type: str = "audio/wav"

    kind: ClassVar[str] = "audio"

    @property
    def format(self) -> str:
        """The APIs' name for the format: ``"wav"`` or ``"mp3"``."""
        return "mp3" if self.media_type == "audio/mpeg" else "wav"

    def __repr__(self) -> str:
        return f"AudioPart({self.media_type}, {len(self.data)} bytes)"


Part = ImagePart | FilePart | AudioPart
"""A non-text content part; a message's text stays in its ``content``."""


@dataclass(frozen=True)
class ChatMessage:
    """A plain text message: ``system``, ``user`` or ``assistant``.

    ``items``: what the provider did on its side before answering (see
    :class:`ProviderItem`); only assistant messages have them.

    ``parsed``: a structured answer's value (``chat.ask(text, output=Model)``):
    a ``Model`` instance for a pydantic model or a dataclass, a dict for a
    TypedDict or a JSON Schema; ``content`` keeps the JSON the model wrote. A
    chat loaded from a store gives a plain dict (the type is not stored).
    ``None`` for any other message.

    ``parts``: images and files sent with a user message
    (``chat.ask(text, images=[...])``), after its text.
    """

    role: Role
    content: str
    turn: int = 0
    stop_reason: StopReason = "end"
    items: tuple[ProviderItem, ...] = ()
    parsed: Any = field(default=None, compare=False, repr=False)
    parts: tuple[Part, ...] = ()

    @property
    def reasoning(self) -> tuple[Reasoning, ...]:
        """What the model thought before this message (its :class:`Reasoning` items)."""
        return tuple(i for i in self.items if isinstance(i, Reasoning))

    @property
    def citations(self) -> tuple[dict[str, Any], ...]:
        """The sources the model cited in this text (Anthropic ``citations`` on its text
        blocks: web search results, documents), in order, each as the API sent it."""
        return tuple(c for i in self.items for c in i.citations)


@dataclass(frozen=True)
class AssistantToolCallMessage:
    """An assistant message that asks for tool calls (with optional text)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    turn: int = 0
    stop_reason: StopReason = "tool_use"
    role: Literal["assistant"] = "assistant"
    items: tuple[ProviderItem, ...] = ()

    @property
    def reasoning(self) -> tuple[Reasoning, ...]:
        """What the model thought before asking for these calls (:class:`Reasoning` items)."""
        return tuple(i for i in self.items if isinstance(i, Reasoning))

    @property
    def citations(self) -> tuple[dict[str, Any], ...]:
        """The sources the model cited in this text (Anthropic ``citations`` on its text
        blocks: web search results, documents), in order, each as the API sent it."""
        return tuple(c for i in self.items for c in i.citations)


@dataclass(frozen=True)
class ToolResultMessage:
    """The answer to one tool call, as sent back to the model.

    Attributes:
        tool_call_id: The id of the call answered.
        content: Text sent to the model.
        is_error: Sent as an error (Anthropic ``is_error``); true for every
            status but ``ok``.
        status: ``ok``, ``error``, ``denied``, ``cancelled``, ``skipped``,
            ``timed_out`` or ``in_doubt``.
        name: Tool name (some wire formats want it).
        value: The tool's return value before serialisation (not persisted).
        hosted: It answers a hosted call: not a result but the decision sent
            to the provider (OpenAI ``mcp_approval_response``, ``approve``
            false for a denial).
        parts: Images the tool returned (a figure, a PIL image, PNG bytes...),
            sent after ``content`` (see :mod:`nbagent._result_text`).
    """

    tool_call_id: str
    content: str
    is_error: bool = False
    status: ResultStatus = "ok"
    name: str = ""
    turn: int = 0
    value: Any = field(default=None, compare=False, repr=False)
    role: Literal["tool"] = "tool"
    hosted: bool = False
    parts: tuple[Part, ...] = ()

    @property
    def is_denial(self) -> bool:
        return self.status == "denied"


Message = ChatMessage | AssistantToolCallMessage | ToolResultMessage


@dataclass(frozen=True)
class LLMToolResponse:
    """What a provider answered to one request, SDK objects already converted.

    Attributes:
        text: Assistant text (may be empty when only tools were called).
        tool_calls: The calls asked for, in order.
        input_tokens: Normalised usage (see :class:`Usage`).
        output_tokens: Normalised usage (see :class:`Usage`).
        cached_tokens: Normalised usage (see :class:`Usage`).
        reasoning_tokens: Normalised usage (see :class:`Usage`).
        cache_write_tokens: Normalised usage (see :class:`Usage`).
        model: The model that answered.
        provider: Provider name (``openai``, ``anthropic``, ``demo``...).
        stop_reason: Normalised :data:`StopReason`.
        raw_stop_reason: The provider's own stop reason string.
        refusal: The refusal text when the model refused.
        items: What the provider did on its side (:class:`ProviderItem`).
        replayed: It came from a recording of an identical request (``Chat(replay=...)``),
            not from the model.
        usage_reported: ``False`` when the response carried no token usage (some
            OpenAI-compatible servers send none): its token counts read 0 but are
            unknown, and so is its cost (``cost_usd`` is ``None``); a chat with a budget
            warns once that it cannot count it.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    provider: str = ""
    stop_reason: StopReason = "end"
    cached_tokens: int = 0
    raw_stop_reason: str | None = None
    refusal: str | None = None
    items: tuple[ProviderItem, ...] = ()
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    replayed: bool = False
    usage_reported: bool = True

    @property
    def usage(self) -> Usage:
        return Usage(
            self.input_tokens,
            self.output_tokens,
            self.cached_tokens,
            self.reasoning_tokens,
            self.cache_write_tokens,
        )

    @property
    def reasoning(self) -> tuple[Reasoning, ...]:
        """The model's :class:`Reasoning` items, in order."""
        return tuple(i for i in self.items if isinstance(i, Reasoning))


@dataclass(frozen=True)
class ToolSpec:
    """A tool definition as providers see it (``{"name", "description", "input_schema"}``)."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


ForkChange = Literal["none", "result", "arguments", "decision", "system", "model", "tool_options"]
"""What a fork changed (:attr:`ForkParent.change`)."""


@dataclass(frozen=True)
class ForkParent:
    """Where a fork came from (``fork.parent``), in memory and in a store.

    Attributes:
        chat_id: The chat it was forked from.
        step: The step it shares the history up to: ``fork(step=N)``'s ``N``;
            for a fork at a call, the step whose response asked for the call.
        call_id: The call it was forked at (``fork(call, ...)``), else ``None``.
        change: What is different: ``none``, ``result``, ``arguments``,
            ``decision``, ``system``, ``model`` or ``tool_options``.
        value: The new value, as JSON: the result's text (as the model reads it: a
            key in it as ``***``), the edited arguments (a secret's value as ``***``;
            the call's decision holds them whole), the verdict, the system prompt,
            the model name or the options set.
    """

    chat_id: str
    step: int
    call_id: str | None = None
    change: ForkChange = "none"
    value: Any = None

    def __repr__(self) -> str:
        # a key, URL credentials or a password in the value (a result's text, edited
        # arguments, a system prompt) shows as ***, as in ToolCall's repr
        return (
            f"ForkParent(chat_id={self.chat_id!r}, step={self.step!r}, "
            f"call_id={self.call_id!r}, change={self.change!r}, "
            f"value={redacted(self.value)!r})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "chat_id": self.chat_id,
            "step": self.step,
            "call_id": self.call_id,
            "change": self.change,
            "value": self.value,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ForkParent:
        return cls(
            str(data["chat_id"]),
            int(data.get("step") or 0),
            data.get("call_id"),
            data.get("change") or "none",
            data.get("value"),
        )
