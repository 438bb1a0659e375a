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
        # the user's image and the tool's figure on its folded line, each once (its body does
        # not repeat it: a saved notebook held every figure's bytes twice)
        assert len(shown) == 2
        line = re.search(r'<summary class="nba-head nba-peeking">.*?</summary>', html, re.S)
        assert line is not None and srcs(line[0]) == srcs(html)[1:2]  # seen without a click
        assert 'class="nba-peek nba-peek-media"' in line[0]  # shown larger once opened
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


def _wav() -> bytes:
    import struct

    frames = b"\x00\x00" * 800
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(frames))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", len(frames))
        + frames
    )


def test_a_sound_a_tool_returns_has_one_player_and_thumbnails_are_made_once() -> None:
    """The folded line of a finished call put the sound's player (its bytes) in the page a
    second time, and every redraw shrank and encoded every image again (5 s a redraw for a
    chat of 20 plots in the probe)."""
    from nbagent import AudioPart

    picture = png((900, 600), (10, 200, 10))

    @nbagent.tool
    def record() -> Any:
        """Record a sound and take a picture."""
        return [
            "a sound and a picture",
            AudioPart(_wav(), "audio/wav"),
            ImagePart(picture, "image/png"),
        ]

    script = [call_tools(("record", {})), reply("Done.")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(record)
    chat.ask("record")
    html = chat_mimebundle(chat)["text/html"]
    assert html.count('<audio class="nba-audio"') == 1  # in the body, where it is played
    line = re.search(r'<summary class="nba-head nba-peeking">.*?</summary>', html, re.S)
    assert line is not None and "[audio 1 (audio/wav" in line[0] and "<audio" not in line[0]
    assert len(srcs(line[0])) == 1  # the picture is still seen without a click
    first, again = (
        thumbs((ImagePart(picture, "image/png"),)),
        thumbs((ImagePart(picture, "image/png"),)),
    )
    assert first[0].src is not None and first[0].src is again[0].src  # made once
