"""The ``"ray"`` backend: a batch's chats run on Ray workers, the store coordinates.

``nbagent.batch(..., backend="ray")`` (or ``backend=RayBackend(address=...)``)
connects to Ray (the Ray this process is connected to, else ``ray.init()`` on
this machine, or ``address=`` for a cluster) and uses a pool of **workers**:
Ray actors (``workers=``, default the cluster's CPUs) that reserve no CPU
(chats wait on the network) and are spread over the nodes, each running up to
``ceil(concurrency / workers)`` chats at once on its own event loop with the
local backend's own code (``_local.settle_job``), so a row's result does not
depend on where it ran. The pool is kept for the process's next batch.

**What crosses to a worker.** Once per run: a :class:`BatchSpec` in Ray's
object store (the :class:`RunSpec` without its store, ``make_chat`` pickled
with cloudpickle, and a :class:`StoreLocator` from which the worker opens its
own store), read once by each worker. Per chat: the :class:`Job`. The
factory builds the provider *on the worker* (``Chat("gpt-4.1-mini")`` reads
``OPENAI_API_KEY`` there), so API keys come from the workers' environment and
are never pickled (a provider object cannot be: a factory that captures one
is refused with a clear error). A PostgreSQL DSN's password rides in the
``BatchSpec``: never in a task's arguments, a ``repr`` or a log (Ray logs a
``runtime_env``'s variables in clear, so it is not used for it); better, give
the workers ``PGPASSWORD`` or ``~/.pgpass`` and leave it out of the DSN.

**Progress.** Each chat is a streaming actor call: the worker yields the
latest :class:`RowUpdate` (a status change at once, token counts at most
every :data:`PROGRESS_INTERVAL`) and finally the :class:`RowResult`; the
driver feeds the updates to the batch's progress sink as they arrive.

**Approvals.** A chat that parks on a gated call does not hold its worker
slot: the worker returns ``awaiting_approval`` (its state is in the store).
The driver follows the parked chats on the store's follower
(:func:`nbagent.store.follow`: LISTEN/NOTIFY on PostgreSQL, else one poll)
and, when a decision made anywhere (the inbox, another process, ``store.approve``) or an
answer (``store.answer``: an external tool's result, ``ask_user``'s) lowers the chat's count
of undecided calls and unanswered inputs, sends a continuation (``Job(chat_id=...)``)
to a worker, which loads the chat and completes it: the approved call runs
there, once (the store's claim). Without a store a parked chat cannot be
continued by another process: its row fails and says so.

**Where the store lives.** The store is the coordination point, so every
worker must reach it: a :class:`~nbagent.store.PostgresStore` works from any
node; a SQLite file only when every node of the cluster is this machine (a
cluster with a node elsewhere is refused with a clear error).

**A worker that dies** (a segfault, the OOM killer, ``os._exit`` in a tool,
``ray.kill``) takes the chats it was running with it: each of their rows
fails with an error saying so (``WorkerDied``), nothing else is affected, and
a new worker takes its place for the next rows. A kept worker that died while idle is
found dead (it does not answer Ray's ready call) and replaced before it is sent a
chat. A worker that never started (its ``__init__`` raised: Ray then runs none of its
methods, so nothing of a row ran there) is replaced and its rows are sent again, at most
:data:`START_RESENDS` times each; a row whose workers kept failing to start fails saying so
(``WorkerStartFailed``), never "in doubt". With a store, a worker that died while the
chat it held was waiting (for a decision or an answer, parked and stored while its worker
was still closing it, say stopping an MCP server) or before it took up a decided call has
nothing of that chat running: the store says so (no call ``running``), and the replacement
continues it, at most :data:`WAIT_RESENDS` times. Nothing that ran is retried behind the user's
back (Ray's own retries are off: a rerun chat could run a tool twice). With a store,
rerunning the batch continues those chats: finished calls are kept, and a call that was
running when its worker died is *in doubt* (the model is told), never rerun silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import pickle
import socket
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from .._config import configure, get_config, positive_int
from .._errors import NBAgentError, redact_keys
from .._optional import require
from ..otel import attached, worker_traces
from ._backend import FINAL, Job, ProgressSink, RowResult, RowUpdate, RunSpec
from ._backends import register_backend
from ._local import RowRaised, one_line, settle_job

FEATURE = 'nbagent.batch(..., backend="ray")'
RAY_OPTIONS = frozenset({"address", "workers", "init", "worker_options", "keep_workers"})
"""The options ``nbagent.batch(backend_options=...)`` may give the Ray backend."""


def _ray() -> Any:
    return require("ray", FEATURE)


# ------------------------------------------------------------------ the store
@dataclass(frozen=True)
class StoreLocator:
    """How a worker opens the batch's store.

    Attributes:
        kind: ``"sqlite"``, or ``"pickled"``: a store that pickles itself as
            the way to open it again (a :class:`~nbagent.store.PostgresStore`,
            a third-party store).
        target: The SQLite file (absolute), or where the store is (its
            ``location``: a DSN without its password; else its ``repr``): the
            key a worker keeps the opened store under.
        pickled: The pickled store. A PostgreSQL DSN's password is in it:
            never in a ``repr``, a log or a task's arguments; it rides in the
            run's :class:`BatchSpec` (Ray's object store, read once per
            worker), and is unpickled only by a worker that has no such store
            open yet.
    """

    kind: str
    target: Any
    pickled: bytes = field(default=b"", repr=False, compare=False)
    options: tuple[tuple[str, Any], ...] = ()
    """A SQLite store's keywords, as the store tells them (:func:`_options_of`:
    ``synchronous``, ``timeout``, ``claim_timeout``): the workers open the file as the
    driver did (a ``synchronous="FULL"`` store written ``NORMAL`` on the workers lost the
    durability it was opened for)."""

    def open(self) -> Any:
        """The store, opened in this process."""
        if self.kind == "sqlite":
            from ..store import SQLiteStore

            return SQLiteStore(self.target, **dict(self.options))
        return pickle.loads(self.pickled)

    def key(self) -> tuple[Any, ...]:
        """What a worker keeps the opened store under: where it is, how it is opened, and
        for a SQLite file the file itself (device, inode): a file deleted and made again
        at the same path is another store (the one kept open on the old file fails every
        write, "the file was replaced")."""
        file = None
        if self.kind == "sqlite":
            with contextlib.suppress(OSError):
                stat = os.stat(self.target)
                file = (stat.st_dev, stat.st_ino)
        return (self.kind, str(self.target), self.options, file)


def locate_store(store: Any) -> StoreLocator | None:
    """The :class:`StoreLocator` of ``store`` (``None``: no store)."""
    if store is None:
        return None
    from ..store import SQLiteStore

    if isinstance(store, SQLiteStore):
        return StoreLocator("sqlite", str(os.path.abspath(store.path)), options=_options_of(store))
    try:
        pickled = pickle.dumps(store)
    except Exception as exc:
        raise TypeError(
            f"{FEATURE} opens the store on every worker, and it cannot open a "
            f"{type(store).__name__}: use a PostgresStore (or a SQLiteStore on one machine), "
            f"or a store that pickles itself ({type(exc).__name__}: {exc})"
        ) from None
    where = getattr(store, "location", None)
    return StoreLocator("pickled", where if isinstance(where, str) else repr(store), pickled)


def _options_of(store: Any) -> tuple[tuple[str, Any], ...]:
    """The keywords a SQLite store was opened with, as far as the store tells them: its
    ``options`` (a mapping of ``SQLiteStore``'s keywords), else its public
    ``claim_timeout``."""
    given = getattr(store, "options", None)
    if isinstance(given, Mapping):
        options = dict(given)
    else:
        claim_timeout = getattr(store, "claim_timeout", None)
        options = {} if claim_timeout is None else {"claim_timeout": claim_timeout}
    return tuple(sorted(options.items()))


def check_store_reach(locator: StoreLocator | None, nodes: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a SQLite store when a worker could run on another machine."""
    if locator is None or locator.kind != "sqlite":
        return
    here = {_node_ip(), "127.0.0.1", socket.gethostname()}
    elsewhere = sorted(
        {str(n.get("NodeManagerAddress")) for n in nodes if n.get("Alive", True)} - here
    )
    if elsewhere:
        raise ValueError(
            f"{FEATURE}: the store is a SQLite file on this machine ({locator.target}) and "
            f"this Ray cluster has nodes elsewhere ({', '.join(elsewhere)}) whose workers "
            "cannot reach it: use PostgresStore(dsn), which every node can reach"
        )


def _node_ip() -> str:
    with contextlib.suppress(Exception):
        return str(_ray().util.get_node_ip_address())
    return "127.0.0.1"


# ------------------------------------------------------------------ the worker
@dataclass(frozen=True)
class BatchSpec:
    """What a worker needs for one batch run, put once in Ray's object store.

    Attributes:
        spec: The batch's spec, without its store.
        locator: How to open the store (no secret), or ``None``.
        per_worker: Most chats of this run one worker runs at once.
        config: The driver's ``nbagent.configure(...)`` defaults (``max_steps``,
            budgets, ``stream``, ``tool_timeout``...): the workers apply them,
            so a chat runs as it would in the driver.
    """

    spec: RunSpec
    locator: StoreLocator | None
    per_worker: int
    config: Any = None


class ChatWorker:
    """A Ray actor that runs chats of any batch (``ray.remote`` applied on first use).

    The driver puts a run's :class:`BatchSpec` in Ray's object store once and
    passes its reference (boxed in a list, so Ray does not resolve it for every
    call) with each job; the worker reads it once per run (the factory is
    unpickled once), opens the store once per locator, and keeps a limit per
    run. :meth:`run` runs one job until it settles, yielding the latest
    :class:`RowUpdate` whenever its chat changed and the :class:`RowResult` last.
    """

    CACHED_RUNS = 8

    def __init__(self) -> None:
        self._runs: dict[str, tuple[RunSpec, Any, Any]] = {}  # spec, limit, the driver's config
        self._stores: dict[tuple[Any, ...], Any] = {}  # StoreLocator.key() -> the store
        self._lock = threading.Lock()

    async def _run_of(self, boxed: list[Any]) -> tuple[RunSpec, Any]:
        ref = boxed[0]
        key = ref.hex()
        spec, limit, config = self._runs.get(key) or await self._read(ref, key)
        if config is not None and config != get_config():  # the driver's defaults
            configure(**{f.name: getattr(config, f.name) for f in fields(config)})
        return spec, limit

    async def _read(self, ref: Any, key: str) -> tuple[RunSpec, Any, Any]:
        batch: BatchSpec = await ref
        found = self._runs.get(key)  # another call read it meanwhile
        if found is not None:
            return found
        from ._limits import AdaptiveLimit

        store = None
        if batch.locator is not None:
            store = await asyncio.to_thread(self._store_of, batch.locator)
        found = (replace(batch.spec, store=store), AdaptiveLimit(batch.per_worker), batch.config)
        self._runs[key] = found
        while len(self._runs) > self.CACHED_RUNS:
            del self._runs[next(iter(self._runs))]
        return found

    def _store_of(self, locator: StoreLocator) -> Any:
        """The store at ``locator``, opened once per file and way of opening it (on a
        worker thread). A store kept on a file since deleted or replaced is closed: it
        could only fail."""
        with self._lock:
            key = locator.key()
            store = self._stores.get(key)
            if store is None:
                store = locator.open()
                key = locator.key()  # the file it opened (it creates a missing one)
                for old in [k for k in self._stores if k[:2] == key[:2] and k[3] != key[3]]:
                    with contextlib.suppress(Exception):
                        self._stores.pop(old).close()
                self._stores[key] = store
            return store

    async def run(self, boxed: list[Any], job: Job) -> AsyncIterator[RowUpdate | RowResult]:
        try:
            spec, limit = await self._run_of(boxed)
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as exc:  # the run's spec could not be read here: make_chat's
            # module is not importable on this worker (only on the driver's sys.path), say
            raise SpecUnreadable.of(exc) from None
        except BaseException as exc:  # out of this task it would end the worker's loop
            raise RowRaised(f"input {job.key!r}: {one_line(exc)}") from exc
        loop = asyncio.get_running_loop()
        latest: dict[str, RowUpdate] = {}
        changed = asyncio.Event()

        def progress(update: RowUpdate) -> None:  # any thread (the contract's sink)
            def put() -> None:
                latest["u"] = update
                changed.set()

            loop.call_soon_threadsafe(put)

        worker_traces(spec.trace)  # as the driver does, for this run (content, or off)
        with attached(spec.trace):  # the row's task runs inside the batch's trace
            task = asyncio.ensure_future(settle_job(job, spec, progress, limit))
        sent_status, sent_at = "", 0.0
        waiter: asyncio.Future[Any] | None = None
        try:
            while not task.done():
                waiter = asyncio.ensure_future(changed.wait())
                await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                update = latest.get("u")
                if update is None or task.done():
                    continue
                wait = sent_at + PROGRESS_INTERVAL - time.monotonic()
                if update.status == sent_status and wait > 0:  # only tokens changed: not yet
                    await asyncio.wait({task}, timeout=wait)
                    if task.done():
                        break
                changed.clear()
                update = latest.pop("u")
                sent_status, sent_at = update.status, time.monotonic()
                yield update
        except BaseException:
            # The driver stopped (its stop button: ray.cancel) or went away: the row's chat
            # stops too, as a local row's does (its running calls cancelled, written, never
            # retried), instead of running its tools to the end for nobody. Its wait for
            # progress too: left pending, the loop logged "Task was destroyed" for it.
            ends = {task} if waiter is None else {task, waiter}
            for end in ends:
                end.cancel()
            await asyncio.wait(ends)
            raise
        await asyncio.sleep(0)  # updates posted from other threads just before the end
        if "u" in latest:
            yield latest.pop("u")
        yield task.result()


class SpecUnreadable(RuntimeError):
    """A Ray worker could not read the batch's spec (``make_chat``'s module cannot be
    imported there, say): every row sent there fails with this one line."""

    def __init__(self, message: str, error_type: str = "SpecUnreadable") -> None:
        super().__init__(message, error_type)

    def __str__(self) -> str:
        return str(self.args[0])

    @property
    def error_type(self) -> str:
        return str(self.args[1])

    @classmethod
    def of(cls, exc: BaseException) -> SpecUnreadable:
        """The one line for ``exc``, raised reading the spec (Ray wraps the cause)."""
        root = exc
        seen: set[int] = set()
        while id(root) not in seen:
            seen.add(id(root))
            inner = getattr(root, "cause", None)  # a RayTaskError's
            if not isinstance(inner, BaseException):  # a RaySystemError's (unpickling)
                inner = getattr(root, "client_exc", None)
            inner = inner if isinstance(inner, BaseException) else None
            inner = inner or root.__cause__ or root.__context__
            if inner is None:
                break
            root = inner
        if isinstance(root, ImportError):
            why = one_line(root, limit=200).split(": ", 1)[-1]
            hint = "put its module on the workers' PYTHONPATH or runtime_env"
        else:
            why = one_line(root, limit=200)
            hint = "the workers must be able to unpickle it, as the driver did"
        return cls(
            f"make_chat could not be loaded on the Ray worker: {why} ({hint})",
            type(root).__name__,
        )


START_RESENDS = 2
"""Times a row is sent again when its worker never started (its ``__init__`` raised):
nothing of the row ran, so it goes to the worker that replaced it."""

WAIT_RESENDS = 2
"""Times a row is sent again when its worker died while the store shows its chat waiting
with no call running (:func:`_waits_in_store`): continued from the store by the worker
that replaced it."""

PING_SECONDS = 5.0
"""How long the driver waits for a kept worker to answer before sending it chats: one that
does not answer in time is busy, not dead (a dead one is known at once)."""

PROGRESS_INTERVAL = 0.5
"""Seconds between a row's progress updates when only its tokens changed (a status
change is sent at once): each update is an object and a message to the driver."""


# ------------------------------------------------------------------ the driver
_Heard = TypeVar("_Heard", RowUpdate, RowResult)


@dataclass
class _Row:
    job: Job
    chat_id: str | None = None
    pending: int = 0
    worker: int | None = None
    handle: Any = None
    stream: Any = None
    used: RowResult | None = None
    """What the row's chat used, as last heard (an update, a result): what the driver
    reports while the chat is on its way to a worker again (a continuation starts from
    the stored chat), and for a row whose worker died."""
    latency: float = 0.0
    """Seconds the row's chat ran in its segments so far (each continuation is one)."""
    resent: int = 0
    """Times the row was sent again because its worker never started (nothing ran)."""
    waits_resent: int = 0
    """Times the row was sent again because its worker died while its chat waited."""

    def heard(self, item: _Heard) -> _Heard:
        """``item`` with what the chat used never less than heard before (kept in
        :attr:`used`): a chat's tokens and cost only grow, but a continued chat is first
        reported before its worker has loaded it (zeros), and the bar's totals went down
        by the row's share meanwhile. A result's ``latency_s`` is the row's whole: a
        worker times the segment it ran (up to a park), the driver adds them up."""
        if isinstance(item, RowResult) and item.latency_s is not None:
            self.latency += item.latency_s
            item = replace(item, latency_s=self.latency)
        last = self.used or RowResult(self.job.key, self.job.index, "queued")
        if item.input_tokens + item.output_tokens < last.input_tokens + last.output_tokens:
            item = replace(
                item,
                input_tokens=last.input_tokens,
                output_tokens=last.output_tokens,
                cost_usd=last.cost_usd,
            )
        if isinstance(item, RowResult):
            item = replace(item, calls=max(item.calls, last.calls))
        self.used = replace(
            last,
            calls=item.calls if isinstance(item, RowResult) else last.calls,
            input_tokens=item.input_tokens,
            output_tokens=item.output_tokens,
            cost_usd=item.cost_usd,
        )
        return item


class RayBackend:
    """Run a batch's chats on Ray: ``nbagent.batch(..., backend=RayBackend(...))``.

    ``backend="ray"`` is ``RayBackend(**backend_options)``.

    Args:
        address: The Ray cluster (``"auto"``, ``"ray://head:10001"``...);
            ``None`` uses the Ray this process is connected to, else starts
            one on this machine (``ray.init()``).
        workers: Worker actors; default: the cluster's CPUs (at least 1).
            Each runs up to ``ceil(concurrency / workers)`` chats at once.
        init: Other ``ray.init`` arguments (``runtime_env``, ``namespace``...),
            used only when this backend connects.
        worker_options: Other actor options for the workers (``num_cpus``,
            ``resources``, ``runtime_env``...). By default a worker reserves
            no CPU (chats wait on the network; Ray places the workers with
            ``scheduling_strategy="SPREAD"``): ``{"num_cpus": 1}`` if the tools
            compute.
        keep_workers: Keep the workers for the next batch of this process
            (they start in seconds; idle, they hold only memory). ``False``
            ends them with the batch. :meth:`shutdown` ends kept ones.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        workers: int | None = None,
        init: Mapping[str, Any] | None = None,
        worker_options: Mapping[str, Any] | None = None,
        keep_workers: bool = True,
    ) -> None:
        _ray()  # without Ray: one line naming the extra, before anything runs
        if workers is not None:
            workers = positive_int(workers, "workers")
        self.address = address
        self.workers = workers
        self.init = dict(init or {})
        self.worker_options = dict(worker_options or {})
        self.keep_workers = keep_workers

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None) -> RayBackend:
        """``backend="ray"`` with ``backend_options=`` (unknown keys: a clear error)."""
        options = dict(options or {})
        unknown = sorted(set(options) - RAY_OPTIONS)
        if unknown:
            raise TypeError(
                f"unknown Ray backend option(s) {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(sorted(RAY_OPTIONS))}"
            )
        return cls(**options)

    def __repr__(self) -> str:
        return f"RayBackend(address={self.address!r}, workers={self.workers!r})"

    def connect(self) -> Any:
        """Ray, initialised: the running instance, else ``ray.init(address, **init)``.

        Raises:
            RayUnavailable: ``ray.init`` failed: one line saying why; whatever
                it had started in this machine (Ray's processes, its session)
                is ended first. A Ray started here (no ``address``, no
                ``RAY_ADDRESS``) that timed out starting is started again, up to
                :data:`START_ATTEMPTS` times in all; the line then says how many.
        """
        ray = _ray()
        if ray.is_initialized():
            return ray
        # Ray started here may time out starting on a loaded machine (its raylet waits a
        # fixed ~15 s for its dashboard agent, then ends itself): nothing has run yet, so
        # it is started again. Any other failure (or a cluster's) is said at once.
        local = self.address is None and not os.environ.get("RAY_ADDRESS")
        attempts = START_ATTEMPTS if local else 1
        attempt = 0
        while True:
            attempt += 1
            before = _children()
            try:
                ray.init(address=self.address, **self.init)
                return ray
            except Exception as exc:
                with contextlib.suppress(Exception):
                    ray.shutdown()
                _end({p for p in _children() - before if _is_ray(p)})  # a GCS server left
                if START_TIMED_OUT in str(exc) and attempt < attempts:
                    continue
                where = f" at {self.address}" if self.address else " on this machine"
                tried = f" ({attempt} attempts)" if attempt > 1 else ""
                raise RayUnavailable(
                    f"Ray could not start{where}{tried}: {one_line(exc, 300)}"
                ) from None

    @staticmethod
    def shutdown() -> None:
        """End the workers kept for later batches (``ray.shutdown()`` ends them too)."""
        ray = _ray()
        for workers in _POOLS.values():
            _kill(ray, workers)
        _POOLS.clear()

    async def run(
        self, jobs: Sequence[Job], spec: RunSpec, progress: ProgressSink
    ) -> AsyncIterator[RowResult]:
        """Run ``jobs`` on Ray workers (see the module docstring)."""
        backend = self  # nbagent.batch(backend="ray", backend_options={...}):
        if spec.options:
            mine = {name: getattr(self, name) for name in RAY_OPTIONS}
            backend = self.from_options({**mine, **spec.options})
        locator = locate_store(spec.store)
        try:
            ray = backend.connect()
        except RayUnavailable as exc:
            if spec.on_error == "raise":
                raise
            for job in jobs:  # every row says why, and the bar counts them failed
                failed = RowResult(job.key, job.index, "failed", error=str(exc))
                failed = replace(failed, error_type="RayUnavailable")
                progress(failed.as_update())
                yield failed
            return
        check_store_reach(locator, ray.nodes())
        if not jobs:
            return
        size = backend.workers or max(1, int(ray.cluster_resources().get("CPU", 1) or 1))
        workers, key = backend._workers(ray, size, locator)
        run = _Run(ray, spec, locator, workers)
        if workers.used:  # kept since an earlier run: one may have died idle
            await run.revive()
        workers.used = True
        try:
            async for result in run.run(jobs, progress):
                yield result
        finally:
            await run.close()
            if not backend.keep_workers:
                _kill(ray, _POOLS.pop(key, workers))

    def _workers(
        self, ray: Any, size: int, locator: StoreLocator | None
    ) -> tuple[_Workers, tuple[Any, ...]]:
        options: dict[str, Any] = {
            "num_cpus": 0,
            "scheduling_strategy": "SPREAD",
            "max_concurrency": MAX_CHATS_PER_WORKER,
            # A dead worker is replaced by a new one (_Run.replace); Ray never
            # restarts it, nor reruns the chats it was running.
            "max_restarts": 0,
            "max_task_retries": 0,
        }
        options.update(self.worker_options)
        context = ray.get_runtime_context()  # a new Ray (after ray.shutdown) has a new node
        key = (context.get_node_id(), context.get_job_id(), size, _options_key(options))
        workers = _POOLS.get(key)
        if workers is None:
            actor = ray.remote(ChatWorker).options(**options)
            workers = _POOLS[key] = _Workers(actor.remote for _ in range(size))
        return workers, key


START_ATTEMPTS = 3
"""How many times a Ray this process starts is started when it times out starting."""

START_TIMED_OUT = "timed out during startup"
"""Ray's words (``ray._private.node``) when the node it started did not come up in time:
the only ``ray.init`` failure tried again (see :meth:`RayBackend.connect`)."""


class RayUnavailable(NBAgentError, RuntimeError):
    """Ray could not start (or be reached): ``ray.init`` failed; the message is one line."""


def _children() -> set[int]:
    """This process's child processes (Linux ``/proc``; elsewhere none are known)."""
    me = os.getpid()
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                    stat = f.read()
                if int(stat.rsplit(")", 1)[1].split()[1]) == me:  # the field after state
                    found.add(int(name))
    return found


def _is_ray(pid: int) -> bool:
    """Whether the process runs Ray's code (its command line names Ray's package)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ")
    except OSError:
        return False
    return b"/ray/" in cmd or cmd.startswith(b"ray::")


def _end(pids: set[int]) -> None:
    """End these child processes (Ray's, started by a failed ``ray.init``), each waited for
    through Ray's own ``Popen`` of it where one is left (:func:`_handles`)."""
    import signal

    handles = _handles(pids)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        for pid in list(alive):
            if _reaped(pid, handles):
                alive.discard(pid)
        if alive:
            time.sleep(0.05)
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        handle = handles.get(pid)
        with contextlib.suppress(ChildProcessError, OSError):
            if handle is not None:
                handle.wait()
            else:
                os.waitpid(pid, 0)


def _handles(pids: set[int]) -> dict[int, Any]:
    """Ray's ``subprocess.Popen`` objects of these processes, where a failed ``ray.init``
    left them (in its half-made node, collected later): reaped by ``os.waitpid``, a Popen
    still says its process runs, and warns "subprocess ... is still running" when collected
    (pytest reports it in whichever test is running then)."""
    import gc
    import subprocess

    if not pids:
        return {}
    return {
        o.pid: o
        for o in gc.get_objects()
        if isinstance(o, subprocess.Popen) and o.pid in pids and o.returncode is None
    }


def _reaped(pid: int, handles: dict[int, Any]) -> bool:
    """Whether ``pid`` has ended (and is reaped: by its Popen where there is one)."""
    handle = handles.get(pid)
    if handle is not None:
        return handle.poll() is not None
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done != 0
    return True


MAX_CHATS_PER_WORKER = 1000
"""A worker's ``max_concurrency``: the batch's limit (per run) is what bounds it."""


class _Workers(list[Any]):
    """A pool of worker actors, and how to make a new one (to replace a dead one)."""

    def __init__(self, spawns: Any) -> None:
        spawns = list(spawns)
        super().__init__(spawn() for spawn in spawns)
        self.spawn = spawns[0]
        self.used = False  # a run had them: kept since, one may have died idle


_POOLS: dict[tuple[Any, ...], _Workers] = {}
"""Workers kept for later batches: (Ray node and job, size, options) -> actors."""


def _kill(ray: Any, workers: Sequence[Any]) -> None:
    for worker in workers:
        with contextlib.suppress(Exception):  # gone already
            ray.kill(worker)


def _options_key(options: Mapping[str, Any]) -> str:
    import hashlib
    import json

    text = json.dumps(options, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()  # the env's secrets stay out of the key


class _Run:
    """One batch run on a pool of workers: the rows in flight and the parked ones."""

    def __init__(
        self, ray: Any, spec: RunSpec, locator: StoreLocator | None, workers: _Workers
    ) -> None:
        self.ray = ray
        self.spec = spec
        self.store = spec.store
        self.workers = workers
        per_worker = max(1, math.ceil(spec.concurrency / len(workers)))
        batch = BatchSpec(
            spec=replace(spec, store=None),
            locator=locator,
            per_worker=per_worker,
            config=get_config(),
        )
        try:
            self.boxed = [ray.put(batch)]
        except Exception as exc:
            cause: BaseException = exc
            while cause.__cause__ is not None or cause.__context__ is not None:
                cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
            raise TypeError(
                f"{FEATURE} sends make_chat to the workers, and it cannot be pickled "
                f"({one_line(cause, limit=120)}): make the provider inside the factory "
                "(Chat('gpt-4.1-mini') reads its API key from the worker's environment) "
                "instead of capturing a provider, client or open file"
            ) from None
        self.load = [0] * len(workers)
        self.results: asyncio.Queue[RowResult | BaseException] = asyncio.Queue()
        self.tasks: set[asyncio.Task[None]] = set()
        self.running: dict[int, _Row] = {}
        self.parked: dict[str, _Row] = {}
        self.sub: Any = None  # the parked chats, followed on the store's follower
        self.progress: ProgressSink = lambda update: None
        self.slots = asyncio.Semaphore(min(spec.concurrency, per_worker * len(workers)))
        self.closed = False  # close() was called: no continuation is sent any more

    async def run(self, jobs: Sequence[Job], progress: ProgressSink) -> AsyncIterator[RowResult]:
        waiting = list(reversed(jobs))
        unsettled = len(jobs)
        self.progress = progress

        async def feed() -> None:
            while waiting:
                await self.slots.acquire()
                self.start(_Row(waiting.pop()), progress)

        feeder = asyncio.ensure_future(feed())
        try:
            while unsettled:
                result = await self.results.get()
                if isinstance(result, BaseException):  # on_error="raise"
                    raise result
                if result.status in FINAL:
                    unsettled -= 1
                yield result
        finally:
            feeder.cancel()
            if self.sub is not None:
                self.sub.close()

    def start(self, row: _Row, progress: ProgressSink) -> None:
        """Send a row to the least busy worker (holding a slot)."""
        index = min(range(len(self.workers)), key=self.load.__getitem__)
        row.worker, row.handle = index, self.workers[index]
        self.load[index] += 1
        progress(row.heard(RowUpdate(row.job.key, "running", chat_id=row.chat_id)))
        stream = row.handle.run.options(num_returns="streaming").remote(self.boxed, row.job)
        row.stream = stream
        self.running[id(row)] = row
        task = asyncio.ensure_future(self.follow(row, stream, progress))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def follow(self, row: _Row, stream: Any, progress: ProgressSink) -> None:
        """Forward a row's updates to the progress sink; queue its result."""
        started = time.monotonic()
        result: RowResult | BaseException | None = None
        again = False
        try:
            async for ref in stream:
                item = await ref
                if isinstance(item, RowUpdate):
                    row.chat_id = item.chat_id or row.chat_id
                    progress(row.heard(item))
                else:
                    result = row.heard(item)
        except Exception as raised:
            exc = _leaf(raised)  # Ray's async iteration may wrap it in an ExceptionGroup
            if _worker_died(self.ray, exc):
                self.replace(row)  # before anything else is sent to it
            if _never_started(self.ray, exc):
                # its __init__ failed: Ray ran none of its methods, so nothing of the row
                # ran there; it goes again, to the replacement (a transient cause is gone
                # there; a permanent one fails it too, and the row then fails saying so)
                again = row.resent < START_RESENDS
                if again:
                    row.resent += 1
            else:
                if row.chat_id is None and self.store is not None:
                    # it died before its first update: the store knows the chat
                    row.chat_id = await asyncio.to_thread(self.recorded_chat, row.job.key)
                if row.chat_id is not None and self.store is not None:
                    # what it paid for since its last update (a request, at most) is stored
                    stored = await asyncio.to_thread(_stored_usage, self.store, row.chat_id)
                    if stored is not None:
                        row.heard(replace(stored, key=row.job.key, index=row.job.index))
                    if (
                        _worker_gone(self.ray, exc)
                        and row.waits_resent < WAIT_RESENDS
                        and await asyncio.to_thread(_waits_in_store, self.store, row.chat_id)
                    ):
                        # it died with the chat waiting (parked and stored, its result not
                        # sent yet: closing it takes a while, an MCP server stopping) or
                        # before it took up a decided call: nothing of it was running, so
                        # the replacement continues it from the store
                        row.waits_resent += 1
                        row.job = replace(row.job, chat_id=row.chat_id)
                        row.latency += time.monotonic() - started  # the segment it ran
                        again = True
            if not again:
                result = self.failure(row, exc, time.monotonic() - started)
        finally:
            assert row.worker is not None
            self.running.pop(id(row), None)
            self.load[row.worker] -= 1
            self.slots.release()
        if again:
            await self.slots.acquire()
            if self.closed:  # the run stopped meanwhile: nothing is sent any more
                self.slots.release()
                return
            self.start(row, progress)
            return
        if result is None:
            result = self.failure(row, RuntimeError("the worker returned no result"), 0.0)
        if isinstance(result, RowResult):
            result = self.settle(row, result, progress)
        await self.results.put(result)

    def failure(self, row: _Row, exc: BaseException, elapsed: float) -> RowResult | BaseException:
        """The row's failed result (or, with ``on_error="raise"``, the error to raise)."""
        cause = exc
        if isinstance(exc, self.ray.exceptions.RayTaskError):  # the row's own error, raised
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
        if self.spec.on_error == "raise":
            return cause
        error, kind = one_line(cause, limit=300), type(cause).__name__
        if isinstance(cause, SpecUnreadable):  # one clear line, not Ray's traceback
            error, kind = str(cause), cause.error_type
        if _never_started(self.ray, exc):
            error, kind = (
                f"the Ray worker could not start: {_start_failure(exc)}",
                "WorkerStartFailed",
            )
        elif _worker_died(self.ray, exc):
            error = f"the Ray worker running this chat died ({type(exc).__name__})" + (
                "; rerun the batch with its store to continue the chat (finished calls "
                "are kept, a call that was running is in doubt)"
                if self.store is not None
                else "; its chat is lost (no store)"
            )
            kind = "WorkerDied"
        used = row.used or RowResult(row.job.key, row.job.index, "failed")
        return RowResult(
            row.job.key,
            row.job.index,
            "failed",
            chat_id=row.chat_id,
            calls=used.calls,
            input_tokens=used.input_tokens,
            output_tokens=used.output_tokens,
            cost_usd=used.cost_usd,
            latency_s=row.latency + elapsed,
            error=error,
            error_type=kind,
        )

    def replace(self, row: _Row) -> None:
        """The worker that ran ``row`` died: a new one takes its place (once)."""
        assert row.worker is not None
        if self.workers[row.worker] is row.handle:
            with contextlib.suppress(Exception):
                self.ray.kill(row.handle)
            self.workers[row.worker] = self.workers.spawn()

    def recorded_chat(self, key: str) -> str | None:
        """The chat the store recorded for ``key`` in this batch (``None``: not known)."""
        with contextlib.suppress(Exception):
            return self.store.batch_chats(self.spec.batch_id).get(key)
        return None

    def settle(self, row: _Row, result: RowResult, progress: ProgressSink) -> RowResult:
        """A settled row: final, or parked (watched), or parked with no store (failed)."""
        row.chat_id = result.chat_id or row.chat_id
        if result.status != "awaiting_approval":
            if result.status == "failed":
                progress(result.as_update())
            return result
        if self.store is None or result.chat_id is None:
            failed = replace(
                result,
                status="failed",
                error_type="NeedsStore",
                error=(
                    "the chat is awaiting approval on a Ray worker, and without a store no "
                    "other process can continue it: pass store=PostgresStore(dsn)"
                ),
            )
            progress(failed.as_update())
            return failed
        # what it waits for (RowResult.pending): calls awaiting a decision and inputs
        # awaiting an answer (an external tool's result, ask_user's); a decision or an
        # answer lowers the count
        row.pending = result.pending
        self.parked[result.chat_id] = row
        if self.sub is None:
            from ..store import follow

            loop = asyncio.get_running_loop()
            self.sub = follow(self.store, (), lambda ids: self.decided(ids, loop))
        self.sub.add([result.chat_id])  # looked at once: a decision may have come first
        return result

    def decided(self, chat_ids: set[str], loop: asyncio.AbstractEventLoop) -> None:
        """From the store's follower (a worker thread): decisions were recorded in these
        chats; those whose count of undecided calls went down are continued."""
        try:
            pending = _pending_counts(self.store, chat_ids)
        except Exception:  # the store cannot be read now: look again at the next tick
            self.sub.add(chat_ids)
            return
        with contextlib.suppress(RuntimeError):  # the run's loop is gone: nothing to continue
            asyncio.run_coroutine_threadsafe(self.resume(chat_ids, pending), loop)

    async def resume(self, chat_ids: set[str], pending: dict[str, int]) -> None:
        for chat_id in sorted(chat_ids):
            row = self.parked.get(chat_id)
            if row is not None and pending.get(chat_id, 0) < row.pending:
                del self.parked[chat_id]
                self.sub.discard([chat_id])
                row.job = replace(row.job, chat_id=chat_id)
                await self.slots.acquire()
                # the worker it goes to may have died while the row was parked: a new one
                # takes its place first (else the row failed "in doubt" though nothing ran)
                await self.revive(min(range(len(self.workers)), key=self.load.__getitem__))
                if self.closed:  # the run stopped meanwhile: nothing is sent (the decision
                    self.slots.release()  # stays in the store; a rerun continues the chat)
                    return
                self.start(row, self.progress)

    async def revive(self, *indices: int) -> None:
        """Replace the workers at ``indices`` (default: all) that are dead: a kept worker
        may have died while idle (the OOM killer, ``ray.kill``), and a chat sent to it
        fails at once, as if it had died running it."""
        chosen = list(indices) or list(range(len(self.workers)))
        handles = [self.workers[i] for i in chosen]
        dead = await asyncio.gather(*(self._dead(h) for h in handles))
        for index, handle, gone in zip(chosen, handles, dead, strict=True):
            if gone and self.workers[index] is handle:
                with contextlib.suppress(Exception):
                    self.ray.kill(handle)
                self.workers[index] = self.workers.spawn()

    async def _dead(self, handle: Any) -> bool:
        """Whether the worker actor is known dead (a slow answer is not: it is busy)."""

        async def ping() -> None:
            await handle.__ray_ready__.remote()

        try:
            await asyncio.wait_for(ping(), PING_SECONDS)
        except TimeoutError:
            return False
        except Exception as exc:
            return _worker_died(self.ray, _leaf(exc))
        return False

    async def close(self) -> None:
        """Stop following rows (the caller stopped early, or all settled)."""
        self.closed = True
        for row in list(self.running.values()):  # stop their chats on the workers
            with contextlib.suppress(Exception):
                self.ray.cancel(row.stream)
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _worker_died(ray: Any, exc: BaseException) -> bool:
    return isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.WorkerCrashedError)


def _worker_gone(ray: Any, exc: BaseException) -> bool:
    """Whether ``exc`` says the row's worker is dead for sure (its process died or was
    killed), not just unreachable for now (``ActorUnavailableError``: it may still be
    running the chat, so continuing it elsewhere could make two drivers of it)."""
    unavailable = getattr(ray.exceptions, "ActorUnavailableError", ())
    return isinstance(
        exc, ray.exceptions.ActorDiedError | ray.exceptions.WorkerCrashedError
    ) and not isinstance(exc, unavailable)


def _never_started(ray: Any, exc: BaseException) -> bool:
    """Whether ``exc`` says the row's worker never started: its ``__init__`` raised (Ray
    then runs none of the actor's methods: nothing of the row ran)."""
    return isinstance(exc, ray.exceptions.RayActorError) and bool(
        getattr(exc, "actor_init_failed", False)
    )


def _start_failure(exc: BaseException) -> str:
    """Why a worker could not start, on one line: the last line of Ray's message (it ends
    with the traceback of the worker's ``__init__``: ``Type: message``)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = redact_keys(lines[-1]) if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _stored_usage(store: Any, chat_id: str) -> RowResult | None:
    """What the stored chat used (calls, tokens, cost), as a result's numbers (``None``:
    the store cannot tell now)."""
    try:
        record = store.load(chat_id)
    except Exception:
        return None
    state = record.state
    usage = state.get("usage") or {}
    return RowResult(
        "",
        0,
        "failed",
        chat_id=chat_id,
        calls=record.info.n_calls,
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
        cost_usd=None if state.get("unpriced") else float(state.get("cost_usd") or 0.0),
    )


def _waits_in_store(store: Any, chat_id: str) -> bool:
    """Whether the stored chat waits for a decision or an answer (a call ``awaiting_input``:
    an external tool's result, ``ask_user``'s), or holds a call decided and not started,
    with no call running: a worker that died holding it was running
    nothing of it (a call claimed is ``running`` until its result is stored, then in doubt;
    a model request is made only once every call of the round is settled)."""
    try:
        statuses = {call.status for call in store.load(chat_id).calls}
        if "running" in statuses:
            return False
        if statuses & {"requested", "awaiting_approval", "approved", "awaiting_input"}:
            return True
        inputs = getattr(store, "pending_inputs", None)
        return bool(inputs is not None and inputs(chat_id))
    except Exception:  # the store cannot be read now: the row fails as it did
        return False


def _pending_counts(store: Any, chat_ids: set[str]) -> dict[str, int]:
    """Calls awaiting a decision and inputs awaiting an answer, per chat (one query of
    each for all when there are many)."""
    inputs: Any = getattr(store, "pending_inputs", None) or (lambda chat_id=None: [])
    if len(chat_ids) > 8:
        waits = [*store.pending_approvals(), *inputs()]
    else:
        waits = [
            w for chat_id in chat_ids for w in (*store.pending_approvals(chat_id), *inputs(chat_id))
        ]
    return dict(Counter(w.chat_id for w in waits))


register_backend("ray", RayBackend)

__all__ = ["BatchSpec", "ChatWorker", "RayBackend", "StoreLocator", "locate_store"]
