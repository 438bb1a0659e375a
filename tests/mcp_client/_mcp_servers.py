"""Helpers for the MCP client tests: the notes server (notes_server.py beside this file),
a real MCP server built with the official SDK, and process checks."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable
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
