"""A PostgreSQL store whose database was read-only for a while writes again once it is not.

``ALTER DATABASE ... SET default_transaction_read_only = on`` (and the backends ended, so
that the store connects again), later ``= off``: a session reads the setting when it
connects, so every connection made in between stays read-only for its life. The store
replaced a connection only when it was broken, so its own connection (and its loop's
sender's) kept failing "cannot execute UPDATE in a read-only transaction ... continue
(complete()) once the store can be written" for ever, while another process wrote fine.
(A failover does the same: a connection to the old primary, now a standby.) A write
refused as read-only (SQLSTATE 25006) now closes the connection it was refused on, so the
next operation connects again and reads the setting of the moment; the write refused
still raises, and nothing of it is written twice or lost.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest

from nbagent import Chat, LLMToolResponse, StoreError, tool
from nbagent.providers import ModelRequest
from nbagent.store import PostgresStore
from nbagent.testing import ScriptedProvider, call_tools, reply

pytest.importorskip("psycopg")

RAN: list[str] = []
_lock = threading.Lock()


@tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: The item.
    """
    with _lock:
        RAN.append(item)
    return f"{item}: found"


def _one_round(request: ModelRequest) -> LLMToolResponse:
    """One ``lookup`` per question, then the answer."""
    users = [m for m in request.messages if m.role == "user"]
    prompt = str(users[-1].content)
    last = request.messages[-1]
    if last.role == "user":
        return call_tools(("lookup", {"item": prompt}))
    return reply(f"answer to {prompt}")


def _read_only(server: Any, dsn: str, on: bool, *, kick: bool) -> None:
    """The database's default for new sessions; ``kick``: its backends ended too."""
    db = dsn.rsplit("/", 1)[1].split("?")[0]
    with server.admin() as admin:
        admin.execute(
            f"ALTER DATABASE {db} SET default_transaction_read_only = {'on' if on else 'off'}"
        )
    if kick:
        server.terminate(dsn)


def _stored(dsn: str, chat_id: str) -> list[tuple[str, Any]]:
    with PostgresStore(dsn) as other:
        return [(m["role"], m["content"]) for m in other.load(chat_id).messages]


def test_a_chat_writes_again_once_its_database_is_no_longer_read_only(
    postgres_dsn: str, postgres_server: Any
) -> None:
    store = PostgresStore(postgres_dsn)
    chat = Chat(model="demo", store=store, display=False)
    chat.ask("one")
    _read_only(postgres_server, postgres_dsn, True, kick=True)
    with pytest.raises(StoreError, match="read-only"):
        chat.ask("two")
    with pytest.raises(StoreError, match="read-only"):  # still: it was not written
        chat.complete()
    _read_only(postgres_server, postgres_dsn, False, kick=False)  # no backend ended now
    chat.complete()  # connects again, and writes
    assert chat.status == "complete"
    stored = _stored(postgres_dsn, chat.id)
    assert stored == [(m.role, m.content) for m in chat.transcript], stored
    assert [c for r, c in stored if r == "user"] == ["one", "two"]  # each once
    assert len(stored) == 4
    chat.ask("three")  # and goes on
    assert [c for r, c in _stored(postgres_dsn, chat.id) if r == "user"][-1] == "three"
    store.close()


class _Spied(PostgresStore):
    """Notes whether each group its loop's sender sent was committed, and the server
    process of the sender's connection."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.committed: list[bool] = []
        self.pid = 0

    async def _send_group_async(self, conn: Any, group: list[Any]) -> None:
        self.pid = conn.info.backend_pid
        try:
            await super()._send_group_async(conn, group)
        finally:
            self.committed.append(all(job.written for job in group))


def test_a_loops_sender_commits_again_once_the_database_is_writable(
    postgres_dsn: str, postgres_server: Any
) -> None:
    """The sender connects again while the database is read-only (its backend ended); the
    store's own connection, older, still writes, so each group the sender cannot commit is
    written the careful way. Once the setting is lifted (no backend ended), the sender's
    groups commit again: before, its read-only connection failed every group for ever (and
    each chat's write took the slow path)."""
    RAN.clear()
    store = _Spied(postgres_dsn)
    chat = Chat(provider=ScriptedProvider([_one_round], repeat_last=True), store=store)
    chat = chat.with_tools(lookup)

    async def drive() -> None:
        await chat.ask_async("one")
        assert store.committed and all(store.committed)  # the sender wrote its rounds
        _read_only(postgres_server, postgres_dsn, True, kick=False)
        with postgres_server.admin() as admin:  # the sender's connection alone ends
            admin.execute("SELECT pg_terminate_backend(%s, 10000)", [store.pid])
        before = len(store.committed)
        await chat.ask_async("two")  # written the careful way
        assert store.committed[before:] and not any(store.committed[before:])
        _read_only(postgres_server, postgres_dsn, False, kick=False)
        before = len(store.committed)
        await chat.ask_async("three")
        assert store.committed[before:] and all(store.committed[before:]), store.committed

    asyncio.run(drive())
    assert chat.status == "complete"
    assert Counter(RAN) == Counter({"one": 1, "two": 1, "three": 1})  # each tool ran once
    stored = _stored(postgres_dsn, chat.id)
    assert stored == [(m.role, m.content) for m in chat.transcript], stored
    assert [c for r, c in stored if r == "user"] == ["one", "two", "three"]
    assert [c for r, c in stored if r == "tool"] == [f"{p}: found" for p in ("one", "two", "three")]
    store.close()
