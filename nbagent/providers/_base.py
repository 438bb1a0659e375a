"""The provider seam: one request value, one method (and its async twin).

A :class:`ModelRequest` holds everything one model request needs; every
provider implements ``complete(request)`` and ``complete_async(request)``,
returning a neutral :class:`~nbagent.LLMToolResponse`. SDK objects never leave
an adapter. Adding a request parameter means adding a field to
:class:`ModelRequest` and mapping it to the wire in the adapters that support
it; no signature repeats the list.

Ragrails' spelling of one request, ``complete_with_tools(messages=, system=,
tools=)`` and its async twin, is written once over that seam
(:class:`CompleteWithToolsMixin`): it builds the ``ModelRequest``
(:func:`tool_request`) and calls ``complete`` / ``complete_async``. Every
provider nbagent ships inherits it; it is not a member of the :class:`Provider`
protocol, so a provider of your own that implements ``complete`` alone still
works everywhere a provider is taken.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .._errors import ToolArgumentsError, ToolOptionError
from .._hosted import HostedTool
from .._output import Output, as_output
from .._schema import NAME_RE
from .._secrets import redacted, scrub
from .._types import (
    AssistantToolCallMessage,
    ChatMessage,
    LLMToolResponse,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)


@dataclass(frozen=True)
class StreamDelta:
    """A fragment of a streaming response.

    Attributes:
        kind: ``"text"``, ``"tool_call"`` or ``"reasoning"`` (thinking text or a
            reasoning summary).
        text: Text fragment, or a fragment of a call's JSON arguments.
        index: Which tool call of the response (for ``tool_call``).
        call_id: The call id, once known.
        name: The tool name, once known.
    """

    kind: Literal["text", "tool_call", "reasoning"]
    text: str = ""
    index: int = 0
    call_id: str | None = None
    name: str | None = None


DeltaSink = Callable[[StreamDelta], None]
ToolDefinition = ToolSpec | Mapping[str, Any]


_SCHEMA_KEYS = ("input_schema", "parameters", "inputSchema")
"""Where a tool dict may keep its JSON Schema: Anthropic's key, OpenAI's, MCP's."""
_PASSED_OVER: tuple[str, ...] = ("type", "strict", "cache_control", "title", "outputSchema")
_PASSED_OVER += ("annotations", "_meta", "icons", "execution", "output_schema", "meta")
_PASSED_OVER += ("input_examples", "defer_loading", "eager_input_streaming")
"""Keys the APIs' own tool formats carry that a tool dict may keep and nbagent does not
use: ``type`` (Responses' ``"function"``, Anthropic's ``"custom"``), ``strict`` (the
adapters decide), ``cache_control`` (``Chat(cache=True)`` places its own), Anthropic's
``input_examples``, ``defer_loading`` and ``eager_input_streaming``, and MCP's ``title``,
``outputSchema``, ``annotations``, ``_meta``, ``icons`` and ``execution`` (a listing's
task support), also as the MCP SDK's ``model_dump()`` spells them (``output_schema``,
``meta``)."""
_TOOL_KEYS = ("name", "description", *_SCHEMA_KEYS, *_PASSED_OVER)
_TOOL_SHAPE = (
    "a tool dict has 'name' (required: a non-empty string), and optionally 'description' "
    "(a string) and 'input_schema' (a JSON Schema; or 'parameters' / 'inputSchema')"
)


def _check_keys(tool: Mapping[Any, Any], owner: str) -> None:
    """Refuse a key a tool dict cannot have (a typo such as ``input_shema`` would otherwise
    send the tool with no parameters), naming the nearest known key.

    Raises:
        TypeError: Naming the first unknown key.
    """
    unknown = [k for k in tool if k not in _TOOL_KEYS]
    if unknown:
        key = unknown[0]
        near = difflib.get_close_matches(str(key), _TOOL_KEYS, n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise TypeError(f"{owner}: unknown key {key!r}{hint}; {_TOOL_SHAPE}")
    kind = tool.get("type", "function")
    if kind not in ("function", "custom"):
        raise TypeError(
            f"{owner}: 'type' {kind!r} is not a function tool nbagent can send ('function', "
            "the default); a provider-hosted tool is a HostedMCP, or extra_body="
        )


def as_spec(tool: ToolDefinition) -> ToolSpec:
    """Accept a :class:`ToolSpec`, a tool dict, or an nbagent tool (its ``spec``).

    A dict is ``{"name", "description", "input_schema"}``, only ``name`` required;
    the schema may be under OpenAI's key ``parameters`` or MCP's ``inputSchema``
    instead, and OpenAI's ``{"type": "function", "function": {...}}`` wrapper is
    taken off. It is checked as the APIs will check it: the name is 1 to 64
    characters of ``[a-zA-Z0-9_-]``, the description a string, the schema a JSON
    Schema of an object (a tool's arguments are a JSON object); a dict with no
    schema takes no arguments. Keys of the APIs' own tool formats that nbagent does
    not use are passed over (``type``, ``strict``, ``cache_control``, MCP's
    ``title``, ``outputSchema``, ``annotations``); any other key is refused, naming
    the nearest known one (``input_shema``: ``input_schema``), rather than sending
    the tool without what the key meant.

    Raises:
        TypeError: Anything else, naming what is wrong (before anything is sent).
    """
    if isinstance(tool, ToolSpec):
        return tool
    spec = getattr(tool, "spec", None)
    if isinstance(spec, ToolSpec):
        return spec
    if (
        isinstance(tool, Mapping)
        and "name" not in tool
        and tool.get("type") == "function"
        and isinstance(tool.get("function"), Mapping)
    ):
        extra = sorted(str(k) for k in tool if k not in ("type", "function"))
        if extra:
            raise TypeError(
                f"a tool definition {{'type': 'function', 'function': {{...}}}} has unknown "
                f"key {extra[0]!r} next to 'function'; {_TOOL_SHAPE}"
            )
        tool = tool["function"]  # OpenAI's Chat Completions wrapper
    if not isinstance(tool, Mapping):
        raise TypeError(
            "a tool definition needs 'name': it is a dict, a ToolSpec or an nbagent tool; "
            f"got {tool!r:.200}; {_TOOL_SHAPE}"
        )
    named = isinstance(tool.get("name"), str) and bool(tool["name"])
    _check_keys(tool, f"tool {tool['name']!r}" if named else "a tool definition")
    if not named:
        raise TypeError(f"a tool definition needs 'name'; {_TOOL_SHAPE}; got {tool!r:.200}")
    name = tool["name"]
    if not NAME_RE.match(name):
        raise TypeError(
            f"tool {name!r}: invalid name; providers accept 1 to 64 characters from "
            "[a-zA-Z0-9_-] (no spaces or dots)"
        )
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise TypeError(
            f"tool {name!r}: 'description' must be a string; got {type(description).__name__}"
        )
    given = [k for k in _SCHEMA_KEYS if tool.get(k) is not None]
    if len(given) > 1 and any(tool[k] != tool[given[0]] for k in given[1:]):
        raise TypeError(
            f"tool {name!r}: its schema is given twice, differently ({' and '.join(given)}); "
            "keep one ('input_schema')"
        )
    schema = tool[given[0]] if given else None
    if schema is not None and not isinstance(schema, Mapping):
        raise TypeError(
            f"tool {name!r}: '{given[0]}' must be a JSON Schema dict; got {type(schema).__name__}"
        )
    if not schema:
        schema = {"type": "object", "properties": {}}
    if schema.get("type") != "object":
        raise TypeError(
            f"tool {name!r}: '{given[0]}' must describe an object ({{'type': 'object', "
            f"'properties': {{...}}}}): a tool's arguments are a JSON object; got "
            f"type {schema.get('type')!r}"
        )
    return ToolSpec(
        name=name,
        description=description or "",
        # a dict is kept, not copied: its identity keys the adapters' wire cache
        input_schema=schema if isinstance(schema, dict) else dict(schema),
    )


@dataclass(frozen=True)
class ModelRequest:
    """One request to a model, provider-neutral (a plain value; the chat builds one per step).

    Lists are accepted for ``messages`` and ``tools`` and stored as tuples;
    tools may be :class:`~nbagent.ToolSpec` values or plain dicts with
    ``name``, ``description`` and ``input_schema`` (JSON Schema), stored as
    ``ToolSpec`` values.

    Attributes:
        messages: The transcript, oldest first.
        system: System instructions.
        tools: Tool definitions.
        tool_choice: Already resolved by the chat: ``"auto"``, ``"required"``,
            ``"none"`` or a tool name.
        calls: ``"one"`` or ``"many"`` calls per response; an adapter sends it
            where its wire format has a switch, and the chat enforces it everywhere.
        stream: Stream the response.
        on_delta: Receives :class:`StreamDelta` values while a response streams
            (not part of the value: left out of equality and repr).
        max_tokens: Output token limit, a positive int (default: the provider's own);
            anything else fails here (``TypeError`` or ``ValueError``), before any request.
        hosted: Provider-hosted tools (:class:`~nbagent.HostedMCP`); an adapter
            whose API cannot host them raises :class:`~nbagent.ToolOptionError`.
        output: The structured answer asked for (``chat.ask(output=...)``); an
            adapter sends its strict schema in the API's native field, and
            raises :class:`~nbagent.OutputSchemaError` if it cannot express it.
        reasoning: ``None`` (the provider's default), an effort (``"low"``,
            ``"medium"``, ``"high"``) or a thinking budget in tokens; see
            :mod:`nbagent._reasoning` for each API's mapping.
        cache: Prompt caching (``Chat(cache=True)``): the Anthropic adapter
            marks the tools, the system prompt and the latest messages with
            ``cache_control`` breakpoints; OpenAI caches by itself and ignores it.
    """

    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str = "auto"
    calls: Literal["one", "many"] = "many"
    stream: bool = False
    on_delta: DeltaSink | None = field(default=None, compare=False, repr=False)
    max_tokens: int | None = None
    hosted: tuple[HostedTool, ...] = ()
    output: Output | None = None
    reasoning: str | int | None = None
    cache: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_tokens", checked_max_tokens(self.max_tokens))
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(map(as_spec, self.tools)))
        object.__setattr__(self, "hosted", tuple(self.hosted))
        if self.output is not None and not isinstance(self.output, Output):
            object.__setattr__(self, "output", as_output(self.output))


def checked_max_tokens(value: Any, what: str = "max_tokens", *, optional: bool = True) -> Any:
    """``value`` as an output token limit: a positive int (``None`` where ``optional``).

    Raises:
        TypeError: Not an int (a bool, a float, a str such as ``"100"``), or ``None``
            where a limit is required.
        ValueError: An int below 1.
    """
    if value is None and optional:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        need = "a positive int" + (" or None" if optional else "")
        raise TypeError(f"{what} must be {need}; got {type(value).__name__} {value!r:.40}")
    if value < 1:
        raise ValueError(f"{what} must be at least 1 (an output token limit); got {value}")
    return int(value)


_MESSAGE_TYPES = "ChatMessage, AssistantToolCallMessage or ToolResultMessage"
_ITEMS = "_nbagent_response_items"
"""The attribute linking a call returned by ``complete_with_tools`` to its response's items."""


def _link_items(response: LLMToolResponse) -> LLMToolResponse:
    """Let each call carry its response's provider items back into the next request.

    A thinking model's reasoning (and a hosted tool's items) must go back with the
    calls it led to: Anthropic wants the thinking block first in the assistant turn
    a ``tool_result`` answers, stateless Responses the ``reasoning`` item before its
    ``function_call``. Ragrails' ``AssistantToolCallMessage(content=response.text,
    tool_calls=response.tool_calls)`` has no place for them, so the calls carry them
    (a plain attribute, outside the call's value) and :func:`tool_request` puts them
    on a message that has none.
    """
    if response.items:
        for call in response.tool_calls:
            setattr(call, _ITEMS, response.items)
    return response


_CUT_OFF = ("max_tokens", "context_window")
_STOPPED = ("refusal", "other")
"""Stop reasons of a response the provider stopped without finishing it: a refusal or a
content filter (Chat Completions ``content_filter``, Anthropic ``refusal``, an incomplete
Responses response) or a stop nbagent does not know. Its calls must not run, as a cut-off
response's must not (the chat answers them ``skipped``)."""
_CLIP = 200
"""The most characters of a call's argument text a :class:`ToolArgumentsError` quotes."""


def stop_words(response: LLMToolResponse) -> str:
    """``response``'s stop reason for a message: ``refusal, content_filter`` (the neutral
    reason, then the provider's own where it differs)."""
    raw = str(response.raw_stop_reason or "")[:60]
    return response.stop_reason + (f", {raw}" if raw and raw != response.stop_reason else "")


def _call_problems(response: LLMToolResponse) -> dict[str, str]:
    """The calls of ``response`` that must not run, by id: why."""
    problems: dict[str, str] = {}
    cut = response.stop_reason in _CUT_OFF
    stopped = response.stop_reason in _STOPPED
    for call in response.tool_calls:
        if stopped and not call.hosted:
            problems[call.id] = (
                f"the provider stopped the response (stop reason {stop_words(response)}) "
                f"instead of finishing it, so its call of {call.name} must not run"
            )
        elif cut and not call.hosted:
            problems[call.id] = (
                f"the response was cut off (stop reason {response.stop_reason}) before the "
                f"arguments for {call.name} were complete ({call.parse_error})"
                if call.parse_error is not None
                else f"the response was cut off (stop reason {response.stop_reason}), so the "
                f"arguments for {call.name} may be incomplete"
            )
        elif call.parse_error is not None:
            problems[call.id] = (
                f"the arguments for {call.name} were not a valid JSON object ({call.parse_error})"
            )
    return problems


def _sent(call: ToolCall) -> str:
    """What the model sent as a call's arguments, clipped, keys and passwords hidden."""
    if call.raw_arguments is not None:
        text = call.raw_arguments
    else:
        text = json.dumps(redacted(call.arguments), ensure_ascii=False, default=str)
    if len(text) > _CLIP:
        text = text[:_CLIP] + f"... ({len(text)} characters)"
    return repr(text)


def _checked_calls(provider: Any, response: LLMToolResponse) -> LLMToolResponse:
    """``response``, unless a call of it must not run (see :class:`ToolArgumentsError`).

    Raises:
        ToolArgumentsError: Naming each such call, its problem and what the model sent.
    """
    problems = _call_problems(response)
    if not problems:
        return response
    name = str(getattr(provider, "name", "") or type(provider).__name__)
    lines = [
        f"  - {c.name} ({c.id}): {problems[c.id]}; the model sent {_sent(c)}"
        for c in response.tool_calls
        if c.id in problems
    ]
    cut = response.stop_reason in _CUT_OFF
    secrets = getattr(provider, "secrets", None)
    message = (
        f"{name}: {len(lines)} tool call(s) of the response must not run as they are "
        "(nothing was run):\n" + "\n".join(lines) + "\nThe whole response is this error's "
        "`.response`; `.problems` says why for each call id. Answer each such call with a "
        "ToolResultMessage saying so instead of running it, then call again"
        + (" (or raise max_tokens)." if cut else ".")
    )
    raise ToolArgumentsError(
        scrub(message, secrets() if callable(secrets) else ()),
        provider=name,
        response=response,
        problems=problems,
    )


_REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(ModelRequest))


def _sequence(value: Any, what: str) -> list[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a list; got {type(value).__name__} {value!r:.80}")
    return list(value)


def _result_content(message: ToolResultMessage, index: int) -> ToolResultMessage:
    """``message`` with JSON-able content (a dict, a list, a number) written as compact JSON."""
    content: Any = message.content
    if isinstance(content, str):
        return message
    if isinstance(content, (dict, list, tuple, int, float, bool)) or content is None:
        try:
            text = json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"messages[{index}]: ToolResultMessage.content is not JSON ({exc}); pass a str"
            ) from None
        return dataclasses.replace(message, content=text, value=content)
    raise TypeError(
        f"messages[{index}]: ToolResultMessage.content must be a str (or a JSON value); "
        f"got {type(content).__name__}"
    )


CHAT_ROLES = ("user", "assistant", "system")
"""The roles a :class:`~nbagent.ChatMessage` may have (a tool's result is a
``ToolResultMessage``)."""


def checked_role(role: Any, where: str) -> None:
    """Refuse a :class:`~nbagent.ChatMessage` role no API has a place for.

    Raises:
        TypeError: Not ``"user"``, ``"assistant"`` or ``"system"``, naming ``where``.
    """
    if isinstance(role, str) and role in CHAT_ROLES:
        return
    hint = ""
    if isinstance(role, str) and role.strip().lower() in CHAT_ROLES:
        hint = f" (meant {role.strip().lower()!r}?)"
    elif role == "tool":
        hint = " (a tool's result is a ToolResultMessage(tool_call_id=call.id, content=...))"
    elif role == "developer":
        hint = " (OpenAI's developer instructions: role 'system', or system=)"
    raise TypeError(
        f"{where}: ChatMessage.role must be 'user', 'assistant' or 'system'; got {role!r:.80}{hint}"
    )


def _checked_message(message: Any, index: int) -> Message:
    """One message of a ``complete_with_tools`` transcript, checked (see :func:`tool_request`)."""
    if isinstance(message, ChatMessage):
        checked_role(message.role, f"messages[{index}]")
        if not isinstance(message.content, str):
            raise TypeError(
                f"messages[{index}]: ChatMessage.content must be a str; "
                f"got {type(message.content).__name__}"
            )
        return message
    if isinstance(message, AssistantToolCallMessage):
        calls = _sequence(message.tool_calls, f"messages[{index}].tool_calls")
        for call in calls:
            if not isinstance(call, ToolCall):
                raise TypeError(
                    f"messages[{index}]: AssistantToolCallMessage.tool_calls holds ToolCall "
                    f"values (response.tool_calls); got {type(call).__name__} {call!r:.80}"
                )
        items = message.items or next(
            (linked for c in calls if (linked := getattr(c, _ITEMS, ()))), ()
        )
        if isinstance(message.tool_calls, tuple) and items is message.items:
            return message
        return dataclasses.replace(message, tool_calls=tuple(calls), items=items)
    if isinstance(message, ToolResultMessage):
        if not isinstance(message.tool_call_id, str) or not message.tool_call_id:
            raise TypeError(
                f"messages[{index}]: ToolResultMessage.tool_call_id must be the id of the "
                f"call it answers (call.id); got {message.tool_call_id!r}"
            )
        return _result_content(message, index)
    hint = ""
    if isinstance(message, Mapping) and "role" in message:
        hint = " (a dict: write ChatMessage(role=..., content=...))"
    raise TypeError(
        f"messages[{index}] is a {type(message).__name__}{hint}; a message is a "
        f"{_MESSAGE_TYPES} (from nbagent import ...)"
    )


def tool_request(
    messages: Iterable[Message],
    system: str | None = None,
    tools: Iterable[ToolDefinition] | None = (),
    **options: Any,
) -> ModelRequest:
    """The :class:`ModelRequest` that ``complete_with_tools(...)`` sends.

    Messages are checked here, so a mistake fails before any request with a
    ``TypeError`` naming the message: each must be a :class:`~nbagent.ChatMessage`
    (its role ``"user"``, ``"assistant"`` or ``"system"``),
    an :class:`~nbagent.AssistantToolCallMessage` (its ``tool_calls`` the
    :class:`~nbagent.ToolCall` values of a response, a list is accepted; without
    ``items`` it gets those of the response its calls came from, so a thinking
    model's reasoning goes back with them) or a
    :class:`~nbagent.ToolResultMessage` (a dict, list or number as ``content``
    is sent as compact JSON). Tools are checked by :func:`as_spec`.

    Args:
        messages: The transcript, oldest first.
        system: System instructions.
        tools: Tool definitions: ``{"name", "description", "input_schema"}`` dicts,
            :class:`~nbagent.ToolSpec` values or nbagent tools (``None``: none).
        **options: Any other :class:`ModelRequest` field (``tool_choice``,
            ``calls``: ``"one"``, ``1`` or ``"many"``, ``stream``, ``on_delta``,
            ``max_tokens``, ``output``, ``reasoning``...).

    Raises:
        TypeError: A message or tool of the wrong shape, an unknown option, or a
            ``max_tokens`` that is not an int.
        ValueError: A ``max_tokens`` below 1.
        ToolOptionError: A ``tool_choice`` naming no tool in ``tools`` (or ``"required"``
            with none).
    """
    unknown = sorted(set(options) - set(_REQUEST_FIELDS))
    if unknown:
        others = ", ".join(f"{n}=" for n in _REQUEST_FIELDS[3:])
        raise TypeError(
            f"complete_with_tools() got an unknown option {', '.join(unknown)}; it takes "
            f"messages=, system=, tools= and {others}"
        )
    if system is not None and not isinstance(system, str):
        raise TypeError(f"system must be a str or None; got {type(system).__name__}")
    calls = options.get("calls", "many")
    if calls == 1 and isinstance(calls, numbers.Integral) and not isinstance(calls, bool):
        options["calls"] = "one"  # as with_tool_options(calls=1)
    elif calls not in ("one", "many"):
        raise TypeError(f"calls must be 'one' (or 1) or 'many'; got {calls!r:.80}")
    choice = options.get("tool_choice", "auto")
    if not isinstance(choice, str) or not choice:
        raise TypeError(
            "tool_choice must be 'auto', 'required', 'none' or a tool's name; "
            f"got {type(choice).__name__} {choice!r:.80}"
        )
    checked = tuple(_checked_message(m, i) for i, m in enumerate(_sequence(messages, "messages")))
    specs = () if tools is None else tuple(as_spec(t) for t in _sequence(tools, "tools"))
    check_choice(choice, [s.name for s in specs], bool(options.get("hosted")))
    return ModelRequest(checked, system=system, tools=specs, **options)


def check_choice(choice: str, names: list[str], hosted: bool) -> None:
    """A forced choice names one of the tools sent (as the chat refuses one it does not have).

    Raises:
        ToolOptionError: A tool name not among ``tools``, or ``"required"`` with no tools.
    """
    if choice in ("auto", "none"):
        return
    if choice == "required":
        if not names and not hosted:
            raise ToolOptionError(
                "tool_choice 'required' needs tools, but none were given (pass tools=)"
            )
        return
    if choice not in names:
        raise ToolOptionError(
            f"tool_choice {choice!r} is not one of the tools given: {sorted(names)} "
            "(pass its definition in tools=, or 'auto', 'required' or 'none')"
        )


class _Completes(Protocol):
    def complete(self, request: ModelRequest) -> LLMToolResponse: ...

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse: ...


class CompleteWithToolsMixin:
    """Ragrails' ``complete_with_tools()`` (and its async twin) over ``complete(request)``.

    Every provider nbagent ships has it. A provider of your own gets it by
    inheriting this class next to implementing ``complete`` and
    ``complete_async``; it is not part of the :class:`Provider` protocol.
    """

    def complete_with_tools(
        self: _Completes,
        *,
        messages: Iterable[Message],
        system: str | None = None,
        tools: Iterable[ToolDefinition] | None = (),
        **options: Any,
    ) -> LLMToolResponse:
        """One model request, provider-neutral: your own tool loop's building block.

        Nothing runs here: the response's ``tool_calls`` (``id``, ``name`` and
        ``arguments`` as a dict) are for your code to check, run and answer with
        an :class:`~nbagent.AssistantToolCallMessage` and one
        :class:`~nbagent.ToolResultMessage` per call; call again until
        ``response.tool_calls`` is empty. A response with a call whose arguments
        did not arrive whole is never returned as if they were ``{}``: it comes
        on a :class:`ToolArgumentsError`.

        Args:
            messages: ``ChatMessage``, ``AssistantToolCallMessage`` and
                ``ToolResultMessage`` values, oldest first.
            system: System instructions.
            tools: ``{"name", "description", "input_schema"}`` dicts (or
                ``ToolSpec`` values, or nbagent tools); ``None``: none.
            **options: Any other :class:`ModelRequest` field: ``tool_choice``
                (``"auto"``, ``"required"``, ``"none"`` or a tool name),
                ``calls`` (``"one"`` / ``"many"``), ``stream`` and ``on_delta``,
                ``max_tokens``, ``output``, ``reasoning``...

        Returns:
            The :class:`~nbagent.LLMToolResponse` (``text``, ``tool_calls``,
            ``input_tokens``, ``output_tokens``, ``model``, ``provider``...).

        Raises:
            TypeError: A message, a tool or an option of the wrong shape (before
                any request is sent).
            ValueError: An option's value out of range (``max_tokens`` below 1); a
                :class:`~nbagent.ToolOptionError` (a ``ValueError``) for a
                ``tool_choice`` naming a tool not in ``tools``.
            ModelNotSupportedError: The model is known not to support tools
                (also a ``NotImplementedError``), before any request is sent.
            ToolArgumentsError: A call's arguments must not be used: not a JSON
                object (cut off, not JSON, a list), or the response was cut off by
                the token limit or stopped by the provider (a refusal, a content
                filter, an incomplete Responses response, a stop reason nbagent does
                not know: ``stop_reason`` ``"refusal"`` or ``"other"``). A
                ``ProviderError``; the response is on it
                (``.response``, and ``.problems``: why, by call id).
            ProviderError: The request failed.
        """
        response = self.complete(tool_request(messages, system, tools, **options))
        return _checked_calls(self, _link_items(response))

    async def complete_with_tools_async(
        self: _Completes,
        *,
        messages: Iterable[Message],
        system: str | None = None,
        tools: Iterable[ToolDefinition] | None = (),
        **options: Any,
    ) -> LLMToolResponse:
        """Async twin of :meth:`complete_with_tools`."""
        response = await self.complete_async(tool_request(messages, system, tools, **options))
        return _checked_calls(self, _link_items(response))


@runtime_checkable
class Provider(Protocol):
    """What the chat needs from a model provider: a name, a model, one method.

    ``complete_with_tools(messages=, system=, tools=, ...)`` and its async twin
    (Ragrails' spelling, for your own tool loop) come with every provider
    nbagent ships, from :class:`CompleteWithToolsMixin`. They are not members of
    this protocol, so a provider that implements ``complete`` and
    ``complete_async`` alone is still a ``Provider``; inherit the mixin to give
    it ``complete_with_tools`` too.
    """

    name: str
    model: str

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        """Send ``request``; return the neutral response."""
        ...

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        """Async twin of :meth:`complete`."""
        ...


class InProcessProvider(CompleteWithToolsMixin):
    """Base for providers that answer in-process, with no I/O to await.

    Subclasses implement :meth:`complete`; the async twin runs it directly on
    the event loop.
    """

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        raise NotImplementedError

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        """Async twin of :meth:`complete` (nothing to await: it just runs it)."""
        return self.complete(request)
