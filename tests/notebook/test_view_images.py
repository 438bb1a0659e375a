"""Images in the view: user messages and finished calls show thumbnails nbagent encoded itself.

In-process (``ChatView`` with no kernel) and the static HTML a saved notebook keeps.
"""

from __future__ import annotations

import base64
import io
import re
from typing import Any

import ipywidgets
import pytest
from _views import widgets_in

import nbagent
from nbagent import Chat, ImagePart
from nbagent.notebook import ChatView
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.notebook._state import THUMB_PIXELS, thumbs
from nbagent.testing import ScriptedProvider, call_tools, reply

Image = pytest.importorskip("PIL.Image")


def png(size: tuple[int, int], rgb: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, rgb).save(out, format="PNG")
    return out.getvalue()


def srcs(html: str) -> list[bytes]:
    """The bytes of every thumbnail in ``html``."""
    found = re.findall(
        r'<img class="nba-thumb" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html
    )
    return [base64.b64decode(s) for s in found]


def html_of(view: ChatView) -> str:
    return "\n".join(
        w.value for w in widgets_in(view) if isinstance(w, ipywidgets.HTML) and w.value
    )


def test_a_user_image_and_a_tool_figure_show_as_thumbnails() -> None:
    plt = pytest.importorskip("matplotlib.pyplot")

    @nbagent.tool
    def plot() -> Any:
        """Plot."""
        fig, ax = plt.subplots(figsize=(8, 6))
        ax.plot([1, 2], [2, 1])
        return fig

    script = [call_tools(("plot", {})), reply("A falling line.")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(plot)
    view = ChatView(chat)
    big = png((1200, 900), (250, 10, 10))
    chat.ask("Look at this, then plot", images=big)
    plt.close("all")
    for html in (html_of(view), chat_mimebundle(chat)["text/html"]):
        shown = [Image.open(io.BytesIO(b)) for b in srcs(html)]
        # the user's image, the tool's figure on its folded line and in its body
        assert len(shown) == 3 and srcs(html)[1] == srcs(html)[2]
        line = re.search(r'<summary class="nba-head nba-peeking">.*?</summary>', html, re.S)
        assert line is not None and srcs(line[0]) == srcs(html)[1:2]  # seen without a click
        assert max(shown[0].size) == THUMB_PIXELS and shown[0].getpixel((5, 5))[:3] == (250, 10, 10)
        assert max(shown[1].size) <= THUMB_PIXELS  # 800 x 600 figure, shrunk
        assert 'alt="image 1 (image/png' in html
    markdown = chat_mimebundle(chat)["text/markdown"]
    assert "[image 1 (image/png" in markdown and "data:" not in markdown


def test_only_checked_image_bytes_go_into_a_src() -> None:
    fake = ImagePart(b"javascript:alert(1)", "image/png")  # not a PNG: a label, no src
    [thumb] = thumbs((fake,))
    assert thumb.src is None and thumb.label.startswith("image 1 (image/png")
    [pdf] = thumbs((nbagent.image(b"%PDF-1.4\n%%EOF"),))
    assert pdf.src is None and "application/pdf" in pdf.label
