"""A PostgreSQL store's group commit from an event loop: the writes of the chats one loop
drives (a batch's), sent together on an async connection, with no thread.

The async driver awaits its extensions' ``catch_up`` before each model request and
tool round (:mod:`nbagent._extension`). A store that can (``send_async``) is handed
each chat's write there as one job (:meth:`~nbagent.store._sql.SQLStore.write_job`:
its events, its recordings, the claims of the round about to run), and the chat's
coroutine awaits it while the loop drives the other chats. One :class:`Sender` per
store and loop sends what its chats queued as one transaction in one round trip
(``BEGIN``, the chats' advisory locks in order, every job's statements, each checking
the rows it changed, then ``COMMIT``: ``PostgresStore._trips``), and while it waits the
next chats' jobs queue for the next group. A group is as large as the writes that came
during one group's round trip, across all the loop's chats.

The promise is the one the store keeps on any thread: a job is ``written`` only once
its group committed (a claim is granted only when durable), and a group that cannot
commit writes none of it. A job not written is written again by the chat's usual path
(a worker thread, statement by statement where needed), which decides what happened:
a change found done already (a commit whose answer was lost), a call claimed
elsewhere.

Measured (1,000 chats x 3 rounds, C = 16, loopback): the same writes handed to worker
threads, each group made of the few chats whose threads met at the connection's lock,
cost 2 ms of client CPU per request more than no store, and 32 context switches; sent
from the loop, 0.8 ms and one. A round trip is also a turn of the loop that every chat
waits behind, which is why a group takes one, not two.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable
from typing import Any

from .._errors import StoreError
from ._sql import _failed, _Job

CANCEL_GRACE = 1.0
"""Seconds a cancelled chat waits for its group under way to end by itself before that
group is cancelled on the server (a group waiting longer waits on something: a lock)."""


class Sender:
    """One store's group commit on one event loop (see the module docstring).

    ``store()`` gives the store (a weak reference: a sender, which its loop's finalizer
    keeps, never keeps the store alive), whose ``_send_group_async(connection, jobs)``
    sends one group and marks the jobs written and ``_async_connect()`` opens a
    connection. The connection is opened at the first job and kept; one found broken is
    replaced at the next group. A store gone or closed fails the jobs still queued.
    """

    def __init__(self, store: Callable[[], Any]):
        self._store = store
        self._queue: list[tuple[_Job, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._closing = False  # close() came while a group was under way: closed after it
        self._flying: list[_Job] = []  # the group on the wire
        self.conn: Any = None

    async def send(self, job: _Job) -> None:
        """Queue ``job`` for the next group and return once its group ended (``job.written``
        says how; ``job.error`` holds what its writer should raise).

        Cancelled (``asyncio.wait_for``, a task cancelled, the stop button), it raises once
        it is known whether the job was written, and does not wait for ever on a server
        that does not answer: a job still queued is taken out (not written); a job whose
        group is under way is given :data:`CANCEL_GRACE` s to end (a group takes a round
        trip: it commits, as it would have), and then that group is cancelled on the
        server (``cancel_safe``: a statement waiting on a lock another session holds, for
        ever with no ``lock_timeout``, stops), which rolls it back unless it committed
        first (then it is ``written``). Either way its writer learns the truth, and the
        group's other jobs, not written, are written again by their chats' usual path."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        self._queue.append((job, ended))
        if self._task is None:
            self._task = loop.create_task(self._run())
        try:
            await asyncio.shield(ended)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):  # cancelled again: still the truth
                if not ended.done():
                    await self._withdraw(job, ended)
                await ended
            raise

    async def _withdraw(self, job: _Job, ended: asyncio.Future[None]) -> None:
        """``job``'s sender was cancelled: take it out of the queue, or cancel its group on
        the server (see :meth:`send`)."""
        for i, (queued, _) in enumerate(self._queue):
            if queued is job:
                del self._queue[i]
                job.settled = True  # not written (never sent)
                ended.set_result(None)
                return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(ended), CANCEL_GRACE)
            return  # the group ended by itself
        conn = self.conn
        if conn is None or not any(j is job for j in self._flying):
            return
        with contextlib.suppress(Exception):  # no cancel: the group ends as it would have
            await asyncio.shield(conn.cancel_safe(timeout=5.0))

    async def _run(self) -> None:
        """Send groups until nothing is queued: each takes every job queued so far."""
        try:
            while self._queue:
                group, self._queue = self._queue, []
                jobs = self._flying = [job for job, _ in group]
                try:
                    store = self._store()
                    if store is None or store.closed:
                        raise StoreError("the store was closed before its writes were sent")
                    conn = self.conn
                    if conn is None or conn.closed or conn.broken:
                        self.conn = conn = await store._async_connect(reconnect=True)
                    await store._send_group_async(conn, jobs)
                    del store
                except BaseException as exc:
                    _failed(jobs, exc)
                    if not isinstance(exc, Exception):  # cancelled (the loop ends): the
                        _finish(self.conn)  # transaction under way is the server's to undo
                        self.conn = None
                        for job, ended in [*group, *self._queue]:
                            job.settled = True
                            if not ended.done():
                                ended.set_result(None)
                        self._queue = []
                        raise
                finally:
                    self._flying = []
                    for job, ended in group:
                        job.settled = True
                        if not ended.done():
                            ended.set_result(None)
        finally:
            self._task = None
            if self._closing:
                self.close()

    def close(self) -> None:
        """Close the connection (without the loop: libpq's ``PQfinish``); if a group is
        under way (on the loop's thread), once it ended."""
        self._closing = True  # first: the loop's thread looks at it after its last group
        if self._task is not None:
            return
        conn, self.conn = self.conn, None
        _finish(conn)


def _finish(conn: Any) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.pgconn.finish()


class Senders:
    """A store's senders, one per event loop that drives its chats (a loop gone takes its
    sender with it, and its connection is closed)."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Sender] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, store: Callable[[], Any]) -> Sender:
        """The running loop's sender (made at its first use). A loop closed since the last
        one was made gives its connection back now (``asyncio.run`` in a notebook cell makes
        a loop per cell, which may wait for the garbage collector's cycle to go)."""
        loop = asyncio.get_running_loop()
        sender = self._by_loop.get(loop)
        if sender is None:
            for other, old in list(self._by_loop.items()):
                if other.is_closed():
                    del self._by_loop[other]
                    old.close()
            sender = self._by_loop[loop] = Sender(store)
            weakref.finalize(loop, sender.close)
        return sender

    def close(self) -> None:
        for sender in list(self._by_loop.values()):
            sender.close()
        self._by_loop.clear()


__all__ = ["CANCEL_GRACE", "Sender", "Senders"]
