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
and then reports the decisions recorded meanwhile: those above the last id it
saw, and those below it that it never saw (a serial id is taken at the insert,
not at the commit: a decision whose transaction began first may commit after a
later one was announced, while nobody listened). To be sure, every follower then
looks at every chat it follows once (:meth:`~nbagent.store._follow.Follower.missed`).
It holds the store only weakly (its ``connect`` method): a store dropped
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


class _Seen:
    """The ids of one table (``decisions``, ``input_answers``) announced so far: the highest,
    and the holes below it (ids not seen yet: a transaction that took its id before one
    announced and has not committed, or one rolled back). At most :attr:`HOLES` holes are
    kept, the highest (a hole that old is a rollback's, as good as sure)."""

    HOLES = 4096

    def __init__(self, last: int | None):
        self.last = last  # None: the newest when it first listens (nothing before)
        self.holes: set[int] = set()

    def note(self, id_: int) -> bool:
        """``id_`` was announced (or read): whether it is news (not seen before)."""
        if self.last is None or id_ > self.last:
            if self.last is not None:
                self.holes.update(range(max(self.last + 1, id_ - self.HOLES), id_))
                if len(self.holes) > self.HOLES:
                    self.holes = set(sorted(self.holes)[-self.HOLES :])
            self.last = id_
            return True
        if id_ in self.holes:
            self.holes.discard(id_)
            return True
        return False

    def missed_query(self, table: str) -> tuple[str, tuple[Any, ...]]:
        """Rows committed while nobody listened: above the last id, or in a hole."""
        return (
            f"SELECT id, chat_id FROM {table} WHERE id > %s OR id = ANY(%s) ORDER BY id",
            (self.last, sorted(self.holes)),
        )


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
        self._decisions = _Seen(last_id)
        self._answers = _Seen(last_answer)  # answers to inputs (input_answers), their own ids
        self._listened = False  # LISTEN held once: a later one follows a connection lost
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

    def _missed(self) -> None:
        with self._lock:
            watches = list(self._watches)
        for w in watches:
            w.missed()

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
            if self._decisions.last is None or self._answers.last is None:
                cur = await conn.execute(
                    "SELECT (SELECT COALESCE(MAX(id), 0) FROM decisions), "
                    "(SELECT COALESCE(MAX(id), 0) FROM input_answers)"
                )
                newest = await cur.fetchone()
                if self._decisions.last is None:
                    self._decisions.last = int(newest[0])
                if self._answers.last is None:
                    self._answers.last = int(newest[1])
            for seen, table in ((self._decisions, "decisions"), (self._answers, "input_answers")):
                cur = await conn.execute(*seen.missed_query(table))
                news = [str(chat) for id_, chat in await cur.fetchall() if seen.note(int(id_))]
                if news:
                    self._dispatch(news)
            self.rules += 1  # a rule changed while it did not listen is read at the next look
            if self._listened:  # what else was missed while it did not listen: every
                self._missed()  # follower looks at its chats once
            self._listened = True
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
                self._answers.note(int(data["answer"]))
            else:
                self._decisions.note(int(data["id"]))
        except (ValueError, KeyError, TypeError):
            return
        self._dispatch([chat_id])  # news even if seen: a NOTIFY comes once per commit


__all__ = ["Listener"]
