"""The stdio transport: a server process nbagent starts and talks to over its pipes.

nbagent uses its own instead of the SDK's ``stdio_client`` (whose reader joins
every chunk onto the unfinished line, quadratic in a long message, decodes
strictly, so one byte that is not UTF-8 ends its reader for good, and hands
every notification to the session). It yields the same pair of streams the
SDK's ``Client`` takes:

- **Lines in linear time, bounded.** Bytes are split at newlines as they
  come; a message longer than ``max_message_bytes`` is not kept (only its
  first and last few KiB, to find which request it answers): that request
  gets an error response saying so, and the session goes on. A long
  notification is dropped. A long answer whose request cannot be told ends
  the connection (``on_lost`` says why), so nothing waits for an answer that
  was thrown away.
- **Lenient decoding.** Invalid UTF-8 becomes U+FFFD; a line that is not
  JSON-RPC is passed on as an error item (the session ignores it), unless it
  names a request waiting for its answer, which then fails at once.
- **List changes coalesced.** ``notifications/tools/list_changed`` lines call
  ``on_list_changed`` here and never reach the session: a server announcing
  a change thousands of times costs a substring test each, on the loop every
  server shares.
- **A dead reader ends the connection**: whatever stops it, the session sees
  the end of its stream (waiting requests fail) and ``on_lost`` gets the reason.
- **The process tree.** The server starts in its own session (process
  group). On Linux a small guard process is the group's leader: it asks the
  kernel for a signal when nbagent's process dies (``PR_SET_PDEATHSIG``),
  starts the command as its child, and on that signal kills the whole group,
  so a server behind a wrapper (``npx``, ``uvx``, ``sh -c``) goes with a
  killed kernel too. Stopping closes stdin, waits, then ends the group
  (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, TextIO

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # default cap on one message from a stdio server
STOP_GRACE = 2.0  # seconds a server gets to exit after its stdin closes (then SIGTERM, SIGKILL)
_KEEP = 64 * 1024  # bytes of an over-long message kept at each end (to find its request id)
_READ = 64 * 1024
_LIST_CHANGED = b"notifications/tools/list_changed"
UNREADABLE = "nbagent-unreadable"  # ``data`` of the error responses this transport makes up

_devnull: TextIO | None = None

# The guard (Linux), run as ``python -I -S -c _GUARD <nbagent pid> <command> <args...>``:
# it leads the server's process group, dies with nbagent's process and takes the group along.
_GUARD = """\
import ctypes, os, signal, sys
signal.signal(signal.SIGTERM, lambda *_: None)
signal.signal(signal.SIGUSR1, lambda *_: os.killpg(0, signal.SIGKILL))
ctypes.CDLL(None).prctl(1, signal.SIGUSR1)
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as exc:
        sys.stderr.write(f"cannot start {sys.argv[2]}: {exc}\\n")
        os._exit(127)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except ChildProcessError:
        status = 0
        break
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""


def guarded(command: str, args: list[str], path: str | None) -> list[str]:
    """The argv that starts ``command`` so that its process group dies with this process.

    Raises:
        FileNotFoundError: ``command`` is not an executable file or on ``path``.
    """
    found = shutil.which(command, path=path)
    if found is None:
        where = "" if os.sep in command else " on the server's PATH"
        raise FileNotFoundError(f"command {command!r} not found{where}")
    if not sys.platform.startswith("linux"):
        return [found, *args]
    return [sys.executable, "-I", "-S", "-c", _GUARD, str(os.getpid()), found, *args]


def server_stderr() -> TextIO:
    """Where a stdio server's stderr goes: a stream with a file descriptor.

    In a Jupyter kernel ``sys.stderr`` is the kernel's own stream (no file
    descriptor, which a child process needs): the process's real stderr
    (``sys.__stderr__``, the terminal running Jupyter) is used, else the null device.
    """
    global _devnull
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None and stream.fileno() >= 0:
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    if _devnull is None:
        _devnull = open(os.devnull, "w")  # noqa: SIM115 (kept open for every later server)
    return _devnull


class _Lines:
    """Splits a byte stream into lines in linear time; a line past ``limit`` is not kept."""

    def __init__(self, limit: int):
        self.limit = limit
        self._buf = bytearray()
        self._size = 0  # bytes of the current line so far
        self._head: bytes | None = None  # set once the current line is over the limit
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | _Oversized]:
        out: list[bytes | _Oversized] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl
            if end > start:
                self._add(chunk[start:end] if start or end < len(chunk) else chunk)
            if nl < 0:
                return out
            out.append(self._take())
            start = nl + 1

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._head is None and self._size <= self.limit:
            self._buf += piece
            return
        if self._head is None:  # this piece takes the line past the limit
            self._head = bytes(self._buf[:_KEEP]) if self._buf else piece[:_KEEP]
            self._tail = bytes(self._buf[-_KEEP:])
            self._buf = bytearray()
        self._tail = (self._tail + piece[-_KEEP:])[-_KEEP:]

    def _take(self) -> bytes | _Oversized:
        if self._head is not None:
            line: bytes | _Oversized = _Oversized(self._head, self._tail, self._size)
        else:
            line = bytes(self._buf)
        self._buf = bytearray()
        self._size, self._head, self._tail = 0, None, b""
        return line


class _Oversized:
    """A line longer than the cap: its size and both ends."""

    def __init__(self, head: bytes, tail: bytes, size: int):
        self.head, self.tail, self.size = head, tail, size


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_TAIL_ID = re.compile(
    rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?}\s*$'
)


def _head_fields(head: bytes) -> dict[bytes, bytes]:
    """The top-level scalar members a (possibly cut) JSON object shows at its start."""
    fields: dict[bytes, bytes] = {}
    depth = 0
    key: bytes | None = None
    expect_key = False
    for m in _TOKEN.finditer(head):
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
            expect_key = tok == b"{" and depth == 1
        elif tok in (b"}", b"]"):
            depth -= 1
        elif tok == b",":
            expect_key = depth == 1
        elif tok == b":":
            continue
        elif depth == 1 and expect_key:
            key, expect_key = tok, False
            continue
        elif depth == 1 and key is not None:
            fields[key] = tok
        if depth == 1:
            key = None
    return fields


def _id_value(raw: bytes) -> Any:
    with contextlib.suppress(ValueError):
        return json.loads(raw)
    return None


def _answered_id(line: bytes | _Oversized, waiting: dict[str, Any]) -> Any:
    """Which waiting request an unreadable answer is for (``None``: cannot tell)."""
    head, tail = (line.head, line.tail) if isinstance(line, _Oversized) else (line, line)
    fields = _head_fields(head)
    if b'"method"' in fields:
        return None  # a request or notification from the server, not an answer
    start = fields.get(b'"id"')
    candidates = [_id_value(start) if start is not None else None]
    m = _TAIL_ID.search(tail[-4096:])
    if m:
        candidates.append(_id_value(m.group(1)))
    for c in candidates:
        if c is not None and str(c) in waiting:
            return waiting[str(c)]
    return None


@contextlib.asynccontextmanager
async def stdio_transport(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    *,
    max_message_bytes: int,
    on_list_changed: Callable[[], None],
    on_lost: Callable[[str], None],
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``argv`` and yield ``(read_stream, write_stream)`` for the SDK's ``Client``."""
    import anyio
    import anyio.lowlevel
    import mcp_types as types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    if sys.platform == "win32":  # pragma: no cover (the SDK's spawn: a Job Object ends the tree)
        from mcp.os.win32.utilities import create_windows_process

        environment = get_default_environment() | env
        process: Any = await create_windows_process(
            argv[0], argv[1:], environment, server_stderr(), cwd
        )
    else:
        process = await anyio.open_process(
            argv,
            env=get_default_environment() | env,
            stderr=server_stderr(),
            cwd=cwd,
            start_new_session=True,
        )
    read_in, read_out = anyio.create_memory_object_stream[Any](0)
    write_in, write_out = anyio.create_memory_object_stream[Any](0)
    waiting: dict[str, Any] = {}  # requests sent and not answered yet, by str(id)
    stopping = False

    def made_up_error(rid: Any, message: str) -> Any:
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=message, data=UNREADABLE)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))

    async def deliver(line: bytes | _Oversized) -> bool:
        """Hand one line to the session; False: the connection must end."""
        if isinstance(line, _Oversized):
            rid = _answered_id(line, waiting)
            if b'"method"' in _head_fields(line.head):
                # a notification (or a request) the server sent on its own: dropped
                await read_in.send(ValueError(f"dropped a {line.size}-byte message"))
                return True
            if rid is None:
                on_lost(
                    f"the server sent a message of {line.size:,} bytes, more than "
                    f"max_result_bytes={max_message_bytes:,}, and which request it "
                    "answers could not be told"
                )
                return False
            waiting.pop(str(rid), None)
            too_long = (
                f"the server's answer was {line.size:,} bytes, more than "
                f"max_result_bytes={max_message_bytes:,}; it was discarded"
            )
            await read_in.send(made_up_error(rid, too_long))
            return True
        line = line.rstrip(b"\r")
        if not line.strip():
            return True
        if len(line) < 512 and _LIST_CHANGED in line and b'"id"' not in line:
            on_list_changed()  # coalesced: the session never sees these
            return True
        text = line.decode("utf-8", errors="replace")
        try:
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError as exc:
            rid = _answered_id(line, waiting)
            if rid is None:
                await read_in.send(exc)  # not JSON-RPC (a stray print): the session ignores it
                return True
            waiting.pop(str(rid), None)
            reason = f"the server's answer is not valid JSON-RPC ({str(exc)[:200]})"
            await read_in.send(made_up_error(rid, reason))
            return True
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            waiting.pop(str(message.id), None)
        await read_in.send(SessionMessage(message))
        return True

    async def reader() -> None:
        assert process.stdout is not None
        lines = _Lines(max_message_bytes)
        why = "the server closed its output (the process ended)"
        try:
            async with read_in:
                while True:
                    try:
                        chunk = await process.stdout.receive(_READ)
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        if not stopping:  # said before the session sees the end
                            on_lost(await _ended(process))
                        break
                    for line in lines.feed(chunk):
                        if not await deliver(line):
                            return
                    await anyio.lowlevel.checkpoint()  # a flooding server takes turns with the rest
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is gone
        except Exception as exc:  # a dead reader must not leave requests waiting
            why = f"reading the server's output failed ({type(exc).__name__}: {exc})"
        finally:
            if not stopping:
                on_lost(why)

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_out:
                async for item in write_out:
                    msg = item.message
                    if isinstance(msg, types.JSONRPCRequest):
                        waiting[str(msg.id)] = msg.id
                    elif getattr(msg, "method", None) == "notifications/cancelled":
                        rid = (getattr(msg, "params", None) or {}).get("requestId")
                        waiting.pop(str(rid), None)  # abandoned: its answer is not awaited
                    data = msg.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            if not stopping:
                on_lost(f"writing to the server failed ({type(exc).__name__})")
            await read_in.aclose()  # the session sees the end instead of waiting for ever

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_out, write_in
        finally:
            stopping = True
            with anyio.CancelScope(shield=True):
                await _stop(process)
                for stream in (read_out, write_in, read_in, write_out):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def _ended(process: Any) -> str:
    """Why a server's output ended: its exit code, once it exits (waited for briefly)."""
    import anyio

    with anyio.move_on_after(1.0):
        await process.wait()
    code = getattr(process, "returncode", None)
    if code is None:
        return "the server closed its output"
    return f"the server's process ended (exit code {code})"


async def _stop(process: Any) -> None:
    """Close stdin, give the server :data:`STOP_GRACE` seconds, then end its process group."""
    import anyio

    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    with anyio.move_on_after(STOP_GRACE):
        await process.wait()
    # the whole tree, even if the server exited: what a wrapper (sh -c, npx) started may still run
    if sys.platform == "win32":  # pragma: no cover
        from mcp.os.win32.utilities import close_process_job, terminate_windows_process_tree

        with contextlib.suppress(Exception):
            if process.returncode is None:
                await terminate_windows_process_tree(process)
            close_process_job(process)
    else:
        from mcp.os.posix.utilities import terminate_posix_process_tree

        with contextlib.suppress(Exception):
            await terminate_posix_process_tree(process, STOP_GRACE)
    with anyio.move_on_after(STOP_GRACE):
        await process.wait()
    with contextlib.suppress(Exception):
        await process.stdout.aclose()
