"""The PostgreSQL store's listener: one ``LISTEN nbagent_decisions`` connection per store object.

A trigger on ``decisions`` (:mod:`nbagent.store._pg_migrations`, m002) NOTIFYs
every recorded decision at its commit, with ``{id, chat, call}``, one on
``input_answers`` (m015) every answer to a pending input, with ``{answer, chat}``, and one on
``events`` (m017) every rule change, with ``{rule, chat}`` (counted in :attr:`Listener.rules`,
which tells a driven chat whether to read its rules again). The listener
is a task on nbagent's background loop (psycopg's ``AsyncConnection`` and its
``notifies()``: no thread of its own) that pushes the chat ids to the store's
follower (:mod:`nbagent.store._follow`). If the connection is lost (a
restart, a terminated backend, a network cut) it connects again with backoff
and then reports the decisions recorded meanwhile (ids above the last one it
saw). It holds the store only weakly (its ``connect`` method): a store dropped
without ``close()`` stops it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

from .._aio import on_background_loop, spawn
from .._errors import StoreError
from . import _pg_migrations as migrations
from ._follow import Follower


class Listener:
    """One ``LISTEN`` connection of a store, a task on the background loop, pushing to its
    followers; decisions are reported from ``last_id`` on (those above it recorded before
    the first ``LISTEN`` included).
    """

    RECONNECT_MAX = 2.0

    def __init__(
        self,
        connect: Callable[[], Awaitable[Any]],
        last_id: int | None,
        last_answer: int | None = 0,
    ):
        self._connect = weakref.WeakMethod(connect)
        self._watches: set[Follower] = set()
        self._lock = threading.Lock()
        self._last_id = last_id  # None: the newest when it first listens (nothing before)
        self._last_answer = last_answer  # answers to inputs (input_answers), their own ids
        self.listening = threading.Event()  # set once LISTEN holds (and at each reconnection)
        self.rules = 0
        """Moves at each rule change committed anywhere (m017 announces them) and each time
        LISTEN holds again (what was committed while it did not is unknown): equal values
        while ``listening``, no rule changed in between, once announced."""
        self.last_error: BaseException | None = None
        self._ended = threading.Event()  # set once its task ended (its connection closed)
        self._task = spawn(self._run())

    def add(self, watch: Follower) -> None:
        with self._lock:
            self._watches.add(watch)

    @property
    def followed(self) -> bool:
        """Whether it has followers (one started for the rules token alone has none; they
        leave only when it stops)."""
        with self._lock:
            return bool(self._watches)

    def stop(self, wait: float = 0.0) -> None:
        """Stop listening (its connection closes) and close every follower; with ``wait``,
        return once the connection is closed (at most ``wait`` seconds, and never on the
        background loop, which is the one to close it)."""
        self._task.cancel()
        with self._lock:
            watches, self._watches = list(self._watches), set()
        for w in watches:
            w.close()
        if wait and not on_background_loop():
            self._ended.wait(wait)

    def _dispatch(self, chat_ids: list[str]) -> None:
        with self._lock:
            watches = list(self._watches)
        for w in watches:
            w.push(chat_ids)

    async def _run(self) -> None:
        # Its first step always runs, even when stopped at once: a cancel reaches a task
        # started by ``spawn`` only after that step, so ``_ended`` is always set.
        try:
            delay = 0.05
            while True:
                try:
                    await self._listen()
                except Exception as exc:  # the connection was lost, or not made: again, backoff
                    self.last_error = exc
                if self.listening.is_set():
                    delay = 0.05  # it listened: the backoff starts over
                self.listening.clear()
                if self._connect() is None:  # the store is gone
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.RECONNECT_MAX)
        finally:
            self._ended.set()

    async def _listen(self) -> None:
        """Connect, LISTEN, catch up from the last id seen, then push each notification."""
        connect = self._connect()
        if connect is None:
            raise StoreError("the store was closed")
        conn = await connect()
        del connect
        try:
            await conn.execute(f"LISTEN {migrations.CHANNEL}")
            if self._last_id is None or self._last_answer is None:
                cur = await conn.execute(
                    "SELECT (SELECT COALESCE(MAX(id), 0) FROM decisions), "
                    "(SELECT COALESCE(MAX(id), 0) FROM input_answers)"
                )
                newest = await cur.fetchone()
                if self._last_id is None:
                    self._last_id = int(newest[0])
                if self._last_answer is None:
                    self._last_answer = int(newest[1])
            cur = await conn.execute(
                "SELECT id, chat_id FROM decisions WHERE id > %s ORDER BY id", (self._last_id,)
            )
            rows = await cur.fetchall()
            if rows:
                self._last_id = int(rows[-1][0])
                self._dispatch([r[1] for r in rows])
            cur = await conn.execute(
                "SELECT id, chat_id FROM input_answers WHERE id > %s ORDER BY id",
                (self._last_answer,),
            )
            rows = await cur.fetchall()
            if rows:
                self._last_answer = int(rows[-1][0])
                self._dispatch([r[1] for r in rows])
            self.rules += 1  # a rule changed while it did not listen is read at the next look
            self.listening.set()
            async for note in conn.notifies():
                self._note(note.payload)
        finally:
            with suppress(Exception):
                await conn.close()

    def _note(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            chat_id = str(data["chat"])
            if "rule" in data:  # a rule change (m017): read by each chat at its next look
                self.rules += 1
                return
            if "answer" in data:  # an answer to an input (m015)
                self._last_answer = max(self._last_answer or 0, int(data["answer"]))
            else:
                self._last_id = max(self._last_id or 0, int(data["id"]))
        except (ValueError, KeyError, TypeError):
            return
        self._dispatch([chat_id])


__all__ = ["Listener"]
