"""A tool result's rich form (a pandas DataFrame's table), rebuilt as inert HTML.

A tool that returns a DataFrame should show the table Jupyter would show, not
squashed text. The object's ``_repr_html_()`` gives that table, already bounded
the way pandas bounds it (``display.max_rows`` / ``max_columns``: head, tail and
``...``). But that HTML comes from user code (any object can define
``_repr_html_``, and a DataFrame's cells hold whatever the tool put there), so
it is never put into the view as it is. :func:`rich_html` parses it and
**rebuilds** it from an allowlist: table markup (``table``, ``thead``, ``tr``,
``th``, ``td``...) and a few text tags, no attribute but ``colspan`` /
``rowspan`` with a number, every piece of text escaped again, and the content
of ``script``, ``style``, ``iframe`` and the like dropped. Whatever the input,
the output can hold no script, link, image, style or event handler; at worst
it is a mangled table.

Anything whose HTML is larger than :data:`RICH_CHARS`, that raises, or that
has no ``_repr_html_`` shows as text (the result the model read).
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from .._html import esc

RICH_CHARS = 300_000

_KEEP = frozenset(
    {
        "table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption", "colgroup", "col",
        "p", "div", "span", "br", "b", "strong", "i", "em", "code", "small", "sub", "sup",
    }
)  # fmt: skip
_VOID = frozenset({"br", "col"})
# Tags whose content is not text to show.
_DROP = frozenset(
    {
        "script", "style", "iframe", "object", "embed", "template", "svg", "math", "noscript",
        "textarea", "title", "head", "select", "canvas", "audio", "video", "frameset", "xmp",
    }
)  # fmt: skip
_SPANS = frozenset({"colspan", "rowspan"})


class _Rebuild(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROP:
            self.skip += 1
            return
        if self.skip or tag not in _KEEP:
            return
        kept = "".join(
            f' {name}="{int(value)}"'
            for name, value in attrs
            if name in _SPANS
            and value is not None
            and value.strip().isdigit()
            and 0 < int(value) <= 1000
        )
        self.out.append(f"<{tag}{kept}>")
        if tag not in _VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROP:
            self.skip = max(0, self.skip - 1)
            return
        if self.skip or tag not in self.open:
            return
        while self.open:  # close what was left open inside it
            top = self.open.pop()
            self.out.append(f"</{top}>")
            if top == tag:
                break

    def handle_data(self, data: str) -> None:
        if not self.skip and not (data.isspace() and "\n" in data):  # pretty-printing only
            self.out.append(esc(data))

    def result(self) -> str:
        self.close()
        self.out.extend(f"</{tag}>" for tag in reversed(self.open))
        self.open.clear()
        return "".join(self.out)


def sanitize_table_html(markup: str) -> str:
    """``markup`` rebuilt from the allowlist (see the module docstring)."""
    parser = _Rebuild()
    parser.feed(markup)
    return parser.result()


def rich_html(value: Any) -> str | None:
    """The inert HTML of ``value``'s rich form, or ``None`` when it has none (or a bad one)."""
    if value is None or isinstance(value, (str, bytes, int, float, dict, list, tuple)):
        return None
    method = getattr(type(value), "_repr_html_", None)
    if method is None:
        return None
    try:
        markup = method(value)
        if isinstance(markup, tuple):  # (data, metadata), as IPython allows
            markup = markup[0]
        if not isinstance(markup, str) or not markup or len(markup) > RICH_CHARS:
            return None
        html = sanitize_table_html(markup)
    except Exception:  # the object's own code: its failure only costs the rich form
        return None
    return html if "<table" in html else None


def rich_label(value: Any) -> str:
    """A few words for a rich result's summary line: ``DataFrame, 200 rows × 3 columns``."""
    kind = type(value).__name__
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and len(shape) == 2 and all(isinstance(n, int) for n in shape):
        rows, cols = shape
        return f"{kind}, {rows:,} row{'s' if rows != 1 else ''} × {cols:,} column" + (
            "s" if cols != 1 else ""
        )
    return kind
