"""Who claims a call: a process identity that outlives the process, and whether it is alive.

An owner is ``host:pid:start:token``: the start time (clock ticks since boot,
Linux) tells a reused pid from the original, and the token one attached chat
object from another in the same process.
"""

from __future__ import annotations

import os
import socket

from .._events import utcnow
from ._protocol import StoredCall

_HOST = socket.gethostname()
LIVE_TOKENS: set[str] = set()


def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    if not rest or rest[0] == "Z":  # a zombie has finished
        return "zombie"
    return rest[19] if len(rest) > 19 else None


_PROCESS: tuple[int, str] | None = None  # (pid, "host:pid:start"), per process (fork)


def new_owner() -> str:
    """``host:pid:start:token``: who claims a call (one token per attached chat object)."""
    global _PROCESS
    pid = os.getpid()
    if _PROCESS is None or _PROCESS[0] != pid:
        _PROCESS = (pid, f"{_HOST}:{pid}:{_proc_start(pid) or ''}")
    return f"{_PROCESS[1]}:{os.urandom(6).hex()}"


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process behind ``owner`` is alive; ``None`` when it cannot be told."""
    if not owner:
        return False
    parts = owner.rsplit(":", 3)
    if len(parts) != 4:
        return None
    host, pid_s, start, token = parts
    if host != _HOST:
        return None
    try:
        pid = int(pid_s)
    except ValueError:
        return None
    if pid == os.getpid():
        return token in LIVE_TOKENS
    now = _proc_start(pid)
    if now == "zombie":
        return False
    if start and now is not None:
        return now == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return None
    return True


def this_host() -> str:
    """This machine's host name, as claims made here record it."""
    return _HOST


def other_host(owner: str | None) -> str | None:
    """The host ``owner`` names when it is not this one (whether a process there is alive
    cannot be told from here), else ``None``."""
    parts = (owner or "").rsplit(":", 3)
    if len(parts) != 4 or parts[0] == _HOST:
        return None
    return parts[0]


def abandoned(call: StoredCall, claim_timeout: float | None) -> bool:
    alive = owner_alive(call.claimed_by)
    if alive is None:
        if claim_timeout is None or call.claimed_at is None:
            return False
        return (utcnow() - call.claimed_at).total_seconds() > claim_timeout
    return not alive
