"""SDK clients shared by the providers of a process that would make the same one.

``Chat(model="gpt-4.1-mini")`` makes a provider, and the provider made an SDK client of
its own: an SSL context and an HTTP connection pool, about 20 ms of CPU, and a socket
held as long as the chat lived; an async client per provider and event loop, the same
again. A batch whose ``make_chat`` named a model spent 49 ms of CPU per chat against
2.5 ms with one provider shared (the advice the docs had to give), and a notebook keeping
a few hundred chats held a few hundred sockets.

Now providers asking for the same client (the same SDK, key, base URL and options, and
the same environment variables of that SDK: a key set in a later cell makes a new one)
share it: the sync client for the process (closed once every provider that took it
called ``close()``; a provider collected without closing keeps it open, as the SDKs
advise: a client is meant to live long), the async one for its event loop (closed when
the loop shuts down). A client passed in, or options that are objects (a custom
``http_client``), are the provider's own as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import weakref
from collections.abc import Callable
from typing import Any

from .._leases import Leases, Release

_SYNC: Leases[Any] = Leases(lambda client: client.close(), lambda client: not client.is_closed())

_ASYNC: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)
"""Per event loop: the shared async clients by key (each closed by its keeper at shutdown)."""


def _plain(value: Any) -> Any:
    """A client option as JSON: a value (``httpx.Timeout`` by its ``repr``), never an object
    compared by identity (raises ``TypeError``: such a client is not shared)."""
    if type(value).__name__ == "Timeout" and type(value).__module__.startswith("httpx"):
        return repr(value)
    raise TypeError(type(value).__name__)


def client_key(sdk: str, env_prefix: str, **config: Any) -> str | None:
    """What makes an SDK client, as a digest (it holds the key), or ``None`` when an option
    cannot be compared by value: then the provider makes its own."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(env_prefix))
    try:
        text = json.dumps([sdk, config, env], sort_keys=True, default=_plain)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def sync_client(key: str | None, make: Callable[[], Any]) -> tuple[Any, Release]:
    """The client of ``key`` (shared), or a new one of the caller's own when ``key`` is
    ``None``; and how to let go of it (``release(later)``: closes it when nobody else
    holds it)."""
    if key is None:
        client = make()
        return client, lambda later=False: client.close()
    return _SYNC.take(key, make)


async def _close_on_shutdown(client: Any, done: Callable[[], None] | None = None) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        if done is not None:
            done()
        with contextlib.suppress(Exception):
            await client.close()


keepers: set[asyncio.Task[None]] = set()
"""Every client keeper until it ends: a loop holds its tasks only weakly, and a keeper must
outlive its provider to close the client on its loop."""


def keep(
    loop: asyncio.AbstractEventLoop, client: Any, done: Callable[[], None] | None = None
) -> Any:
    """A task on ``loop`` that closes ``client`` when the loop shuts down (or the task is
    cancelled), then calls ``done``."""
    keeper = loop.create_task(_close_on_shutdown(client, done), name="nbagent-client-keeper")
    keepers.add(keeper)
    keeper.add_done_callback(keepers.discard)
    return keeper


def async_client(key: str, make: Callable[[], Any]) -> Any:
    """The running loop's shared async client of ``key`` (made with ``make`` at first)."""
    loop = asyncio.get_running_loop()
    clients = _ASYNC.get(loop)
    if clients is None:
        clients = _ASYNC[loop] = {}
    client = clients.get(key)
    if client is None or client.is_closed():
        client = clients[key] = make()
        keep(loop, client, lambda: clients.pop(key, None) if clients.get(key) is client else None)
    return client


__all__ = ["async_client", "client_key", "keep", "keepers", "sync_client"]
