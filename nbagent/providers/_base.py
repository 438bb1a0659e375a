"""The provider seam: one method (and its async twin) every adapter implements.

``complete_with_tools`` takes the neutral transcript and tool definitions and
returns a neutral :class:`~nbagent.LLMToolResponse`; SDK objects never leave an
adapter. Tools may be :class:`~nbagent.ToolSpec` values or plain dicts with
``name``, ``description`` and ``input_schema`` (JSON Schema).

``tool_choice`` is already resolved by the chat: ``"auto"``, ``"required"``,
``"none"`` or a tool name. ``calls`` is ``"one"`` or ``"many"``; an adapter sends
it where its wire format has a switch and the chat enforces it everywhere.
While a response streams, ``on_delta`` receives :class:`StreamDelta` values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .._types import LLMToolResponse, Message, ToolSpec


@dataclass(frozen=True)
class StreamDelta:
    """A fragment of a streaming response.

    Attributes:
        kind: ``"text"`` or ``"tool_call"``.
        text: Text fragment, or a fragment of a call's JSON arguments.
        index: Which tool call of the response (for ``tool_call``).
        call_id: The call id, once known.
        name: The tool name, once known.
    """

    kind: Literal["text", "tool_call"]
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
        return ToolSpec(
            name=str(tool["name"]),
            description=str(tool.get("description", "")),
            input_schema=dict(tool.get("input_schema") or {"type": "object", "properties": {}}),
        )
    except (KeyError, TypeError) as exc:
        raise TypeError(
            f"a tool definition needs 'name', 'description' and 'input_schema'; got {tool!r}"
        ) from exc


@runtime_checkable
class Provider(Protocol):
    """What the chat needs from a model provider."""

    name: str
    model: str

    def complete_with_tools(
        self,
        *,
        messages: Sequence[Message],
        system: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        tool_choice: str = "auto",
        calls: Literal["one", "many"] = "many",
        stream: bool = False,
        on_delta: DeltaSink | None = None,
        max_tokens: int | None = None,
    ) -> LLMToolResponse: ...

    async def complete_with_tools_async(
        self,
        *,
        messages: Sequence[Message],
        system: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        tool_choice: str = "auto",
        calls: Literal["one", "many"] = "many",
        stream: bool = False,
        on_delta: DeltaSink | None = None,
        max_tokens: int | None = None,
    ) -> LLMToolResponse: ...


class InProcessProvider:
    """Base for providers that answer in-process, with no I/O to await.

    Subclasses implement ``complete_with_tools``; the async twin runs it
    directly on the event loop.
    """

    def complete_with_tools(
        self,
        *,
        messages: Sequence[Message],
        system: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        tool_choice: str = "auto",
        calls: Literal["one", "many"] = "many",
        stream: bool = False,
        on_delta: DeltaSink | None = None,
        max_tokens: int | None = None,
    ) -> LLMToolResponse:
        raise NotImplementedError

    async def complete_with_tools_async(
        self,
        *,
        messages: Sequence[Message],
        system: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        tool_choice: str = "auto",
        calls: Literal["one", "many"] = "many",
        stream: bool = False,
        on_delta: DeltaSink | None = None,
        max_tokens: int | None = None,
    ) -> LLMToolResponse:
        """Async twin of :meth:`complete_with_tools` (nothing to await: it just runs it)."""
        return self.complete_with_tools(
            messages=messages,
            system=system,
            tools=tools,
            tool_choice=tool_choice,
            calls=calls,
            stream=stream,
            on_delta=on_delta,
            max_tokens=max_tokens,
        )
