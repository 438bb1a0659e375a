"""What the offline demo model says about an image: its size and its dominant colours.

Size is read from the file's header (PNG, JPEG, GIF, WebP) with no dependency;
colours need Pillow (``PIL``), which is optional: without it the description
says only the size. A PDF is described by its size in bytes.
"""

from __future__ import annotations

import io
import struct
from typing import Any

from .._types import AudioPart, FilePart, Part

# A small named palette: each pixel counts for the nearest name.
_NAMES: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("white", (255, 255, 255)),
    ("light grey", (200, 200, 200)),
    ("grey", (128, 128, 128)),
    ("black", (0, 0, 0)),
    ("red", (220, 30, 30)),
    ("orange", (255, 140, 0)),
    ("yellow", (240, 220, 40)),
    ("green", (40, 160, 60)),
    ("teal", (0, 128, 128)),
    ("blue", (31, 119, 180)),
    ("navy", (20, 30, 110)),
    ("purple", (128, 60, 160)),
    ("pink", (240, 130, 180)),
    ("brown", (140, 90, 40)),
)


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from an image file's header, or ``None`` if it cannot be read."""
    try:
        if data.startswith(b"\x89PNG") and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return int(w), int(h)
        if data.startswith((b"GIF87a", b"GIF89a")):
            w, h = struct.unpack("<HH", data[6:10])
            return int(w), int(h)
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_size(data)
        if data.startswith(b"\xff\xd8"):
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


def _nearest(rgb: tuple[int, int, int]) -> str:
    return min(_NAMES, key=lambda n: sum((a - b) ** 2 for a, b in zip(n[1], rgb, strict=True)))[0]


def dominant_colours(data: bytes, top: int = 3) -> list[str] | None:
    """The names of the most common colours (most first), or ``None`` without Pillow."""
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(data)) as opened:
            img: Any = opened.convert("RGB")
            img.thumbnail((64, 64))
            counts: dict[str, int] = {}
            for count, rgb in img.getcolors(64 * 64) or ():
                name = _nearest(rgb)
                counts[name] = counts.get(name, 0) + count
    except Exception:
        return None
    total = sum(counts.values()) or 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return [name for name, n in ranked[:top] if n / total >= 0.02]


def describe(part: Part) -> str:
    """One sentence about ``part``: what a person would say at a glance."""
    if isinstance(part, AudioPart):
        return f"a {part.format.upper()} sound ({len(part.data) / 1024:.0f} KB) I cannot hear"
    if isinstance(part, FilePart):
        return f"a PDF document ({part.filename}, {len(part.data) / 1024:.0f} KB)"
    kind = part.media_type.removeprefix("image/").upper()
    size = image_size(part.data)
    where = f"a {size[0]}x{size[1]} {kind} image" if size else f"a {kind} image"
    colours = dominant_colours(part.data)
    if colours is None:
        return where + " (install Pillow and I can say its colours)"
    if not colours:
        return where
    if len(colours) == 1:
        return f"{where}, all {colours[0]}"
    return f"{where}, mostly {colours[0]}, with {' and '.join(colours[1:])}"
