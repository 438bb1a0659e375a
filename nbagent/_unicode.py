"""Text that is always valid UTF-8: lone surrogates are replaced where text enters a chat.

JSON may carry a lone surrogate (``"\\ud800"`` is a valid escape), and so may a
tool's result or an exception's message. Python strings hold it happily, but
it cannot be encoded as UTF-8: every later request, the log's Parquet export
and the store would fail. The chat cleans text once, where it enters (the
model's response, the user's text and decisions, a tool's result), replacing a
lone surrogate with U+FFFD; a well-formed pair split into two code points is
joined. Everything downstream (wire, log, store, view) can then encode.
"""

from __future__ import annotations

from typing import Any


class TooDeep(ValueError):
    """A JSON value nested deeper than :data:`MAX_DEPTH`."""


MAX_DEPTH = 200
"""Deepest nesting accepted in tool arguments (JSON Schema validators and encoders
recurse; real arguments are a few levels deep)."""


def clean(text: str) -> str:
    """``text``, with lone surrogates replaced by U+FFFD (the same object when none)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def clean_json(value: Any, depth: int = 0) -> Any:
    """A JSON value with every string (and key) cleaned; the same object when nothing changed.

    Raises:
        TooDeep: nested deeper than :data:`MAX_DEPTH`.
    """
    if isinstance(value, str):
        return clean(value)
    if depth >= MAX_DEPTH and isinstance(value, (dict, list)):
        raise TooDeep(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = clean(k) if isinstance(k, str) else k
            item = clean_json(v, depth + 1)
            changed = changed or key is not k or item is not v
            out[key] = item
        return out if changed else value
    if isinstance(value, list):
        items = [clean_json(v, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


__all__ = ["MAX_DEPTH", "TooDeep", "clean", "clean_json"]
