"""Durable chats: the :class:`Store` seam, attaching a chat to a store, loading it back.

Persistence is one more subscriber of the chat's event stream. Every event
except the streaming fragments (``TextDelta``, ``ToolCallDelta``) becomes an
:class:`Entry`: the event itself plus the one row change it implies (a new
message, a new call, a decision, a call's final status), the event leaving out
what that row already holds. Events are queued as they come and encoded when
they are written, in batches, each batch one transaction, at these boundaries:

- every claim: the claim's transaction first writes what is pending (the model
  response that asked for the call), so a call's row exists before it is claimed;
- the end of a tool round (its results are on disk before the next model
  request), of a step that parks the chat on an approval, and of ``complete``;
- at once: a decision, an options change, a failed request, an in-doubt call,
  a denial, and a result that arrives while other calls of its round still run.

A model response whose calls run right away is written with their claim; a
hard crash before that loses only that response (the next load asks the model
again), never a tool's outcome. What is pending is also written when the chat
object is garbage-collected or the interpreter exits.

**The claim** (``Chat._claim``): right before a call runs, the store moves its
row from ``requested``/``approved`` to ``running`` in one transaction and
says whether this process got it. A call is therefore run by at most one
process, and a crash cannot make it run again silently: on load, a call left
``running`` by a process that is gone is *in doubt* (a ``CallInDoubt`` event,
then a ``ToolCallFinished`` with status ``in_doubt`` whose result tells the
model the outcome is unknown), unless its tool is declared ``idempotent``, in
which case it is made runnable again.

**Two drivers.** A chat is driven by one process at a time. If two processes
drive the same chat at once, the first to claim a call runs it; the other one
stops: its step hook ends the loop with ``StepResult("busy")`` and warns
(:class:`StoreConflictWarning`). The same happens when a process finds the
transcript moved on under it (it tried to write a message index another
process already wrote). That copy of the chat is stale: ``Chat.load`` it
again to continue. Decisions are not driving: anyone may decide a pending call
at any time, and the first decision recorded in the store wins.

**Decisions made elsewhere** (``store.approve(call_id)`` from a script, another
notebook, a web form) are written to the call's row and to the ``decisions``
table. A chat applies them through ``chat.approve``/``chat.deny`` (so they emit
the same events as a click) at the start of every step, on ``Chat.load``, and
on ``chat.refresh()``.

**Secrets**: the provider object is never stored, only its name and model.

The seam: :class:`Store` is everything the chat side needs from a database.
:class:`~nbagent._sqlite_store.SQLiteStore` is the embedded default; a
PostgreSQL store implements the same methods (``SELECT ... FOR UPDATE`` /
``UPDATE ... WHERE status IN (...)`` for the claim, ``INSERT ... ON CONFLICT
DO NOTHING`` for first-writer-wins), and everything in this module works with it
unchanged.
"""

from __future__ import annotations

import os
import socket
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from . import _serde as serde
from ._errors import DecisionError, StoreError
from ._events import (
    ApprovalDecided,
    CallbackWarning,
    CallInDoubt,
    Event,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    OptionsChanged,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
    utcnow,
)
from ._types import (
    Approval,
    Decision,
    Message,
    ToolCall,
    ToolResultMessage,
)

if TYPE_CHECKING:
    from ._chat import Chat

ChatT = TypeVar("ChatT", bound="Chat")


class StoreConflictWarning(UserWarning):
    """Another process is driving this chat; this copy stopped (``Chat.load`` it again)."""


# ---------------------------------------------------------------- values
@dataclass(frozen=True)
class ChatInfo:
    """One stored chat, as ``store.chats()`` lists it.

    Attributes:
        id: The chat id (``Chat.load(id, store=...)``).
        created_at / updated_at: When it was created and last written.
        provider / model: What it ran on (never an API key).
        title: The first user message, shortened.
        n_messages / n_calls: Transcript length and tool calls so far.
        pending: Calls awaiting a decision.
    """

    id: str
    created_at: datetime
    updated_at: datetime
    provider: str
    model: str
    title: str | None = None
    n_messages: int = 0
    n_calls: int = 0
    pending: int = 0


@dataclass(frozen=True)
class StoredCall:
    """A tool call as the store has it (``store.pending_approvals()``, ``store.call(id)``).

    Attributes:
        chat_id: The chat the call belongs to.
        id / name / arguments: The call's identity.
        status: Its lifecycle status in the store.
        approval / decision / result: As on :class:`~nbagent.ToolCall`.
        turn / step: When the model asked for it.
        requested_at / started_at / finished_at: Times.
        claimed_by / claimed_at: The process that claimed it to run
            (``host:pid:start:token``), and when.
    """

    chat_id: str
    id: str
    name: str
    arguments: dict[str, Any]
    status: str
    approval: Approval | None = None
    decision: Decision | None = None
    result: ToolResultMessage | None = None
    turn: int = 0
    step: int = 0
    requested_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    raw_arguments: str | None = None
    parse_error: str | None = None

    def to_tool_call(self) -> ToolCall:
        """A :class:`~nbagent.ToolCall` with this identity and lifecycle."""
        c = ToolCall(self.id, self.name, dict(self.arguments), self.raw_arguments, self.parse_error)
        c.status = self.status  # type: ignore[assignment]
        c.approval, c.decision, c.result = self.approval, self.decision, self.result
        c.started_at, c.finished_at = self.started_at, self.finished_at
        return c

    def __repr__(self) -> str:
        return (
            f"StoredCall(chat_id={self.chat_id[:8]!r}, id={self.id!r}, name={self.name!r}, "
            f"arguments={serde.dumps(self.arguments)[:80]}, status={self.status!r})"
        )


@dataclass(frozen=True)
class ChatRecord:
    """Everything ``Chat.load`` needs, as the store returns it.

    Attributes:
        info: The chat's summary.
        system: System instructions.
        state: Loop state (turn, step, usage, options...), as written by the chat.
        messages: The transcript, as JSON objects (see :mod:`nbagent._serde`).
        calls: Every call, in request order.
        unapplied: Ids of calls with a decision made through the store that no
            chat has applied yet.
        next_seq: The next event sequence number.
    """

    info: ChatInfo
    system: str | None
    state: dict[str, Any]
    messages: list[dict[str, Any]]
    calls: list[StoredCall]
    unapplied: frozenset[str] = frozenset()
    next_seq: int = 0


# ----------------------------------------------------------- write records
@dataclass(frozen=True, slots=True)
class NewMessage:
    """Append message ``idx``; it must not exist yet (else: another driver).

    ``seq`` and ``ts`` are its ``MessageAdded`` event's: the row is that event.
    """

    idx: int
    turn: int
    role: str
    data: str
    seq: int | None = None
    ts: str | None = None


@dataclass(frozen=True, slots=True)
class NewCall:
    """Insert a requested call; it must not exist yet."""

    call_id: str
    seq: int
    name: str
    arguments: str
    raw_arguments: str | None
    parse_error: str | None
    status: str
    gated: bool
    approval: str
    turn: int
    step: int
    requested_at: str


@dataclass(frozen=True, slots=True)
class DecisionChange:
    """Record a decision. First decision wins; repeating it only marks an external one applied.

    ``override``: the decision may replace an automatic one on a call that has
    not started (a human overruling a resolver or policy).
    """

    call_id: str
    verdict: str
    by: str
    at: str
    reason: str | None
    arguments: str | None
    data: str
    override: bool


@dataclass(frozen=True, slots=True)
class CallFinal:
    """A call reached a final status. Allowed while it has no result and is not
    running, or is running under ``owner`` (this process's claim, or the dead
    owner of an in-doubt call)."""

    call_id: str
    status: str
    result: str
    started_at: str | None
    finished_at: str | None
    owner: str | None


@dataclass(frozen=True, slots=True)
class CallReset:
    """An in-doubt call of an idempotent tool becomes runnable again (``status``)."""

    call_id: str
    status: str
    owner: str | None


Change = NewMessage | NewCall | DecisionChange | CallFinal | CallReset

FOLDED: dict[str, type[Event]] = {
    ModelRequestFinished.type: ModelRequestStarted,
    ModelRequestFailed.type: ModelRequestStarted,
    ToolCallFinished.type: ToolCallStarted,
}
"""A finishing event's type -> the type of the event it may carry under ``"started"``."""


def unfold(type_: str, data: dict[str, Any]) -> tuple[str, int, str, dict[str, Any]] | None:
    """The started event that a finishing event's stored fields carry, if any.

    Removes ``"started"`` from ``data`` (the finishing event's fields); returns
    the started event's type, ``seq``, ``ts`` and fields (those it shares with
    the finishing event filled in from ``data``), for
    :func:`nbagent._serde.decode_event`.
    """
    started = data.pop("started", None)
    cls = FOLDED.get(type_)
    if not isinstance(started, dict) or cls is None:
        return None
    own = dict(started)
    seq, ts = own.pop("seq"), own.pop("ts")
    out = {k: data[k] for k in _own_fields(cls) if k in data and k not in own}
    out.update(own)
    return cls.type, seq, ts, out


def _own_fields(cls: type[Event]) -> tuple[str, ...]:
    names = _OWN_FIELDS.get(cls)
    if names is None:
        names = _OWN_FIELDS[cls] = tuple(
            f.name for f in fields(cls) if f.name not in ("chat_id", "seq", "ts")
        )
    return names


_OWN_FIELDS: dict[type[Event], tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True)
class Entry:
    """One event to persist and the row change it implies, written together.

    A store applies ``change`` first: if it was already applied (a duplicate
    from a racing process) the event is not written; if it contradicts the
    store (another process drove the chat), the store stops the batch there
    and reports the conflict.

    ``data`` is the event's fields as JSON, or ``None`` when the row written by
    ``change`` already says everything the event does: a ``ToolCallRequested``
    is its :class:`NewCall` row (``seq``, ``requested_at`` = ``ts``, step, turn,
    approval) and a ``MessageAdded`` its :class:`NewMessage` row (``seq``,
    ``ts``, index, turn, the message), so no event row is stored for them and
    ``iter_events`` rebuilds them from those rows. Likewise a
    ``ToolCallFinished`` leaves out the ``result`` its :class:`CallFinal` row
    holds (except for a denial, which a person may still overrule, replacing
    the row's result).

    A finishing event may carry the event that started it, when both are
    written in one batch: the ``data`` of a ``ModelRequestFinished`` or
    ``ModelRequestFailed`` (its ``ModelRequestStarted``) or of a
    ``ToolCallFinished`` (its ``ToolCallStarted``) then has a ``"started"``
    object: that event's ``seq``, ``ts`` and the fields whose values differ
    from the finishing event's (see :data:`FOLDED` and :func:`unfold`). A
    store just stores it.
    """

    seq: int
    type: str
    ts: str
    data: str | None
    change: Change | None = None


@dataclass(frozen=True)
class ClaimResult:
    """What a claim found: ``claimed`` or why not."""

    claimed: bool
    status: str | None = None
    claimed_by: str | None = None
    conflict: str | None = None


# ------------------------------------------------------------------- seam
@runtime_checkable
class Store(Protocol):
    """What a chat needs from a database: the seam a PostgreSQL store implements.

    Every method is one transaction. The write methods follow the rules of
    :class:`Entry` (first writer wins, duplicates are dropped, a contradiction
    is reported, never raised). ``claim`` is the at-most-once primitive: a
    conditional update of one call row from ``requested``/``approved`` to
    ``running``; it returns ``claimed=True`` only to the one caller that changed it.
    """

    location: str
    """Where the data lives (a path, or a DSN without its password)."""

    claim_timeout: float | None
    """Seconds after which a claim whose owner cannot be checked (another host)
    is considered abandoned; ``None``: never."""

    # the chat side
    def create_chat(self, info: ChatInfo, system: str | None, state: Mapping[str, Any]) -> None:
        """Record a new chat; :class:`~nbagent.StoreError` if the id exists."""
        ...

    def load(self, chat_id: str) -> ChatRecord:
        """Everything to rebuild a chat; :class:`~nbagent.StoreError` for an unknown id."""
        ...

    def write(
        self,
        chat_id: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Apply entries (and the chat's state and tool schemas) in one transaction.

        Returns:
            ``None``, or a description of the conflict that stopped the batch.
        """
        ...

    def claim(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Entry] = (),
        state: Mapping[str, Any] | None = None,
    ) -> ClaimResult:
        """Write ``entries``, then claim the call for ``owner``, in one transaction."""
        ...

    def decisions(self, chat_id: str, call_ids: Iterable[str]) -> dict[str, Decision]:
        """The recorded decisions of these calls (those that have one)."""
        ...

    def reject_decision(self, chat_id: str, call_id: str, error: str) -> None:
        """A chat could not apply a stored decision: put the call back to awaiting approval."""
        ...

    # the outside
    def approve(
        self,
        call_id: str | StoredCall | ToolCall,
        arguments: dict[str, Any] | None = None,
        reason: str | None = None,
        by: str = "store",
        *,
        chat_id: str | None = None,
    ) -> StoredCall:
        """Approve a pending call from anywhere (see :class:`~nbagent.store.SQLiteStore`)."""
        ...

    def deny(
        self,
        call_id: str | StoredCall | ToolCall,
        reason: str | None = None,
        by: str = "store",
        *,
        chat_id: str | None = None,
    ) -> StoredCall:
        """Deny a pending call from anywhere."""
        ...

    def call(self, call_id: str, *, chat_id: str | None = None) -> StoredCall:
        """One call; :class:`~nbagent.DecisionError` if unknown or ambiguous."""
        ...

    def pending_approvals(self, chat_id: str | None = None) -> list[StoredCall]:
        """Calls awaiting a decision, in every chat (or one)."""
        ...

    def chats(self) -> list[ChatInfo]:
        """Every stored chat, oldest first."""
        ...

    def iter_events(
        self, chat_id: str | None = None, *, calls: dict[str, ToolCall] | None = None
    ) -> Iterator[Event]:
        """Stored events, rebuilt, per chat in ``seq`` order (what ``nbagent.read_log`` reads).

        ``call`` fields are rebuilt once per call and shared by the events of a
        chat; pass ``calls`` (with ``chat_id``) to reuse existing objects.
        """
        ...

    def close(self) -> None: ...


# --------------------------------------------------------------- opening
def open_store(store: Store | str | os.PathLike[str]) -> Store:
    """A store object from a path (SQLite) or a store object (returned as is).

    Raises:
        StoreError: The file cannot be opened as an nbagent store.
    """
    return _open(store)[0]


def _open(store: Any) -> tuple[Store, bool]:
    """The store and whether we opened it (and so must close it)."""
    from ._sqlite_store import SQLiteStore

    if isinstance(store, (str, os.PathLike)):
        return SQLiteStore(Path(store)), True
    if isinstance(store, (SQLiteStore, Store)):  # the first check is much the cheaper
        return store, False
    raise TypeError(
        f"store must be a path or a store object (e.g. nbagent.store.SQLiteStore), "
        f"got {type(store).__name__}"
    )


# ------------------------------------------------------ process identity
_HOST = socket.gethostname()
_LIVE_TOKENS: set[str] = set()


def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    if not rest or rest[0] == "Z":  # a zombie has finished
        return "zombie"
    return rest[19] if len(rest) > 19 else None


_PROCESS: tuple[int, str] | None = None  # (pid, "host:pid:start"), per process (fork)


def new_owner() -> str:
    """``host:pid:start:token``: who claims a call (one token per attached chat object)."""
    global _PROCESS
    pid = os.getpid()
    if _PROCESS is None or _PROCESS[0] != pid:
        _PROCESS = (pid, f"{_HOST}:{pid}:{_proc_start(pid) or ''}")
    return f"{_PROCESS[1]}:{os.urandom(6).hex()}"


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process behind ``owner`` is alive; ``None`` when it cannot be told."""
    if not owner:
        return False
    parts = owner.rsplit(":", 3)
    if len(parts) != 4:
        return None
    host, pid_s, start, token = parts
    if host != _HOST:
        return None
    try:
        pid = int(pid_s)
    except ValueError:
        return None
    if pid == os.getpid():
        return token in _LIVE_TOKENS
    now = _proc_start(pid)
    if now == "zombie":
        return False
    if start and now is not None:
        return now == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return None
    return True


def _abandoned(call: StoredCall, claim_timeout: float | None) -> bool:
    alive = owner_alive(call.claimed_by)
    if alive is None:
        if claim_timeout is None or call.claimed_at is None:
            return False
        return (utcnow() - call.claimed_at).total_seconds() > claim_timeout
    return not alive


# ------------------------------------------------------------ the entries
_FLUSH_NOW = (StepFinished, ModelRequestFailed, ApprovalDecided, OptionsChanged, CallInDoubt)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


class _Attachment:
    """Connects one chat object to a store: event writer, claim, step hook."""

    def __init__(self, chat: Chat, store: Store, owned: bool):
        self.store = store
        self.owned = owned
        self.chat_id = chat.id
        self.owner = new_owner()
        self._token = self.owner.rsplit(":", 1)[1]
        _LIVE_TOKENS.add(self._token)
        self._chat = weakref.ref(chat)
        self._lock = threading.RLock()
        self._pending: list[tuple[_Builder, Any, Any]] = []  # (builder, event, noted)
        self._running: set[str] = set()
        self._orphans: dict[str, str | None] = {}  # in-doubt call id -> its dead owner
        self._tools_sig: tuple[Any, ...] | None = None
        self._state: dict[str, Any] | None = None
        self._state_key: tuple[Any, ...] | None = None
        self.detached: str | None = None
        self._closed = False
        self._memo: dict[int, str] = {}  # id(message) -> its JSON, while a batch is encoded

    # -- wiring ------------------------------------------------------------
    def install(self, chat: Chat) -> None:
        chat._store = self
        chat._claim = self.claim
        chat._step_hooks.append(self.on_step)
        chat.on(None, self.on_event)
        weakref.finalize(chat, self.close)

    def close(self) -> None:
        """Write what is pending and release the store (if the chat opened it)."""
        if self._closed:
            return
        try:
            self.flush()
        except (StoreError, StoreConflictWarning):
            pass  # closing must not raise (it also runs from a finalizer)
        finally:
            self._closed = True
            _LIVE_TOKENS.discard(self._token)
            if self.owned:
                self.store.close()

    # -- state ---------------------------------------------------------------
    def _snapshot(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The chat's state and tool schemas, each only when changed since last written.

        Both are checked at every write, so the checks are cheap: the state is
        rebuilt only when one of its inputs is another object than last time
        (``ToolOptions`` is frozen: changing options replaces it), and the tools
        are compared by name and identity.
        """
        chat = self._chat()
        if chat is None:
            return None, None
        state: dict[str, Any] | None = None
        key: tuple[Any, ...] = (chat._turn, chat._forced_spent, chat._options)
        key += (chat.max_steps, chat.on_tool_error, chat.stream)
        if key != self._state_key:
            self._state_key = key
            state = chat_state(chat)
            if state == self._state:
                state = None
            else:
                self._state = state
        tools = None
        sig = (*chat._tools, *map(id, chat._tools.values()))
        if sig != self._tools_sig:
            self._tools_sig = sig
            tools = {t.name: t.input_schema for t in chat._tools.values()}
        return state, tools

    # -- events --------------------------------------------------------------
    def on_event(self, e: Event) -> None:
        """Queue an event; write the queue at a boundary (see the module docstring).

        Runs for every event, on the thread driving the chat, so it only does
        what must happen now: decide whether this event is a boundary, and
        note the live values its entry needs (a ``ToolCall`` changes after its
        event). Encoding is left to :meth:`_take`, which turns the whole queue
        into entries in one pass right before it is written.
        """
        build, flush = _PLANS.get(type(e)) or _plan(type(e))
        if build is None or self._closed:
            return
        if self.detached is not None and build is not _Attachment._decided:
            return
        noted: Any = None
        if build is _Attachment._call_finished:
            noted, flush = self._finished(e)
        elif build is _Attachment._in_doubt:
            noted = self._reset_status(e)
        elif build is _Attachment._step_finished and e.kind == "generated":  # type: ignore[attr-defined]
            # Written with the next claim or step, unless the chat parks here.
            chat = self._chat()
            flush = chat is None or chat.awaiting_approval
        with self._lock:
            self._pending.append((build, e, noted))
        if flush:
            self.flush()

    def _finished(self, e: Any) -> tuple[tuple[str | None, datetime | None], bool]:
        """A call finished: who may record its result, when, and whether to write now."""
        call = e.call
        self._running.discard(call.id)
        in_doubt = e.status == "in_doubt"
        owner = self._orphans.pop(call.id, self.owner) if in_doubt else self.owner
        # Written at the end of the round, unless other calls of the round still run.
        flush = bool(self._running) or in_doubt or e.status == "denied"
        return (owner, call.finished_at), flush

    def _reset_status(self, e: Any) -> str | None:
        """For an in-doubt call that will be rerun: the status it goes back to."""
        if not e.rerun:
            return None
        call = e.call
        self._orphans.pop(call.id, None)
        gated = call.approval is not None and call.approval.required
        return "approved" if gated else "requested"

    # One builder per kind of event: (self, event, what on_event noted) -> its entry.
    def _plain(self, e: Event, noted: Any = None) -> Entry:
        return Entry(e.seq, e.type, e.ts.isoformat(), serde.event_json(e))

    def _message_added(self, e: Any, noted: Any) -> Entry:
        m = e.message
        ts = e.ts.isoformat()
        change = NewMessage(e.index, e.turn, m.role, self._message_json(m), e.seq, ts)
        return Entry(e.seq, e.type, ts, None, change)  # the message's row is the event

    def _message_json(self, m: Any) -> str:
        """A message as JSON, encoded once per batch (a tool result is also its call's result)."""
        memo = self._memo
        key = id(m)
        data = memo.get(key)
        if data is None:
            data = memo[key] = serde.dumps(serde.message_out(m))
        return data

    def _call_requested(self, e: Any, noted: Any) -> Entry:
        c, approval = e.call, e.approval
        encoded = serde.dumps(serde.approval_out(approval))
        ts = e.ts.isoformat()
        change = NewCall(
            c.id,
            e.seq,
            c.name,
            serde.dumps(c.arguments),
            c.raw_arguments,
            c.parse_error,
            "awaiting_approval" if approval.required else "requested",
            approval.required,
            encoded,
            e.turn,
            e.step,
            ts,
        )
        return Entry(e.seq, e.type, ts, None, change)  # the call's row is the event

    def _decided(self, e: Any, noted: Any) -> Entry:
        d = e.decision
        encoded = serde.dumps(serde.decision_out(d))
        change = DecisionChange(
            e.call.id,
            d.verdict,
            d.by,
            d.at.isoformat(),
            d.reason,
            None if d.arguments is None else serde.dumps(d.arguments),
            encoded,
            override=not d.automatic,
        )
        data = serde.event_json(e, "decision", encoded)
        return Entry(e.seq, e.type, e.ts.isoformat(), data, change)

    def _call_finished(self, e: Any, noted: tuple[str | None, datetime | None]) -> Entry:
        owner, finished_at = noted
        encoded = self._message_json(e.result)
        change = CallFinal(
            e.call.id, e.status, encoded, _iso(e.started_at), _iso(finished_at), owner
        )
        if e.status == "denied":  # may be overruled later, replacing the row's result
            data = serde.event_json(e, "result", encoded)
        else:  # the result is in the call's row, final
            data = serde.dumps(serde.event_out(e, skip="result"))
        return Entry(e.seq, e.type, e.ts.isoformat(), data, change)

    def _in_doubt(self, e: Any, noted: str | None) -> Entry:
        if noted is None:  # not rerun: the ToolCallFinished that follows settles it
            return self._plain(e)
        change = CallReset(e.call.id, noted, e.claimed_by)
        return Entry(e.seq, e.type, e.ts.isoformat(), serde.event_json(e), change)

    def _step_finished(self, e: Event, noted: Any) -> Entry:
        return self._plain(e)

    def _take(self) -> list[Entry]:
        """Everything queued, as entries (encoded now, in order); empties the queue.

        A started event whose finishing event is in the same batch is folded
        into it (see :class:`Entry`): one row, one encoding. An event that
        cannot be encoded is dropped with a warning, as an event whose
        subscriber raises is: it never stops the chat.
        """
        with self._lock:
            queued, self._pending = self._pending, []
            entries: list[Entry | None] = []
            held: dict[tuple[str, Any], tuple[int, Event]] = {}  # key -> (slot, started event)
            self._memo = {}
            try:
                for build, e, noted in queued:
                    start = _STARTS.get(type(e))
                    if start is not None:
                        earlier = held.get(key := start(e))
                        if earlier is not None:  # never finished here: written as it is
                            entries[earlier[0]] = self._build(_Attachment._plain, earlier[1], None)
                        held[key] = (len(entries), e)
                        entries.append(None)  # its slot, if nothing finishes it here
                        continue
                    entry = self._build(build, e, noted)
                    finish = _FINISHES.get(type(e))
                    if finish is not None and entry is not None and entry.data is not None:
                        started = held.pop(finish(e), None)
                        if started is not None:
                            entry = self._fold(entry, started[1], e)
                    entries.append(entry)
                for slot, e in held.values():
                    entries[slot] = self._build(_Attachment._plain, e, None)
            finally:
                self._memo = {}
            return [x for x in entries if x is not None]

    def _build(self, build: _Builder, e: Event, noted: Any) -> Entry | None:
        try:
            return build(self, e, noted)
        except Exception as exc:
            warnings.warn(
                f"nbagent store: could not store {e.type} {e.seq} of chat "
                f"{self.chat_id}: {type(exc).__name__}: {exc}",
                CallbackWarning,
                stacklevel=4,
            )
            return None

    @staticmethod
    def _fold(entry: Entry, started: Event, finished: Event) -> Entry:
        """``finished``'s entry carrying ``started``: its seq, ts and the fields that differ."""
        own: dict[str, Any] = {"seq": started.seq, "ts": started.ts.isoformat()}
        for name, value in serde.event_out(started).items():
            mine = getattr(started, name)
            try:
                same = hasattr(finished, name) and (
                    getattr(finished, name) is mine or bool(getattr(finished, name) == mine)
                )
            except Exception:
                same = False
            if not same:
                own[name] = value
        head = entry.data or "{}"
        sep = "," if len(head) > 2 else ""
        data = f'{head[:-1]}{sep}"started":{serde.dumps(own)}}}'
        return Entry(entry.seq, entry.type, entry.ts, data, entry.change)

    def flush(self) -> None:
        with self._lock:
            if not self._pending:
                return
            entries = self._take()
            if self.detached is not None:
                entries = [x for x in entries if isinstance(x.change, DecisionChange)]
                state, tools = None, None
            else:
                state, tools = self._snapshot()
            if not entries:
                return
            conflict = self.store.write(self.chat_id, entries, state, tools)
        if conflict is not None:
            self._detach(conflict)

    # -- claim -----------------------------------------------------------------
    def claim(self, call: ToolCall) -> bool:
        if self.detached is not None:
            return False
        with self._lock:  # the step's own flush writes the state; the claim writes events
            result = self.store.claim(self.chat_id, call.id, self.owner, self._take())
        if result.conflict is not None:
            self._detach(result.conflict)
            return False
        if not result.claimed:
            who = f" by {result.claimed_by}" if result.claimed_by else ""
            self._detach(f"{call.name}({call.id}) is already {result.status}{who}")
            return False
        self._running.add(call.id)
        return True

    def _detach(self, why: str) -> None:
        if self.detached is not None:
            return
        self.detached = why
        with self._lock:
            self._pending = [x for x in self._pending if x[0] is _Attachment._decided]
        warnings.warn(
            f"nbagent store: chat {self.chat_id} is being driven by another process "
            f"({why}). This copy stops here (its steps return 'busy'); load it again with "
            f"Chat.load({self.chat_id!r}, store=...) to continue.",
            StoreConflictWarning,
            stacklevel=3,
        )

    # -- the step hook ---------------------------------------------------------
    def on_step(self, chat: Chat) -> str | None:
        """Before each step: settle calls left running elsewhere, apply decisions made elsewhere.

        Both can only concern the open round (a call is running or awaiting
        approval only until its round closes), so a step with no open round
        costs nothing, and the store is read only when a call waits for a decision.
        """
        if self.detached is not None:
            return "busy"
        opened = chat._open
        if opened is None:
            return None
        running = self._running
        if any(c.status == "running" and c.id not in running for c in opened.tool_calls):
            settle_orphans(chat, self, live_check=True)
            if self.detached is not None:
                return "busy"
        apply_decisions(chat, self.store)
        return "busy" if self.detached is not None else None


_Builder = Callable[[_Attachment, Any, Any], Entry]
# Started events held for their finishing event (same key), and those finishing events.
_STARTS: dict[type[Event], Callable[[Any], tuple[str, Any]]] = {
    ModelRequestStarted: lambda e: ("model", e.step),
    ToolCallStarted: lambda e: ("tool", e.call.id),
}
_FINISHES: dict[type[Event], Callable[[Any], tuple[str, Any]]] = {
    ModelRequestFinished: lambda e: ("model", e.step),
    ModelRequestFailed: lambda e: ("model", e.step),
    ToolCallFinished: lambda e: ("tool", e.call.id),
}
_BUILDERS: tuple[tuple[type[Event], _Builder], ...] = (
    (MessageAdded, _Attachment._message_added),
    (ToolCallRequested, _Attachment._call_requested),
    (ApprovalDecided, _Attachment._decided),
    (ToolCallFinished, _Attachment._call_finished),
    (CallInDoubt, _Attachment._in_doubt),
    (StepFinished, _Attachment._step_finished),
)
_PLANS: dict[type[Event], tuple[_Builder | None, bool]] = {}


def _plan(cls: type[Event]) -> tuple[_Builder | None, bool]:
    """How events of ``cls`` are written: its builder (``None``: not stored) and
    whether it is written at once. Worked out once per class."""
    build: _Builder | None = _Attachment._plain
    if issubclass(cls, (TextDelta, ToolCallDelta)):  # streaming fragments
        build = None
    else:
        build = next((b for base, b in _BUILDERS if issubclass(cls, base)), build)
    plan = _PLANS[cls] = (build, issubclass(cls, _FLUSH_NOW))
    return plan


def chat_state(chat: Chat) -> dict[str, Any]:
    """The loop state a loaded chat needs besides messages, calls and events.

    Usage, the step counter and the last step's kind are in the events
    (``ModelRequestFinished``, ``StepFinished``); the store derives them on load,
    so this changes rarely and the chat's row is rarely rewritten.
    """
    o = chat._options
    return {
        "turn": chat._turn,
        "forced_spent": chat._forced_spent,
        "options": {f.name: getattr(o, f.name) for f in fields(o)},
        "max_steps": chat.max_steps,
        "on_tool_error": chat.on_tool_error,
        "stream": chat.stream,
    }


# ------------------------------------------------------------ attaching
def attach_store(chat: Chat, store: Any) -> Store:
    """Persist a new chat in ``store`` (a path or a store object) as it runs.

    Raises:
        StoreError: The store cannot be opened, or already has a chat with this id
            (use ``Chat.load`` to continue it).
    """
    st, owned = _open(store)
    now = utcnow()
    info = ChatInfo(chat.id, now, now, chat.provider.name, chat.model)
    state = chat_state(chat)
    try:
        st.create_chat(info, chat.system, state)
    except BaseException:
        if owned:
            st.close()
        raise
    att = _Attachment(chat, st, owned)
    att._state = state
    att.install(chat)
    return st


def load_chat(
    cls: type[ChatT],
    chat_id: str,
    *,
    store: Any,
    tools: Sequence[Any] = (),
    provider: Any = None,
    model: str | None = None,
    **chat_kwargs: Any,
) -> ChatT:
    """Rebuild a stored chat (see ``Chat.load``)."""
    st, owned = _open(store)
    try:
        record = st.load(chat_id)
        chat = _build(cls, record, tools, provider, model, chat_kwargs)
    except BaseException:
        if owned:
            st.close()
        raise
    _feed_log(chat, st)
    att = _Attachment(chat, st, owned)
    att._state = chat_state(chat) if record.state.get("options") else None
    att.install(chat)
    settle_orphans(chat, att, live_check=False, record=record)
    apply_decisions(chat, st)
    return chat


def _build(
    cls: type[ChatT],
    record: ChatRecord,
    tools: Sequence[Any],
    provider: Any,
    model: str | None,
    chat_kwargs: dict[str, Any],
) -> ChatT:
    state = record.state
    kwargs: dict[str, Any] = {"system": record.system}
    for key in ("max_steps", "on_tool_error", "stream"):
        if state.get(key) is not None:
            kwargs[key] = state[key]
    kwargs.update(chat_kwargs)
    if "store" in kwargs or "id" in kwargs:
        raise TypeError("Chat.load takes the store and chat id as its own arguments")
    if provider is None:
        provider = record.info.provider
        if model is None:
            model = record.info.model
    elif model is None and isinstance(provider, str):
        model = record.info.model
    chat = cls(model, provider=provider, id=record.info.id, **kwargs)
    if tools:
        chat.with_tools(*tools)

    calls: dict[str, ToolCall] = {}
    call_turn: dict[str, int] = {}
    call_step: dict[str, int] = {}
    for sc in record.calls:
        c = sc.to_tool_call()
        if sc.id in record.unapplied:
            # decided through the store, not applied yet: apply_decisions() does it
            c.status, c.decision, c.result = "awaiting_approval", None, None
        calls[sc.id] = c
        call_turn[sc.id] = sc.turn
        call_step[sc.id] = sc.step
    messages: list[Message] = [serde.message_in(m, calls) for m in record.messages]
    options = state.get("options")
    chat._restore(
        messages=messages,
        calls=list(calls.values()),
        call_turn=call_turn,
        call_step=call_step,
        turn=max([int(state.get("turn", 0)), *(getattr(m, "turn", 0) for m in messages)]),
        step=int(state.get("step", 0)),
        forced_spent=bool(state.get("forced_spent", False)),
        usage=serde.usage_in(state.get("usage") or {}),
        options=options if isinstance(options, dict) else None,
        last_step=state.get("last_step"),
        next_seq=record.next_seq,
    )
    return chat


def _feed_log(chat: Chat, store: Store) -> None:
    """Replay the stored events into the chat's log, so ``chat.log`` shows the history."""
    feed = getattr(getattr(chat, "_log", None), "feed", None)
    if callable(feed):
        feed(store.iter_events(chat.id, calls=dict(chat._calls)))


# --------------------------------------------------- orphans and decisions
def settle_orphans(
    chat: Chat, att: _Attachment, *, live_check: bool, record: ChatRecord | None = None
) -> None:
    """Calls left ``running`` by a process that is gone become in doubt (or runnable again).

    A call running in a live process makes this copy of the chat stale (it
    cannot continue the round): it detaches, and its steps return ``busy``.
    """
    with chat._lock:
        foreign = [
            c for c in chat._calls.values() if c.status == "running" and c.id not in att._running
        ]
    if not foreign:
        return
    if record is not None:
        stored = {sc.id: sc for sc in record.calls}
    else:
        stored = {}
        for c in foreign:
            try:
                stored[c.id] = att.store.call(c.id, chat_id=chat.id)
            except DecisionError:
                continue
    events: list[Event] = []
    busy: list[str] = []
    for c in foreign:
        sc = stored.get(c.id)
        if sc is None:
            continue
        if sc.status != "running":
            busy.append(f"{c.name}({c.id}) is {sc.status} in the store")
            continue
        if not _abandoned(sc, att.store.claim_timeout):
            busy.append(f"{c.name}({c.id}) is running in {sc.claimed_by}")
            continue
        tool = chat._tools.get(c.name)
        rerun = bool(tool is not None and getattr(tool, "idempotent", False))
        with chat._lock:
            if c.status != "running":
                continue
            turn = chat._call_turn.get(c.id, chat._turn)
            step = chat._call_step.get(c.id, chat._step)
            if rerun:
                gated = c.approval is not None and c.approval.required
                c.status = "approved" if gated else "requested"
                c.started_at = None
            att._orphans[c.id] = sc.claimed_by
            events.append(
                CallInDoubt(
                    chat_id=chat.id,
                    call=c,
                    step=step,
                    turn=turn,
                    claimed_by=sc.claimed_by,
                    claimed_at=sc.claimed_at,
                    rerun=rerun,
                )
            )
            if not rerun:
                result = ToolResultMessage(
                    c.id, in_doubt_content(c, sc), True, "in_doubt", c.name, turn=turn
                )
                c.status, c.result, c.finished_at = "in_doubt", result, utcnow()
                events.append(
                    ToolCallFinished(
                        chat_id=chat.id,
                        call=c,
                        step=step,
                        turn=turn,
                        status="in_doubt",
                        result=result,
                        error="outcome unknown: the process running it stopped",
                        duration_ms=None,
                        started_at=c.started_at,
                        mode=None,
                    )
                )
    if busy:
        att._detach("; ".join(busy))
        return
    chat._emit_all(events)


def in_doubt_content(call: ToolCall, stored: StoredCall) -> str:
    """What the model is told about a call whose outcome is unknown."""
    when = f" at {stored.claimed_at.isoformat()}" if stored.claimed_at else ""
    return serde.dumps(
        {
            "status": "in_doubt",
            "tool": call.name,
            "message": (
                f"The outcome of {call.name} is unknown: it was started{when}, but the process "
                "running it stopped before recording a result. It may or may not have taken effect."
            ),
            "instruction": "Do not assume it succeeded or failed; check its effect before calling "
            "it again, or ask the user.",
        }
    )


def apply_decisions(chat: Chat, store: Store) -> list[ToolCall]:
    """Apply decisions recorded in the store to this chat's pending calls.

    Each goes through ``chat.approve``/``chat.deny`` (same events as a click).
    Returns the calls decided.
    """
    pending = chat.pending_approvals
    if not pending:
        return []
    found = store.decisions(chat.id, [c.id for c in pending])
    decided: list[ToolCall] = []
    for c in pending:
        d = found.get(c.id)
        if d is None:
            continue
        try:
            if d.verdict == "approved":
                chat.approve(c, d.arguments, reason=d.reason, by=d.by)
            else:
                chat.deny(c, d.reason, by=d.by)
        except DecisionError as exc:
            if c.name not in chat._tools:  # another process with the tool can apply it
                warnings.warn(
                    f"nbagent store: {c.name}({c.id}) was approved elsewhere with edited "
                    f"arguments, but this chat has no {c.name!r} tool to check them; it stays "
                    "pending here.",
                    StoreConflictWarning,
                    stacklevel=2,
                )
                continue
            store.reject_decision(chat.id, c.id, str(exc))
            warnings.warn(
                f"nbagent store: the decision on {c.name}({c.id}) made elsewhere cannot be "
                f"applied ({exc}); the call is awaiting approval again.",
                StoreConflictWarning,
                stacklevel=2,
            )
            continue
        with chat._lock:
            c.decision = d  # keep when and by whom it was decided, as stored
        decided.append(c)
    return decided


def refresh_chat(chat: Chat, store: Store | None = None) -> list[ToolCall]:
    """Apply decisions made elsewhere to ``chat`` (see ``Chat.refresh``)."""
    att = chat._store
    if store is None:
        if not isinstance(att, _Attachment):
            return []
        store = att.store
    if isinstance(att, _Attachment):
        att.flush()
        if att.detached is not None:
            return []
    return apply_decisions(chat, store)


__all__ = [
    "ChatInfo",
    "ChatRecord",
    "ClaimResult",
    "Entry",
    "Store",
    "StoreConflictWarning",
    "StoredCall",
    "attach_store",
    "load_chat",
    "open_store",
]
