"""A small MCP server for nbagent's tests, built with the official ``mcp`` SDK.

Run over stdio (``python notes_server.py``) or streamable HTTP on the loopback
interface (``python notes_server.py --http PORT``). Its tools cover what the
client must handle: annotations (read-only, destructive, none), text,
structured and image results, ``isError``, a crash in the middle of a call,
and a tool list that changes (with ``notifications/tools/list_changed`` on
the legacy protocol and a ``subscriptions/listen`` event on the modern one).

``--once FILE``: after ``answer_then_exit`` ran, the server refuses to start again (a
server gone for good right after it answered).

``--linger`` makes the process ignore the end of its input (a badly behaved
server): it stays alive until it is killed, so a test can check that nbagent
kills it when its parent goes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations
from pydantic import BaseModel

READ_ONLY = ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)

server = MCPServer("notes", log_level="WARNING")
ONCE: str | None = None  # --once FILE: answer_then_exit writes it; a start that finds it exits
NOTES: dict[str, str] = {"todo": "buy milk"}

# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class Note(BaseModel):
    title: str
    text: str
    words: int


@server.tool(annotations=READ_ONLY)
def read_note(title: str) -> str:
    """Read a note by its title."""
    if title not in NOTES:
        raise ToolError(f"no note called {title!r}")
    return NOTES[title]


@server.tool(annotations=READ_ONLY)
def note_info(title: str) -> Note:
    """A note with its word count (structured output)."""
    text = NOTES.get(title, "")
    return Note(title=title, text=text, words=len(text.split()))


@server.tool()
def add_note(title: str, text: str, tags: list[str] | None = None) -> str:
    """Add a note (no annotations: a client should ask before running it)."""
    NOTES[title] = text
    return f"added {title!r}" + (f" tagged {', '.join(tags)}" if tags else "")


@server.tool(annotations=DESTRUCTIVE)
def delete_note(title: str) -> str:
    """Delete a note."""
    NOTES.pop(title, None)
    return f"deleted {title!r}"


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=READ_ONLY)
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool(annotations=READ_ONLY)
def picture() -> Image:
    """A tiny picture."""
    return Image(data=PNG, format="png")


@server.tool(annotations=READ_ONLY)
def crash() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


@server.tool(annotations=DESTRUCTIVE)
def answer_then_exit(text: str) -> str:
    """Answer, then exit the server process a moment later (``--once``: for good)."""
    if ONCE is not None:
        with open(ONCE, "w") as f:
            f.write(str(os.getpid()))
    threading.Timer(0.05, os._exit, (4,)).start()
    return text


@server.tool(annotations=READ_ONLY)
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    import anyio

    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(annotations=READ_ONLY)
async def grow(name: str, ctx: Context) -> str:
    """Add a read-only tool called ``name`` that answers with its name, and say so."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"The tool {name}.", annotations=READ_ONLY)
    await ctx.notify_tools_changed()  # modern protocol: subscriptions/listen
    with contextlib.suppress(Exception):
        await ctx.session.send_tool_list_changed()  # legacy protocol: the notification
    return f"added tool {name}"


def _linger() -> None:
    def stay() -> None:
        while True:
            time.sleep(60)

    threading.Thread(target=stay, daemon=False).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on this port")
    parser.add_argument("--http-fd", type=int, default=None, help="... on this listening socket")
    parser.add_argument("--linger", action="store_true", help="do not exit at the end of input")
    parser.add_argument("--once", default=None, help="once answer_then_exit ran, never start")
    args = parser.parse_args()
    if args.once is not None:
        if os.path.exists(args.once):
            raise SystemExit(f"notes server: gone for good ({args.once} exists)")
        global ONCE
        ONCE = args.once
    if args.linger:
        _linger()
    if args.http_fd is not None:
        from _http_serve import serve_http_fd

        serve_http_fd(server, args.http_fd)
    elif args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
