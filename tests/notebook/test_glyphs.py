"""Every symbol the view draws exists in DejaVu Sans (Debian's default UI font).

A glyph missing from the fonts a browser has renders as an empty box (the budget
card's pause sign U+23F8 did). DejaVu Sans is the fallback font of Debian and
most Linux desktops; the common macOS and Windows UI fonts cover these too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

import nbagent.notebook as nb

HOME = Path(nb.__file__).parent
# the view's files, and the stylesheet and text primitives every drawing shares
SOURCES = ("approval.js", "approval.css", "_render.py", "_widgets.py", "../_html.py")


def _symbols(text: str) -> set[str]:
    found = {c for c in text if ord(c) > 0x7F}
    found |= {chr(int(h, 16)) for h in re.findall(r"\\u([0-9A-Fa-f]{4})", text)}
    found |= {chr(int(h, 16)) for h in re.findall(r'"\\\\?([0-9A-Fa-f]{4})"', text)}  # CSS
    found |= {chr(int(n)) for n in re.findall(r"&#(\d+);", text)}
    return {c for c in found if ord(c) > 0x7F}


@cache
def _dejavu_has(c: str) -> bool:
    out = subprocess.run(
        ["fc-list", f":charset={ord(c):x}", "family"], capture_output=True, text=True, check=True
    ).stdout
    return "DejaVu Sans" in out


@pytest.mark.skipif(shutil.which("fc-list") is None, reason="needs fontconfig's fc-list")
def test_every_symbol_drawn_is_in_dejavu_sans() -> None:
    assert _dejavu_has("\u2714") and not _dejavu_has("\u23f8")  # the check itself works
    missing = {
        f"{name}: U+{ord(c):04X} {c}"
        for name in SOURCES
        if (HOME / name).exists()
        for c in _symbols((HOME / name).read_text(encoding="utf-8"))
        if not _dejavu_has(c)
    }
    assert not missing, sorted(missing)
