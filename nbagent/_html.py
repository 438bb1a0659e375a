"""Text and HTML primitives shared by every wing that draws: the view, the inbox, comparison.

- :func:`printable`: control characters (C0 but newline and tab, DEL, C1: what
  starts a terminal's escape sequences) shown as ``\\x1b``-style escapes, invisible ones
  (bidi overrides, zero-width characters) as ``\\u``-style escapes;
- :func:`esc`: that, HTML-escaped (quotes too, so it is safe in attributes);
- :func:`md_inline` / :func:`md_text`: text for Markdown with every markup
  character escaped;
- :func:`preview` / :func:`clip`: bounded views of long text; :func:`json_preview`,
  :func:`compact_json`, :func:`short_json`: bounded views of any JSON value;
- :func:`fmt_ms`, :func:`fmt_cost`: a duration, a cost in words;
- :func:`style_tag`: the stylesheet every nbagent drawing shares (JupyterLab's
  theme variables, with fallbacks for nbconvert and other front ends).

A leaf below the wings: it knows no chat, no view, no store; a wing imports it
instead of another wing's renderers.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, get_args

from ._errors import redact_keys
from ._errors import redacted as redacted  # what the view shows of arguments: one definition
from ._secrets import shown_as
from ._types import CallStatus

PREVIEW_CHARS = 160
RESULT_CHARS = 20_000

# Every call status in words: its name, spaced, except the one that asks for something.
STATUS_WORDS: dict[str, str] = {
    **{status: status.replace("_", " ") for status in get_args(CallStatus)},
    "awaiting_approval": "needs approval",
    "awaiting_input": "needs an answer",
}

# Characters that are not seen but change what is: bidi embeddings, overrides and isolates
# (U+202A-202E, U+2066-2069), direction marks (U+200E/200F, U+061C), zero-width and other
# invisible characters (U+200B-200D, U+2060-2064, U+FEFF, U+180E, the soft hyphen) and tag
# characters (U+E0000-E007F, text no one sees). With them a card could read "DE89 8765 4321"
# for an IBAN that runs as "DE89 <U+202E>1234 5678", or hide a word from the person approving.
# (Written as code points: none of them is a glyph the view draws.)
_INVISIBLE_RANGES = (
    (0xAD, 0xAD),
    (0x61C, 0x61C),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x2069),
    (0xFEFF, 0xFEFF),
    (0xE0000, 0xE007F),
)
INVISIBLE = "".join(f"{chr(a)}-{chr(b)}" for a, b in _INVISIBLE_RANGES)
"""Those characters, as a regular expression's character class holds them."""
# Control characters a terminal acts on (C0 but \n and \t, DEL, C1), the invisible ones
# above, and line ends.
_CONTROL = re.compile(r"\r\n?|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + INVISIBLE + "]")
_ZWJ = chr(0x200D)


def _show_control(m: re.Match[str]) -> str:
    c = m[0]
    if c == "\r\n":
        return "\n"
    if c == "\r":
        return "\\r"
    n = ord(c)
    if n <= 0xFF:
        return f"\\x{n:02x}"
    if c == _ZWJ and _joins_emoji(m.string, m.start()):
        return c  # an emoji sequence (a family, a flag): drawn as one picture, hides no text
    if c in _JOINERS and _joins_letters(m.string, m.start()):
        return c  # Persian, Arabic, Indic words are written with them ("می‌خواهم")
    if c in _MARKS and _beside_rtl(m.string, m.start()):
        return c  # a direction mark in right-to-left text, as Hebrew and Arabic are written
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


_JOINERS = (chr(0x200C), chr(0x200D))  # zero-width non-joiner and joiner
_MARKS = (chr(0x200E), chr(0x200F), chr(0x61C))  # left-to-right, right-to-left, Arabic marks


def _joins_letters(text: str, at: int) -> bool:
    """Whether the joiner at ``at`` follows a letter (or a mark: a virama) of a script
    written with joiners, and comes before no letter of another (from Hebrew on: not Latin,
    Greek or Cyrillic, where one only hides a difference: "examp<ZWNJ>le.com" reads as
    example.com)."""
    import unicodedata

    def written_with_joiners(c: str) -> bool:
        return ord(c) >= 0x590 and (c.isalpha() or unicodedata.category(c).startswith("M"))

    before, after = text[at - 1 : at], text[at + 1 : at + 2]
    if not before or not written_with_joiners(before):
        return False
    return not after or not after.isalpha() or written_with_joiners(after)


def _beside_rtl(text: str, at: int) -> bool:
    """Whether the mark at ``at`` touches a right-to-left letter (Hebrew, Arabic...)."""
    import unicodedata

    beside = text[at - 1 : at] + text[at + 1 : at + 2]  # not the mark: it is "R" itself
    return any(unicodedata.bidirectional(c) in ("R", "AL") for c in beside)


def _joins_emoji(text: str, at: int) -> bool:
    """Whether the zero-width joiner at ``at`` joins two pictographs (an emoji sequence)."""
    import unicodedata

    before, after = text[at - 1 : at], text[at + 1 : at + 2]
    if before and (ord(before) == 0xFE0F or 0x1F3FB <= ord(before) <= 0x1F3FF):
        return bool(after) and unicodedata.category(after) == "So"  # after a variation, a tone
    return (
        bool(before and after)
        and unicodedata.category(before) == "So"
        and unicodedata.category(after) == "So"
    )


def printable(text: str) -> str:
    """``text`` with its control characters shown as escapes (``\\x1b``, ``\\r``), so an
    escape sequence is seen, not acted on, and its invisible ones too (a bidi override, a
    zero-width space, as backslash, ``u`` and its code point; see :data:`INVISIBLE`), so what
    shows is what the text holds; newlines and tabs stay, CRLF becomes LF."""
    if text.isprintable() or _CONTROL.search(text) is None:  # the first: a fast common case
        return text
    return _CONTROL.sub(_show_control, text)


def esc(text: object) -> str:
    """HTML-escape anything (quotes included, so it is safe in attributes too)."""
    return html.escape(printable(str(text)), quote=True)


def fmt_ms(ms: float | None) -> str:
    """A duration in words: ``<1 ms``, ``12 ms``, ``1.50 s`` (empty for ``None``)."""
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


def clip(text: str, limit: int = RESULT_CHARS, sep: str = "\n") -> str:
    """``text`` cut at ``limit`` characters, with a note (after ``sep``) saying how many
    more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}{sep}… {len(text) - limit:,} more characters"


# ------------------------------------------------------------------ bounded JSON
def pretty_json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


VALUE_CHARS = 2_000  # a string (a value or a key) longer than this shows its start
ARGUMENTS_CHARS = 20_000  # arguments whose JSON is longer than this show a preview
_MAX_DEPTH = 40  # deeper containers show as {…} / […]


def json_preview(
    value: Any, *, limit: int = ARGUMENTS_CHARS, value_chars: int = VALUE_CHARS
) -> tuple[str, bool]:
    """``(text, whole)``: ``value`` as pretty JSON when that is at most ``limit`` characters
    (``whole`` is true), else a bounded preview: each string's first ``value_chars``
    characters, about ``limit`` characters in all, and notes such as
    ``… 1,998,000 more characters`` or ``… 49,000 more keys`` for what is left out.

    The cost is bounded by ``limit``, not by the size of ``value`` (a 2 MB string or
    50,000 keys cost what ``limit`` characters cost), so a view can call it on
    anything a model sent.
    """
    if fits(value, limit):
        try:
            text = pretty_json(value)
        except RecursionError:
            text = ""
        else:
            if len(text) <= limit:
                return json_visible(text), True
    return json_visible(_Preview(limit, value_chars).render(value)), False


_C1 = re.compile(r"[\x7f-\x9f" + INVISIBLE + "]")


def _json_escape(m: re.Match[str]) -> str:
    n = ord(m[0])
    if n <= 0xFFFF:
        return f"\\u{n:04x}"
    n -= 0x10000  # JSON writes a character past U+FFFF as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"


def json_visible(text: str) -> str:
    """DEL, C1 and invisible characters (which JSON leaves as they are) as ``\\u`` escapes:
    the text stays the same JSON (the editor's text parses back to the same value), and a
    terminal escape sequence or a bidi override in it is seen, not acted on."""
    if text.isascii() or _C1.search(text) is None:
        return text
    return _C1.sub(_json_escape, text)


# ------------------------------------------------------------------ secrets
_REDACT_DEPTH = 200  # a container deeper than this shows as "…" (json_preview stops at 40)


SECRET_EDITED = (
    "A value in these arguments holds a secret the card shows as ***, and the edit changed "
    "the text around it, so the secret cannot be put back. Keep that value as the card shows "
    "it (it then runs with the real one), or give the arguments in code: "
    "chat.approve(call, arguments=...)."
)


def unredacted(edited: Any, original: Any) -> Any:
    """``edited`` (arguments a person edited, starting from :func:`redacted` ``original``)
    with each value shown redacted put back as ``original`` holds it: a value left as the
    card showed it runs with its real text, never with ``***``. Raises ``ValueError``
    (:data:`SECRET_EDITED`) for a text that holds ``***`` but is neither a value of
    ``original`` nor one shown redacted (the edit changed text around a secret), or a
    redacted value that stands for two different secrets."""
    hidden: dict[str, str | None] = {}  # shown -> the real text (None: two real texts)
    real: set[str] = set()
    for text in _strings(original):
        real.add(text)
        shown = redact_keys(text)
        if shown != text:
            hidden[shown] = text if hidden.get(shown, text) == text else None
    if not hidden and redacted(original) is original:
        return edited

    def back(text: str) -> str:
        if text in hidden:
            found = hidden[text]
            if found is None:
                raise ValueError(SECRET_EDITED)
            return found
        if "***" in text and text not in real:
            raise ValueError(SECRET_EDITED)
        return text

    def walk(v: Any, was: Any, key: Any, depth: int) -> Any:
        # ``was``: what ``original`` holds where ``v`` is (``_NONE``: nothing); a value
        # left as the card showed it there (``"password": "***"``) is that value
        if isinstance(v, str):
            # a value shown as *** under a secret's name (a string, a number, a dict whole)
            if was is not _NONE and v != was and v == shown_as(was, key):
                return was
            return back(v)
        if depth >= _REDACT_DEPTH:
            return v
        if isinstance(v, dict):
            olds = was if isinstance(was, dict) else {}
            out = {}
            for k, x in v.items():
                real_k = back(k) if isinstance(k, str) else k
                out[real_k] = walk(x, olds.get(real_k, _NONE), real_k, depth + 1)
            return out
        if isinstance(v, list):
            items = list(was) if isinstance(was, list | tuple) else []
            matched = _matched(v, items, key)
            return [walk(x, o, key, depth + 1) for x, o in zip(v, matched, strict=True)]
        return v

    return walk(edited, original, None, 0)


_NONE = object()


def _matched(edited: list[Any], olds: list[Any], key: Any = None) -> list[Any]:
    """For each item of an edited list, the original item it stands for (``_NONE``: none
    known): an item left as shown is that item wherever it moved (its shown form is one
    original's only); another is the item at its place only when the list kept its length
    and no item moved. A secret is never put back into another item than its own: a
    deleted or moved entry would have given its password to its neighbour. ``key``: the
    list's name: under a secret's, every item shows as ``***`` (a literal ``***`` the model
    wrote among them too), so no shown form is one item's and the items keep their places;
    judged without it, the literal was the only ``***`` and every item left as shown became
    it: the tool ran with ``***`` for the real secret, told the user had edited it."""
    shown: dict[str, int | None] = {}
    for j, o in enumerate(olds):
        form = _form(shown_as(o, key))
        shown[form] = j if form not in shown else None  # two alike: which is unknown
    exact: list[int | None] = [shown.get(_form(x)) for x in edited]
    in_place = len(edited) == len(olds) and all(j is None or j == i for i, j in enumerate(exact))
    out: list[Any] = []
    for i, found in enumerate(exact):
        if found is not None:
            out.append(olds[found])
        elif in_place:
            out.append(olds[i])
        else:
            out.append(_NONE)
    return out


def _form(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def _strings(value: Any) -> list[str]:
    """Every string in ``value`` (keys too), to :data:`_REDACT_DEPTH`."""
    out: list[str] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif depth < _REDACT_DEPTH and isinstance(v, dict):
            out.extend(k for k in v if isinstance(k, str))
            stack.extend((x, depth + 1) for x in v.values())
        elif depth < _REDACT_DEPTH and isinstance(v, (list, tuple)):
            stack.extend((x, depth + 1) for x in v)
    return out


def fits(value: Any, limit: int) -> bool:
    """Whether ``value``'s pretty JSON may fit in ``limit`` characters: a lower bound of its
    length (strings unescaped, each item on its own indented line) is at most ``limit``.
    Stops as soon as the bound passes ``limit``, so it visits O(limit) items."""
    size = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            size += len(v) + 2
        elif isinstance(v, (dict, list, tuple)):
            size += 2 + len(v) * (2 * depth + 3)  # per item: newline, indent (, comma)
            if size > limit:
                return False
            if isinstance(v, dict):
                for k, x in v.items():
                    size += len(k) + 4 if isinstance(k, str) else 3
                    stack.append((x, depth + 1))
            else:
                stack.extend((x, depth + 1) for x in v)
        else:
            size += 1
        if size > limit:
            return False
    return True


class _Preview:
    """Pretty JSON with a budget: long strings clipped, containers cut when it runs out.

    Each item of a container gets an equal share of what is left of the container's
    budget, so one huge value cannot hide its siblings (the ``path`` after 50,000 keys
    of ``data`` is still shown).
    """

    def __init__(self, limit: int, value_chars: int):
        self.limit = limit
        self.value_chars = value_chars
        self.parts: list[str] = []
        self.size = 0

    def render(self, value: Any) -> str:
        self.value(value, 0, self.limit)
        return "".join(self.parts)

    def emit(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def value(self, v: Any, depth: int, stop: int) -> None:
        """Render ``v``; a container stops adding items once the output reaches ``stop``."""
        if isinstance(v, str):
            self.string(v)
        elif isinstance(v, dict):
            self.container(v, v.items(), depth, stop, "{}", "key")
        elif isinstance(v, (list, tuple)):
            self.container(v, v, depth, stop, "[]", "item")
        else:
            try:
                text = json.dumps(v, ensure_ascii=False, default=str)
            except (TypeError, ValueError, RecursionError):
                text = repr(v)
            self.emit(clip(text, self.value_chars, sep=""))

    def string(self, s: str) -> None:
        if len(s) <= self.value_chars:
            self.emit(json.dumps(s, ensure_ascii=False))
        else:
            head = json.dumps(s[: self.value_chars], ensure_ascii=False)
            self.emit(f"{head}… {len(s) - self.value_chars:,} more characters")

    def container(
        self, v: Any, items: Any, depth: int, stop: int, brackets: str, noun: str
    ) -> None:
        n = len(v)
        if n == 0:
            self.emit(brackets)
            return
        if depth >= _MAX_DEPTH:
            self.emit(f"{brackets[0]}… {_count(n, noun)}{brackets[1]}")
            return
        pad = "  " * (depth + 1)
        self.emit(brackets[0])
        for i, item in enumerate(items):
            if self.size >= stop:
                self.emit(f"\n{pad}… {_count(n - i, 'more ' + noun)}")
                break
            self.emit(",\n" + pad if i else "\n" + pad)
            if noun == "key":
                key, item = item
                self.string(key if isinstance(key, str) else _key(key))
                self.emit(": ")
            self.value(item, depth + 1, self.size + (stop - self.size) // (n - i))
        self.emit("\n" + "  " * depth + brackets[1])


def _key(key: Any) -> str:
    """A non-string key as JSON writes it (``true``, ``null``, ``3``)."""
    try:
        return json.dumps(key) if isinstance(key, (bool, int, float)) or key is None else str(key)
    except (TypeError, ValueError):
        return repr(key)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def compact_json(value: Any, limit: int) -> str | None:
    """``value`` as compact JSON when that is at most ``limit`` characters, else ``None``
    (the cost is bounded by ``limit``, not by ``value``)."""
    if not fits(value, 3 * limit):
        return None
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if len(text) <= limit else None


def short_json(value: Any, limit: int = 200) -> str:
    """``value`` as one line of at most ``limit`` characters: its compact JSON when that
    fits, else the start of a bounded preview of it."""
    text = compact_json(value, max(limit, 200))
    if text is None:
        text = json_preview(value, limit=400, value_chars=100)[0]
    return text if len(text) <= limit and "\n" not in text else preview(text, limit)


def fmt_cost(usd: float) -> str:
    """A cost in dollars: ``$0``, ``$0.0123`` under a dollar, ``$1,234.50`` above."""
    if usd == 0:
        return "$0"
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"


# Characters that start markup anywhere on a line: HTML and entities (as entities, so
# no renderer's pre-pass sees a tag), emphasis, code, links and images, headings,
# tables, strikethrough, math, e-mail autolinks. A backslash before a bracket is an
# entity too: JupyterLab's math pre-pass reads a doubled backslash there as \( or \[.
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MD_CHARS = re.compile(
    r"[&<>\\`*_{}\[\]#|~$@]"
    r"|(?<=[0-9A-Za-z]):(?=\S)"  # a scheme's colon: no autolink (http://..., mailto:x)
    r"|(?<=:)/|(?<=:/)/"  # and no protocol-relative //host after it
    r"|(?<=[Ww]{3})\."  # www.host
)
# What starts a block at the start of a line: indentation (an indented code block),
# list items, setext underlines, definition lists.
_MD_LINE = re.compile(r"^(?:([ \t]+)(?=\S)|([-+=:])|(\d+)([.)]))", re.MULTILINE)


def _md_char(m: re.Match[str]) -> str:
    c = m[0]
    if c == "\\" and m.string[m.end() : m.end() + 1] in ("(", ")", "[", "]"):
        return "&#92;"
    return _MD_ESCAPES.get(c) or "\\" + c


def _md_line(m: re.Match[str]) -> str:
    if m[1]:
        return m[1].replace("\t", "    ").replace(" ", "&nbsp;")
    if m[2]:
        return "\\" + m[2]
    return f"{m[3]}\\{m[4]}"


def md_inline(text: str) -> str:
    """Text for a markdown line: every markup character escaped, line breaks as spaces.

    Nothing in it can start a link, an autolink, an image, raw HTML, emphasis,
    code or math; the rendered text reads as written.
    """
    text = printable(text).replace("\n", " ")
    return _MD_CHARS.sub(_md_char, text)


def md_text(text: str) -> str:
    """Text of several lines for markdown: :func:`md_inline` escapes, line breaks kept
    (as hard breaks), and no line can start a block (a list, a quote, a code block...)."""
    text = _MD_CHARS.sub(_md_char, printable(text))
    return _MD_LINE.sub(_md_line, text).replace("\n", "  \n")


CSS = """
.nba-chat { font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, #1f1f1f);
  max-width: 100%; }
.nba-chat .widget-html, .nba-chat .widget-html-content { line-height: 1.4; height: auto;
  margin: 0; align-self: stretch; }
.nba-chat .widget-vbox { margin: 0; }
.nba-entry { margin: 3px 0; box-sizing: border-box; width: 100%; }
.nba-user { border-left: 3px solid var(--jp-brand-color1, #1976d2); padding: 3px 8px;
  background: var(--jp-layout-color2, #eeeeee); white-space: pre-wrap; word-break: break-word; }
.nba-progress-row { display: flex; align-items: center; gap: 6px; margin: 3px 0; }
.nba-progress { width: 14em; max-width: 60%; height: 0.8em;
  accent-color: var(--jp-brand-color1, #1976d2); }
.nba-logs > summary { cursor: pointer; color: var(--jp-ui-font-color2, #616161);
  font-size: 0.92em; }
.nba-logs-bad > summary { color: var(--jp-warn-color0, #e65100); }
.nba-thumbs { display: flex; flex-wrap: wrap; gap: 4px; margin: 3px 0; white-space: normal; }
.nba-thumb { max-height: 160px; max-width: 100%; height: auto; object-fit: contain;
  border: 1px solid var(--jp-border-color2, #e0e0e0); background: #fff; }
.nba-audio { height: 32px; max-width: 100%; vertical-align: middle; }
.nba-thumb-label { color: var(--jp-ui-font-color2, #616161); font-style: italic; }
.nba-who { font-weight: 600; margin-right: 6px; color: var(--jp-ui-font-color2, #616161); }
.nba-text { padding: 3px 8px; word-break: break-word;
  border-left: 3px solid var(--jp-border-color2, #e0e0e0); }
.nba-plain { white-space: pre-wrap; }
.nba-thinking { padding: 1px 8px; color: var(--jp-ui-font-color2, #616161);
  border-left: 3px dotted var(--jp-border-color2, #e0e0e0); word-break: break-word; }
.nba-thinking > summary { cursor: pointer; font-style: italic; }
.nba-commentary { padding: 1px 8px; color: var(--jp-ui-font-color2, #616161); font-style: italic;
  border-left: 3px dotted var(--jp-border-color2, #e0e0e0); word-break: break-word; }
.nba-sources { padding: 1px 8px; font-size: 90%; color: var(--jp-ui-font-color2, #616161); }
.nba-sources ol { margin: 0; padding-left: 22px; }
.nba-streaming::after { content: "\\258D"; color: var(--jp-brand-color1, #1976d2); }
.nba-md > :first-child { margin-top: 0; }
.nba-md > :last-child { margin-bottom: 0; }
.nba-md p, .nba-md ul, .nba-md ol, .nba-md pre, .nba-md table, .nba-md blockquote {
  margin: 0 0 6px 0; }
.nba-md ul, .nba-md ol { padding-left: 22px; }
.nba-md h1, .nba-md h2, .nba-md h3, .nba-md h4, .nba-md h5, .nba-md h6 {
  font-size: var(--jp-ui-font-size2, 15px); margin: 6px 0 4px 0; line-height: 1.3; }
.nba-md h1, .nba-md h2 { font-size: var(--jp-ui-font-size3, 17px); }
.nba-md code { font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); background: var(--jp-layout-color2, #eeeeee);
  padding: 0 3px; border-radius: 3px; }
.nba-md pre { background: var(--jp-layout-color2, #eeeeee); padding: 4px 8px; overflow: auto;
  border-radius: 3px; }
.nba-md pre code { background: none; padding: 0; white-space: pre; }
.nba-md blockquote { border-left: 3px solid var(--jp-border-color1, #bdbdbd); padding-left: 8px;
  color: var(--jp-ui-font-color2, #616161); }
.nba-md a { color: var(--jp-content-link-color, #1976d2); }
.nba-md table, .nba-rich table { border-collapse: collapse;
  font-size: var(--jp-ui-font-size1, 13px); }
.nba-md th, .nba-md td, .nba-rich th, .nba-rich td {
  border: 1px solid var(--jp-border-color2, #e0e0e0); padding: 2px 8px; text-align: left; }
.nba-rich td { text-align: right; }
.nba-md th, .nba-rich th { background: var(--jp-layout-color2, #eeeeee); font-weight: 600; }
.nba-rich { overflow: auto; max-height: 28em; margin: 2px 0; white-space: normal; }
.nba-rich p { margin: 2px 0; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-step { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px);
  padding: 1px 8px; }
.nba-step.nba-failed { color: var(--jp-error-color1, #d32f2f); }
.nba-card { border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 4px;
  padding: 3px 8px; background: var(--jp-layout-color1, #ffffff); }
.nba-card.nba-st-awaiting_approval { border-color: var(--jp-warn-color0, #f57c00);
  border-left-width: 3px; }
.nba-card.nba-st-error, .nba-card.nba-st-timed_out, .nba-card.nba-error-card {
  border-color: var(--jp-error-color1, #d32f2f); border-left-width: 3px; }
.nba-card.nba-st-denied { border-left: 3px solid var(--jp-error-color2, #e57373); }
.nba-card.nba-st-ok { border-left: 3px solid var(--jp-success-color1, #388e3c); }
.nba-card.nba-st-running, .nba-card.nba-st-approved {
  border-left: 3px solid var(--jp-brand-color1, #1976d2); }
.nba-card.nba-done { padding: 1px 8px; }
.nba-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: baseline; }
.nba-chat details.nba-done > summary.nba-head { display: flex; flex-wrap: nowrap;
  overflow: hidden; white-space: nowrap; color: inherit; font-size: inherit; list-style: none; }
.nba-chat details.nba-done > summary.nba-head::-webkit-details-marker { display: none; }
.nba-chat details.nba-done > summary.nba-head::before { content: "\\25B8";
  color: var(--jp-ui-font-color2, #616161); }
.nba-chat details.nba-done[open] > summary.nba-head::before { content: "\\25BE"; }
.nba-done > summary > * { flex: none; }
.nba-done > summary > .nba-sum, .nba-done > summary > .nba-args1 { flex: 0 1 auto;
  min-width: 0; overflow: hidden; text-overflow: ellipsis; }
.nba-chat details.nba-done > summary.nba-peeking { flex-wrap: wrap; }
.nba-done > summary.nba-peeking > .nba-sum { flex: 1 1 0; }
.nba-done > summary > .nba-peek { flex: 1 0 100%; white-space: normal; padding-left: 14px;
  cursor: pointer; }
.nba-chat details.nba-done[open] > summary > .nba-peek:not(.nba-peek-media) { display: none; }
.nba-peek .nba-thumb { max-height: 64px; }
.nba-chat details.nba-done[open] > summary > .nba-peek-media .nba-thumb { max-height: 160px; }
.nba-peek .nba-rich { max-height: 8em; overflow: hidden; }
.nba-body { padding: 2px 0 2px 14px; }
.nba-chip { font-size: var(--jp-ui-font-size0, 11px); padding: 0 6px; border-radius: 8px;
  border: 1px solid var(--jp-warn-color0, #f57c00); color: var(--jp-warn-color0, #f57c00); }
.nba-tool { font-family: var(--jp-code-font-family, monospace); font-weight: 600; }
.nba-server { font-family: var(--jp-code-font-family, monospace);
  border: 1px solid var(--jp-border-color1, #bdbdbd); border-radius: 6px; padding: 0 4px;
  color: var(--jp-ui-font-color2, #616161); }
.nba-item .nba-tag { font-size: var(--jp-ui-font-size0, 11px); }
.nba-args1 { font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); color: var(--jp-content-font-color1, inherit);
  background: none; padding: 0; }
.nba-sum { color: var(--jp-ui-font-color2, #616161); }
.nba-line { padding: 0 8px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  border-left: 3px solid var(--jp-border-color2, #e0e0e0); }
.nba-line.nba-st-ok { border-left-color: var(--jp-success-color1, #388e3c); }
.nba-line.nba-st-error, .nba-line.nba-st-timed_out {
  border-left-color: var(--jp-error-color1, #d32f2f); }
.nba-line code { font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); }
.nba-err-line { color: var(--jp-error-color1, #d32f2f); }
.nba-args { display: grid; grid-template-columns: max-content 1fr; column-gap: 10px;
  row-gap: 1px; margin: 2px 0; }
.nba-arg { display: contents; }
.nba-args > .nba-arg > * { min-width: 0; overflow-wrap: anywhere; }
.nba-fold > summary { overflow-wrap: anywhere; }
.nba-key { font-family: var(--jp-code-font-family, monospace);
  color: var(--jp-ui-font-color2, #616161); }
.nba-val { font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); word-break: break-word; }
.nba-defaults { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px);
  margin: 1px 0; }
.nba-tag { font-style: italic; border: 1px dashed var(--jp-border-color1, #bdbdbd);
  border-radius: 6px; padding: 0 4px; }
.nba-diff { margin: 2px 0; font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); }
.nba-diff .nba-note { font-family: var(--jp-ui-font-family, system-ui, sans-serif); }
.nba-add, .nba-diff ins { color: var(--jp-success-color1, #388e3c); text-decoration: none; }
.nba-del, .nba-diff del { color: var(--jp-error-color1, #d32f2f); }
.nba-dim { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px); }
.nba-ran-before { color: var(--jp-warn-color0, #f57c00); font-size: var(--jp-ui-font-size0, 11px); }
.nba-badge { font-size: var(--jp-ui-font-size0, 11px); padding: 0 6px; border-radius: 8px;
  background: var(--jp-layout-color3, #bdbdbd); color: var(--jp-ui-inverse-font-color1, #fff); }
.nba-b-ok { background: var(--jp-success-color1, #388e3c); }
.nba-b-error, .nba-b-timed_out { background: var(--jp-error-color1, #d32f2f); }
.nba-b-denied { background: var(--jp-error-color2, #e57373); }
.nba-b-awaiting_approval { background: var(--jp-warn-color0, #f57c00); }
.nba-b-running, .nba-b-approved { background: var(--jp-brand-color1, #1976d2); }
.nba-chat pre.nba-json, .nba-chat pre.nba-result, .nba-chat pre.nba-block {
  font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 12px); background: var(--jp-layout-color2, #eeeeee);
  color: var(--jp-content-font-color1, inherit); margin: 2px 0; padding: 3px 6px; max-height: 14em;
  overflow: auto; white-space: pre-wrap; word-break: break-word; border: 0; }
.nba-args pre.nba-block { margin: 0; }
.nba-chat details > summary { cursor: pointer; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-err { color: var(--jp-error-color1, #d32f2f); white-space: pre-wrap; word-break: break-word; }
.nba-note { color: var(--jp-ui-font-color2, #616161); font-size: var(--jp-ui-font-size0, 11px); }
.nba-controls:empty { display: none; }
.nba-chat table.nba-parsed { border-collapse: collapse; margin: 2px 0; table-layout: auto; }
.nba-chat table.nba-parsed th.nba-key { white-space: nowrap; word-break: normal;
  overflow-wrap: normal; }
.nba-chat table.nba-parsed td.nba-val { overflow-wrap: anywhere; }
.nba-chat table.nba-parsed caption { text-align: left; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-chat table.nba-parsed th, .nba-chat table.nba-parsed td { text-align: left;
  vertical-align: top; padding: 1px 10px 1px 0; border: 0; font-weight: normal; }
.nba-status { border-top: 1px solid var(--jp-border-color2, #e0e0e0); margin-top: 4px;
  padding: 2px 8px; color: var(--jp-ui-font-color2, #616161);
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-phase-awaiting { color: var(--jp-warn-color0, #f57c00); font-weight: 600; }
.nba-phase-error { color: var(--jp-error-color1, #d32f2f); font-weight: 600; }
.nba-phase-complete { color: var(--jp-success-color1, #388e3c); font-weight: 600; }
.nba-phase-busy { color: var(--jp-brand-color1, #1976d2); font-weight: 600; }
.nba-chat .nba-more { width: auto; max-width: 100%; height: auto; min-height: 24px;
  padding: 1px 10px; overflow: visible; align-self: flex-start;
  font-size: var(--jp-ui-font-size0, 11px); }
.nba-chat .nba-more .widget-label-basic, .nba-chat .nba-more span { overflow: visible;
  text-overflow: clip; white-space: nowrap; }
"""


def style_tag() -> str:
    return f"<style>{CSS}</style>"
