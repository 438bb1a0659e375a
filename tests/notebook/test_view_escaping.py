"""Issue 13, item 13 for the notebook view: what a model or a tool produced stays text.

In every output of the view (the live and static ``text/html``, the
``text/markdown`` and ``text/plain`` fallbacks, and the ``review()`` prompt), a
link, a raw-HTML break-out or a terminal escape sequence coming from the model
(the user's and its text, a tool name, an argument's key or value) or from a
tool (its result), or in a denial's reason, is shown as text and does nothing.
The markdown is checked with real renderers (mistune as nbconvert configures
it, markdown-it), not by looking for substrings; tests/browser checks
JupyterLab's own.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import ipywidgets
import pytest
from _views import widgets_in

from nbagent import Chat, Tool
from nbagent._html import json_preview
from nbagent.notebook import ChatView, review
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.notebook._state import state_for
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply

# ----------------------------------------------------------------------------- vectors
LINKS = (
    "[click](javascript:alert(1)) [here](http://evil.example/x) ![i](http://evil.example/i.png) "
    "<javascript:alert(1)> <http://evil.example/auto> https://evil.example/bare www.evil.example "
    "[ref]\n\n[ref]: http://evil.example/ref"
)
BREAKOUT = "x\n\n<img src=x onerror=alert(1)>\n\n<script>alert(2)</script>\n\n    <a href=http://evil>a</a>"
ANSI = "a\x1b[2Jb \x1b]8;;http://evil\x07link\x1b]8;;\x07 c\x9b31md\x07\x08\x00\x7f\re"
# Code fences and spans that try to close early (a tool name is a code span, a result a fence).
FENCES = "a ``` b `` c\n```\n<img src=x onerror=alert(5)>\n````\n~~~\n<b>x</b>\n`"
VECTORS = {"links": LINKS, "breakout": BREAKOUT, "ansi": ANSI, "fences": FENCES}
# What each vector reads as, once it is shown as text.
AS_TEXT = {
    "links": [
        "[click](javascript:alert(1)) [here](http://evil.example/x)",
        "<javascript:alert(1)>",
    ],
    "breakout": ["<img src=x onerror=alert(1)>", "<script>alert(2)</script>"],
    "ansi": ["a\\x1b[2Jb", "\\x1b]8;;http://evil\\x07link", "\\x9b31md"],
    "fences": ["a ``` b `` c", "<img src=x onerror=alert(5)>"],
}

# Control characters a terminal (or JupyterLab's ANSI renderer) acts on: C0 but \n and \t, DEL, C1.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Echo(Tool):
    """Returns its text."""

    requires_approval = True

    def execute(self, text: str) -> str:
        return f"echo: {text}"


def evil_chat(evil: str) -> Chat:
    """``evil`` in the user's and the model's text, a tool name, an argument's key and
    value, a tool's result and a denial's reason."""
    provider = ScriptedProvider(
        [
            call_tools(
                ("tool" + evil, {"x": evil, evil: 1}, "c_unknown"),
                ("echo", {"text": evil}, "c_ok"),
                ("echo", {"text": evil}, "c_denied"),
                text=evil,
            ),
            reply(evil),
        ]
    )
    chat = Chat(provider=provider, display=False).with_tools(Echo)
    state_for(chat)  # the display state follows the chat from the start, as in a kernel
    chat.ask(evil)
    assert chat.status == "awaiting_approval"
    return chat


def finish(chat: Chat, evil: str) -> None:
    chat.approve("c_ok")
    chat.deny("c_denied", reason=evil)
    chat.complete()
    assert chat.status == "complete"


# ----------------------------------------------------------------------- html checks
class Tags(HTMLParser):
    """Every start tag and attribute of an HTML document, and its text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


# What the view's own HTML (and the markdown renderers, from our markdown) may produce:
# the cards' markup, and what the model's text rendered as Markdown may hold.
SAFE_TAGS = {
    "style", "div", "span", "pre", "details", "summary", "p", "strong", "em", "code", "br",
    "blockquote", "hr", "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "s", "del", "ins",
    "table", "thead", "tbody", "tr", "th", "td", "a",
}  # fmt: skip
SAFE_ATTRIBUTES = {"class", "data-call-id", "title", "style"}
# A link is allowed only to the web or mail, opening a new tab without an opener.
LINK_ATTRIBUTES = {"href", "target", "rel"}
SAFE_HREF = re.compile(r"(https?|mailto):", re.IGNORECASE)


def _bad_tag(tag: str, attrs: dict[str, str | None]) -> bool:
    if tag == "a":
        href = attrs.get("href") or ""
        return (
            set(attrs) - LINK_ATTRIBUTES != set()
            or not SAFE_HREF.match(href)
            or attrs.get("target") != "_blank"
            or "noopener" not in (attrs.get("rel") or "")
        )
    if tag in ("th", "td"):
        return bool(set(attrs) - {"style"}) or attrs.get("style") not in (
            None, "text-align:left", "text-align:right", "text-align:center",
        )  # fmt: skip
    return (
        tag not in SAFE_TAGS or bool(set(attrs) - SAFE_ATTRIBUTES - {"style"}) or ("style" in attrs)
    )


def assert_inert_html(text: str, where: str) -> None:
    """Only the view's own tags and attributes: no image, script, handler, or link
    other than an http(s)/mailto one opening in a new tab."""
    tags = Tags(text).tags
    bad = [(t, a) for t, a in tags if _bad_tag(t, a)]
    assert bad == [], f"{where}: {bad[:5]}"
    assert not CONTROL.search(text), f"{where}: control characters {CONTROL.findall(text)[:5]}"
    for tag, attrs in tags:
        if tag == "a":
            assert not re.match(r"\s*(javascript|data|vbscript):", attrs["href"] or "", re.I)


def render_markdown(text: str) -> dict[str, str]:
    """The markdown as HTML, through the renderers Jupyter's Python side uses."""
    out = {}
    mistune = pytest.importorskip("mistune")
    # nbconvert's markdown renderer and plugins (bare URLs become links with "url").
    md = mistune.create_markdown(
        escape=False, plugins=["strikethrough", "table", "url", "task_lists", "def_list"]
    )
    out["mistune"] = md(text)
    markdown_it = pytest.importorskip("markdown_it")
    out["markdown-it"] = (
        markdown_it.MarkdownIt("commonmark", {"html": True})
        .enable(["table", "strikethrough"])
        .render(text)
    )
    return out


def rendered_text(html: str) -> str:
    return "".join(Tags(html).text)


def html_of(view: ChatView) -> str:
    """Every HTML the view shows: its HTML widgets and its gated calls' cards."""
    return "".join(
        w.value for w in widgets_in(view) if isinstance(w, (ipywidgets.HTML, ActionCard))
    )


# -------------------------------------------------------------------------- item 13
@pytest.mark.parametrize("vector", VECTORS)
def test_html_shows_every_vector_as_text(vector: str) -> None:
    evil = VECTORS[vector]
    chat = evil_chat(evil)
    view = ChatView(chat)
    pending = html_of(view)
    finish(chat, evil)
    outputs = {
        "live view (pending)": pending,
        "live view (final)": html_of(view),
        "static html": chat_mimebundle(chat)["text/html"],
        "turn view": ChatView(chat, turn=1)._repr_mimebundle_()["text/html"],
    }
    for where, html in outputs.items():
        assert_inert_html(html, where)
    text = rendered_text(outputs["static html"])
    for shown in AS_TEXT[vector]:
        assert shown in text  # readable: shown as written


@pytest.mark.parametrize("vector", VECTORS)
def test_markdown_shows_every_vector_as_text(vector: str) -> None:
    evil = VECTORS[vector]
    chat = evil_chat(evil)
    pending = chat_mimebundle(chat)["text/markdown"]
    finish(chat, evil)
    final = chat_mimebundle(chat)["text/markdown"]
    for when, markdown in {"pending": pending, "final": final}.items():
        for renderer, html in render_markdown(markdown).items():
            assert_inert_html(html, f"{renderer} ({when})")
        assert not CONTROL.search(markdown), when
    text = rendered_text(render_markdown(final)["markdown-it"])
    for shown in AS_TEXT[vector]:
        assert shown in text  # readable: the model's text reads as it was written


def test_markdown_keeps_normal_text_readable() -> None:
    provider = ScriptedProvider([reply("It costs 5 USD, see the docs.\nSecond line: ok.")])
    chat = Chat(provider=provider, display=False)
    chat.ask("Price?")
    markdown = chat_mimebundle(chat)["text/markdown"]
    assert "It costs 5 USD, see the docs." in markdown  # no escapes where none are needed
    text = rendered_text(render_markdown(markdown)["markdown-it"])
    assert "It costs 5 USD, see the docs.\nSecond line: ok." in text


@pytest.mark.parametrize("vector", VECTORS)
def test_plain_text_has_no_control_characters(vector: str) -> None:
    evil = VECTORS[vector]
    chat = evil_chat(evil)
    pending = chat_mimebundle(chat)["text/plain"]
    finish(chat, evil)
    final = chat_mimebundle(chat)["text/plain"]
    for text in (pending, final):
        assert not CONTROL.search(text), CONTROL.findall(text)[:5]
    for shown in AS_TEXT[vector]:
        assert shown.split("\n")[0] in final  # visible, not acted on


@pytest.mark.parametrize("vector", VECTORS)
def test_review_prompt_has_no_control_characters(vector: str) -> None:
    evil = VECTORS[vector]
    chat = evil_chat(evil)
    printed: list[str] = []
    answers = iter(["a", "d", evil, "e", "[not json" + evil])

    def ask(prompt: str) -> str:
        printed.append(prompt)
        return next(answers, "s")

    review(chat, input=ask, print=lambda *a, **_k: printed.append(" ".join(map(str, a))))
    assert chat.status == "complete"
    out = "\n".join(printed)
    assert not CONTROL.search(out), CONTROL.findall(out)[:5]
    for shown in AS_TEXT[vector]:
        assert shown in out  # the arguments and the reply, visible and otherwise as written


def test_json_previews_show_del_and_c1_as_json_escapes() -> None:
    """JSON leaves DEL and C1 as they are; the view's JSON shows them as escapes."""
    value = {"c": "a\x9b31m\x7f\x1b[2J"}
    text, whole = json_preview(value)
    assert whole and json.loads(text) == value  # still the same JSON (the card's editor)
    assert not CONTROL.search(text)
