"""An MCP tool's answer (``CallToolResult``) -> the value a call returns.

- ``isError``: :class:`~nbagent.MCPToolError` carrying the tool's text, so
  the call ends as an ``error`` result the model reads.
- content blocks, in order: text as is; an image block (PNG, JPEG, GIF or WebP,
  recognised by its bytes) as a real image part the model sees, with its
  ``[image N: ...]`` line in the text; an audio block holding a WAV or MP3 file
  (recognised by its bytes) as an :class:`~nbagent.AudioPart` with its ``[audio N:
  ...]`` line (the provider's wire sends it where the API takes audio, else says
  why in words); an image or a sound in another format as a one-line placeholder
  naming its type and size; an embedded text resource as its text, a binary one holding an image
  or a PDF as a part, another as a placeholder with its URI; a resource link as a
  line naming it (the model reads it with the server's ``read_resource`` tool,
  see ``_resources.py``).
- ``structuredContent`` with no content block (the spec asks servers to send
  both): its compact JSON.
- a result whose ``structuredContent`` does not match the tool's own ``outputSchema``
  (the SDK refuses it after the tool ran): kept as it came, with a last line saying so
  (``output_error``); an error instead would have the model run a paid call again.

The value is an :class:`MCPResult`, a ``str`` (what the model reads) that
also keeps ``structured_content`` and the raw ``content`` blocks for Python
code (``after_tool_result`` callbacks, ``ToolResultMessage.value``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .._errors import MCPToolError
from .._media import IMAGE_TYPES, sniff, sniff_audio
from .._result_text import part_label
from .._types import AudioPart, FilePart, ImagePart, Part
from .._unicode import clean
from ._connection import OUTPUT_MISMATCH


class MCPResult(str):
    """What an MCP tool answered: the text the model reads, plus the raw parts.

    Attributes:
        structured_content: The tool's ``structuredContent`` (``None`` if it sent none).
        content: The content blocks as JSON objects (images keep their base64 data).
        parts: Its images, PDFs and sounds as :class:`~nbagent.ImagePart` /
            :class:`~nbagent.FilePart` / :class:`~nbagent.AudioPart`, sent to the
            model after the text (whose ``[image N: ...]`` lines stand for them).
    """

    structured_content: Any
    content: list[dict[str, Any]]
    parts: tuple[Part, ...]
    uri: str | None = None
    """The resource it was read from (``server.read_resource(uri)``), else ``None``."""
    output_error: str | None = None
    """Why its ``structured_content`` does not match the tool's ``outputSchema`` (the
    answer is kept as the server sent it), else ``None``."""

    def __new__(
        cls,
        text: str,
        structured_content: Any = None,
        content: list[dict[str, Any]] | None = None,
        parts: tuple[Part, ...] = (),
    ) -> MCPResult:
        self = super().__new__(cls, text)
        self.structured_content = structured_content
        self.content = content or []
        self.parts = tuple(parts)
        return self

    def attachment(self) -> tuple[str, str, tuple[Part, ...]]:
        """What ``chat.ask(..., resources=[this])`` adds: its URI, text and parts."""
        return self.uri or "result", str(self), self.parts


def _size(data: str) -> str:
    try:
        n = len(base64.b64decode(data, validate=False))
    except (ValueError, TypeError):
        n = len(data)
    return f"{n} bytes"


def _decoded(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (ValueError, TypeError):
        return None


def block_part(block: Any) -> Part | None:
    """The image, PDF or sound a content block holds, as a part for the model, else None.

    Only bytes whose format is recognised count (a PNG, JPEG, GIF, WebP image, a PDF
    in an embedded resource, a WAV or MP3 sound): the server's ``mimeType`` is not trusted.
    """
    kind = getattr(block, "type", None)
    if kind == "image":
        data = _decoded(getattr(block, "data", None))
        media = sniff(data[:16]) if data else None
        return ImagePart(data, media) if data and media in IMAGE_TYPES else None
    if kind == "audio":
        data = _decoded(getattr(block, "data", None))
        media = sniff_audio(data[:16]) if data else None
        return AudioPart(data, media) if data and media else None
    if kind == "resource":
        res = block.resource
        data = _decoded(getattr(res, "blob", None))
        media = sniff(data[:16]) if data else None
        if not data or media is None:
            return None
        if media == "application/pdf":
            name = str(res.uri).rstrip("/").rsplit("/", 1)[-1] or "document.pdf"
            return FilePart(data, media, name if name.endswith(".pdf") else f"{name}.pdf")
        return ImagePart(data, media)
    return None


def block_text(block: Any) -> str:
    """One content block as text (a placeholder for what the model cannot read yet)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind == "image":
        return (
            f"[image: {block.mime_type}, {_size(block.data)}; not a PNG, JPEG, GIF or WebP "
            "image, so the model cannot be shown it]"
        )
    if kind == "audio":
        return (
            f"[audio: {block.mime_type}, {_size(block.data)}; not a WAV or MP3 file, so the "
            "model cannot be sent it]"
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
    structured = getattr(result, "structured_content", None)
    if getattr(result, "is_error", False):
        text = "\n".join(clean(block_text(b)) for b in blocks)
        raise MCPToolError(text or "the tool reported an error without a message")
    lines: list[str] = []
    parts: list[Part] = []
    for b in blocks:
        part = block_part(b)
        if part is None:
            lines.append(clean(block_text(b)))
        else:
            parts.append(part)
            lines.append(part_label(len(parts), part))
    text = "\n".join(lines)
    if not blocks and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"), default=str)
    problem = (getattr(result, "meta", None) or {}).get(OUTPUT_MISMATCH)
    if isinstance(problem, str):
        text += (
            f"\n[note: the tool ran and answered the above, but its structured content "
            f"does not match its declared output schema ({clean(problem)})]"
        )
    value = MCPResult(text, structured, [_dump(b) for b in blocks], tuple(parts))
    if isinstance(problem, str):
        value.output_error = clean(problem)
    return value
