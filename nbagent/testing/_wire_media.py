"""Images and files on the fake server's three wire formats, checked as the APIs do.

- Chat Completions: ``image_url`` (a ``data:`` URL) and ``file`` (``file_data``)
  parts, in user messages only; tool messages are text only. ``input_audio`` (base64
  ``data``, ``format`` wav or mp3) likewise, and only for an audio model (a name with
  an ``audio`` part: ``gpt-audio``, ``gpt-4o-audio-preview``).
- Responses: ``input_image`` / ``input_file`` in user messages and in a
  ``function_call_output``'s output list; no audio input anywhere.
- Anthropic: ``image`` / ``document`` blocks (base64 source) in user messages
  and in ``tool_result`` content, never in an assistant message; no audio block.

In strict mode a part the real API would refuse gets its 400: bad base64,
bytes that are not the declared format, an unsupported format, an image over
the API's size limit, an image where the API takes none.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from .._media import (
    IMAGE_TYPES,
    MAX_IMAGE_BASE64_ANTHROPIC,
    MAX_IMAGE_BYTES_OPENAI,
    hears_audio,
    sniff,
    sniff_audio,
)
from ._script import WireError

_DATA_URL = re.compile(r"^data:([a-z]+/[a-z0-9.+-]+);base64,(.*)$", re.DOTALL)


def _invalid(message: str, param: str | None = None) -> WireError:
    return WireError(400, message, code="invalid_value", param=param)


def _decode(text: Any) -> bytes | None:
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _openai_data(url: Any, where: str, *, image: bool) -> WireError | None:
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if match is None:
        return _invalid(f"Invalid '{where}'. Expected a base64-encoded data URL.", where)
    declared, data = match.group(1), _decode(match.group(2))
    if data is None:
        return _invalid(f"Invalid '{where}'. Expected a base64-encoded data URL.", where)
    actual = sniff(data[:16])
    if image:
        if actual not in IMAGE_TYPES or declared not in IMAGE_TYPES:
            return _invalid(
                "You uploaded an unsupported image. Please make sure your image has of one "
                "the following formats: ['png', 'jpeg', 'gif', 'webp'].",
                where,
            )
        if len(data) > MAX_IMAGE_BYTES_OPENAI:
            return _invalid(f"Invalid '{where}'. Image exceeds the 20 MB limit.", where)
    elif actual != "application/pdf" or declared != "application/pdf":
        return _invalid(f"Invalid '{where}'. The file is not a valid PDF.", where)
    return None


def _chat_audio(part: Mapping[str, Any], where: str, model: str) -> WireError | None:
    if hears_audio("chat", model) is not None:
        return _invalid(
            f"Invalid '{where}'. This model does not support audio input: input_audio "
            "is only supported by audio models.",
            where,
        )
    audio = part.get("input_audio")
    audio = audio if isinstance(audio, Mapping) else {}
    fmt = audio.get("format")
    if fmt not in ("wav", "mp3"):
        return _invalid(
            f"Invalid value: '{fmt}'. Supported values are: 'wav' and 'mp3'.",
            f"{where}.input_audio.format",
        )
    data = _decode(audio.get("data"))
    if data is None or sniff_audio(data[:16]) != ("audio/wav" if fmt == "wav" else "audio/mpeg"):
        return _invalid(
            f"Invalid '{where}.input_audio.data'. The audio data is not valid {fmt}.",
            f"{where}.input_audio.data",
        )
    return None


def _chat_parts(message: Mapping[str, Any], i: int, model: str) -> WireError | None:
    content = message.get("content")
    if not isinstance(content, list):
        return None
    role = message.get("role")
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "input_audio":
            where = f"messages[{i}].content[{j}]"
            if role != "user":
                return _invalid(
                    f"Invalid '{where}'. Audio is only allowed for messages with role "
                    f"'user', but this message with role '{role}' contains it.",
                    where,
                )
            error = _chat_audio(part, where, model)
            if error is not None:
                return error
        if kind in ("image_url", "file"):
            if role != "user":
                return _invalid(
                    f"Invalid 'messages[{i}]'. Image URLs and files are only allowed for "
                    f"messages with role 'user', but this message with role '{role}' "
                    "contains one.",
                    f"messages.[{i}].content.[{j}]",
                )
            where = f"messages[{i}].content[{j}]"
            if kind == "image_url":
                url = (part.get("image_url") or {}).get("url")
                error = _openai_data(url, f"{where}.image_url.url", image=True)
            else:
                data = (part.get("file") or {}).get("file_data")
                error = _openai_data(data, f"{where}.file.file_data", image=False)
            if error is not None:
                return error
    return None


def _responses_parts(content: Any, where: str, *, allowed: bool) -> WireError | None:
    if not isinstance(content, list):
        return None
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        at = f"{where}[{j}]"
        if kind == "input_audio":
            return _invalid(
                "Invalid value: 'input_audio'. Supported values are: 'input_text', "
                "'input_image', and 'input_file'.",
                f"{at}.type",
            )
        if kind in ("input_image", "input_file") and not allowed:
            return _invalid(f"Invalid '{at}': '{kind}' is only allowed in user input.", at)
        if kind == "input_image":
            if part.get("detail") not in ("low", "high", "auto", "original"):
                return _invalid(f"Missing required parameter: '{at}.detail'.", f"{at}.detail")
            error = _openai_data(part.get("image_url"), f"{at}.image_url", image=True)
        elif kind == "input_file":
            error = _openai_data(part.get("file_data"), f"{at}.file_data", image=False)
        else:
            error = None
        if error is not None:
            return error
    return None


def _anthropic_block(block: Mapping[str, Any], where: str) -> WireError | None:
    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return _invalid(f"{where}.source: Input should be a base64 source")
    media = source.get("media_type")
    raw = source.get("data")
    if block.get("type") == "image":
        if media not in IMAGE_TYPES:
            return _invalid(
                f"{where}.source.base64.media_type: Input should be 'image/jpeg', "
                "'image/png', 'image/gif' or 'image/webp'"
            )
        if isinstance(raw, str) and len(raw) > MAX_IMAGE_BASE64_ANTHROPIC:
            return _invalid(
                f"{where}.source.base64: image exceeds 5 MB maximum: {len(raw)} bytes > "
                f"{MAX_IMAGE_BASE64_ANTHROPIC} bytes"
            )
    elif media != "application/pdf":
        return _invalid(f"{where}.source.base64.media_type: Input should be 'application/pdf'")
    data = _decode(raw)
    if data is None:
        return _invalid(f"{where}.source.base64.data: The data is not valid base64.")
    if sniff(data[:16]) != media:
        kind = "Image" if block.get("type") == "image" else "Document"
        return _invalid(
            f"{where}.source.base64.data: {kind} does not match the provided media type {media}"
        )
    return None


def _anthropic_content(content: Any, where: str, role: Any) -> WireError | None:
    if not isinstance(content, list):
        return None
    for j, block in enumerate(content):
        if not isinstance(block, Mapping):
            continue
        at = f"{where}.content.{j}"
        kind = block.get("type")
        if kind in ("audio", "input_audio"):
            return _invalid(
                f"{at}: Input tag '{kind}' found using 'type' does not match any of the "
                "expected tags"
            )
        if kind in ("image", "document"):
            if role != "user":
                return _invalid(
                    f"{at}: `{kind}` blocks are only allowed in `user` messages and tool results"
                )
            error = _anthropic_block(block, at)
            if error is not None:
                return error
        elif kind == "tool_result":
            error = _anthropic_content(block.get("content"), at, "user")
            if error is not None:
                return error
    return None


def check_media(api: str, body: Mapping[str, Any]) -> WireError | None:
    """The 400 the API answers for an image or file part it refuses (``None``: fine)."""
    if api == "chat":
        for i, message in enumerate(body.get("messages") or ()):
            model = str(body.get("model") or "")
            if isinstance(message, Mapping) and (error := _chat_parts(message, i, model)):
                return error
    elif api == "responses":
        for i, item in enumerate(body.get("input") or ()):
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "function_call_output":
                out = item.get("output")
                error = _responses_parts(out, f"input[{i}].output", allowed=True)
            else:
                user = item.get("role") == "user"
                error = _responses_parts(item.get("content"), f"input[{i}].content", allowed=user)
            if error is not None:
                return error
    else:
        for i, message in enumerate(body.get("messages") or ()):
            if isinstance(message, Mapping):
                role = message.get("role")
                error = _anthropic_content(message.get("content"), f"messages.{i}", role)
                if error is not None:
                    return error
    return None
