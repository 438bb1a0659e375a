"""The provider seam: one request value, one method (and its async twin).

A :class:`ModelRequest` holds everything one model request needs; every
provider implements ``complete(request)`` and ``complete_async(request)``,
returning a neutral :class:`~nbagent.LLMToolResponse`. SDK objects never leave
an adapter. Adding a request parameter means adding a field to
:class:`ModelRequest` and mapping it to the wire in the adapters that support
it; no signature repeats the list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .._hosted import HostedTool
from .._output import Output, as_output
from .._types import LLMToolResponse, Message, ToolSpec


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


def as_spec(tool: ToolDefinition) -> ToolSpec:
    """Accept a :class:`ToolSpec` or a ``{"name", "description", "input_schema"}`` dict."""
    if isinstance(tool, ToolSpec):
        return tool
    try:
        schema = tool.get("input_schema")
        return ToolSpec(
            name=str(tool["name"]),
            description=str(tool.get("description", "")),
            # a dict is kept, not copied: its identity keys the adapters' wire cache
            input_schema=schema
            if isinstance(schema, dict) and schema
            else dict(schema or {"type": "object", "properties": {}}),
        )
    except (KeyError, TypeError) as exc:
        raise TypeError(
            f"a tool definition needs 'name', 'description' and 'input_schema'; got {tool!r}"
        ) from exc


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
        max_tokens: Output token limit (default: the provider's own).
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
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(map(as_spec, self.tools)))
        object.__setattr__(self, "hosted", tuple(self.hosted))
        if self.output is not None and not isinstance(self.output, Output):
            object.__setattr__(self, "output", as_output(self.output))


@runtime_checkable
class Provider(Protocol):
    """What the chat needs from a model provider: a name, a model, one method."""

    name: str
    model: str

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        """Send ``request``; return the neutral response."""
        ...

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        """Async twin of :meth:`complete`."""
        ...


class InProcessProvider:
    """Base for providers that answer in-process, with no I/O to await.

    Subclasses implement :meth:`complete`; the async twin runs it directly on
    the event loop.
    """

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        raise NotImplementedError

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        """Async twin of :meth:`complete` (nothing to await: it just runs it)."""
        return self.complete(request)
