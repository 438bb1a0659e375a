"""Helpers for the MCP client tests: the notes server (notes_server.py beside this file),
a real MCP server built with the official SDK, and process checks."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import nbagent

SERVER = str(Path(__file__).with_name("notes_server.py"))
PROTOCOL_SERVER = str(Path(__file__).with_name("protocol_server.py"))
TOKEN = "tok-3f9a8b7c6d5e"
"""A secret: protocol_server.py's NOTES_TOKEN (its ``count`` logs it), given to the client
as an env value (stdio) or a header (HTTP), so nbagent must hide it everywhere."""


def notes_server(*flags: str, **kwargs: object) -> nbagent.MCPServer:
    """A new stdio connection to a fresh notes server (its own process)."""
    return nbagent.MCPServer.stdio(sys.executable, [SERVER, *flags], **kwargs)  # type: ignore[arg-type]


def protocol_server(**kwargs: object) -> nbagent.MCPServer:
    """A new stdio connection to a fresh protocol server (progress, logs, media, resources,
    prompts: protocol_server.py)."""
    return nbagent.MCPServer.stdio(sys.executable, [PROTOCOL_SERVER], **kwargs)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped yet) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def http_server(
    script: str, env: dict[str, str] | None = None, *, port: int = 0
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Our server ``script`` over streamable HTTP: ``(url, process)``, killed on exit.

    The test binds the listening socket and hands it to the server (``--http-fd``,
    see ``_http_serve.py``): the port is never free in between, so another
    process cannot take it and the test never reaches a stranger's server on it.
    Returns once the server says ``ready``; a server that exits first fails here.
    ``port=`` binds that port again (a server restarted where it was).
    """
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    with listener:
        proc = subprocess.Popen(
            [sys.executable, script, "--http-fd", str(listener.fileno())],
            pass_fds=(listener.fileno(),),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline()  # "ready", or nothing when it exited
        if said.strip() != b"ready":
            raise RuntimeError(f"{Path(script).name} did not start (exit code {proc.wait(10)})")
        yield url, proc
    finally:
        proc.kill()  # terminate() waits for open client streams (uvicorn's graceful stop)
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answering(
    chat: nbagent.Chat, answer: Callable[[nbagent.Chat, nbagent.PendingInput], None]
) -> threading.Thread:
    """A person at another thread: answers each input as it is asked (the asking call waits)."""
    asked = threading.Semaphore(0)
    chat.on(nbagent.InputRequested, lambda e: asked.release())

    def run() -> None:
        while asked.acquire(timeout=90):
            for pending in chat.pending_inputs:
                answer(chat, pending)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t
