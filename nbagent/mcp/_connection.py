"""One MCP server's session, on nbagent's background loop.

**Where sessions live.** The SDK's sessions are bound to the event loop (and
the task) that opened them: their reader tasks run there. So every session
lives on nbagent's one long-lived background loop (``_aio``, the loop
``run_sync`` and the store's follower use), and every request is handed to
that loop (``run_coroutine_threadsafe``) and awaited from wherever the
caller runs, or awaited directly by a round already running there. Nothing
on that loop blocks: a session's reads, writes, timeouts and process stops
are all awaits, so a hung server is only a pending await and never stalls
the rest of the loop. ``chat.ask()`` in a script (a private loop per
thread), ``chat.ask()`` in a notebook (its rounds run on the background
loop while the kernel's waits), ``await chat.ask_async()`` (the kernel's
loop), a worker thread of the ``threads`` mode: all reach the same session
the same way. Only a *blocking* request (:func:`wait`) cannot be made from
the background loop itself; it says so instead of waiting for ever.

**Lifecycle.** A :class:`Connection` connects on first use (a task on the
background loop enters the SDK ``Client`` and holds it until told to stop, since
the SDK's cancel scopes must be left by the task that entered them).
Connecting and listing the tools are bounded by ``connect_timeout``. A
connection found broken *before* a request (the server process exited while
idle, its transport ended) is reopened first; one that breaks *during* a
call fails that call (whether the tool did anything is unknown, so it is
never re-sent) and is reopened by the next request. Whether it broke is
decided from the transport (the session's stream ended), never from an
error code: a JSON-RPC error is the server refusing, and the session stays.
``notifications/tools/list_changed`` (legacy protocol) or a
``subscriptions/listen`` event (2026-07-28 protocol) marks the tool list
stale; the next listing refetches it, at most :data:`RELIST_BURST` times at
once and then once every :data:`RELIST_EVERY` seconds (a server announcing
changes without end does not make every step list again).

**Giving up a wait.** :func:`wait` and the tools' requests register with
the chat's cancel flag (``on_chat_cancel``): ``chat.cancel()`` abandons a
connection, a listing or a call in flight (the SDK tells the server).

**Processes** are started by ``_stdio.py`` (their own process group, which
dies with nbagent's process on Linux). Everywhere, open connections are
closed at interpreter exit (stdin closed, then the group ended).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import itertools
import json
import logging
import threading
import time
import warnings
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine
from http import HTTPStatus
from typing import Any, Final, TypeVar

from .._aio import on_background_loop, spawn
from .._errors import ChatCancelled, MCPServerError
from .._tools import CallReporter, InputAsker, InputsRequired, on_chat_cancel
from .._unicode import clean
from ._requests import Requests
from ._secrets import guard_sdk_logs
from ._stdio import UNREADABLE

T = TypeVar("T")

_open: weakref.WeakSet[Connection] = weakref.WeakSet()
_pending: set[asyncio.Task[None]] = set()  # closes started on the background loop itself

log = logging.getLogger("nbagent.mcp")
"""Where servers' log messages (``notifications/message``) go, at their level."""

LOG_LEVEL: Final = "info"
"""The lowest level of server log messages asked for (``logging/setLevel`` on the older
protocol, the per-request opt-in on 2026-07-28)."""
LOG_CHARS = 4_000  # a log message's text kept (the rest is cut)
_PY_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

CLOSE_TIMEOUT = 10.0  # seconds to wait for a server to stop (then its task is cancelled)
CONNECT_TIMEOUT = 30.0  # default seconds for connecting, and for listing the tools
RELIST_BURST = 3  # re-listings after list changes allowed at once...
RELIST_EVERY = 1.0  # ...then one per this many seconds


def wait(coro: Coroutine[Any, Any, T], timeout: float | None = None, what: str = "") -> T:
    """Run ``coro`` on the background loop and block until it finishes (from any other loop).

    Raises:
        ChatCancelled: The chat this runs for was cancelled meanwhile (the
            request is abandoned; ``what`` names it in the message).
        RuntimeError: Called on that loop itself (nbagent's
            background loop: an async tool of a ``chat.ask()`` in a notebook),
            where blocking would wait for ever.
    """
    if on_background_loop():
        coro.close()
        raise RuntimeError(
            "a blocking MCP call (MCPServer.call, list_tools, connect) cannot be made from "
            "nbagent's background loop, where MCP sessions run (an async tool of chat.ask() in "
            "a notebook); await call_async(...) there instead"
        )
    future = spawn(coro)
    withdraw = on_chat_cancel(future.cancel)
    try:
        return future.result(timeout)
    except concurrent.futures.CancelledError:
        raise ChatCancelled(
            f"the chat was cancelled while {what or 'an MCP request'} was waiting; "
            "call complete() to resume"
        ) from None
    except BaseException:
        future.cancel()
        raise
    finally:
        withdraw()


_INPUT_ROUNDS = 10
"""Rounds of input requests answered without a person (roots, state only) before giving up
(the SDK's own default)."""

_HEADER_MISMATCH = -32020
"""The 2026-07-28 error for a call whose tool this connection has not listed (or whose schema
changed): listed again, and the call resent once (as the SDK's ``Client.call_tool`` does)."""


def _modern(client: Any) -> bool:
    """Whether the connection speaks the 2026-07-28 protocol (``InputRequiredResult``)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return getattr(client, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def _is_list_changed(message: Any) -> bool:
    return getattr(message, "method", None) == "notifications/tools/list_changed"


class Connection:
    """A server's session on the background loop: connect, list tools, call, reconnect, close.

    Every ``async`` method runs on nbagent's background loop (``_aio``).

    Args:
        open_client: Builds an un-entered SDK ``Client`` given this connection
            (its :meth:`on_message`, :meth:`list_changed` and :meth:`lost`).
        label: The server's label, for messages.
        connect_timeout: Seconds for connecting, and for listing the tools
            (``None``: no limit).
    """

    def __init__(
        self,
        open_client: Callable[[Any], Any],
        label: str,
        connect_timeout: float | None = CONNECT_TIMEOUT,
    ):
        self._open_client = open_client
        self.label = label
        self.connect_timeout = connect_timeout
        self.client: Any = None
        self.broken = False
        self.stale = True  # the tool list must be fetched (again)
        self.generation = 0  # connections opened so far
        self.lost_reason: str | None = None  # why the transport ended (stdio), once known
        self.server_name: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._connecting: asyncio.Lock | None = None
        self._relist_lock = threading.Lock()
        self._relist_tokens = float(RELIST_BURST)
        self._relist_at = time.monotonic()
        self.has_resources = False  # it lists a resource or a template (seen when listing tools)
        self.scrub: Callable[[str], str] = _same  # the server's secrets out of its text
        self._reporters: dict[int, CallReporter] = {}  # calls in flight that report
        self._keys = itertools.count()
        self.requests: Any = None  # the server's ``Requests``: the SDK client's callbacks
        self._busy = 0  # requests in flight (calls, reads, listings): close() waits for them
        self._close_when_idle = False  # close() was asked while some were in flight
        self.http_status: int | None = None  # the last 4xx/5xx answer to a POST (HTTP only)

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

    def may_relist(self) -> bool:
        """Whether a changed list may be fetched now (takes one of the re-listing tokens)."""
        with self._relist_lock:
            now = time.monotonic()
            self._relist_tokens = min(
                float(RELIST_BURST), self._relist_tokens + (now - self._relist_at) / RELIST_EVERY
            )
            self._relist_at = now
            if self._relist_tokens < 1.0:
                return False
            self._relist_tokens -= 1.0
            return True

    # ------------------------------------------------------------ transport callbacks
    async def on_message(self, message: Any) -> None:
        """The SDK session's handler for what the server sends on its own."""
        if _is_list_changed(message):  # legacy protocol (and the listen stream's copy)
            self.stale = True

    async def on_log(self, params: Any) -> None:
        """The server's log message: Python logging (``nbagent.mcp``) and every call in flight.

        The protocol does not say which request a log message belongs to, so
        each call of this server running when it arrives gets it (its card, a
        ``ToolCallLog`` event); its text has the server's secrets replaced by ``***``.
        """
        level = str(getattr(params, "level", "info"))
        name = getattr(params, "logger", None)
        data = getattr(params, "data", None)
        if isinstance(data, str):
            text = data
        else:
            try:
                text = json.dumps(data, ensure_ascii=False, default=str)
            except (TypeError, ValueError):
                text = repr(data)
        text = self.scrub(clean(text)[:LOG_CHARS])
        name = self.scrub(clean(str(name))[:200]) if name else None
        where = f" [{name}]" if name else ""
        log.log(_PY_LEVELS.get(level, logging.INFO), "MCP server %r%s: %s", self.label, where, text)
        for reporter in list(self._reporters.values()):
            with contextlib.suppress(Exception):  # a report must never break the session
                reporter.log(level, text, name)

    def list_changed(self) -> None:
        """The server said its tools changed (called by the stdio transport, coalesced)."""
        self.stale = True

    def lost(self, reason: str) -> None:
        """The transport ended (the first reason given is kept)."""
        if self.lost_reason is None:
            self.lost_reason = reason

    def http_answered(self, method: str, status: int) -> None:
        """nbagent's HTTP client got an answer (its response hook): an error status to a
        POST, the request every message is sent with, is kept for :meth:`_why`."""
        if method == "POST" and status >= 400:
            self.http_status = status

    def _why(self, exc: BaseException) -> str:
        """``exc`` said shortly, with the HTTP status behind it when the SDK replaced it by
        a fixed text (``Server returned an error response``): the status and what it
        means, never the answer's headers or body (a ``WWW-Authenticate`` may echo the
        token)."""
        from mcp.shared.exceptions import MCPError

        text, inner, status = _short(exc), _unwrap(exc), self.http_status
        if status is not None and isinstance(inner, MCPError) and inner.message in _STAND_INS:
            text += f" ({http_status_hint(status)})"
        return text

    # ------------------------------------------------------------ on the background loop
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
            self.lost_reason = None
            self.http_status = None
            self._task = asyncio.ensure_future(self._hold(ready, self._stop))
            limit = asyncio.timeout(self.connect_timeout)
            try:
                async with limit:
                    await asyncio.shield(ready)
            except BaseException as exc:
                # the session task is stuck in the handshake, deaf to ``stop``: cancel it
                # (the transport still stops the process: stdin closed, then its group ended)
                if isinstance(exc, TimeoutError) and limit.expired():
                    # stopped in the background: its grace to exit is not the caller's wait
                    _in_background(self.drop(cancel=True))
                    raise MCPServerError(
                        f"MCP server {self.label!r} did not finish connecting within "
                        f"{self.connect_timeout:g} s (connect_timeout); it is being stopped"
                    ) from None
                await self.drop(cancel=True)
                if isinstance(exc, Exception) and not isinstance(exc, MCPServerError):
                    why = f"{type(exc).__name__}: {self._why(exc)}"
                    if self.lost_reason:  # a stdio server that exited while starting
                        why = (
                            f"{self.lost_reason}; {why}. Its stderr, which may say why, went "
                            "to this process's stderr (in a notebook: the terminal or log of "
                            "the Jupyter server, not the notebook)"
                        )
                    raise MCPServerError(
                        f"MCP server {self.label!r} could not be started or reached: {why}"
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
            opening = self._open_client(self)
            _guard_sdk_logs()
            async with opening as client:
                self.client, self.broken = client, False
                info = getattr(client, "server_info", None)
                name = getattr(info, "name", None)  # the server's own word: its secrets out
                self.server_name = self.scrub(clean(name)[:200]) if isinstance(name, str) else None
                _keep_unmatched_output(client)
                await _ask_for_logs(client)
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

    async def drop(self, *, cancel: bool = False) -> None:
        """Stop the session task (the transport stops a stdio server: stdin closed, then a kill).

        ``cancel``: cancel the task at once instead of asking it to stop (a task still in
        the handshake never reads ``stop``; waiting for it would add ``CLOSE_TIMEOUT``).
        """
        task, stop = self._task, self._stop
        self._task = self._stop = None
        self.client = None
        if task is None:
            return
        if stop is not None:
            stop.set()
        if cancel:
            task.cancel()
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
        limit = asyncio.timeout(self.connect_timeout)
        try:
            async with limit:
                for _ in range(1000):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.has_resources = await _has_resources(client)
        except TimeoutError as exc:
            self.stale = True
            if not limit.expired():
                raise self._failure(exc, "listing its tools") from exc
            self.broken = True  # a server that does not list its tools is restarted next time
            raise MCPServerError(
                f"MCP server {self.label!r} did not list its tools within "
                f"{self.connect_timeout:g} s (connect_timeout); it is restarted at the next use"
            ) from None
        except Exception as exc:
            self.stale = True
            raise self._failure(exc, "listing its tools") from exc
        return tools

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        reporter: CallReporter | None = None,
        parking: tuple[Requests, InputAsker] | None = None,
        *,
        generation: int | None = None,
    ) -> Any:
        """Call a tool once; the raw ``CallToolResult``.

        ``reporter``: the chat's call, told the server's progress notifications
        for this request and the log messages the server sends meanwhile.
        ``parking``: the server's requests and the chat call's asker, when the call may
        park on its inputs (a chat with a store): on the 2026-07-28 protocol an
        ``InputRequiredResult`` then ends the run (``InputsRequired``) instead of being
        answered in memory, and a run whose inputs were answered retries the call with
        them (see :meth:`_parked_call`). ``generation``: the connection the call was
        checked for (the tools it lists); the call is not sent on another one (the server
        restarted again meanwhile).

        Raises:
            MCPServerError: The server could not be reached, or the connection
                broke during the call (the call is not re-sent).
            InputsRequired: The call parks on the server's input requests.
        """
        async with self._in_use():
            return await self._call(name, arguments, reporter, parking, generation)

    async def _call(
        self,
        name: str,
        arguments: dict[str, Any],
        reporter: CallReporter | None,
        parking: tuple[Requests, InputAsker] | None,
        generation: int | None = None,
    ) -> Any:
        client = await self.ensure()  # a connection that broke while idle is reopened here
        if generation is not None and self.generation != generation:
            raise MCPServerError(
                f"MCP server {self.label!r} restarted again while the call of {name!r} was "
                "checked against its tools; the call was not sent"
            )
        progress = None
        key = next(self._keys)
        if reporter is not None:
            self._reporters[key] = reporter
            progress = self._progress_to(reporter)
        try:
            if parking is not None and _modern(client):
                return await self._parked_call(client, name, arguments, progress, *parking)
            return await client.call_tool(name, arguments, progress_callback=progress)
        except UnmatchedOutput as exc:  # the tool ran: its answer stands, with the problem
            log.warning("MCP server %r, %r: %s", self.label, name, self.scrub(exc.first_line))
            return exc.marked()
        except (InputsRequired, MCPServerError):
            raise
        except Exception as exc:
            raise self._failure(exc, f"calling {name!r}", calling=True) from exc
        finally:
            self._reporters.pop(key, None)

    async def _parked_call(
        self,
        client: Any,
        name: str,
        arguments: dict[str, Any],
        progress: Any,
        requests: Requests,
        asker: InputAsker,
    ) -> Any:
        """The SDK's input-required loop, driven here so that it can stop between rounds.

        A first run sends the call; a run resumed after its inputs were answered sends it
        with their ``input_responses`` and the stored ``request_state`` (each a new
        request: the call was claimed again before this run). Roots requests are answered
        at once from ``roots=``; a state-only answer is retried after a short pause; any
        other request ends the run parked (``InputsRequired``).
        """
        from mcp import types
        from mcp.shared.exceptions import MCPError

        resume = asker.resume()
        responses = await requests.responses(asker, resume) if resume is not None else None
        state = resume.get("request_state") if resume is not None else None
        relisted = False
        for round_ in range(_INPUT_ROUNDS):
            try:
                result = await client.session.call_tool(
                    name,
                    arguments,
                    progress_callback=progress,
                    input_responses=responses,
                    request_state=state,
                    allow_input_required=True,
                )
            except MCPError as exc:  # the tool's listing is stale here (a new connection)
                if exc.code != _HEADER_MISMATCH or relisted:
                    raise
                relisted = True
                await client._relist_tool(name)
                continue
            if not isinstance(result, types.InputRequiredResult):
                return result
            asked, ready = [], {}
            for key, request in (result.input_requests or {}).items():
                if getattr(request, "method", "") == "roots/list":
                    dumped = requests.roots_result().model_dump(mode="json", by_alias=True)
                    ready[key] = dumped
                else:
                    asked.append((key, *requests.describe(request)))
            if asked:
                raise InputsRequired(asked, result.request_state, ready, requests.label)
            responses = {k: types.ListRootsResult.model_validate(v) for k, v in ready.items()}
            state = result.request_state
            if not ready:  # state only: the server is not ready yet
                await asyncio.sleep(min(0.05 * 2**round_, 0.25))
        raise MCPServerError(
            f"MCP server {self.label!r} asked for input more than {_INPUT_ROUNDS} times in a "
            f"row while calling {name!r}"
        )

    async def paged(self, what: str, method: str, field: str) -> list[Any]:
        """Every page of a listing (``list_resources``, ``list_prompts``...), within
        ``connect_timeout``; ``what`` names it in errors."""
        async with self._in_use():
            return await self._paged(what, method, field)

    async def _paged(self, what: str, method: str, field: str) -> list[Any]:
        client = await self.ensure()
        items: list[Any] = []
        cursor: str | None = None
        limit = asyncio.timeout(self.connect_timeout)
        try:
            async with limit:
                for _ in range(1000):
                    page = await getattr(client, method)(cursor=cursor)
                    items.extend(getattr(page, field))
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except TimeoutError as exc:
            if not limit.expired():
                raise self._failure(exc, what) from exc
            raise MCPServerError(
                f"MCP server {self.label!r} did not finish {what} within "
                f"{self.connect_timeout:g} s (connect_timeout)"
            ) from None
        except Exception as exc:
            raise self._failure(exc, what) from exc
        return items

    async def request(self, what: str, method: str, *args: Any) -> Any:
        """One request (``read_resource``, ``get_prompt``) with its errors mapped."""
        async with self._in_use():
            client = await self.ensure()
            try:
                return await getattr(client, method)(*args)
            except Exception as exc:
                raise self._failure(exc, what) from exc

    @contextlib.asynccontextmanager
    async def _in_use(self) -> AsyncIterator[None]:
        """A request in flight: :meth:`close` meanwhile stops the server only once the last
        one ends; a request started after a close keeps it (using it again reconnects it)."""
        self._busy += 1
        self._close_when_idle = False
        try:
            yield
        finally:
            self._busy -= 1
            if not self._busy and self._close_when_idle:
                self._close_when_idle = False
                _in_background(self._stop_now())

    def _progress_to(self, reporter: CallReporter) -> Callable[..., Any]:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            text = self.scrub(clean(message)) if message else None
            of = f"/{total:g}" if total is not None else ""
            log.debug("MCP server %r: progress %g%s %s", self.label, value, of, text or "")
            with contextlib.suppress(Exception):  # a report must never break the session
                reporter.progress(float(value), None if total is None else float(total), text)

        return progress

    def _failure(self, exc: Exception, doing: str, *, calling: bool = False) -> MCPServerError:
        """The error for a failed request: the connection was lost, or the server refused.

        Lost is decided from the transport (the session's stream ended, or the
        failure is not a JSON-RPC error at all), never from the error code:
        -32000, the SDK's code for a closed connection, also starts the range
        servers use for their own errors. ``calling``: the request was a tool's call, which
        may have done something; any other (listing the tools before an approved call is
        sent, reading a resource) ran no tool, and the error says so.
        """
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        ended = not self.usable()  # the session's stream ended (marks the connection broken)
        if isinstance(exc, MCPError) and exc.data == UNREADABLE:
            return MCPServerError(f"MCP server {self.label!r}, {doing}: {exc.message}")
        if not isinstance(exc, MCPError) or (exc.code == CONNECTION_CLOSED and ended):
            self.broken = True
            why = f"{type(exc).__name__}: {_short(exc)}"
            if self.lost_reason:
                why = f"{self.lost_reason}; {why}"
            outcome = (
                "whether the tool did anything is unknown, so it was not retried"
                if calling
                else "no tool was called"
            )
            return MCPServerError(
                f"MCP server {self.label!r} stopped or became unreachable while {doing} "
                f"({why}); {outcome}. The server is restarted at the next call."
            )
        return MCPServerError(f"MCP server {self.label!r} refused {doing}: {self._why(exc)}")

    async def _stop_now(self) -> None:
        await self.drop()
        _open.discard(self)

    async def _close(self) -> None:
        """On the background loop: stop now, or once the requests in flight end."""
        if self._busy:
            self._close_when_idle = True
            return
        await self._stop_now()

    # ------------------------------------------------------------ from any thread
    def close(self) -> None:
        """Stop the session (blocking; a no-op if it is not open).

        Requests in flight (a call of another chat using the same server) are not cut
        off: the session then stops as soon as the last one ends, and ``close`` returns
        at once.
        """
        if self._task is None:
            return
        if on_background_loop():  # cannot wait for itself: stop in the background
            _in_background(self._close())
            return
        with contextlib.suppress(Exception):
            wait(self._close(), CLOSE_TIMEOUT + 5)


async def _has_resources(client: Any) -> bool:
    """Whether the server has a resource or a resource template to read (a server that
    only declares the capability, as SDK servers always do, has none)."""
    caps = getattr(client, "server_capabilities", None)
    if getattr(caps, "resources", None) is None:
        return False
    for method, field in (
        ("list_resources", "resources"),
        ("list_resource_templates", "resource_templates"),
    ):
        with contextlib.suppress(Exception):  # not offered after all: no read tool
            if getattr(await getattr(client, method)(), field):
                return True
    return False


def _same(text: str) -> str:
    return text


OUTPUT_MISMATCH: Final = "io.nbagent/outputSchemaMismatch"
"""The ``_meta`` key of a result whose structured content broke the tool's ``outputSchema``
(the SDK's check failed, after the tool ran): its first line (see ``_results.py``)."""


class UnmatchedOutput(Exception):
    """A tool's answer the SDK found not matching the tool's own ``outputSchema`` (or the
    schema unusable): the tool ran, so its answer is kept (:meth:`marked`), never lost
    as if the server were gone."""

    def __init__(self, answer: Any, problem: str):
        super().__init__(problem)
        self.answer = answer  # the SDK's CallToolResult
        self.problem = problem

    @property
    def first_line(self) -> str:
        """The problem's first line (jsonschema adds the schema and the instance)."""
        text = self.problem.strip()
        return (text.splitlines()[0] if text else "invalid")[:500]

    def marked(self) -> Any:
        """The result, its ``_meta`` saying what is wrong with it."""
        meta = dict(getattr(self.answer, "meta", None) or {})
        meta[OUTPUT_MISMATCH] = self.first_line
        return self.answer.model_copy(update={"meta": meta})


def _keep_unmatched_output(client: Any) -> None:
    """Have the SDK's check of a result against the tool's ``outputSchema`` raise
    :class:`UnmatchedOutput` holding the result, instead of a bare ``RuntimeError`` that
    loses it (and read as the server lost: it was restarted, and a paid call's answer
    thrown away)."""
    session: Any = getattr(client, "session", None)
    check = getattr(session, "validate_tool_result", None)
    if session is None or check is None or getattr(check, "_nbagent_keeps", False):
        return

    async def validate(name: str, result: Any) -> None:
        try:
            await check(name, result)
        except RuntimeError as exc:  # the SDK's word for a result or schema it refuses
            raise UnmatchedOutput(result, str(exc)) from None

    validate._nbagent_keeps = True  # type: ignore[attr-defined]
    session.validate_tool_result = validate


def _in_background(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` as a task of the background loop (called on it), kept until it ends."""
    task = asyncio.ensure_future(coro)
    _pending.add(task)
    task.add_done_callback(_pending.discard)


def _guard_sdk_logs() -> None:
    """The SDK's loggers, all imported (its HTTP transport logs each request at DEBUG),
    get the filter that scrubs the servers' secrets from their records."""
    with contextlib.suppress(ImportError):
        import mcp.client.stdio
        import mcp.client.streamable_http  # noqa: F401
    guard_sdk_logs()


async def _ask_for_logs(client: Any) -> None:
    """On the older protocol, ask a server that logs for :data:`LOG_LEVEL` and up (the
    2026-07-28 protocol opts in per request: the client's ``log_level``)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    caps = getattr(client, "server_capabilities", None)
    if getattr(caps, "logging", None) is None:
        return
    if getattr(client, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return
    with warnings.catch_warnings(), contextlib.suppress(Exception):
        warnings.simplefilter("ignore")  # deprecated as of 2026-07-28, still what it speaks
        await client.set_logging_level(LOG_LEVEL)


def _unwrap(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups the SDK's task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _short(exc: BaseException) -> str:
    text = str(_unwrap(exc)) or type(_unwrap(exc)).__name__
    return text if len(text) <= 300 else text[:300] + "..."


_STAND_INS: Final = frozenset({"Server returned an error response", "Not Found"})
"""The texts the SDK's streamable HTTP transport puts in place of a request's 4xx/5xx
answer (``Not Found``: a 404 before any session; a 404 after one reads ``Session
terminated``, which says what happened)."""


def http_status_hint(status: int) -> str:
    """An HTTP error status and what it means to whoever set up the server (never the
    answer's own text: its reason phrase is the standard one)."""
    try:
        head = f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        head = f"HTTP {status}"
    if status in (401, 407):
        why = (
            "the server refused the credentials; check the token in headers= or the URL's "
            "credentials"
        )
    elif status == 403:
        why = (
            "the server refused access with these credentials; check the token in headers= "
            "and what it is allowed"
        )
    elif status == 404:
        why = "nothing answers at this URL; check its path, the MCP endpoint's (often /mcp)"
    elif status == 429:
        why = "the server is limiting the rate of requests; try again later"
    elif status >= 500:
        why = "the server failed; its own logs may say why"
    else:
        why = "the server refused the request"
    return f"{head}: {why}"


@contextlib.asynccontextmanager
async def http_transport(
    url: str,
    headers: dict[str, str] | None,
    on_status: Callable[[str, int], None] | None = None,
) -> AsyncIterator[Any]:
    """Streamable HTTP with our headers (the HTTP client is closed with the transport).

    ``on_status(method, status)``: told each answer's status (the SDK replaces an error
    status by a fixed text; :meth:`Connection.http_answered` keeps it to say it).
    """
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def answered(response: Any) -> None:
        if on_status is not None:
            with contextlib.suppress(Exception):  # a hint must never break the request
                on_status(str(response.request.method), int(response.status_code))

    timeout = httpx2.Timeout(30.0, read=300.0)
    hooks = {"response": [answered]}
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=timeout, event_hooks=hooks) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


@atexit.register
def _close_all() -> None:
    """At interpreter exit, stop every open server (stdio processes included)."""
    conns = list(_open)
    if not conns:
        return

    async def drop_all() -> None:
        await asyncio.gather(*(c.drop() for c in conns), return_exceptions=True)

    with contextlib.suppress(BaseException):
        wait(drop_all(), CLOSE_TIMEOUT + 5)
