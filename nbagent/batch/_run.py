"""BatchRun: one run of a batch, its rows as they settle, its chats, and its result frame.

A run consumes its backend's results on the event loop that started it (a
task: :meth:`BatchRun.start`), keeps the latest :class:`~nbagent.batch.RowResult`
per key, and builds the result DataFrame (:meth:`BatchRun.frame`) from them at
any time. ``nbagent.batch`` returns once every row settled; in a notebook the
task goes on continuing parked rows, so :func:`nbagent.batch_results` (or
``run.frame()``) gives a fresher frame later.

The frame carries the run as ``df.attrs["nbagent_batch"]`` (it deep-copies to
itself, so pandas operations keep it): that is how ``nbagent.read_log(df)``
and ``nbagent.inbox(df)`` find the chats (``run.chats``) and the store
(``run.store``).

**What a run keeps alive.** A run still consuming results (running rows, or
watching parked ones) is held by the registry, so parked rows continue when
decided even if no frame is left. A run that stopped is held only by its
frames: once the last one is gone, the run and its chats are freed (the
registry finds a run by id only while something else holds it). A row's chat
is let go as soon as the row is ``done`` (it can no longer change): with a
store, its record is in the store, where ``read_log`` and the inbox read it
(the store writes what a chat still has queued before the chat is freed);
without one, the run keeps the chat's events, pickled and deflated against the
first done chat's (:mod:`nbagent._packing`: about 0.5 KiB for a 3-round chat, a
ninth of its record), instead of the chat, folds
them into its record when the log is read (``fold(events) == chat.record``), and
reads the chat itself while the user still holds it (a chat whose events cannot
be pickled, a tool's return value that cannot, keeps its record instead).
Parked and failed rows keep their chats (they can still change).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .._packing import Packer
from ._backend import FINAL, SETTLED, Job, RowResult, RowUpdate
from ._display import ProgressDisplay
from ._progress import Progress

_DTYPES = {
    "key": "string",
    "status": "string",
    "reply": "string",
    "error": "string",
    "calls": "int64",
    "tokens": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cost_usd": "float64",
    "latency_s": "float64",
    "pending": "int64",
    "chat_id": "string",
    "error_type": "string",
}
COLUMNS = list(_DTYPES)
"""The result's columns, in order (one row per input, in the inputs' order)."""

_registry: weakref.WeakValueDictionary[str, BatchRun] = weakref.WeakValueDictionary()
"""The latest run of each batch id, while something (a frame, ``_running``) holds it."""
_running: set[BatchRun] = set()
"""Runs still consuming results: held here so parked rows continue without a frame."""
_registry_lock = threading.Lock()


class BatchRun:
    """One run of a batch (see the module docstring).

    Attributes:
        id: The batch id (the store's key for it).
        jobs: Every input's job, in order.
        rows: The latest result per key (rows finished before, read from the
            store, included).
        chats: Live chats of this run by chat id (local backend): only rows not
            ``done`` keep theirs (parked or failed rows, which can still change).
            A done row's log is read from the store, or, without one, from its
            chat's events, kept compressed instead of the chat.
        store: The batch's store, or ``None``.
        progress: The totals the progress display shows.
    """

    def __init__(
        self,
        batch_id: str,
        jobs: Sequence[Job],
        store: Any,
        index: Any = None,
        rows: dict[str, RowResult] | None = None,
    ) -> None:
        self.id = batch_id
        self.jobs = list(jobs)
        self.store = store
        self.index = index
        self.rows: dict[str, RowResult] = {}
        self._unsettled = {j.key for j in self.jobs}  # not yet done, failed or parked
        self._open = set(self._unsettled)  # not yet done or failed
        self.chats: dict[str, Any] = {}
        # without a store, a done row's log (its chat's events, packed) and its chat while
        # held elsewhere
        self._done: dict[str, tuple[bytes | Any, weakref.ref[Any]]] = {}
        self._packer = Packer()  # a done row's events, against the first done row's
        self._lock = threading.Lock()
        self._settled = asyncio.Event()
        self._final = asyncio.Event()
        for row in (rows or {}).values():
            self._keep(row)
        self.progress = Progress(
            [j.key for j in self.jobs], {k: r.as_update() for k, r in self.rows.items()}
        )
        self.display: ProgressDisplay | None = None
        self.error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        with _registry_lock:
            _registry[batch_id] = self

    # ------------------------------------------------------------ pandas & pickle
    def __deepcopy__(self, memo: Any) -> BatchRun:
        return self  # a DataFrame's attrs are deep-copied by pandas operations

    def __copy__(self) -> BatchRun:
        return self

    def __reduce__(self) -> Any:
        return (_lookup, (self.id,))

    def __repr__(self) -> str:
        counts = self.progress.snapshot().counts
        shown = ", ".join(f"{k}={v}" for k, v in counts.items() if v)
        return f"BatchRun(id={self.id!r}, rows={len(self.jobs)}, {shown})"

    # ------------------------------------------------------------------ running
    def add_chat(self, chat: Any) -> None:
        """A backend made or loaded a chat (in this process)."""
        with self._lock:
            self.chats[chat.id] = chat

    def update(self, update: RowUpdate) -> None:
        """The progress sink (thread-safe)."""
        self.progress.apply(update)

    def start(self, results: AsyncIterator[RowResult]) -> None:
        """Consume ``results`` in a task on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._consume(results), name=f"nbagent-{self.id}")
        with _registry_lock:
            _registry[self.id] = self
            _running.add(self)

    def _keep(self, result: RowResult) -> None:
        """A row's latest result (O(1): the rows still open are kept as sets, and the
        run's settled and final events set once none is left)."""
        key = result.key
        self.rows[key] = result
        if result.status in SETTLED:
            self._unsettled.discard(key)
        if result.status in FINAL:
            self._open.discard(key)
        else:
            self._open.add(key)
        if result.status == "done" and result.chat_id:
            with self._lock:  # a done chat can no longer change: the run lets it go
                chat = self.chats.pop(result.chat_id, None)
                if chat is not None and self.store is None:  # its log, kept without it
                    self._done[result.chat_id] = (self._packed(chat), weakref.ref(chat))
        if not self._unsettled:
            self._settled.set()
        if not self._open:
            self._final.set()

    async def _consume(self, results: AsyncIterator[RowResult]) -> None:
        try:
            async for result in results:
                self._keep(result)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.error = exc
        finally:
            aclose = getattr(results, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(BaseException):
                    await aclose()
            self._settled.set()
            self._final.set()
            self._finish()

    def _finish(self) -> None:
        self.progress.finished = self.final
        if self.progress.parked_hint:  # no longer watched: they no longer continue by themselves
            self.progress.parked_hint = False
        if self.display is not None:
            self.display.stop(final=True)
        with _registry_lock:  # from now on only its frames keep it
            _running.discard(self)

    @property
    def final(self) -> bool:
        """Every row is ``done`` or ``failed``."""
        return not self._open

    @property
    def running(self) -> bool:
        """The run is still consuming results (running rows or watching parked ones)."""
        return self._task is not None and not self._task.done()

    async def wait_settled(self) -> None:
        """Until every row settled (or the run failed: ``on_error="raise"``)."""
        await self._settled.wait()
        if self.error is not None:
            raise self.error

    async def wait_final(self, timeout: float | None) -> bool:
        """Until every row is final, at most ``timeout`` seconds; whether they are."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._final.wait(), timeout)
        if self.error is not None:
            raise self.error
        return self.final

    async def stop(self) -> None:
        """Stop the run (parked rows stay parked: in the store, or as live chats).

        Waits for the run's running calls to settle; cancelled meanwhile, it still waits
        for them and finishes the run, then raises its ``CancelledError`` (swallowed, the
        stop button pressed while a rerun waited here was ignored)."""
        task = self._task
        cancelled = False
        if task is not None and not task.done():
            # rows still queued or running will not finish in this run: the bar says so
            # (stopped, its clock stopped) rather than counting down an ETA for ever
            self.progress.stop()
            task.cancel()
            while not task.done():
                try:
                    await asyncio.wait([task])
                except asyncio.CancelledError:
                    cancelled = True  # the run ends first: its calls settle, recorded
            # the run's own end is the run's: retrieved, not raised. Read, a cancelled task
            # lets go of its CancelledError, whose traceback holds the rows' frames and so
            # their chats (kept, a parked row's chat lived as long as the frame)
            with contextlib.suppress(BaseException):
                task.result()
        self._finish()
        if cancelled:
            raise asyncio.CancelledError

    async def stop_anywhere(self) -> None:
        """:meth:`stop`, from any event loop (the run's own may be another thread's)."""
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop() or loop.is_closed():
            await self.stop()
        elif loop.is_running():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.stop(), loop))

    # ------------------------------------------------------------------ results
    def _catch_up(self) -> None:
        """Rows parked when the run stopped watching, whose live chat went on since
        (continued by the inbox or by hand): read them off their chat again."""
        if self.running:
            return
        from ._local import outcome

        jobs = {j.key: j for j in self.jobs}
        for key, row in list(self.rows.items()):
            chat = self.chats.get(row.chat_id) if row.chat_id else None
            if row.status != "awaiting_approval" or chat is None or chat.is_running:
                continue
            if chat.status not in ("complete", "awaiting_approval", "budget_exhausted"):
                continue
            self._keep(outcome(jobs[key], chat, row.latency_s))
            self.progress.apply(self.rows[key].as_update())

    def frame(self) -> Any:
        """The result DataFrame: one row per input, in order (see :data:`COLUMNS`).

        Rows parked when the run stopped watching are read again off their live
        chat (the inbox, or ``chat.approve`` + ``chat.complete()``, may have
        continued it since).
        """
        import pandas as pd

        self._catch_up()
        rows = [self.rows.get(j.key) or RowResult(j.key, j.index, "queued") for j in self.jobs]
        data = {c: [getattr(r, c) for r in rows] for c in COLUMNS if c != "tokens"}
        data["tokens"] = [r.input_tokens + r.output_tokens for r in rows]
        df = pd.DataFrame(data, columns=COLUMNS).astype(_DTYPES)
        if self.index is not None and len(self.index) == len(df):
            df.index = self.index
        df.attrs["nbagent_batch"] = self
        return df

    def log_sources(self, chat_ids: Sequence[str] | None = None) -> list[Any]:
        """What ``nbagent.read_log`` reads for these chats (default: all of the run's):
        the live chat, else the chat's stored events."""
        ids = chat_ids
        if ids is None:
            ids = [r.chat_id for r in self.rows.values() if r.chat_id]
        sources: list[Any] = []
        for cid in dict.fromkeys(ids):
            if not isinstance(cid, str):
                continue
            chat = self.chats.get(cid)
            done = self._done.get(cid)
            if chat is None and done is not None:
                chat = done[1]()  # the user still holds it (and may have continued it)
            if chat is not None:
                sources.append(chat)
            elif done is not None:
                sources.append(self._unpacked(done[0], cid))
            elif self.store is not None:
                sources.append(list(self.store.iter_events(cid)))
        return sources

    def _packed(self, chat: Any) -> bytes | Any:
        """A done chat's log, small: its events packed (:mod:`nbagent._packing`, about a
        ninth of its record, whose objects would keep every message alive), else its
        record (an event that cannot be pickled: a tool's return value, say)."""
        try:
            return self._packer.pack(list(chat.events))
        except Exception:
            return chat.record

    def _unpacked(self, kept: bytes | Any, chat_id: str) -> Any:
        """The record of a done chat from what :meth:`_packed` kept."""
        if not isinstance(kept, bytes):
            return kept
        from .._record import fold

        return fold(self._packer.unpack(kept), chat_id)


def _lookup(batch_id: str) -> Any:
    """Unpickling a frame's run: the live run of this process, else only its id."""
    with _registry_lock:
        run = _registry.get(batch_id)
    return run if run is not None else _Detached(batch_id)


class _Detached:
    """A run from a pickled frame in a process that has no such run: its id only."""

    def __init__(self, batch_id: str) -> None:
        self.id = batch_id
        self.chats: dict[str, Any] = {}
        self.store = None

    def __reduce__(self) -> Any:
        return (_lookup, (self.id,))

    def log_sources(self, chat_ids: Sequence[str] | None = None) -> list[Any]:
        raise LookupError(
            f"batch {self.id!r} did not run in this process: read its log from its store, "
            "nbagent.read_log(store) (or Chat.load a chat by its chat_id)"
        )


def run_of(frame: Any) -> BatchRun:
    """The run behind a result frame (``df.attrs["nbagent_batch"]``)."""
    attrs = getattr(frame, "attrs", None)
    run = attrs.get("nbagent_batch") if isinstance(attrs, dict) else None
    if isinstance(run, str):
        with _registry_lock:
            run = _registry.get(run)
    if not isinstance(run, BatchRun):
        raise TypeError(
            "not a batch result: pass the DataFrame nbagent.batch(...) returned "
            "(or a selection of its rows)"
        )
    return run


def get_run(batch_id: str) -> BatchRun | None:
    """The latest run of ``batch_id`` in this process, if it is still kept."""
    with _registry_lock:
        return _registry.get(batch_id)


def active_run(batch_id: str) -> BatchRun | None:
    """The run of ``batch_id`` still consuming results in this process, if any."""
    run = get_run(batch_id)
    return run if run is not None and run.running else None


__all__ = ["COLUMNS", "BatchRun", "active_run", "get_run", "run_of"]
