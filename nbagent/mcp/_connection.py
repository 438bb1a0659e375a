"""One MCP server's session, owned by nbagent's MCP loop thread.

**Where sessions live.** The SDK's sessions are bound to the event loop (and
the task) that opened them: their reader tasks run there. So every session
lives on one long-lived loop that nbagent owns, on a daemon thread
(``nbagent-mcp``), and every request is handed to that loop
(``run_coroutine_threadsafe``) and awaited from wherever the caller runs. No
driver ever blocks that loop: ``chat.ask()`` in a script (a private loop per
thread), ``chat.ask()`` in a notebook (nbagent's background loop while the
kernel's waits), ``await chat.ask_async()`` (the kernel's loop), a worker
thread of the ``threads`` mode: all reach the same session the same way.

**Lifecycle.** A :class:`Connection` connects on first use (a task on the
MCP loop enters the SDK ``Client`` and holds it until told to stop, since
the SDK's cancel scopes must be left by the task that entered them). A
connection found broken *before* a request (the server process exited while
idle) is reopened first; one that breaks *during* a call fails that call
(whether the tool did anything is unknown, so it is never re-sent) and is
reopened by the next request. ``notifications/tools/list_changed`` (legacy
protocol) or a ``subscriptions/listen`` event (2026-07-28 protocol) marks the
tool list stale; the next listing refetches it.

**A stdio server never outlives its parent.** On Linux the command is started
through a tiny guard that asks the kernel to kill it when nbagent's process
dies (``PR_SET_PDEATHSIG``, kept across ``exec``) and then ``exec``s the
command, so even a server that ignores the end of its input goes with a
killed kernel. Everywhere, open connections are closed at interpreter exit
(the SDK closes stdin, then terminates the process tree).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import shutil
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TextIO, TypeVar

from .._errors import MCPServerError

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_loop_lock = threading.Lock()
_open: weakref.WeakSet[Connection] = weakref.WeakSet()
_pending: set[asyncio.Task[None]] = set()  # closes started on the MCP loop itself
_devnull: TextIO | None = None

CLOSE_TIMEOUT = 10.0  # seconds to wait for a server to stop (the SDK escalates to a kill)

# Run by the guard interpreter (Linux): die with the parent, then become the server.
_GUARD = (
    "import ctypes,os,sys\n"
    "ctypes.CDLL(None).prctl(1, 9)\n"  # PR_SET_PDEATHSIG, SIGKILL
    "os.getppid() == int(sys.argv[1]) or os._exit(1)\n"  # the parent died before prctl
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def mcp_loop() -> asyncio.AbstractEventLoop:
    """The loop every MCP session lives on (started on first use)."""
    global _loop, _thread
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="nbagent-mcp", daemon=True)
            thread.start()
            _loop, _thread = loop, thread
        return _loop


def on_mcp_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def wait(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the MCP loop and block until it finishes (from any other thread)."""
    if on_mcp_thread():
        coro.close()
        raise RuntimeError("a blocking MCP call cannot be made from the MCP loop itself")
    future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, mcp_loop())
    try:
        return future.result(timeout)
    except BaseException:
        future.cancel()
        raise


def guarded(command: str, args: list[str], path: str | None) -> tuple[str, list[str]]:
    """The command line that starts ``command`` so that it dies with this process.

    Raises:
        FileNotFoundError: ``command`` is not an executable file or on ``path``.
    """
    found = shutil.which(command, path=path)
    if found is None:
        where = "" if os.sep in command else " on the server's PATH"
        raise FileNotFoundError(f"command {command!r} not found{where}")
    if not sys.platform.startswith("linux"):
        return command, list(args)
    return sys.executable, ["-I", "-S", "-c", _GUARD, str(os.getpid()), found, *args]


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


def _is_list_changed(message: Any) -> bool:
    return getattr(message, "method", None) == "notifications/tools/list_changed"


class Connection:
    """A server's session on the MCP loop: connect, list tools, call, reconnect, close.

    Every ``async`` method runs on the MCP loop (see :func:`mcp_loop`).

    Args:
        open_client: Builds an un-entered SDK ``Client`` given a message handler.
        label: The server's label, for messages.
    """

    def __init__(self, open_client: Callable[[Any], Any], label: str):
        self._open_client = open_client
        self.label = label
        self.client: Any = None
        self.broken = False
        self.stale = True  # the tool list must be fetched (again)
        self.generation = 0  # connections opened so far
        self.server_name: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._connecting: asyncio.Lock | None = None

    # ------------------------------------------------------------ state
    def usable(self) -> bool:
        """Connected, and not known to be broken (a server that exited while idle is)."""
        client = self.client
        if client is None or self.broken:
            return False
        dispatcher = getattr(getattr(client, "_session", None), "_dispatcher", None)
        if getattr(dispatcher, "_closed", False):  # the transport ended (the process exited)
            self.broken = True
            return False
        return True

    # ------------------------------------------------------------ on the MCP loop
    async def ensure(self) -> Any:
        """The connected client, connecting (or reconnecting) first if needed."""
        if self.usable():
            return self.client
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self.usable():
                return self.client
            await self.drop()
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._stop = asyncio.Event()
            self._task = asyncio.ensure_future(self._hold(ready, self._stop))
            try:
                await asyncio.shield(ready)
            except BaseException as exc:
                await self.drop()
                if isinstance(exc, Exception) and not isinstance(exc, MCPServerError):
                    raise MCPServerError(
                        f"MCP server {self.label!r} could not be started or reached: "
                        f"{type(exc).__name__}: {_short(exc)}"
                    ) from exc
                raise
            self.generation += 1
            self.stale = True
            _open.add(self)
            return self.client

    async def _hold(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        """The task that owns the SDK client: enter it, serve until stopped, leave it."""
        import anyio

        try:
            async with self._open_client(self._on_message) as client:
                self.client, self.broken = client, False
                info = getattr(client, "server_info", None)
                self.server_name = getattr(info, "name", None)
                if not ready.done():
                    ready.set_result(None)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._listen, client)
                    await stop.wait()
                    tg.cancel_scope.cancel()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(_unwrap(exc))
        finally:
            self.client = None
            self.broken = True

    async def _listen(self, client: Any) -> None:
        """On the 2026-07-28 protocol, list changes arrive on a ``subscriptions/listen`` stream."""
        caps = getattr(getattr(client, "server_capabilities", None), "tools", None)
        if not getattr(caps, "list_changed", False):
            return
        with contextlib.suppress(Exception):  # not supported (legacy), or the connection ended
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self.stale = True

    async def _on_message(self, message: Any) -> None:
        if _is_list_changed(message):  # legacy protocol (and the listen stream's copy)
            self.stale = True

    async def drop(self) -> None:
        """Stop the session task (the SDK stops a stdio server: stdin closed, then a kill)."""
        task, stop = self._task, self._stop
        self._task = self._stop = None
        self.client = None
        if task is None:
            return
        if stop is not None:
            stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except BaseException:
            pass

    async def list_tools(self) -> list[Any]:
        """The server's tools (every page), marking the list fresh."""
        client = await self.ensure()
        self.stale = False  # a change announced while listing marks it stale again
        tools: list[Any] = []
        cursor: str | None = None
        try:
            for _ in range(1000):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as exc:
            self.stale = True
            raise self._failure(exc, "listing its tools") from exc
        return tools

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call a tool once; the raw ``CallToolResult``.

        Raises:
            MCPServerError: The server could not be reached, or the connection
                broke during the call (the call is not re-sent).
        """
        client = await self.ensure()  # a connection that broke while idle is reopened here
        try:
            return await client.call_tool(name, arguments)
        except Exception as exc:
            raise self._failure(exc, f"calling {name!r}") from exc

    def _failure(self, exc: Exception, doing: str) -> MCPServerError:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        lost = not isinstance(exc, MCPError) or exc.code == CONNECTION_CLOSED
        if lost or not self.usable():
            self.broken = True
            return MCPServerError(
                f"MCP server {self.label!r} stopped or became unreachable while {doing} "
                f"({type(exc).__name__}: {_short(exc)}); whether the tool did anything is "
                "unknown, so it was not retried. The server is restarted at the next call."
            )
        return MCPServerError(f"MCP server {self.label!r} refused {doing}: {_short(exc)}")

    # ------------------------------------------------------------ from any thread
    def close(self) -> None:
        """Stop the session (blocking; a no-op if it is not open)."""
        if self._task is None:
            return
        if on_mcp_thread():  # cannot wait for itself: stop in the background
            task = asyncio.ensure_future(self.drop())
            _pending.add(task)
            task.add_done_callback(_pending.discard)
            return
        with contextlib.suppress(Exception):
            wait(self.drop(), CLOSE_TIMEOUT + 5)
        _open.discard(self)


def _unwrap(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups the SDK's task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _short(exc: BaseException) -> str:
    text = str(_unwrap(exc)) or type(_unwrap(exc)).__name__
    return text if len(text) <= 300 else text[:300] + "..."


@contextlib.asynccontextmanager
async def http_transport(url: str, headers: dict[str, str] | None) -> AsyncIterator[Any]:
    """Streamable HTTP with our headers (the HTTP client is closed with the transport)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


@atexit.register
def _close_all() -> None:
    """At interpreter exit, stop every open server (stdio processes included)."""
    conns = list(_open)
    if not conns or _loop is None or _loop.is_closed():
        return

    async def drop_all() -> None:
        await asyncio.gather(*(c.drop() for c in conns), return_exceptions=True)

    with contextlib.suppress(BaseException):
        wait(drop_all(), CLOSE_TIMEOUT + 5)
