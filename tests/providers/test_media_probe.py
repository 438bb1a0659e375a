"""What a probe of images, sounds and replay found, each pinned here.

Every provider is the real SDK client in strict mode talking to the loopback fake server.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import pytest
from _provider_harness import make_provider

import nbagent
from nbagent import ImagePart, MediaError  # noqa: F401 (used below)
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn


def png(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- 1. a refused tool image leaves the others -----------------------------------


@pytest.mark.parametrize("kind", ["anthropic", "openai-chat", "openai-responses"])
def test_a_too_large_tool_image_leaves_out_only_itself(server: FakeLLMServer, kind: str) -> None:
    small, other = png(5, 5, (0, 200, 0)), png(6, 6, (0, 0, 200))
    limit = 4 * 1024 * 1024 if kind == "anthropic" else 21 * 1024 * 1024
    big = png() + b"\0" * limit

    @nbagent.tool
    def plots() -> list[Any]:
        """Make the plots."""
        return ["three plots", small, big, other]

    server.script([Turn(tool_calls=[FakeToolCall("plots", {})]), Turn(text="I see two.")])
    provider = make_provider(kind, server)
    try:
        chat = nbagent.Chat(provider=provider, display=False).with_tools(plots)
        assert chat.ask("Plot").content == "I see two."
    finally:
        provider.close()
    [result] = [m for m in chat.transcript if isinstance(m, nbagent.ToolResultMessage)]
    assert [p.data for p in result.parts] == [small, other]  # kept for the user and the store
    assert "[images not sent: image 2 is" in result.content
    assert "image 1 is" not in result.content and "image 3 is" not in result.content
    body = json.dumps(server.requests[-1].body)
    assert _b64(small) in body and _b64(other) in body and _b64(big[:3000]) not in body
    assert list(chat.log["result_type"]) == ["text+image"]
