"""An MCP server for the rest of the protocol, built with the official ``mcp`` SDK.

Run over stdio (``python protocol_server.py``) or streamable HTTP on the loopback
interface (``python protocol_server.py --http PORT``). What it offers:

- ``count``: reports progress (``n`` steps, each with a message) and logs a line per
  step at ``info`` (one at ``debug``, below what nbagent asks for), one ``warning``
  naming the secret it was given in its environment (``NOTES_TOKEN``);
- ``picture`` / ``sound``: an image (PNG) / an audio (WAV) content block with a caption;
- ``find_doc``: a text result carrying a resource link to ``docs://guide``;
- resources ``docs://guide`` (text), ``docs://logo`` (a PNG blob) and a template
  ``docs://pages/{page}``; prompts ``review`` (arguments ``code``, ``style``) and ``hello``.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import struct
import warnings
import wave

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Audio, Image
from mcp.types import (
    AudioContent,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolAnnotations,
)

warnings.simplefilter("ignore")  # logging is deprecated as of 2026-07-28, still spoken

READ_ONLY = ToolAnnotations(read_only_hint=True)
server = MCPServer("protocol", log_level="WARNING")

# An 8x8 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFWEXHbQSACj/P8Fu7N9hAAAAAElFTkSuQmCC"
)


def wav() -> bytes:
    """A tenth of a second of silence, 8 kHz mono."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(struct.pack("<h", 0) * 800)
    return out.getvalue()


@server.tool(annotations=READ_ONLY)
async def count(n: int, ctx: Context) -> str:
    """Count to n, reporting progress and logging as it goes."""
    await ctx.debug("starting (debug: below the level asked for)")
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i} of {n}")
        await ctx.info(f"did step {i}", logger_name="counter")
    token = os.environ.get("NOTES_TOKEN", "")
    await ctx.warning(f"used token {token} for the count")
    return f"counted to {n}"


@server.tool(annotations=READ_ONLY)
def picture() -> list[TextContent | ImageContent]:
    """A small red picture with a caption."""
    return [
        TextContent(type="text", text="a red square"),
        Image(data=PNG, format="png").to_image_content(),
    ]


@server.tool(annotations=READ_ONLY)
def sound() -> list[TextContent | AudioContent]:
    """A short sound with a caption."""
    return [
        TextContent(type="text", text="a short silence"),
        Audio(data=wav(), format="wav").to_audio_content(),
    ]


@server.tool(annotations=READ_ONLY)
def find_doc(topic: str) -> list[TextContent | ResourceLink]:
    """Find the document about a topic (answers with a link to it)."""
    return [
        TextContent(type="text", text=f"the guide covers {topic}"),
        ResourceLink(
            type="resource_link", uri="docs://guide", name="guide", mimeType="text/markdown"
        ),
    ]


@server.resource("docs://guide", name="guide", mime_type="text/markdown")
def guide() -> str:
    """The user guide."""
    return "# Guide\n\nTurn the knob to the left."


@server.resource("docs://logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    """The logo."""
    return PNG


@server.resource("docs://pages/{page}", name="page", mime_type="text/plain")
def page(page: str) -> str:
    """A page of the manual."""
    return f"page {page}: nothing to see"


READS = {"n": 0}


@server.resource("docs://counter", name="counter", mime_type="text/plain")
def counter() -> str:
    """Counts its own reads (so a test can tell whether a read happened)."""
    READS["n"] += 1
    return f"read {READS['n']} time(s)"


@server.tool(annotations=READ_ONLY)
def reads() -> int:
    """How many times docs://counter was read."""
    return READS["n"]


@server.prompt()
def review(code: str, style: str = "brief") -> str:
    """Review some code."""
    return f"Please review this code ({style}):\n{code}"


@server.prompt()
def hello() -> list[object]:
    """Say hello, as a short exchange."""
    from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage

    return [UserMessage("Hello!"), AssistantMessage("Hi, how can I help?"), UserMessage("Go on.")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on PORT")
    parser.add_argument("--http-fd", type=int, default=None, help="... on this listening socket")
    args = parser.parse_args()
    if args.http_fd is not None:
        from _http_serve import serve_http_fd

        serve_http_fd(server, args.http_fd)
    elif args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
