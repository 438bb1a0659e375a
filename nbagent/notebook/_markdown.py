"""The model's text as Markdown, rendered to HTML that carries no markup of its own.

Real models answer in Markdown (emphasis, lists, tables, code fences), so the
view renders it, with markdown-it-py (CommonMark plus tables and
strikethrough), configured so that nothing the model wrote becomes active:

- raw HTML is off: a ``<script>``, an ``<img onerror>`` or any other tag is
  shown as the text it is;
- a link is a link only when its URL is ``http:``, ``https:`` or ``mailto:``
  (after markdown-it's normalisation, so ``java\\tscript:`` is not one either);
  ``javascript:``, ``data:``, ``vbscript:``, relative and other links stay text.
  Links open in a new tab, with ``rel="noopener noreferrer nofollow"``;
- images are off: ``![x](url)`` is a plain link, so rendering an answer never
  fetches a URL the model chose (a prompt-injected model cannot leak data
  through an image's query string just by being shown);
- control characters are shown as escapes (:func:`~._html.printable`) first.

markdown-it-py is imported on first use (``import nbagent`` stays fast), and a
text longer than :data:`MARKDOWN_CHARS` is shown as plain text instead.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from .._html import clip, esc, printable

MARKDOWN_CHARS = 200_000

_SAFE_URL = re.compile(r"(?:https?|mailto):", re.IGNORECASE)
_lock = threading.Lock()
_renderer: Any = None


def _safe_link(url: str) -> bool:
    return _SAFE_URL.match(url) is not None


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    token.attrSet("target", "_blank")
    token.attrSet("rel", "noopener noreferrer nofollow")
    return str(self.renderToken(tokens, idx, options, env))


def _markdown_it() -> Any:
    global _renderer
    with _lock:
        if _renderer is None:
            from markdown_it import MarkdownIt

            md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
            md.enable(["table", "strikethrough"])
            md.disable("image")
            md.validateLink = _safe_link  # type: ignore[method-assign]
            md.add_render_rule("link_open", _link_open)
            _renderer = md
        return _renderer


def markdown_html(text: str) -> str:
    """``text`` (the model's Markdown) as safe HTML (see the module docstring)."""
    if len(text) > MARKDOWN_CHARS:
        return f'<div class="nba-plain">{esc(clip(text, MARKDOWN_CHARS))}</div>'
    return str(_markdown_it().render(printable(text)))
