"""The PostgreSQL store's listener: one ``LISTEN nbagent_decisions`` connection per store object.

A trigger on ``decisions`` (:mod:`nbagent.store._pg_migrations`, m002) NOTIFYs
every recorded decision at its commit, with ``{id, chat, call}``. The listener
waits for those on a daemon thread and pushes the chat ids to the store's
follower (:mod:`nbagent.store._follow`). If the connection is lost (a
restart, a terminated backend, a network cut) it connects again with backoff
and then reports the decisions recorded meanwhile (ids above the last one it
saw). It holds the store only weakly (its ``connect`` method): a store dropped
without ``close()`` stops it.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from .._errors import StoreError
from . import _pg_migrations as migrations
from ._follow import Follower


class Listener:
    """One ``LISTEN`` connection of a store, on a daemon thread, pushing to its follower.

    Holds the store only weakly (its ``connect`` method): a store dropped without
    ``close()`` stops its listener.
    """

    RECONNECT_MAX = 2.0

    def __init__(self, connect: Callable[[], Any], location: str, timeout: float):
        self._connect = weakref.WeakMethod(connect)
        self._watches: set[Follower] = set()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._error: StoreError | None = None
        self._last_id = 0
        self._raw: Any = None
        self._thread = threading.Thread(target=self._run, name="nbagent-pg-listen", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or (self._raw is None and self._error is not None):
            self.stop()
            raise self._error or StoreError(
                f"could not listen for decisions on {location} within {timeout:g} s"
            )

    def add(self, watch: Follower) -> None:
        with self._lock:
            self._watches.add(watch)

    def remove(self, watch: Follower) -> None:
        with self._lock:
            self._watches.discard(watch)

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            watches, self._watches = list(self._watches), set()
        for w in watches:
            w.close()

    def _dispatch(self, chat_ids: list[str]) -> None:
        with self._lock:
            watches = list(self._watches)
        for w in watches:
            w.push(chat_ids)

    def _listen(self) -> Any:
        connect = self._connect()
        if connect is None:  # the store is gone
            self._stopped.set()
            raise StoreError("the store was closed")
        raw = connect()
        del connect
        raw.execute(f"LISTEN {migrations.CHANNEL}")
        return raw

    def _catch_up(self, raw: Any) -> None:
        """After a reconnection: the decisions recorded while no one listened."""
        rows = raw.execute(
            "SELECT id, chat_id FROM decisions WHERE id > %s ORDER BY id", (self._last_id,)
        ).fetchall()
        if rows:
            self._last_id = int(rows[-1][0])
            self._dispatch([r[1] for r in rows])

    def _run(self) -> None:
        delay = 0.05
        first = True
        while not self._stopped.is_set():
            raw = None
            try:
                raw = self._listen()
                if first:
                    row = raw.execute("SELECT COALESCE(MAX(id), 0) FROM decisions").fetchone()
                    self._last_id = int(row[0])
                    first = False
                else:
                    self._catch_up(raw)
            except StoreError as exc:
                self._error = exc
                self._close(raw)
                if first:
                    self._ready.set()
                    return  # the first connection failed: watch() raises it
                self._stopped.wait(delay)
                delay = min(delay * 2, self.RECONNECT_MAX)
                continue
            except Exception:
                self._close(raw)
                self._stopped.wait(delay)
                delay = min(delay * 2, self.RECONNECT_MAX)
                continue
            self._raw, delay = raw, 0.05
            self._ready.set()
            try:
                while not self._stopped.is_set():
                    for note in raw.notifies(timeout=0.5):
                        self._note(note.payload)
            except Exception:
                pass  # the connection was lost: reconnect (and catch up)
            finally:
                self._raw = None
                self._close(raw)

    @staticmethod
    def _close(raw: Any) -> None:
        if raw is not None:
            with suppress(Exception):
                raw.close()

    def _note(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            decision_id, chat_id = int(data["id"]), str(data["chat"])
        except (ValueError, KeyError, TypeError):
            return
        self._last_id = max(self._last_id, decision_id)
        self._dispatch([chat_id])


__all__ = ["Listener"]
