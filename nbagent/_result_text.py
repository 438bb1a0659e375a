"""Turn a tool's return value into the text a model reads.

- ``str``: as is.
- ``None``: ``"null"`` (the tool ran and returned nothing).
- dict / list / tuple / numbers / bools: compact JSON (a NaN as ``null``, an infinity
  as ``"Infinity"`` / ``"-Infinity"``: the text stays valid JSON).
- dataclasses, pydantic models, enums, datetimes, sets: JSON of their natural form.
- pandas DataFrame / Series: a compact text table; past ``max_rows`` rows the
  head and tail are kept and a note says how many rows were left out.
- anything else: ``str(value)``.

A result may also carry images (:func:`to_result`): a matplotlib figure, a PIL
image, PNG/JPEG/GIF/WebP bytes, an IPython ``Image`` or an
:class:`~nbagent.ImagePart`, alone or in a list/tuple with text, and sounds
(an :class:`~nbagent.AudioPart`). The images
become content parts sent after the text; the text gets one ``[image N: ...]``
line per image (:func:`part_label`) so a log, a store or a text-only reader still
sees them. In a dict, an image value (one level down) becomes its ``[image N: ...]``
label in the JSON and a part the same way. A matplotlib figure is closed once it is a
part (pyplot lets it go: a tool plotting on every call leaves no figure open). A
``str`` that carries its own ``parts`` (an MCP tool's :class:`~nbagent.mcp.MCPResult`,
whose text already has those lines) gives them as they are.

Every result is capped at ``max_chars`` characters with a note saying so, so
one chatty tool cannot flood the context window.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from datetime import date, datetime
from typing import Any

from ._media import close_figure, is_image_like, to_part
from ._secrets import redacted
from ._types import AudioPart, FilePart, ImagePart, Part

MAX_ROWS = 20
MAX_CHARS = 20_000


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return tolist()
    return str(value)


def _json(value: Any) -> str:
    """Compact JSON; a NaN is written ``null`` and an infinity ``"Infinity"``/``"-Infinity"``
    (``NaN`` and ``Infinity`` are not JSON: a reader of the result could not parse it)."""
    try:
        return json.dumps(
            value, ensure_ascii=False, default=_default, separators=(",", ":"), allow_nan=False
        )
    except ValueError:  # a float JSON has no spelling for, somewhere inside
        return json.dumps(
            _finite(value), ensure_ascii=False, default=_default, separators=(",", ":")
        )


def _finite(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able data with its NaNs and infinities spelled as JSON can."""
    if isinstance(value, float):
        if value != value:
            return None
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, str | int | bool) or value is None or depth > 200:
        return value
    if isinstance(value, dict):
        return {k: _finite(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v, depth + 1) for v in value]
    return _finite(_default(value), depth + 1)


def _frame_text(value: Any, max_rows: int) -> str:
    rows = len(value)
    if rows > max_rows:
        half = max_rows // 2
        import pandas as pd

        shown = pd.concat([value.head(half), value.tail(max_rows - half)])
        return f"{_frame_string(shown)}\n[{rows - max_rows} of {rows} rows not shown]"
    return _frame_string(value)


def _frame_string(value: Any) -> str:
    # A Series' to_string has no max_colwidth (it is a DataFrame's option).
    return str(value.to_string(max_colwidth=60) if hasattr(value, "columns") else value.to_string())


def to_content(value: Any, *, max_rows: int = MAX_ROWS, max_chars: int = MAX_CHARS) -> str:
    """Serialise a tool result for the model (see the module docstring)."""
    if isinstance(value, str):
        text = value
    elif value is None:
        text = "null"
    elif type(value).__module__.startswith("pandas") and hasattr(value, "to_string"):
        text = _frame_text(value, max_rows)
    else:
        try:
            text = _json(value)
        except (TypeError, ValueError):
            text = str(value)
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[truncated: {len(text) - max_chars} more characters]"
    return text


def part_label(n: int, part: Part) -> str:
    """The line standing for the ``n``-th image or file of a result in its text."""
    return _label(n, part)


def _label(n: int, part: Part) -> str:
    size = f"{len(part.data) / 1024:.0f} KB"
    return f"[{part.kind} {n}: {part.media_type}, {size}]"


def _is_part(value: Any) -> bool:
    return isinstance(value, AudioPart) or is_image_like(value)


def _part(value: Any) -> Part:
    if isinstance(value, AudioPart):
        return value
    part = to_part(value)
    close_figure(value)  # a tool's figure is kept as its part: pyplot lets it go
    return part


def to_result(
    value: Any, *, max_rows: int = MAX_ROWS, max_chars: int = MAX_CHARS
) -> tuple[str, tuple[Part, ...]]:
    """A tool's return value as text and image parts (see the module docstring)."""
    if isinstance(value, str):
        own = getattr(value, "parts", None)
        if (
            isinstance(own, tuple)
            and own
            and all(isinstance(p, ImagePart | FilePart | AudioPart) for p in own)
        ):
            return to_content(value, max_rows=max_rows, max_chars=max_chars), own
        return to_content(value, max_rows=max_rows, max_chars=max_chars), ()
    if _is_part(value):
        part = _part(value)
        return _label(1, part), (part,)
    if isinstance(value, list | tuple) and any(_is_part(v) for v in value):
        texts: list[str] = []
        parts: list[Part] = []
        for item in value:
            if _is_part(item):
                parts.append(_part(item))
                texts.append(_label(len(parts), parts[-1]))
            else:
                texts.append(to_content(item, max_rows=max_rows, max_chars=max_chars))
        text = "\n".join(texts)
        if len(text) > max_chars:
            text = text[:max_chars] + f"\n[truncated: {len(text) - max_chars} more characters]"
        return text, tuple(parts)
    if isinstance(value, dict) and any(_is_part(v) for v in value.values()):
        found: list[Part] = []
        shown: dict[Any, Any] = {}
        for key, item in value.items():
            if _is_part(item):
                found.append(_part(item))
                item = _label(len(found), found[-1])
            shown[key] = item
        return to_content(shown, max_rows=max_rows, max_chars=max_chars), tuple(found)
    return to_content(value, max_rows=max_rows, max_chars=max_chars), ()


_LABEL = re.compile(r"^\[(image|file|audio) \d+: [^\]]*\]$")


def result_type(content: str, parts: tuple[Part, ...] = ()) -> str:
    """What a result holds, for the log: ``text``, ``json``, ``image``, ``file``, ``audio``,
    ``text+image``, ``text+file``, ``image+file``, ``text+audio``..."""
    kinds = sorted({p.kind for p in parts}, key=("image", "file", "audio").index)
    lines = content.splitlines() if parts else [content]
    text = "\n".join(line for line in lines if not _LABEL.match(line)).strip()
    if text:
        is_json = text[:1] in "{[" and text[-1:] in "}]"
        if is_json:
            try:
                json.loads(text)
            except ValueError:
                is_json = False
        kinds.insert(0, "json" if is_json else "text")
    return "+".join(kinds) or "text"


# After a human edited a call's arguments, the model reads this note before the
# result (so it knows the call did not run as it asked). It is for the model only:
# the views and the log's result_preview show the result without it.
_EDIT_NOTE = "[The user edited the arguments before approving; the tool ran with "


def edit_note(arguments: dict[str, Any]) -> str:
    """The line put before the result of a call run with edited ``arguments`` (what the
    model reads): a secret in them as ``***`` (``"password": "***"``, ``sk-***``), as every
    view shows them; the tool itself runs with the real values."""
    shown = redacted(arguments)
    return f"{_EDIT_NOTE}{json.dumps(shown, ensure_ascii=False, default=str)}]"


def without_edit_note(content: str, edited: bool) -> str:
    """``content`` as a human should read it: the :func:`edit_note` line taken off, when
    the call was ``edited`` (JSON has no raw newline, so the note is the first line)."""
    if not edited or not content.startswith(_EDIT_NOTE):
        return content
    first, _, rest = content.partition("\n")
    return rest if first.endswith("]") else content
