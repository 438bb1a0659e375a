"""The store seam: what the chat side needs from a database, and the values that cross it.

:class:`Store` is the protocol; :class:`~nbagent.store.SQLiteStore` is the
embedded default, and :class:`~nbagent.store.PostgresStore` implements the same methods
(``SELECT ... FOR UPDATE`` / ``UPDATE ... WHERE status IN (...)`` for the
claim, ``INSERT ... ON CONFLICT DO NOTHING`` for first-writer-wins). Reads
return :class:`ChatInfo`, :class:`StoredCall` and :class:`ChatRecord`; writes
take :class:`Entry` values (an event and the row change it implies), built by
the codec (:mod:`nbagent.store._codec`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .._events import Event
from .._recording import Recording
from .._secrets import redact_keys, redacted
from .._types import Approval, Decision, PendingInput, ToolCall, ToolResultMessage, short_id
from ._watch import DecisionWatch


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
        parent_id: The chat it was forked from (``chat.fork``), else ``None``.
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
    parent_id: str | None = None


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
        server / hosted: As on :class:`~nbagent.ToolCall` (a hosted call is
            decided here like any other, and never claimed or run).
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
    server: str | None = None
    hosted: bool = False

    def to_tool_call(self, *, undecided: bool = False) -> ToolCall:
        """A new :class:`~nbagent.ToolCall` with this identity and lifecycle.

        ``undecided``: as it was before a decision recorded in the store but not
        yet applied by a chat (awaiting approval, no decision, no result).
        """
        if undecided:
            status, decision, result = "awaiting_approval", None, None
        else:
            status, decision, result = self.status, self.decision, self.result
        return ToolCall(
            self.id,
            self.name,
            dict(self.arguments),
            self.raw_arguments,
            self.parse_error,
            status=status,  # type: ignore[arg-type]
            approval=self.approval,
            decision=decision,
            result=result,
            started_at=self.started_at,
            finished_at=self.finished_at,
            server=self.server,
            hosted=self.hosted,
        )

    def __repr__(self) -> str:
        # a key, URL credentials or a password in the arguments shows as ***, hidden before
        # the cut, as ToolCall's repr, the cards and the log show it
        arguments = json.dumps(
            redacted(self.arguments), ensure_ascii=False, separators=(",", ":"), default=str
        )
        where = f", server={self.server!r}" if self.server is not None else ""
        where += ", hosted=True" if self.hosted else ""
        return (
            f"StoredCall(chat_id={short_id(self.chat_id)!r}, id={self.id!r}, name={self.name!r}, "
            f"arguments={arguments[:80]}, status={self.status!r}{where})"
        )


@dataclass(frozen=True)
class StoredInput:
    """A pending input as the store has it (``store.pending_inputs()``, ``store.answer``).

    Attributes:
        chat_id: The chat that asked.
        id / kind / call_id / tool / message / content / schema / server /
            requested_at: As on :class:`~nbagent.PendingInput`.
        status: ``pending`` until answered, then the answer's action
            (``accept``, ``decline`` or ``cancel``). An input whose call ended before
            any answer (in doubt, denied, cancelled) is ``cancel``, ``reason`` "the call
            ended", as the chat's record has it (``pending_inputs()`` leaves it out).
        data / answered_by / answered_at / reason: The answer, once given. An answer
            given through the store is kept with every key-like token in it (``sk-...``,
            a ``Bearer`` token, URL credentials) as ``***``.
        applied: Whether the chat has recorded the answer (one given in the store
            waits until the chat next looks: a step, ``refresh()``, ``Chat.load``).
        closed: Why the input waits for nothing though its chat never recorded the
            answer it has: ``"not applied: the call ended first"`` (an answer given in
            the store, say after the process running the call died, that no chat applied
            before the call ended: its record has the input cancelled); ``"the call
            ended"`` for an input that had no answer; else ``None``.
    """

    chat_id: str
    id: str
    kind: str
    call_id: str | None
    tool: str | None
    message: str
    content: dict[str, Any] = field(default_factory=dict)
    schema: dict[str, Any] | None = None
    server: str | None = None
    requested_at: datetime | None = None
    status: str = "pending"
    data: Any = None
    answered_by: str | None = None
    answered_at: datetime | None = None
    reason: str | None = None
    applied: bool = False
    resume: dict[str, Any] | None = field(default=None, repr=False)
    closed: str | None = None

    @property
    def request(self) -> PendingInput:
        """The :class:`~nbagent.PendingInput` it is (what ``chat.pending_inputs`` holds)."""
        return PendingInput(
            self.id,
            self.kind,  # type: ignore[arg-type]
            self.call_id,
            self.tool,
            self.message,
            dict(self.content),
            self.schema,
            self.server,
            self.requested_at,
        )

    @property
    def choices(self) -> tuple[Any, ...]:
        """The allowed answers when the answer is one of a list (see ``PendingInput``)."""
        return self.request.choices

    def __repr__(self) -> str:
        message = redact_keys(self.message)  # a key in the question never reaches the screen
        text = message if len(message) <= 60 else message[:57] + "..."
        closed = f" ({self.closed})" if self.closed and self.status != "cancel" else ""
        return (
            f"StoredInput(chat_id={short_id(self.chat_id)!r}, id={self.id!r}, kind={self.kind!r}, "
            f"status={self.status!r}{closed}: {text!r})"
        )


@dataclass(frozen=True)
class ChatRecord:
    """Everything ``Chat.load`` needs, as the store returns it.

    Attributes:
        info: The chat's summary.
        system: System instructions.
        state: Loop state (turn, step, usage, options...), as written by the chat.
        messages: The transcript, as JSON objects (see :mod:`nbagent.store._codec`).
        calls: Every call, in request order.
        unapplied: Ids of calls with a decision made through the store that no
            chat has applied yet.
        next_seq: The next event sequence number.
        parent: A fork's parent link (:meth:`~nbagent.ForkParent.as_dict`), else ``None``.
    """

    info: ChatInfo
    system: str | None
    state: dict[str, Any]
    messages: list[dict[str, Any]]
    calls: list[StoredCall]
    unapplied: frozenset[str] = frozenset()
    next_seq: int = 0
    parent: dict[str, Any] | None = None


# ----------------------------------------------------------- write records
@dataclass(frozen=True, slots=True)
class Blob:
    """An image's or a file's bytes, keyed by their SHA-256 (hex): stored once per hash."""

    sha256: str
    media_type: str
    data: bytes = field(repr=False)


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
    blobs: tuple[Blob, ...] = ()
    """The bytes of the message's images and files, stored once per hash."""


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
    server: str | None = None
    hosted: bool = False


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
    blobs: tuple[Blob, ...] = ()
    """The bytes of the result's images, stored once per hash."""


@dataclass(frozen=True, slots=True)
class CallReset:
    """An in-doubt call of an idempotent tool becomes runnable again (``status``)."""

    call_id: str
    status: str
    owner: str | None


@dataclass(frozen=True, slots=True)
class NewInput:
    """Record an input the chat asked for (its ``inputs`` row); a second write is a no-op."""

    input_id: str
    call_id: str | None
    kind: str
    tool: str | None
    server: str | None
    prompt: str
    content: str
    schema: str | None
    requested_at: str
    resume: str | None = None
    release: str | None = None
    """A run that ended parked on this input (``resume``): the claim of ``release`` (this
    process) on its call is let go, the call runnable again once answered (then claimed
    again before its retry: at most once, as any run)."""


@dataclass(frozen=True, slots=True)
class InputAnswer:
    """Record the chat's answer to an input. The first answer wins: repeating one given in
    the store marks it applied; another answer already there makes this a no-op (its
    event is dropped: the store's answer stands, and the chat applies it)."""

    input_id: str
    action: str
    data: str | None
    by: str
    at: str
    reason: str | None


Change = NewMessage | NewCall | DecisionChange | CallFinal | CallReset | NewInput | InputAnswer


@dataclass(frozen=True, slots=True)
class Entry:
    """One event to persist and the row change it implies, written together.

    A store applies ``change`` first: if it was already applied (a duplicate
    from a racing process) the event is not written; if it contradicts the
    store (another process drove the chat), the store stops the batch there
    and reports the conflict.

    ``data`` is the event's fields as JSON, or ``None`` when the row written by
    ``change`` already says everything the event does (a ``MessageAdded`` is
    its :class:`NewMessage` row, a ``ToolCallRequested`` its :class:`NewCall`
    row): no event row is stored then, and ``iter_events`` rebuilds the event
    from that row. What ``data`` holds, including a started event folded into
    its finishing one, is the codec's business (:mod:`nbagent.store._codec`,
    which builds entries and reads them back); a store just stores it.
    """

    seq: int
    type: str
    ts: str
    data: str | None
    change: Change | None = None


@dataclass(frozen=True)
class ClaimResult:
    """What a claim found: ``claimed`` or why not.

    ``decision``: refused because the call's stored decision is not the one the claimant
    holds (``Store.claim``'s ``decision``: a person overruled the chat's automatic decision
    in another process since the claimant read it), the stored one; ``None`` otherwise.
    """

    claimed: bool
    status: str | None = None
    claimed_by: str | None = None
    conflict: str | None = None
    decision: Decision | None = None


# ------------------------------------------------------------------- seam
@runtime_checkable
class Store(Protocol):
    """What a chat needs from a database: the seam a PostgreSQL store implements.

    Every method is one transaction. The write methods follow the rules of
    :class:`Entry` (first writer wins, duplicates are dropped, a contradiction
    is reported, never raised). ``claim`` is the at-most-once primitive: a
    conditional update of one call row from ``requested``/``approved`` to
    ``running``, and of an approved one only while its decision is the one the
    claimant holds; it returns ``claimed=True`` only to the one caller that changed it.
    """

    location: str
    """Where the data lives (a path, or a DSN without its password)."""

    claim_timeout: float | None
    """Seconds after which a claim whose owner cannot be checked (another host)
    is considered abandoned; ``None``: never."""

    # the chat side
    def create_chat(
        self,
        info: ChatInfo,
        system: str | None,
        state: Mapping[str, Any],
        parent: Mapping[str, Any] | None = None,
    ) -> None:
        """Record a new chat; :class:`~nbagent.StoreError` if the id exists.

        ``parent``: a fork's parent link (``ForkParent.as_dict()``: ``chat_id``,
        ``step``, ``call_id``, ``change``, ``value``), returned by :meth:`load` as
        ``ChatRecord.parent``; ``ChatInfo.parent_id`` is its ``chat_id``.
        """
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
            ``None``, or a description of the conflict that stopped the batch: then
            nothing of the batch is written (a stale copy of the chat must leave no rows).
        """
        ...

    def claim(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Entry] = (),
        state: Mapping[str, Any] | None = None,
        decision: Decision | None = None,
    ) -> ClaimResult:
        """Write ``entries``, then claim the call for ``owner``, in one transaction (none of
        it if the entries conflict: ``ClaimResult.conflict``).

        ``decision``: the call's decision as the claimant holds it (an approved call's). The
        claim is granted only while the call's stored decision is that one (the same decider
        and time): one recorded since (a person overruling the chat's automatic approval
        from another process, with edited arguments or not) refuses it, the stored decision
        in ``ClaimResult.decision``, so that an approved call runs as approved, never with
        the arguments of a decision that no longer stands. ``None``: not checked (an
        ungated call has no decision)."""
        ...

    def decisions(self, chat_id: str, call_ids: Iterable[str]) -> dict[str, Decision]:
        """The recorded decisions of these calls (those that have one)."""
        ...

    def reject_decision(self, chat_id: str, call_id: str, error: str) -> None:
        """A chat could not apply a stored decision: put the call back to awaiting approval."""
        ...

    def rule_changes(self, chat_id: str) -> list[tuple[str, str, str]]:
        """The chat's rule changes in order, from any process: each ``rule_changed`` and
        ``always_allow_changed`` event's time (ISO 8601), type and JSON, as stored."""
        ...

    # inputs (MCP elicitation and sampling, external tools, ask_user)
    def record_answer(
        self,
        chat_id: str,
        request: PendingInput,
        action: str,
        data: Any,
        by: str,
        at: str,
        reason: str | None,
    ) -> StoredInput | None:
        """Write a chat's answer before the chat records it: the first answer wins.
        ``None``: written; else the answer the store already has."""
        ...

    def input_answers(self, chat_id: str, input_ids: Iterable[str]) -> dict[str, StoredInput]:
        """The answers given to these inputs of a chat (the answered ones only), by id."""
        ...

    def reject_answer(self, chat_id: str, input_id: str, error: str) -> None:
        """An answer given in the store that its chat cannot apply: removed (it waits again)."""
        ...

    def pending_inputs(self, chat_id: str | None = None) -> list[StoredInput]:
        """Every input waiting for an answer (in one chat, or all), oldest first."""
        ...

    def inputs(self, chat_id: str | None = None) -> list[StoredInput]:
        """Every input asked for (answered or not; in one chat, or all), oldest first."""
        ...

    def answer(
        self,
        input_id: str | StoredInput | PendingInput | ToolCall,
        data: Any = None,
        *,
        by: str = "store",
        chat_id: str | None = None,
    ) -> StoredInput:
        """Answer a pending input, from any process (checked as ``chat.answer`` checks it)."""
        ...

    def decline(
        self,
        input_id: str | StoredInput | PendingInput | ToolCall,
        reason: str | None = None,
        *,
        by: str = "store",
        chat_id: str | None = None,
        cancel: bool = False,
    ) -> StoredInput:
        """Refuse (``cancel=True``: dismiss) a pending input, from any process."""
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
        exclusive: bool = False,
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
        exclusive: bool = False,
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
        self,
        chat_id: str | None = None,
        *,
        calls: dict[str, ToolCall] | None = None,
        untaken: bool = False,
    ) -> Iterator[Event]:
        """Stored events, rebuilt, per chat in ``seq`` order (what ``nbagent.read_log`` reads).

        ``call`` fields are rebuilt once per call and shared by the events of a
        chat; pass ``calls`` (with ``chat_id``) to reuse existing objects.
        ``untaken``: also the decisions made through the store that no chat has taken
        yet, each as the ``ApprovalDecided`` its chat will emit, after the chat's events.
        """
        ...

    # record and replay (schema version 9; a store without them keeps no recordings)
    def record_response(
        self, recording: Recording, chat_id: str, step: int, replayed: bool
    ) -> None:
        """Keep ``recording`` by its key (a live one replaces, a replayed one only fills a gap)
        and note that ``chat_id``'s ``step`` had that key (``model_requests``)."""
        ...

    def recording(self, key: str) -> Recording | None:
        """The recording of the request with this key, if any (any chat's)."""
        ...

    def recordings(self, *, model: str | None = None, limit: int = 500) -> list[Recording]:
        """The most recent recordings (of one ``provider/model``), newest first."""
        ...

    def recorded_result(self, key: str, call_id: str) -> StoredCall | None:
        """The latest call ``call_id`` that ran (ok, error, timed_out) in a chat whose step
        had request ``key`` (read from the call records)."""
        ...

    def watch(self, chat_ids: Iterable[str] | None = None) -> DecisionWatch:
        """Follow decisions recorded from now on in these chats (``None``: all); see
        :class:`~nbagent.store.DecisionWatch`."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class BatchStore(Protocol):
    """A store that also records batches (``nbagent.batch(store=...)``): which chat runs
    which input. Kept apart from :class:`Store` so a store without it still stores
    chats; a batch with such a store cannot be resumed and says so.

    The record is one row per input: ``(batch_id, key) -> chat_id``, written right
    after the chat is created and before it runs, first writer wins.
    """

    def add_batch_chat(self, batch_id: str, key: str, chat_id: str) -> str:
        """Record that input ``key`` of batch ``batch_id`` is chat ``chat_id``.

        Returns:
            The chat id recorded for the key: ``chat_id``, or the one another
            process recorded first.
        """
        ...

    def batch_chats(self, batch_id: str) -> dict[str, str]:
        """Every input of batch ``batch_id`` recorded so far: key -> chat id."""
        ...
