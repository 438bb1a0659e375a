"""Neutral <-> OpenAI wire formats: Chat Completions and Responses.

Requests are built from neutral values into JSON bytes (one message at a
time, so the adapter can cache them); responses are read from plain JSON
dicts (no SDK models). Each converter is an exhaustive ``isinstance`` chain
that ends in an error.

- tool definition: Chat ``{"type":"function","function":{name,description,parameters}}``;
  Responses flat ``{"type":"function",name,description,parameters,"strict":false}``
  (Responses defaults ``strict`` to true, so it is always sent).
- choice: ``"auto"``/``"none"``/``"required"`` as is; a tool name is
  ``{"type":"function","function":{"name":X}}`` (Chat) or
  ``{"type":"function","name":X}`` (Responses).
- one call: ``parallel_tool_calls: false`` (both). Both go with any tools: on
  Responses a request with hosted tools only is sent its choice too (``"none"``,
  ``"required"``... hold for the provider's tools: it runs an ``mcp_call`` that
  needs no approval, or a web search, without asking nbagent).
- structured answer: ``response_format: {type: json_schema, json_schema: {name,
  schema, strict: true}}`` (Chat); ``text: {format: {type: json_schema, name,
  schema, strict: true}}`` (Responses); the answer is the message's text.
- calls out: ``message.tool_calls[]`` (Chat); ``function_call`` items whose
  ``call_id`` (not the item ``id``) is the call's id (Responses).
- results in: ``{"role":"tool","tool_call_id",content}`` (Chat);
  ``{"type":"function_call_output","call_id",output}`` (Responses).
- usage: ``prompt_tokens`` / ``input_tokens``, both including cached tokens.
- hosted tools (Responses only): a :class:`~nbagent.HostedMCP` is an ``mcp``
  tool; an ``mcp_approval_request`` item is a hosted :class:`ToolCall` (sent
  back as that item, its answer as an ``mcp_approval_response`` with
  ``approve`` false for a denial); ``mcp_list_tools``, ``mcp_call``,
  ``web_search_call`` and every other provider-run item, and any item type
  this module does not know, is a :class:`ProviderItem` sent back unchanged
  (never dropped). Items asking the client to act (``computer_call``,
  ``local_shell_call``, ``custom_tool_call``...) fail the request clearly:
  nbagent offers no such tool and runs none. Chat Completions has no hosted
  tools: hosted calls and provider items are not sent there.
- reasoning (``reasoning=``): Chat sends ``reasoning_effort``, Responses
  ``reasoning: {"effort"}`` with ``include: ["reasoning.encrypted_content"]``.
  A Responses ``reasoning`` item is a :class:`~nbagent.Reasoning` (its summary
  or reasoning text readable) sent back as it came, before the calls it led
  to, when it has ``encrypted_content`` (stateless, an item without it cannot
  be found again: it is kept but not sent). A compatible server's
  ``reasoning_content`` (DeepSeek, vLLM; ``reasoning`` on some) is a
  ``Reasoning`` too; it is sent back as ``reasoning_content`` on the assistant
  messages that asked for tool calls (DeepSeek's thinking mode requires it
  there and ignores it elsewhere), never to OpenAI itself. Reasoning tokens:
  ``completion_tokens_details`` / ``output_tokens_details.reasoning_tokens``.
- message phase (Responses): an assistant ``message`` with a ``phase`` is kept
  whole as a ``message`` :class:`ProviderItem` in its place among the items and
  sent back as it came (id, phase, content); a ``commentary`` message (a
  preamble between tool calls) is not the answer, so its text is not in the
  response's ``text`` (nor streamed as text); a ``final_answer`` message's text
  is, and is not sent a second time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._errors import ProviderError, ServerError
from .._hosted import HostedTool
from .._media import audio_not_sent, hears_audio
from .._output import Output
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
from ._base import DeltaSink, StreamDelta
from ._errors import for_error_type
from ._sdk import arguments_text, dumps, incomplete_stream, make_call, new_call_id

CONTENT_FILTERED = "The response was blocked by the provider's content filter."


# -- shared -------------------------------------------------------------------


def tool_choice_chat(choice: str) -> Any:
    """Neutral choice -> Chat Completions ``tool_choice``."""
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def tool_choice_responses(choice: str) -> Any:
    """Neutral choice -> Responses ``tool_choice``."""
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "name": choice}


def response_format_chat(output: Output) -> dict[str, Any]:
    """A structured answer -> Chat Completions ``response_format`` (strict JSON Schema)."""
    schema = output.strict_schema("openai")
    return {
        "type": "json_schema",
        "json_schema": {"name": output.name, "schema": schema, "strict": True},
    }


def text_format_responses(output: Output) -> dict[str, Any]:
    """A structured answer -> Responses ``text`` (its ``format``, strict JSON Schema)."""
    schema = output.strict_schema("openai")
    return {
        "format": {"type": "json_schema", "name": output.name, "schema": schema, "strict": True}
    }


def reasoning_tokens(usage: Any) -> int:
    """``reasoning_tokens`` of Chat's or Responses' output details (0 if absent)."""
    if not isinstance(usage, dict):
        return 0
    for key in ("completion_tokens_details", "output_tokens_details"):
        details = usage.get(key)
        if isinstance(details, dict) and details.get("reasoning_tokens"):
            return int(details["reasoning_tokens"])
    return 0


def _usage(usage: Any, input_key: str, output_key: str, details_key: str) -> tuple[int, int, int]:
    if not isinstance(usage, dict):
        return 0, 0, 0
    details = usage.get(details_key)
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return int(usage.get(input_key) or 0), int(usage.get(output_key) or 0), int(cached or 0)


# -- Chat Completions: requests -------------------------------------------------


CHAT_ID_MAX = 40
"""The longest tool call id Chat Completions takes back (``messages[].tool_calls[].id``,
``tool_call_id``): longer, a 400 ``string_above_max_length``."""
RESPONSES_ID_MAX = 64
"""The longest ``call_id`` the Responses API takes back (``input[].call_id``)."""


def wire_id(call_id: str, limit: int) -> str:
    """``call_id`` as an OpenAI wire takes it back: as it is up to ``limit`` characters.

    Another server's ids can be longer (vLLM's ``chatcmpl-tool-`` and 32 hex digits are
    46 characters; gateways join ids), and OpenAI refuses the whole request for one such
    id, so a chat forked or moved to OpenAI could not go on. A longer id is sent as its
    first characters, ``_`` and 16 hex digits of its SHA-256, ``limit`` characters in all:
    the same id always maps to the same one, a call and its result agree, and two ids
    sharing a beginning stay apart. The record keeps the original id; only the wire has
    this one.
    """
    if len(call_id) <= limit:
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{call_id[: limit - 17]}_{digest}"


def chat_message(
    message: Message, *, compatible: bool = False, refused: str | None = None
) -> bytes:
    """One neutral message -> one Chat Completions message (JSON bytes; ``b""``: nothing).

    Hosted calls and their answers (another API's) are left out: Chat
    Completions has no hosted tools. A user message's sound goes as ``input_audio``;
    ``refused`` (why the model takes none) sends the line saying so instead.
    """
    if isinstance(message, ChatMessage):
        if message.parts and message.role == "user":
            content = [{"type": "text", "text": message.content}] if message.content else []
            content.extend(_chat_part(p, n, refused) for n, p in enumerate(message.parts, 1))
            return dumps({"role": "user", "content": content})
        return dumps({"role": message.role, "content": message.content})
    if isinstance(message, AssistantToolCallMessage):
        calls = [_chat_call(c) for c in message.tool_calls if not c.hosted]
        if not calls:
            return dumps({"role": "assistant", "content": message.content or ""})
        if compatible:
            _echo_extras(calls, message.items)
        if not compatible:  # OpenAI refuses a long id; a gateway may carry data in one
            for call in calls:  # (LiteLLM keeps Gemini's thought signature there)
                call["id"] = wire_id(call["id"], CHAT_ID_MAX)
        out: dict[str, Any] = {
            "role": "assistant",
            "content": message.content or ("" if compatible else None),
            "tool_calls": calls,
        }
        thought = "".join(r.text for r in message.reasoning if r.api == "chat")
        if compatible and thought:
            out["reasoning_content"] = thought
        return dumps(out)
    if isinstance(message, ToolResultMessage):
        if message.hosted:
            return b""
        return dumps(
            {
                "role": "tool",
                "tool_call_id": (
                    message.tool_call_id
                    if compatible
                    else wire_id(message.tool_call_id, CHAT_ID_MAX)
                ),
                "content": message.content,
            }
        )
    raise TypeError(f"cannot convert {type(message).__name__} to a Chat Completions message")


def _chat_part(part: Part, n: int, refused: str | None) -> dict[str, Any]:
    """One part of a user message; a sound (the ``n``-th part) as ``input_audio``, or, when
    the model takes none (``refused``: why), as a text part saying so."""
    if isinstance(part, AudioPart):
        if refused is not None:
            return {"type": "text", "text": audio_not_sent(n, refused)}
        return {"type": "input_audio", "input_audio": {"data": part.base64, "format": part.format}}
    if isinstance(part, FilePart):
        return {"type": "file", "file": {"file_data": part.data_url, "filename": part.filename}}
    url: dict[str, Any] = {"url": part.data_url}
    if part.detail is not None:
        url["detail"] = part.detail
    return {"type": "image_url", "image_url": url}


TOOL_IMAGES_NOTE = "Images and files returned by the tool calls above:"
"""Chat Completions tool messages are text only: a tool's images follow, after
the round's tool messages, in one user message that starts with this line."""


def chat_tool_parts(results: Sequence[ToolResultMessage], model: str = "") -> bytes:
    """The follow-up user message carrying the images (and sounds) of a round's tool results.

    A sound goes as ``input_audio`` to an audio model; to another, a line saying why not.
    """
    refused = hears_audio("chat", model)
    content: list[dict[str, Any]] = [{"type": "text", "text": TOOL_IMAGES_NOTE}]
    for result in results:
        said = wire_id(result.tool_call_id, CHAT_ID_MAX)
        content.append({"type": "text", "text": f"{result.name} ({said}):"})
        content.extend(_chat_part(p, n, refused) for n, p in enumerate(result.parts, 1))
    return dumps({"role": "user", "content": content})


def chat_messages(
    messages: Sequence[Message], wire: Sequence[bytes], model: str = ""
) -> list[bytes]:
    """The wire messages in order, each round's tool images in a user message after it
    (``model``: whether a sound, a tool's or in a user message such as an MCP prompt's,
    goes as audio, see :func:`chat_tool_parts`; the cached ``wire`` is the audio model's,
    so a user message with a sound is made again for another model)."""
    refused = hears_audio("chat", model)
    out: list[bytes] = []
    waiting: list[ToolResultMessage] = []
    for message, body in zip(messages, wire, strict=True):
        if waiting and not isinstance(message, ToolResultMessage):
            out.append(chat_tool_parts(waiting, model))
            waiting = []
        if (
            refused is not None
            and isinstance(message, ChatMessage)
            and message.role == "user"
            and any(isinstance(p, AudioPart) for p in message.parts)
        ):
            body = chat_message(message, refused=refused)
        if body:
            out.append(body)
        if isinstance(message, ToolResultMessage) and message.parts and not message.hosted:
            waiting.append(message)
    if waiting:
        out.append(chat_tool_parts(waiting, model))
    return out


CALL_EXTRAS = "tool_call_extra"
"""The type of the item keeping what a compatible server sent on a tool call beyond its id,
name and arguments (Gemini's ``extra_content``, its thought signature), to echo it back."""


def call_extras(calls: Sequence[Mapping[str, Any]]) -> tuple[ProviderItem, ...]:
    """What a response's tool calls (as the server sent them, in order) carry beyond the
    usual fields, one item per call that has any: Gemini 3's OpenAI-compatible endpoint
    sends ``extra_content: {"google": {"thought_signature": ...}}`` on each call and refuses
    (400, "Function call is missing a thought_signature") a next request whose call lacks
    it. Each is a :class:`~nbagent.Reasoning` (unreadable: the signature is the model's
    encrypted thought) that goes back on the Chat Completions wire only, on its call."""
    out: list[ProviderItem] = []
    for index, tc in enumerate(calls):
        extra = tc.get("extra_content")
        if isinstance(extra, dict) and extra:
            fn = tc.get("function") or {}
            raw = {
                "type": CALL_EXTRAS,
                "index": index,
                "tool_call_id": tc.get("id"),
                "name": fn.get("name") if isinstance(fn, dict) else None,
                "extra_content": extra,
            }
            out.append(Reasoning("chat", CALL_EXTRAS, raw, text="", redacted=True))
    return tuple(out)


def _echo_extras(calls: list[dict[str, Any]], items: Sequence[ProviderItem]) -> None:
    """Put each call's kept extras back on it (:func:`call_extras`): matched by its place in
    the response and its name (an id the chat renamed on arrival still matches), else by id."""
    kept = [i.raw for i in items if i.api == "chat" and i.type == CALL_EXTRAS]
    if not kept:
        return
    for index, call in enumerate(calls):
        name = call["function"]["name"]
        match = next(
            (r for r in kept if r.get("index") == index and r.get("name") == name),
            None,
        ) or next((r for r in kept if r.get("tool_call_id") == call["id"]), None)
        if match is not None:
            call["extra_content"] = match["extra_content"]


def _chat_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_text(call)},
    }


def chat_system(system: str) -> bytes:
    return dumps({"role": "system", "content": system})


def chat_tools(tools: Sequence[ToolSpec], *, compatible: bool = False) -> bytes:
    """Neutral tool definitions -> Chat Completions ``tools`` (JSON bytes)."""
    out = []
    for spec in tools:
        function: dict[str, Any] = {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        }
        if not compatible:
            function["strict"] = False
        out.append({"type": "function", "function": function})
    return dumps(out)


# -- Chat Completions: responses ----------------------------------------------


def _chat_stop(finish: Any, has_calls: bool, refusal: str | None) -> StopReason:
    if finish == "length":
        return "max_tokens"
    if refusal is not None or finish == "content_filter":
        return "refusal"
    if has_calls:
        return "tool_use"
    if finish in ("stop", "tool_calls", "function_call", "eos", "end_turn", None):
        return "end"
    return "other"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some compatible servers send content parts
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return str(content)


def _refusal(finish: Any, refusal: Any) -> str | None:
    if isinstance(refusal, str) and refusal:
        return refusal
    return CONTENT_FILTERED if finish == "content_filter" else None


def parse_chat(data: dict[str, Any], *, model: str, provider: str) -> LLMToolResponse:
    """A ``chat.completion`` body -> neutral response."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        # a gateway's {} or {"choices": []} is no answer: not an empty one
        raise ValueError(f"no completion in it (choices: {choices!r:.60})")
    choice = choices[0]
    message = choice.get("message") or {}
    finish = choice.get("finish_reason")
    calls = []
    for tc in message.get("tool_calls") or ():
        fn = tc.get("function") or {}
        calls.append(
            make_call(tc.get("id") or new_call_id(), str(fn.get("name") or ""), fn.get("arguments"))
        )
    refusal = _refusal(finish, message.get("refusal"))
    i, o, c = _usage(
        data.get("usage"), "prompt_tokens", "completion_tokens", "prompt_tokens_details"
    )
    thought = message.get("reasoning_content") or message.get("reasoning")
    wire_calls = [tc for tc in message.get("tool_calls") or () if isinstance(tc, dict)]
    return LLMToolResponse(
        items=chat_reasoning(thought if isinstance(thought, str) else "") + call_extras(wire_calls),
        reasoning_tokens=reasoning_tokens(data.get("usage")),
        text=_content_text(message.get("content")),
        tool_calls=tuple(calls),
        input_tokens=i,
        output_tokens=o,
        cached_tokens=c,
        model=str(data.get("model") or model),
        provider=provider,
        stop_reason=_chat_stop(finish, bool(calls), refusal),
        raw_stop_reason=finish,
        refusal=refusal,
        usage_reported=isinstance(data.get("usage"), dict),
    )


def chat_reasoning(text: str) -> tuple[ProviderItem, ...]:
    """A compatible server's ``reasoning_content`` as a :class:`Reasoning` (none if empty)."""
    if not text:
        return ()
    raw = {"type": "reasoning_content", "reasoning_content": text}
    return (Reasoning("chat", "reasoning_content", raw, text=text),)


_STRUCTURE = re.compile(r'[{}\[\]"\\]')
"""The characters that open or close a JSON value's brackets or strings."""


@dataclass
class _PartialCall:
    id: str | None = None
    name: str | None = None
    parts: list[str] = field(default_factory=list)
    extra: dict[str, Any] | None = None  # what else the server sent on it (call_extras)
    # how far the arguments' text is read for whether it is a whole object yet (only when a
    # fragment repeats the name: _starts_another), so each character is read once
    read: int = 0  # parts read
    depth: int = 0  # open brackets ({ and [) outside strings
    opened: bool = False  # a bracket was opened
    in_string: bool = False
    escaped: bool = False  # the last character read was a backslash in a string

    def whole(self) -> bool:
        """Whether the arguments' text so far closes every bracket it opened (outside
        strings): it may be a whole object. Reads on from where the last look stopped."""
        for part in self.parts[self.read :]:
            if not part:
                continue
            skip = 0 if self.escaped else -1  # where a character a backslash escapes is
            self.escaped = False
            for match in _STRUCTURE.finditer(part):
                at = match.start()
                if at == skip:
                    continue
                char = match.group()
                if self.in_string:
                    if char == "\\":
                        if at + 1 == len(part):
                            self.escaped = True  # it escapes the next fragment's first
                        else:
                            skip = at + 1
                    elif char == '"':
                        self.in_string = False
                elif char == '"':
                    self.in_string = True
                elif char in "{[":
                    self.depth += 1
                    self.opened = True
                elif char in "}]":
                    self.depth -= 1
        self.read = len(self.parts)
        return self.opened and self.depth == 0 and not self.in_string


def _starts_another(call: _PartialCall, fn: Mapping[str, Any]) -> bool:
    """Whether a fragment without an id (or index) of its own is another call than ``call``.

    It names another tool; or it names the same tool again and brings arguments after
    ``call``'s already make a whole JSON object (a server repeating the name in each
    fragment of one call sends it before arguments that continue the object's text).
    """
    name = fn.get("name")
    if not name or call.name is None:
        return False
    if name != call.name:
        return True
    if not fn.get("arguments") or not call.parts:
        return False
    if not call.whole():
        return False  # brackets left open: not whole, no parse (parsing every fragment's
        # text so far, or each one ending in "}" in a list of objects, was quadratic)
    try:
        return isinstance(json.loads("".join(call.parts)), dict)
    except (ValueError, RecursionError):
        return False


class ChatStream:
    """Folds ``chat.completion.chunk`` events into a response.

    Tool calls are accumulated by ``index``; ``id`` and ``name`` are taken the
    first time they appear and ignored when a server repeats them in every
    fragment (some OpenAI-compatible servers do). A fragment with an ``id`` other than
    its slot's opens a call of its own: Gemini's OpenAI-compatible endpoint sends each
    call whole in its own chunk with no ``index``, some proxies with ``index`` 0 for
    every call. With ``include_usage`` the last chunk has ``choices: []`` and carries
    the usage.
    """

    def __init__(self, on_delta: DeltaSink | None, *, model: str, provider: str):
        self.on_delta = on_delta
        self.model = model
        self.provider = provider
        self.text: list[str] = []
        self.thought: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _PartialCall] = {}  # by slot: the index, or a new one
        self.slots: dict[int, int] = {}  # a fragment's index -> the slot it now fills
        self.finish_reason: str | None = None
        self.usage: Any = None

    def feed(self, chunk: dict[str, Any]) -> None:
        if chunk.get("error"):
            raise _failed(chunk["error"], self.provider)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("model"):
            self.model = chunk["model"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str):
                self._add(self.thought, "reasoning", thought)
            self._add(self.text, "text", delta.get("content"))
            self._add(self.refusal, "text", delta.get("refusal"))
            for position, tc in enumerate(delta.get("tool_calls") or ()):
                self._call_fragment(tc, position)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _add(self, into: list[str], kind: Literal["text", "reasoning"], piece: Any) -> None:
        """Keep a non-empty fragment and forward it."""
        if piece:
            into.append(piece)
            if self.on_delta is not None:
                self.on_delta(StreamDelta(kind, piece))

    def _call_fragment(self, tc: dict[str, Any], position: int) -> None:
        given = tc.get("index")
        if not isinstance(given, int):
            given = position
        index = self.slots.get(given, given)
        call = self.calls.get(index)
        ident = tc.get("id")
        fn = tc.get("function") or {}
        if call is not None and ident and call.id is not None and ident != call.id:
            # another call under a used index (or none): its own slot, after the others
            known = [n for n, c in self.calls.items() if c.id == ident]
            index = known[0] if known else max(self.calls) + 1
            self.slots[given] = index
            call = self.calls.get(index)
        elif call is not None and not (ident and ident == call.id) and _starts_another(call, fn):
            # another call with no id under a used index (or none): its own slot
            index = max(self.calls) + 1
            self.slots[given] = index
            call = None
        announce = call is None
        if call is None:
            call = self.calls[index] = _PartialCall()
        if ident and call.id is None:
            call.id = ident
        extra = tc.get("extra_content")
        if isinstance(extra, dict) and extra:
            call.extra = extra
        if fn.get("name") and call.name is None:
            call.name = fn["name"]
            announce = True
        fragment = fn.get("arguments")
        if fragment is not None and not isinstance(fragment, str):
            fragment = dumps(fragment).decode()
        if fragment:
            call.parts.append(fragment)
        if self.on_delta is not None and (fragment or announce):
            self.on_delta(StreamDelta("tool_call", fragment or "", index, call.id, call.name))

    def finish(self, ended: bool = True) -> LLMToolResponse:
        """The folded stream read as the ``chat.completion`` body it adds up to.

        ``ended``: ``data: [DONE]`` came. A stream cut after its last choice, before its
        usage and ``[DONE]``, is incomplete: read as whole, its request would count 0 tokens
        (its cost and the budgets blind to it). A server that sends no usage but ends with
        ``[DONE]`` (some OpenAI-compatible ones) is whole.
        """
        if self.finish_reason is None or (not ended and self.usage is None):
            raise incomplete_stream(self.provider)
        calls = [
            {"id": p.id, "function": {"name": p.name, "arguments": "".join(p.parts)}}
            | ({"extra_content": p.extra} if p.extra else {})
            for _, p in sorted(self.calls.items())
        ]
        message = {
            "content": "".join(self.text),
            "reasoning_content": "".join(self.thought),
            "refusal": "".join(self.refusal) or None,
            "tool_calls": calls,
        }
        choice = {"message": message, "finish_reason": self.finish_reason}
        data = {"choices": [choice], "usage": self.usage, "model": self.model}
        return parse_chat(data, model=self.model, provider=self.provider)


# -- Responses: requests ------------------------------------------------------


def responses_items(message: Message) -> bytes:
    """One neutral message -> its Responses input items (JSON bytes, comma-joined; may be empty).

    An assistant message's provider items come first, as they came, then its
    text, then its calls (a hosted call as the ``mcp_approval_request`` it was).
    """
    if isinstance(message, ChatMessage):
        items: list[Any] = _own_items(message.items)
        if message.parts and message.role == "user":
            content = [{"type": "input_text", "text": message.content}] if message.content else []
            content.extend(_responses_part(p, n) for n, p in enumerate(message.parts, 1))
            items.append({"role": "user", "content": content})
        elif message.role != "assistant" or (message.content and not _answered(message.items)):
            items.append({"role": message.role, "content": message.content})
        return b",".join(dumps(item) for item in items)
    if isinstance(message, AssistantToolCallMessage):
        items = _own_items(message.items)
        if message.content and not _answered(message.items):
            items.append({"role": "assistant", "content": message.content})
        items.extend(_responses_call(c) for c in message.tool_calls)
        return b",".join(dumps(item) for item in items)
    if isinstance(message, ToolResultMessage):
        if message.hosted:
            return dumps(approval_response(message))
        output: Any = message.content
        if message.parts:
            output = [{"type": "input_text", "text": message.content}] if message.content else []
            output.extend(_responses_part(p, n) for n, p in enumerate(message.parts, 1))
        call_id = wire_id(message.tool_call_id, RESPONSES_ID_MAX)
        return dumps({"type": "function_call_output", "call_id": call_id, "output": output})
    raise TypeError(f"cannot convert {type(message).__name__} to Responses input items")


def _responses_part(part: Part, n: int) -> dict[str, Any]:
    """One part as a Responses input; a sound (no audio input there) as a line saying so."""
    if isinstance(part, AudioPart):
        return {"type": "input_text", "text": audio_not_sent(n, hears_audio("responses", "") or "")}
    if isinstance(part, FilePart):
        return {"type": "input_file", "file_data": part.data_url, "filename": part.filename}
    return {"type": "input_image", "image_url": part.data_url, "detail": part.detail or "auto"}


def _own_items(items: Sequence[ProviderItem]) -> list[Any]:
    """The items that came from the Responses API (another API's mean nothing here).

    A reasoning item without ``encrypted_content`` is left out: stateless, the
    API could not find it again and would refuse the request.
    """
    return [
        item.raw
        for item in items
        if item.api == "responses" and not (isinstance(item, Reasoning) and not item.resend)
    ]


def _answered(items: Sequence[ProviderItem]) -> bool:
    """Whether the message's text already goes back inside a kept ``message`` item (one with
    a phase that is not commentary), so it is not sent a second time."""
    return any(
        i.type == "message" and i.api == "responses" and i.raw.get("phase") != "commentary"
        for i in items
    )


def _responses_call(c: ToolCall) -> dict[str, Any]:
    if c.hosted:
        return {
            "type": "mcp_approval_request",
            "id": c.id,
            "name": c.name,
            "arguments": arguments_text(c),
            "server_label": c.server or "",
        }
    return {
        "type": "function_call",
        "call_id": wire_id(c.id, RESPONSES_ID_MAX),
        "name": c.name,
        "arguments": arguments_text(c),
    }


def approval_response(message: ToolResultMessage) -> dict[str, Any]:
    """A hosted call's answer on the wire: ``mcp_approval_response``, a denial's reason."""
    approve = message.status != "denied"
    out: dict[str, Any] = {
        "type": "mcp_approval_response",
        "approval_request_id": message.tool_call_id,
        "approve": approve,
    }
    if not approve:
        try:
            reason = json.loads(message.content).get("reason")
        except (ValueError, AttributeError):
            reason = None
        if isinstance(reason, str) and reason:
            out["reason"] = reason
    return out


def responses_tools(tools: Sequence[ToolSpec], hosted: Sequence[HostedTool] = ()) -> bytes:
    """Neutral tool definitions -> Responses ``tools`` (``strict`` sent: it defaults to true).

    Hosted tools follow the function tools, as their own definitions (``mcp``).
    """
    out: list[dict[str, Any]] = []
    for spec in tools:
        out.append(
            {
                "type": "function",
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema,
                "strict": False,
            }
        )
    out.extend(h.openai_tool() for h in hosted)
    return dumps(out)


# -- Responses: responses -----------------------------------------------------


def parse_responses(data: dict[str, Any], *, model: str, provider: str) -> LLMToolResponse:
    """A ``response`` object -> neutral response."""
    status = data.get("status")
    if status == "failed":
        raise _failed(data.get("error"), provider)
    if not isinstance(data.get("output"), list):
        raise ValueError(f"no output in it (keys: {sorted(data)[:8]})")
    if not data["output"] and status != "incomplete":
        # a gateway's {"output": []} is no answer: not an empty one (nor one without calls)
        raise ValueError("no output in it (output: [])")
    text: list[str] = []
    refusal: list[str] = []
    calls: list[ToolCall] = []
    items: list[ProviderItem] = []
    for item in data.get("output") or ():
        if not isinstance(item, dict):
            raise ServerError(f"{provider}: an output item is not an object: {item!r:.80}")
        kind = item.get("type")
        if kind == "message":
            phase = item.get("phase")
            if phase is not None:  # kept whole, in its place: it goes back with phase and id
                items.append(message_item(item))
            if phase == "commentary":  # a preamble between tool calls, not the answer
                continue
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    text.append(str(part.get("text") or ""))
                elif part.get("type") == "refusal":
                    refusal.append(str(part.get("refusal") or ""))
        elif kind == "function_call":
            call_id = item.get("call_id") or item.get("id") or new_call_id()
            calls.append(make_call(call_id, str(item.get("name") or ""), item.get("arguments")))
        elif kind == "mcp_approval_request":
            call = _hosted_call(item)
            if not _repeated(call, calls, provider):
                calls.append(call)
        elif kind == "reasoning":
            items.append(reasoning_item(item))
        elif kind in CLIENT_SIDE:
            raise ProviderError(
                f"{provider}: the model asked this program to run a {kind!r} item, which "
                "nbagent does not run (it offers no such tool); the response is not used",
                provider=provider,
            )
        else:
            items.append(provider_item(item))
    reason = (data.get("incomplete_details") or {}).get("reason")
    refusal_text = "".join(refusal) or None
    stop: StopReason
    if status == "incomplete":
        if reason == "content_filter":
            stop, refusal_text = "refusal", refusal_text or CONTENT_FILTERED
        else:
            stop = "max_tokens" if reason == "max_output_tokens" else "other"
    elif refusal_text is not None:
        stop = "refusal"
    elif calls:
        stop = "tool_use"
    else:
        stop = "end"
    i, o, c = _usage(data.get("usage"), "input_tokens", "output_tokens", "input_tokens_details")
    return LLMToolResponse(
        text="".join(text),
        tool_calls=tuple(calls),
        input_tokens=i,
        output_tokens=o,
        cached_tokens=c,
        model=str(data.get("model") or model),
        provider=provider,
        stop_reason=stop,
        raw_stop_reason=reason or status,
        refusal=refusal_text,
        items=tuple(items),
        reasoning_tokens=reasoning_tokens(data.get("usage")),
        usage_reported=isinstance(data.get("usage"), dict),
    )


def reasoning_item(item: dict[str, Any]) -> Reasoning:
    """A Responses ``reasoning`` item: its summary (or reasoning text) readable, kept whole."""
    parts = [p for p in item.get("summary") or () if isinstance(p, dict)]
    parts = parts or [p for p in item.get("content") or () if isinstance(p, dict)]
    text = "\n\n".join(str(p.get("text") or "") for p in parts if p.get("text"))
    return Reasoning(
        "responses",
        "reasoning",
        item,
        text=text,
        redacted=not text,
        resend=bool(item.get("encrypted_content")),
    )


def message_item(item: dict[str, Any]) -> ProviderItem:
    """An assistant ``message`` with a ``phase`` (``commentary`` or ``final_answer``), kept
    whole: it goes back as it came (id, phase, content), in its place among the items."""
    phase = item.get("phase")
    return ProviderItem(
        "responses", "message", item, name=phase if isinstance(phase, str) else None
    )


PROVIDER_RUN = frozenset(
    {
        "mcp_list_tools",
        "mcp_call",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "tool_search_call",
        "tool_search_output",
        "compaction",
    }
)
"""Output items the provider ran (or made) itself: kept and sent back as they came."""
CLIENT_SIDE = frozenset(
    {
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "custom_tool_call",
    }
)
"""Output items that ask the client to run something nbagent never offers."""
_FAILED = frozenset({"failed", "incomplete"})


def _repeated(call: ToolCall, calls: Sequence[ToolCall], provider: str) -> bool:
    """Whether an approval request repeats one of this response word for word (it is asked,
    and answered, once under its id); a different request under a used id fails clearly."""
    for other in calls:
        if other.hosted and other.id == call.id:
            if (other.name, other.arguments, other.server) == (
                call.name,
                call.arguments,
                call.server,
            ):
                return True
            raise ProviderError(
                f"{provider}: two different approval requests share the id {call.id!r} "
                f"({other.name} and {call.name}); nbagent answers a hosted call only under the "
                "provider's own id and never makes one up, so the response is not used",
                provider=provider,
            )
    return False


def _hosted_call(item: dict[str, Any]) -> ToolCall:
    call = make_call(
        str(item.get("id") or new_call_id("mcpr_")),
        str(item.get("name") or ""),
        item.get("arguments"),
    )
    return dataclasses.replace(call, server=str(item.get("server_label") or ""), hosted=True)


def provider_item(item: dict[str, Any]) -> ProviderItem:
    """An output item the provider ran, or one of a type unknown here: kept as it came."""
    kind = str(item.get("type"))
    server = item.get("server_label")
    name = item.get("name")
    status: str | None = None
    if kind == "mcp_call":
        failed = item.get("error") is not None or item.get("status") in _FAILED
        status = "error" if failed else "ok"
    elif kind == "mcp_list_tools":
        status = "error" if item.get("error") else "ok"
        tools = item.get("tools")
        name = f"list_tools ({len(tools)} tools)" if isinstance(tools, list) else "list_tools"
    elif isinstance(item.get("status"), str) and kind in PROVIDER_RUN:
        status = "error" if item["status"] in _FAILED else "ok"
    return ProviderItem(
        "responses",
        kind,
        item,
        server=server if isinstance(server, str) else None,
        name=name if isinstance(name, str) else None,
        status=status,
        known=kind in PROVIDER_RUN,
    )


def _failed(error: Any, provider: str) -> ProviderError:
    """An error inside a 200 answer (a failed response, a stream's error event or chunk),
    of the class its ``type`` or ``code`` names, as an HTTP error of that kind would be."""
    message = "the response failed"
    code = kind = ""
    if isinstance(error, dict):
        message = str(error.get("message") or message)
        code, kind = str(error.get("code") or ""), str(error.get("type") or "")
    kind = "" if kind == "error" else kind  # a Responses stream's error event: its own type
    cls = for_error_type(kind, code)
    shown = code or kind
    detail = f" ({shown})" if shown else ""
    return cls(f"{provider}: {message}{detail}", provider=provider)


_REASONING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)


class ResponsesStream:
    """Folds ``response.*`` events into a response.

    Deltas are forwarded as they arrive (a commentary message's text is not the answer: it
    is not forwarded as text, and shows once the step settles); the result is read from the final
    ``response.completed`` or ``response.incomplete`` event (an incomplete
    stream ends in ``response.incomplete``, never ``response.completed``). Where that event's
    ``output`` holds fewer items than the stream finished (gateways such as new-api and
    LiteLLM, and the Codex backend, send ``output: []``), the items are read from the
    ``response.output_item.done`` events instead, in their ``output_index`` order; a final
    response with no items after a stream that streamed some is an error, never an empty
    answer.
    """

    def __init__(self, on_delta: DeltaSink | None, *, model: str, provider: str):
        self.on_delta = on_delta
        self.model = model
        self.provider = provider
        self.final: dict[str, Any] | None = None
        self.calls: dict[int, tuple[int, str | None, str | None]] = {}
        self.commentary: set[Any] = set()  # output indexes of commentary messages
        self.items: dict[int, dict[str, Any]] = {}  # response.output_item.done, by index
        self.streamed = False  # text or call arguments came by

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        sink = self.on_delta
        if str(kind).endswith(".delta") and event.get("delta"):
            self.streamed = True
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            commentary = event.get("output_index") in self.commentary
            if sink is not None and event.get("delta") and not commentary:
                sink(StreamDelta("text", event["delta"]))
        elif kind in _REASONING_DELTAS:
            if sink is not None and event.get("delta"):
                sink(StreamDelta("reasoning", event["delta"]))
        elif kind == "response.function_call_arguments.delta":
            n, call_id, name = self._call(event.get("output_index", 0))
            if sink is not None and event.get("delta"):
                sink(StreamDelta("tool_call", event["delta"], n, call_id, name))
        elif kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") == "message" and item.get("phase") == "commentary":
                self.commentary.add(event.get("output_index"))
            elif item.get("type") == "function_call":
                index = event.get("output_index", 0)
                self.calls[index] = (len(self.calls), item.get("call_id"), item.get("name"))
                if sink is not None:
                    n, call_id, name = self.calls[index]
                    sink(StreamDelta("tool_call", "", n, call_id, name))
        elif kind == "response.output_item.done":
            item, index = event.get("item"), event.get("output_index")
            if isinstance(item, dict) and isinstance(index, int):
                self.items[index] = item
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.final = event.get("response") or {}
            if kind == "response.failed":
                raise _failed(self.final.get("error"), self.provider)
        elif kind == "error":
            raise _failed(event, self.provider)

    def _call(self, index: int) -> tuple[int, str | None, str | None]:
        if index not in self.calls:
            self.calls[index] = (len(self.calls), None, None)
        return self.calls[index]

    def finish(self, ended: bool = True) -> LLMToolResponse:
        if self.final is None:
            raise incomplete_stream(self.provider)
        final, output = self.final, self.final.get("output")
        if isinstance(output, list) and len(output) < len(self.items):
            final = {**final, "output": [self.items[i] for i in sorted(self.items)]}
        elif output == [] and self.streamed:
            raise ProviderError(
                f"{self.provider}: the stream's final response holds none of the items it "
                "streamed (output: []); the response is not used",
                provider=self.provider,
            )
        try:
            return parse_responses(final, model=self.model, provider=self.provider)
        except ValueError as exc:
            raise ProviderError(
                f"{self.provider}: unexpected response from the server ({exc})",
                provider=self.provider,
            ) from None


__all__ = [
    "CLIENT_SIDE",
    "PROVIDER_RUN",
    "ChatStream",
    "ResponsesStream",
    "approval_response",
    "chat_message",
    "chat_reasoning",
    "chat_system",
    "chat_tools",
    "message_item",
    "parse_chat",
    "parse_responses",
    "provider_item",
    "reasoning_item",
    "reasoning_tokens",
    "response_format_chat",
    "responses_items",
    "responses_tools",
    "text_format_responses",
    "tool_choice_chat",
    "tool_choice_responses",
]
