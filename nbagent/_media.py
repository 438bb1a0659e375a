"""Turn what a user hands ``chat.ask(images=...)`` (or a tool returns) into content parts.

Accepted, each becoming an :class:`~nbagent.ImagePart` (or a
:class:`~nbagent.FilePart` for a PDF):

- ``bytes`` of a PNG, JPEG, GIF, WebP or PDF file, recognised by their magic
  number (an extension is never trusted);
- a path (``str`` or :class:`os.PathLike`) to such a file;
- a ``PIL.Image.Image`` (saved as PNG; PIL is never a hard dependency);
- a matplotlib ``Figure`` or ``Axes`` (its figure), or a seaborn grid (saved as
  PNG at :data:`FIGURE_DPI` dpi);
- an IPython ``Image`` or any display object with PNG/JPEG data
  (``_repr_png_`` / ``_repr_jpeg_``);
- an :class:`~nbagent.ImagePart` / :class:`~nbagent.FilePart` as it is.

Anything else is a :class:`TypeError` naming what is accepted. A URL is never fetched: an
``http(s)://`` (or other remote) URL is a :class:`~nbagent.MediaError` saying to download
it (the URL quoted without its credentials, query or key-like text); a ``file://`` URL is
its path; a ``data:`` URL of a base64 image or PDF is decoded. A path is checked by its
size (at most :data:`MAX_FILE_BYTES`, the most any API takes) and its first bytes before
it is read. ``detail=`` is ``"low"``, ``"high"`` or ``"auto"`` (OpenAI's; ``None``: the
API's default).

:func:`check_parts` applies the APIs' limits before any request: Anthropic
takes PNG/JPEG/GIF/WebP up to 5 MB *of base64* per image; OpenAI takes the
same formats up to 20 MB per image; PDFs go up to 32 MB on both.

A tool's sound (an :class:`~nbagent.AudioPart`: WAV or MP3, :func:`sniff_audio`) is
never made from what a user passes as ``images=``; :func:`hears_audio` says whether an
API and model take it (Chat Completions' audio models only), and the providers' wires
send the others :func:`audio_not_sent`'s line instead.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ._errors import MediaError, redact_keys
from ._types import AudioPart, FilePart, ImagePart, Part

FIGURE_DPI = 100
"""Resolution a matplotlib figure is saved at (a 6.4 x 4.8 in figure: 640 x 480 px)."""

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image formats all three APIs accept."""

MAX_IMAGE_BASE64_ANTHROPIC = 5 * 1024 * 1024
"""Anthropic: the base64 text of one image may be at most 5 MB (5,242,880 characters)."""
MAX_IMAGE_BYTES_OPENAI = 20 * 1024 * 1024
"""OpenAI (Chat Completions and Responses): at most 20 MB per image."""
MAX_FILE_BYTES = 32 * 1024 * 1024
"""A PDF on either provider: at most 32 MB."""

ACCEPTED = (
    "PNG/JPEG/GIF/WebP/PDF bytes, a path to such a file, a PIL image, a matplotlib "
    "figure, an IPython Image (or display object with PNG/JPEG data), or an "
    "nbagent.ImagePart/FilePart"
)


def sniff(data: bytes) -> str | None:
    """The media type of ``data`` by its magic number, or ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


AUDIO_TYPES = ("audio/wav", "audio/mpeg")
"""The sound formats an API takes (Chat Completions' ``input_audio``: wav and mp3)."""

MAX_AUDIO_BYTES = 20 * 1024 * 1024
"""The most one sound may be to be sent (nbagent's bound: OpenAI publishes none for
``input_audio``; it is its bound for an image, and a request body stays sendable)."""


def sniff_audio(data: bytes) -> str | None:
    """``audio/wav`` or ``audio/mpeg`` by the bytes' header (RIFF/WAVE, an ID3 tag or an
    MPEG audio frame), else ``None``."""
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    if data.startswith(b"ID3"):
        return "audio/mpeg"
    # an MPEG audio frame: 11 sync bits, then a version that exists and layer III
    sync = len(data) >= 2 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0
    if sync and (data[1] >> 3) & 0x3 != 0x1 and (data[1] >> 1) & 0x3 == 0x1:
        return "audio/mpeg"
    return None


def hears_audio(api: str, model: str) -> str | None:
    """``None`` if ``model`` on ``api`` takes a tool's sound as an ``input_audio`` part, else
    why not (the line the model reads instead).

    Chat Completions takes ``input_audio`` (wav, mp3) in user messages, from audio models
    only (``gpt-audio``, ``gpt-4o-audio-preview``...: a name with an ``audio`` part); the
    Responses API and Anthropic's Messages API take no audio input at all.
    """
    if api == "responses":
        return "the Responses API takes no audio input"
    if api == "anthropic":
        return "Anthropic's API takes no audio input"
    name = model.lower().rsplit("/", 1)[-1]
    if "audio" in name.replace(".", "-").replace("_", "-").split("-"):
        return None
    return (
        f"{model} takes no audio input (on Chat Completions only audio models do, "
        "such as gpt-audio)"
    )


def audio_not_sent(n: int, why: str) -> str:
    """The line the model reads for the ``n``-th part, a sound its API does not take."""
    return f"[audio {n} not sent: {why}]"


DETAILS = ("low", "high", "auto")
"""What ``detail=`` takes (OpenAI's image detail; Anthropic has no such switch)."""


def _check_detail(detail: Any) -> None:
    if detail is not None and detail not in DETAILS:
        raise ValueError(
            f"detail= takes 'low', 'high' or 'auto' (or None: the API's default), got "
            f"{str(detail)[:40]!r}"
        )


_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def _shown_url(url: str) -> str:
    """``url`` as an error may quote it: no credentials, query or fragment, no key-like text."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    shown = f"{parts.scheme}://{'***@' if '@' in parts.netloc else ''}{host}{parts.path}"
    if parts.query or parts.fragment:
        shown += "?***"
    shown = redact_keys(shown)
    return shown if len(shown) <= 120 else shown[:117] + "..."


def _from_url(url: str, detail: str | None) -> Part | None:
    """A ``data:`` or ``file://`` URL as a part; a remote URL refused; ``None``: not a URL."""
    if url[:5].lower() == "data:":
        return _from_data_url(url, detail)
    match = _SCHEME.match(url)
    if match is None:
        return None
    if match.group(1).lower() == "file":
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise MediaError(f"a file:// URL on another host is not read: {_shown_url(url)}")
        from urllib.request import url2pathname  # not at import: it loads http and hashlib

        return _from_path(Path(url2pathname(parts.path)), detail)
    raise MediaError(
        f"URLs are not fetched ({_shown_url(url)}): download the image and pass its bytes or a path"
    )


def _from_data_url(url: str, detail: str | None) -> Part:
    import base64

    head, comma, payload = url.partition(",")
    declared, _, encoding = head[5:].partition(";")
    declared = declared.strip().lower()
    if not comma or encoding.strip().lower() != "base64":
        raise MediaError("a data: URL must be base64 (data:image/png;base64,...)")
    if declared and declared not in (*IMAGE_TYPES, "application/pdf"):
        raise MediaError(
            f"a data: URL of {declared[:40]!r}: only PNG, JPEG, GIF, WebP or PDF can be sent"
        )
    if len(payload) // 4 * 3 > MAX_FILE_BYTES:
        raise MediaError(
            f"a data: URL of {_mb(len(payload) // 4 * 3)}; the most any API takes is "
            f"{_mb(MAX_FILE_BYTES)}"
        )
    try:
        data = base64.b64decode("".join(payload.split()), validate=True)
    except ValueError:  # binascii.Error is one
        raise MediaError("a data: URL whose base64 does not decode") from None
    part = _from_bytes(data, detail=detail)
    if declared and part.media_type != declared:
        raise MediaError(f"a data: URL says {declared} but its bytes are {part.media_type}")
    return part


def _from_path(path: Path, detail: str | None) -> Part:
    """A file as a part: its size and first bytes checked before it is read in full."""
    path = path.expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no image file at {redact_keys(str(path))[:200]!r}")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise MediaError(
            f"{path.name[:80]!r} is {_mb(size)}; the most any API takes is "
            f"{_mb(MAX_FILE_BYTES)} (a PDF; an image: 20 MB)"
        )
    with path.open("rb") as f:
        head = f.read(16)
        if sniff(head) is None:
            _from_bytes(head)  # raises: not a format the APIs take
        data = head + f.read()
    return _from_bytes(data, filename=path.name, detail=detail)


def _from_bytes(data: bytes, filename: str = "document.pdf", detail: str | None = None) -> Part:
    kind = sniff(data)
    if kind is None:
        head = data[:8]
        raise MediaError(
            f"not a PNG, JPEG, GIF, WebP or PDF file (it starts with {head!r}); "
            "convert it to PNG first"
        )
    if kind == "application/pdf":
        return FilePart(data, kind, filename)
    return ImagePart(data, kind, detail)


def _figure_png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=FIGURE_DPI, bbox_inches="tight")
    return buffer.getvalue()


def _pil_png(img: Any) -> bytes:
    if img.mode not in ("RGB", "RGBA", "L", "LA", "P", "1"):
        img = img.convert("RGBA")
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    return buffer.getvalue()


def _is_figure(value: Any) -> bool:
    """A matplotlib ``Figure`` (or a seaborn grid, which saves like one)."""
    module = type(value).__module__
    return module.startswith(("matplotlib", "seaborn")) and callable(
        getattr(value, "savefig", None)
    )


def _figure_of(value: Any) -> Any:
    """The figure of a matplotlib ``Axes`` (what plotting functions often return), else None."""
    if type(value).__module__.startswith("matplotlib.axes"):
        fig = getattr(value, "figure", None)
        return fig if _is_figure(fig) else None
    return None


def _is_pil(value: Any) -> bool:
    module = type(value).__module__
    return module.startswith("PIL") and callable(getattr(value, "save", None))


def _display_data(value: Any) -> bytes | None:
    """PNG/JPEG bytes of an IPython ``Image`` or a display object, if it has any."""
    for method in ("_repr_png_", "_repr_jpeg_"):
        fn = getattr(value, method, None)
        if not callable(fn) or isinstance(value, type):
            continue
        data = fn()
        if isinstance(data, tuple):  # (data, metadata)
            data = data[0]
        if isinstance(data, str):  # IPython gives base64 text for some objects
            import base64

            data = base64.b64decode(data)
        if isinstance(data, bytes) and data:
            return data
    return None


def close_figure(value: Any) -> None:
    """Close ``value``'s matplotlib figure (a ``Figure``, an ``Axes`` or a seaborn grid), if
    it is one, so pyplot lets it go: what a tool returned is turned into a part and kept as
    that (a tool plotting on every call would otherwise leave every figure open)."""
    fig = value if _is_figure(value) else _figure_of(value)
    pyplot = sys.modules.get("matplotlib.pyplot")
    if fig is None or pyplot is None:
        return
    fig = getattr(fig, "figure", fig)  # a seaborn grid's Figure (a Figure's is itself)
    if type(fig).__module__.startswith("matplotlib"):
        pyplot.close(fig)


def is_image_like(value: Any) -> bool:
    """Whether ``value`` is something :func:`to_part` makes an image of without a path.

    Used on tool results: a ``str`` is text, never a path; ``bytes`` count only
    when they are an image or PDF file.
    """
    if isinstance(value, ImagePart | FilePart):
        return True
    if isinstance(value, bytes | bytearray | memoryview):
        return sniff(bytes(value[:16])) is not None
    if isinstance(value, str | os.PathLike):
        return False
    return (
        _is_figure(value)
        or _figure_of(value) is not None
        or _is_pil(value)
        or _display_data(value) is not None
    )


def image(value: Any, *, detail: str | None = None) -> Part:
    """One image or file as a content part, e.g. ``nbagent.image(fig, detail="low")``.

    Accepts PNG/JPEG/GIF/WebP/PDF bytes (sniffed by magic number), a path, a PIL
    image, a matplotlib figure, an IPython ``Image`` or display object with
    PNG/JPEG data, or a part (returned as is).

    Raises:
        TypeError: Not one of those.
        ValueError: ``detail`` is not ``"low"``, ``"high"``, ``"auto"`` or ``None``.
        MediaError: Bytes that are none of the accepted formats, a file over
            :data:`MAX_FILE_BYTES`, or a remote URL (never fetched).
    """
    return to_part(value, detail=detail)


def to_part(value: Any, *, detail: str | None = None) -> Part:
    """One image or file as a part (see the module docstring)."""
    _check_detail(detail)
    if isinstance(value, ImagePart | FilePart):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return _from_bytes(bytes(value), detail=detail)
    if isinstance(value, str):
        part = _from_url(value.strip(), detail)
        if part is not None:
            return part
    if isinstance(value, str | os.PathLike):
        return _from_path(Path(value), detail)
    if _is_figure(value):
        return ImagePart(_figure_png(value), "image/png", detail)
    if (fig := _figure_of(value)) is not None:
        return ImagePart(_figure_png(fig), "image/png", detail)
    if _is_pil(value):
        return ImagePart(_pil_png(value), "image/png", detail)
    data = _display_data(value)
    if data is not None:
        return _from_bytes(data, detail=detail)
    if getattr(value, "url", None) and type(value).__module__.startswith("IPython"):
        raise TypeError(
            f"this IPython {type(value).__name__} only points at {value.url!r} and holds no "
            "data: download the file and pass its bytes or path"
        )
    raise TypeError(f"cannot send a {type(value).__name__} as an image: pass {ACCEPTED}")


def as_parts(images: Any, *, detail: str | None = None) -> tuple[Part, ...]:
    """``images=`` as parts: one accepted value or a list/tuple of them."""
    if images is None:
        return ()
    if isinstance(images, list | tuple):
        return tuple(to_part(item, detail=detail) for item in images)
    return (to_part(images, detail=detail),)


RESOURCE_CHARS = 100_000
"""The most characters of one attached resource's text put in a user message."""


def attached(resources: Any) -> tuple[str, tuple[Part, ...]]:
    """``resources=`` of ``chat.ask``: the text they add to the message, and their parts.

    Each item has an ``attachment()`` method giving ``(name, text, parts)`` (an
    MCP server's listed resource, which reads itself, or contents already read:
    ``server.read_resource(uri)``). The text is wrapped in a ``<resource>`` block
    naming it, so the model can tell it from the question.

    Raises:
        TypeError: An item cannot be attached.
    """
    if resources is None:
        return "", ()
    items = list(resources) if isinstance(resources, list | tuple) else [resources]
    blocks: list[str] = []
    parts: list[Part] = []
    for item in items:
        attachment = getattr(item, "attachment", None)
        if isinstance(item, type) or not callable(attachment):
            raise TypeError(
                "resources= takes an MCP server's resources (server.resources()) or their "
                f"contents (server.read_resource(uri)), got {type(item).__name__}"
            )
        name, text, own = attachment()
        if len(text) > RESOURCE_CHARS:
            text = (
                text[:RESOURCE_CHARS]
                + f"\n[truncated: {len(text) - RESOURCE_CHARS} more characters]"
            )
        name = str(name).replace('"', "%22")
        blocks.append(f'<resource uri="{name}">\n{text}\n</resource>')
        parts.extend(p for p in own if isinstance(p, ImagePart | FilePart))
    return "\n\n".join(blocks), tuple(parts)


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def check_parts(parts: Sequence[Part], api: str) -> None:
    """Raise :class:`~nbagent.MediaError` for a part ``api`` would refuse.

    ``api``: ``"anthropic"``, ``"chat"`` or ``"responses"`` (the wire format).
    """
    for n, part in enumerate(parts, 1):
        where = f"{part.kind} {n}"
        if isinstance(part, AudioPart):
            if part.media_type not in AUDIO_TYPES or sniff_audio(part.data[:16]) != part.media_type:
                raise MediaError(f"{where}: its bytes are not a WAV or MP3 file")
            if len(part.data) > MAX_AUDIO_BYTES:
                raise MediaError(
                    f"{where} is {_mb(len(part.data))}; the most a sound may be is "
                    f"{_mb(MAX_AUDIO_BYTES)}"
                )
            continue  # an API that takes no audio is told so in words, on the wire
        if isinstance(part, FilePart):
            if part.media_type != "application/pdf":
                raise MediaError(f"{where}: only PDF files can be sent, got {part.media_type}")
            if len(part.data) > MAX_FILE_BYTES:
                raise MediaError(
                    f"{where} ({part.filename}) is {_mb(len(part.data))}; the most a PDF "
                    f"may be is {_mb(MAX_FILE_BYTES)}"
                )
            continue
        if part.detail is not None and part.detail not in DETAILS:
            raise MediaError(
                f"{where}: detail {str(part.detail)[:40]!r} is not 'low', 'high' or 'auto'"
            )
        if part.media_type not in IMAGE_TYPES:
            raise MediaError(
                f"{where}: {part.media_type} is not a format the API takes (PNG, JPEG, GIF or WebP)"
            )
        if sniff(part.data[:16]) != part.media_type:
            raise MediaError(f"{where}: its bytes are not a {part.media_type} file")
        if api == "anthropic":
            size = (len(part.data) + 2) // 3 * 4
            if size > MAX_IMAGE_BASE64_ANTHROPIC:
                raise MediaError(
                    f"{where} is {_mb(len(part.data))} ({_mb(size)} as base64); Anthropic "
                    "takes at most 5 MB of base64 per image (about 3.75 MB of file): "
                    "make it smaller (fewer pixels, or JPEG)"
                )
        elif len(part.data) > MAX_IMAGE_BYTES_OPENAI:
            raise MediaError(
                f"{where} is {_mb(len(part.data))}; OpenAI takes at most 20 MB per image: "
                "make it smaller (fewer pixels, or JPEG)"
            )
