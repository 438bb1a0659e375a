"""An MCP server's resources and prompts, as values a chat can use.

- :class:`MCPResource`: one listed resource (``server.resources()``); ``read()``
  gives its contents, and it attaches itself to a question
  (``chat.ask(text, resources=[...])``, through its ``attachment()``).
- Contents (``server.read_resource(uri)``) are an :class:`~nbagent.mcp.MCPResult`:
  the text (text contents as they are, a binary one as a line naming it), its images
  and PDFs as parts, the raw contents, and ``uri``; it attaches itself too.
- :class:`MCPPrompt` (``server.prompts()``) describes a prompt and its arguments;
  ``server.prompt(name, **arguments)`` gives :class:`MCPPromptMessages`, the text of
  its last user message (a ``str``: ``chat.ask(prompt)``) carrying the messages
  before it (``before``), which ``ask`` adds first.
- :class:`ResourceReader`: the tool that lets the model read a resource (a link a
  tool's result carried, or one it was told of), offered when the server lists a
  resource or a resource template; gated by the server's approval rule like any of
  its tools (read-only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._result_text import part_label
from .._types import ChatMessage, Part
from .._unicode import clean
from ._results import MCPResult, block_part, block_text

READ_TOOL = "read_resource"
"""The remote-style name of the read tool (``<prefix>_read_resource`` for the model)."""


class _Embedded:
    """A resource's contents seen as an embedded-resource block (one mapping for both)."""

    type = "resource"

    def __init__(self, resource: Any):
        self.resource = resource


def contents_value(result: Any, uri: str) -> MCPResult:
    """A ``ReadResourceResult`` as an :class:`MCPResult` with ``uri`` set."""
    contents = list(getattr(result, "contents", None) or [])
    lines: list[str] = []
    parts: list[Part] = []
    raw: list[dict[str, Any]] = []
    for c in contents:
        block = _Embedded(c)
        part = block_part(block)
        if part is None:
            lines.append(clean(block_text(block)))
        else:
            parts.append(part)
            lines.append(part_label(len(parts), part))
        dump = getattr(c, "model_dump", None)
        raw.append(dump(mode="json", by_alias=True, exclude_none=True) if callable(dump) else {})
    value = MCPResult("\n".join(lines), None, raw, tuple(parts))
    value.uri = uri
    return value


@dataclass(frozen=True)
class MCPResource:
    """One resource a server lists (``server.resources()``).

    Attributes:
        uri: Its URI (what :meth:`~nbagent.MCPServer.read_resource` takes).
        name: Its name.
        title: A title for people, if the server gave one.
        description: What it is, if the server said.
        mime_type: Its media type, if the server said.
        size: Its size in bytes, if the server said.
        server: The server's label.
    """

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    server: str = ""
    _source: Any = field(default=None, repr=False, compare=False)

    def read(self) -> MCPResult:
        """Its contents now (``server.read_resource(self.uri)``)."""
        if self._source is None:
            raise RuntimeError(f"resource {self.uri!r} is not bound to a server")
        result: MCPResult = self._source.read_resource(self.uri)
        return result

    def attachment(self) -> tuple[str, str, tuple[Part, ...]]:
        """What ``chat.ask(..., resources=[this])`` adds: read now."""
        return self.read().attachment()


@dataclass(frozen=True)
class MCPPromptArgument:
    """One argument of a prompt: its name, what it is, whether it is required."""

    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True)
class MCPPrompt:
    """One prompt a server offers (``server.prompts()``).

    Attributes:
        name: What :meth:`~nbagent.MCPServer.prompt` takes.
        title: A title for people, if the server gave one.
        description: What it is for.
        arguments: Its arguments (all strings).
        server: The server's label.
    """

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[MCPPromptArgument, ...] = ()
    server: str = ""


class MCPPromptMessages(str):
    """A prompt's messages, ready to ask with: ``chat.ask(server.prompt("review", code=...))``.

    The ``str`` is the text of its last user message; ``before`` holds the messages
    that come before it (``ask`` adds them first, in the same turn), ``parts`` that
    message's images. ``messages`` is every message as the server gave it.

    Attributes:
        name: The prompt's name.
        description: What the server said it is.
        messages: Every message (:class:`~nbagent.ChatMessage`, ``user`` or ``assistant``).
        before: The messages before the last user message.
        parts: The last user message's images (and PDFs).
    """

    name: str
    description: str | None
    messages: tuple[ChatMessage, ...]
    before: tuple[ChatMessage, ...]
    parts: tuple[Part, ...]

    def __new__(
        cls, name: str, description: str | None, messages: tuple[ChatMessage, ...]
    ) -> MCPPromptMessages:
        last = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        text = messages[last].content if last is not None else ""
        self = super().__new__(cls, text)
        self.name, self.description, self.messages = name, description, messages
        self.before = messages[:last] if last is not None else messages
        self.parts = messages[last].parts if last is not None else ()
        return self

    def __repr__(self) -> str:
        return f"<MCPPromptMessages {self.name!r}: {len(self.messages)} message(s)>"


def _same(text: str) -> str:
    return text


def _text_of(value: Any, scrub: Callable[[str], str]) -> str | None:
    return None if value is None else scrub(str(value))


def prompt_messages(
    name: str, result: Any, scrub: Callable[[str], str] = _same
) -> MCPPromptMessages:
    """A ``GetPromptResult`` as :class:`MCPPromptMessages` (its text through ``scrub``: the
    server's secrets out)."""
    out: list[ChatMessage] = []
    for m in getattr(result, "messages", None) or []:
        role = "assistant" if str(getattr(m, "role", "user")) == "assistant" else "user"
        block = m.content
        part = block_part(block)
        if part is not None and role == "user":
            out.append(ChatMessage("user", part_label(1, part), parts=(part,)))
        else:
            out.append(ChatMessage(role, scrub(clean(block_text(block)))))  # type: ignore[arg-type]
    merged: list[ChatMessage] = []
    for m in out:  # consecutive messages of one role become one (what every API expects)
        if merged and merged[-1].role == m.role:
            prev = merged[-1]
            merged[-1] = ChatMessage(
                prev.role, f"{prev.content}\n{m.content}", parts=(*prev.parts, *m.parts)
            )
        else:
            merged.append(m)
    return MCPPromptMessages(
        name, _text_of(getattr(result, "description", None), scrub), tuple(merged)
    )


def resource_of(definition: Any, server: Any) -> MCPResource:
    """A listed resource bound to ``server`` (an ``MCPServer``: it reads itself there);
    its title and description through the server's scrub."""
    scrub = getattr(server, "_scrub_text", _same)
    return MCPResource(
        uri=str(definition.uri),
        name=str(getattr(definition, "name", "") or definition.uri),
        title=_text_of(getattr(definition, "title", None), scrub),
        description=_text_of(getattr(definition, "description", None), scrub),
        mime_type=getattr(definition, "mime_type", None),
        size=getattr(definition, "size", None),
        server=server.label,
        _source=server,
    )


def prompt_of(definition: Any, server: Any) -> MCPPrompt:
    """A listed prompt of ``server`` (an ``MCPServer``); its text through the server's scrub."""
    scrub = getattr(server, "_scrub_text", _same)
    return MCPPrompt(
        name=str(definition.name),
        title=_text_of(getattr(definition, "title", None), scrub),
        description=_text_of(getattr(definition, "description", None), scrub),
        arguments=tuple(
            MCPPromptArgument(
                str(a.name), _text_of(getattr(a, "description", None), scrub), bool(a.required)
            )
            for a in (getattr(definition, "arguments", None) or [])
        ),
        server=server.label,
    )


def read_tool_definition() -> Any:
    """The read tool as the SDK would list it (so an ``MCPTool`` can be made of it)."""
    from mcp.types import Tool as ToolDefinition
    from mcp.types import ToolAnnotations

    return ToolDefinition(
        name=READ_TOOL,
        description=(
            "Read one of this server's resources by its URI (a resource link a tool result "
            "gave, or a URI you were told of). Returns its contents."
        ),
        input_schema={
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
            "required": ["uri"],
            "additionalProperties": False,
        },
        annotations=ToolAnnotations(read_only_hint=True),
    )
