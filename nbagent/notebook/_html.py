"""The view's text primitives: what every renderer uses to show something as text.

- :func:`printable`: control characters (C0 but newline and tab, DEL, C1: what
  starts a terminal's escape sequences) shown as ``\\x1b``-style escapes;
- :func:`esc`: that, HTML-escaped (quotes too, so it is safe in attributes);
- :func:`preview` / :func:`clip`: bounded views of long text;
- :func:`fmt_ms`: a duration in words.

A leaf: the renderers (``_render``, ``_cards``, ``_markdown``, ``_rich``) import
it, it imports nothing of theirs.
"""

from __future__ import annotations

import html
import re
from typing import get_args

from .._types import CallStatus

PREVIEW_CHARS = 160
RESULT_CHARS = 20_000

# Every call status in words: its name, spaced, except the one that asks for something.
STATUS_WORDS: dict[str, str] = {
    **{status: status.replace("_", " ") for status in get_args(CallStatus)},
    "awaiting_approval": "needs approval",
}

# Control characters a terminal acts on (C0 but \n and \t, DEL, C1), and line ends.
_CONTROL = re.compile(r"\r\n?|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _show_control(m: re.Match[str]) -> str:
    c = m[0]
    if c == "\r\n":
        return "\n"
    return "\\r" if c == "\r" else f"\\x{ord(c):02x}"


def printable(text: str) -> str:
    """``text`` with its control characters shown as escapes (``\\x1b``, ``\\r``), so an
    escape sequence is seen, not acted on; newlines and tabs stay, CRLF becomes LF."""
    if text.isprintable() or _CONTROL.search(text) is None:  # the first: a fast common case
        return text
    return _CONTROL.sub(_show_control, text)


def esc(text: object) -> str:
    """HTML-escape anything (quotes included, so it is safe in attributes too)."""
    return html.escape(printable(str(text)), quote=True)


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1:
        return "<1 ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.2f} s"


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """One line of at most ``limit`` characters (looks at the start of ``text`` only)."""
    head = text[: 4 * limit]
    flat = " ".join(head.split())
    if len(flat) <= limit and len(head) == len(text):
        return flat
    return flat[: limit - 1] + "…"


def clip(text: str, limit: int = RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters)"
