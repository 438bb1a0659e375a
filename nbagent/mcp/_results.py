"""An MCP tool's answer (``CallToolResult``) -> the value a call returns.

- ``isError``: :class:`~nbagent.MCPToolError` carrying the tool's text, so
  the call ends as an ``error`` result the model reads.
- content blocks, in order: text as is; an image or audio block as a one-line
  placeholder naming its type and size (images are not sent to the model
  yet); an embedded text resource as its text; a binary resource or a
  resource link as a placeholder with its URI.
- ``structuredContent`` with no content block (the spec asks servers to send
  both): its compact JSON.

The value is an :class:`MCPResult`, a ``str`` (what the model reads) that
also keeps ``structured_content`` and the raw ``content`` blocks for Python
code (``after_tool_result`` callbacks, ``ToolResultMessage.value``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .._errors import MCPToolError
from .._unicode import clean


class MCPResult(str):
    """What an MCP tool answered: the text the model reads, plus the raw parts.

    Attributes:
        structured_content: The tool's ``structuredContent`` (``None`` if it sent none).
        content: The content blocks as JSON objects (images keep their base64 data).
    """

    structured_content: Any
    content: list[dict[str, Any]]

    def __new__(
        cls, text: str, structured_content: Any = None, content: list[dict[str, Any]] | None = None
    ) -> MCPResult:
        self = super().__new__(cls, text)
        self.structured_content = structured_content
        self.content = content or []
        return self


def _size(data: str) -> str:
    try:
        n = len(base64.b64decode(data, validate=False))
    except (ValueError, TypeError):
        n = len(data)
    return f"{n} bytes"


def block_text(block: Any) -> str:
    """One content block as text (a placeholder for what the model cannot read yet)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return (
            f"[{kind}: {block.mime_type}, {_size(block.data)}; "
            f"{kind}s from tools are not shown to the model yet]"
        )
    if kind == "resource":
        res = block.resource
        if getattr(res, "text", None) is not None:
            return str(res.text)
        mime = getattr(res, "mime_type", None) or "binary"
        return f"[resource {res.uri}: {mime}, {_size(getattr(res, 'blob', ''))}]"
    if kind == "resource_link":
        name = getattr(block, "name", "") or ""
        return f"[resource link: {block.uri}{' (' + name + ')' if name else ''}]"
    return f"[{kind or type(block).__name__} content]"


def _dump(block: Any) -> dict[str, Any]:
    dump = getattr(block, "model_dump", None)
    if callable(dump):
        out = dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(out, dict):
            return out
    return {"type": str(getattr(block, "type", "unknown"))}


def result_value(result: Any) -> MCPResult:
    """The value of a call from its ``CallToolResult``.

    Raises:
        MCPToolError: The result has ``isError`` set (its text is the message).
    """
    blocks = list(getattr(result, "content", None) or [])
    text = "\n".join(clean(block_text(b)) for b in blocks)
    structured = getattr(result, "structured_content", None)
    if getattr(result, "is_error", False):
        raise MCPToolError(text or "the tool reported an error without a message")
    if not blocks and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"), default=str)
    return MCPResult(text, structured, [_dump(b) for b in blocks])
