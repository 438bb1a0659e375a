"""Helpers for the provider tests: the harness, a provider factory, tool specs.

Every provider is the real SDK client talking to the loopback fake server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import zlib
from collections.abc import Sequence
from typing import Any

from nbagent import ToolSpec
from nbagent.providers import AnthropicProvider, ModelRequest, OpenAIProvider, StreamDelta
from nbagent.providers._sdk import SDKProvider
from nbagent.testing import FakeLLMServer, Turn

KEY = "sk-test-SECRET-0123456789"
KINDS = ("openai-chat", "openai-responses", "anthropic", "openai-compatible")
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
WEATHER = ToolSpec("get_weather", "Get the weather for a city.", WEATHER_SCHEMA)
TIME = ToolSpec(
    "get_time",
    "Get the time in a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def make_provider(kind: str, server: FakeLLMServer, **kwargs: Any) -> SDKProvider:
    """A provider of ``kind`` pointed at ``server`` with retries off."""
    kwargs.setdefault("max_retries", 0)
    if kind == "anthropic":
        kwargs.setdefault("api_key", KEY)
        return AnthropicProvider(
            kwargs.pop("model", "claude-sonnet-4-5"), base_url=server.anthropic_base_url, **kwargs
        )
    if kind == "openai-compatible":
        return OpenAIProvider(
            kwargs.pop("model", "llama3.1"), base_url=server.openai_base_url, **kwargs
        )
    kwargs.setdefault("api_key", KEY)
    return OpenAIProvider(
        kwargs.pop("model", "gpt-4.1-mini"),
        api="responses" if kind == "openai-responses" else "chat",
        base_url=server.openai_base_url,
        compatible=False,
        **kwargs,
    )


@dataclasses.dataclass
class Harness:
    """A provider of one kind, the server it talks to, and helpers to drive it."""

    kind: str
    stream: bool
    server: FakeLLMServer
    provider: SDKProvider
    deltas: list[StreamDelta] = dataclasses.field(default_factory=list)

    @property
    def api(self) -> str:
        """Wire dialect: ``chat``, ``responses`` or ``anthropic``."""
        return {"openai-responses": "responses", "anthropic": "anthropic"}.get(self.kind, "chat")

    def script(self, *turns: Turn | str) -> None:
        """Replace the server's script (compatible servers repeat ids in their streams)."""
        resolved = [Turn(text=t) if isinstance(t, str) else t for t in turns]
        if self.kind == "openai-compatible":
            resolved = [dataclasses.replace(t, repeat_ids_in_stream=True) for t in resolved]
        self.server.script(resolved)

    def ask(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        kwargs.setdefault("stream", self.stream)
        kwargs.setdefault("on_delta", self.deltas.append)
        return self.provider.complete(ModelRequest(tuple(messages), **kwargs))

    def ask_async(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        kwargs.setdefault("stream", self.stream)
        kwargs.setdefault("on_delta", self.deltas.append)

        async def go() -> Any:
            return await self.provider.complete_async(ModelRequest(tuple(messages), **kwargs))

        return asyncio.run(go())

    @property
    def body(self) -> dict[str, Any]:
        """The JSON body of the last request the server received."""
        return self.server.last_request.body

    def wire_messages(self) -> list[Any]:
        return self.body["input"] if self.api == "responses" else self.body["messages"]

    def text_deltas(self) -> str:
        return "".join(d.text for d in self.deltas if d.kind == "text")

    def argument_deltas(self, index: int = 0) -> str:
        return "".join(d.text for d in self.deltas if d.kind == "tool_call" and d.index == index)


def png(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real PNG file of one colour, built without PIL."""
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
