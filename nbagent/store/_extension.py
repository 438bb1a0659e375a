"""The store as an extension of a chat: the event writer, the claim, the step hook, refresh.

Persistence is one more subscriber of the chat's event stream
(:class:`StoreExtension`). Every event except the streaming fragments is
queued as it comes, with the few live values its row will need noted, and the
queue is encoded (by :func:`nbagent.store._codec.encode_batch`) and written in
batches, each batch one transaction, at these boundaries:

- every claim: the claim's transaction first writes what is pending (the model
  response that asked for the call), so a call's row exists before it is claimed;
- the end of a tool round (its results are on disk before the next model
  request), of a step that parks the chat on an approval, and of ``complete``;
- a model request that asks a question (a user message is queued): the question
  first, by the step hook (:meth:`StoreExtension._write_ahead`), so a crash while the
  model thinks loses nothing (a batch's chat excepted: its batch keeps the prompt, and
  asks a chat it finds empty again); a question that cannot be written stops the step
  (``StoreError``) before the model is asked;
- a step that completes the chat: its answer, by the step hook, before the step says
  so (a stale copy stops there: see *Two drivers*), then the step itself;
- at once: a decision, an options change, an always-allow rule added or revoked
  (the chat's state holds the rules), a failed request, an in-doubt call, a
  denial, and a result that arrives while other calls of its round still run;
- an answer to a parked call (an external tool's, ``ask_user``'s) with that
  call's result, never alone: an answer marked applied with no result made a
  reloaded chat run the call as if nobody had answered.

A model response whose calls run right away is written with their claim; a
hard crash before that loses only that response (the next load asks the model
again), never a tool's outcome. What is pending is also written when the chat
object is garbage-collected or the interpreter exits.

**A write that fails** (the file locked past the busy timeout by another
connection holding a write transaction, a disk error) drops nothing: entries
leave the queue only when a commit succeeds. What happens then depends on the
boundary:

- a claim raises :class:`~nbagent.StoreError`: its tool does not run (it
  stays runnable, and runs at the next step that can claim it);
- a question (written before the model is asked it) raises ``StoreError``: the
  model is not asked, the question stays queued and in the chat;
- a rule change made here (``add_rule``, ``remove_rule``, ``always_allow``,
  ``revoke``) raises ``StoreError`` and is not made: the chat takes it back and it
  leaves the queue (:meth:`StoreExtension._write_rule_change`);
- a step end, a result, an options change: a ``RuntimeWarning`` (once), and
  the write is retried in the background until it works (a chat parked on an
  approval reaches the store, for a panel elsewhere to see, as soon as the
  file can be written) and again before the next step, which raises
  ``StoreError`` if it still fails and the step would run a tool or ask the
  model (a chat parked or complete goes on: it needs nothing on disk);
- ``chat.refresh()`` and ``chat.close()`` raise ``StoreError`` (closing again
  later loses nothing; a chat garbage-collected or closed at exit can only warn).

Whatever fails, and in whatever order (a write, or a read the step needed while
events wait for a later boundary: the decisions of a pending call, read before
the response that asked for it is written with its calls' claim), events still
queued are retried in the background until written, so a call this chat holds
as awaiting approval reaches the store without another step. The retry runs
while a failure is marked or anything is queued.

A lock is never taken for another process driving the chat: that is only
reported when the store's rows say so. Text SQLite cannot encode (a lone
surrogate) is stored with the surrogate replaced (``SQLiteStore``).

**The claim** (``Extension.claim``): right before a call runs, the store moves
its row from ``requested``/``approved`` to ``running`` in one transaction and
says whether this process got it. A call is therefore run by at most one
process, and a crash cannot make it run again silently: on load, a call left
``running`` by a process that is gone is *in doubt* (a ``CallInDoubt`` event,
then a ``ToolCallFinished`` with status ``in_doubt`` whose result tells the
model the outcome is unknown), unless its tool is declared ``idempotent``, in
which case it is made runnable again. Only calls that start are claimed: the async
driver claims together the calls its round starts at once (:meth:`StoreExtension._starting`),
each later one right before it starts (off the loop: :meth:`StoreExtension.catch_up` with
``starting``); claimed ahead, a call queued behind a running one was in doubt after a
crash, though it never started. An approved call is claimed for the decision the chat holds
(``Store.claim``'s ``decision``: the store grants it only while that decision stands). A
claim refused with no claimant because the call was decided anew in the store (a person
overruling the chat's automatic decision from another process, while its round ran) is not
another driver: the new decision is applied as one made elsewhere
(:meth:`StoreExtension._decided_elsewhere`) and the round goes on: a denial answers the call,
an approval (edited arguments and all) is claimed again, for it, and the call runs as the
person approved it (the loop validates its arguments again: ``_RoundHooks._rearmed``).

**Two drivers.** A chat is driven by one process at a time. If two processes
drive the same chat at once, the first to claim a call runs it; the other one
stops: its step hook ends the loop with ``StepResult("busy")`` and warns
(:class:`StoreConflictWarning`). The same happens when a process finds the
transcript moved on under it (it tried to write a message index another
process already wrote): nothing of that write is stored (the store rolls the
batch back whole), and since a question and a completing answer are written by
the step hook, such a copy stops before asking the model a question the store
never got, or before reporting an answer it does not hold. That copy of the
chat is stale: ``Chat.load`` it again to continue. Decisions are not driving:
anyone may decide a pending call at any time, and the first decision recorded
in the store wins.

**Decisions made elsewhere** (``store.approve(call_id)`` from a script, another
notebook, a web form) are written to the call's row and to the ``decisions``
table. A chat applies them with its own decision rules
(``ChatHost.apply_decision``, so they emit the same events as a click) at the
start of every step, on ``Chat.load``, and on ``chat.refresh()``; a waiting
chat learns of them through :meth:`StoreExtension.follow_decisions` (the
store's follower: ``LISTEN``/``NOTIFY`` on PostgreSQL), which a pending card
and a parked batch row subscribe to instead of refreshing on a timer.

Everything here goes through the :class:`~nbagent.store.Store` protocol, so it
works unchanged with any store that implements it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import inspect
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, cast

from .._aio import exiting_here, in_worker, spawn
from .._chat_state import EditUnchecked, RuleRefused
from .._decisions import rule_change_undone, rule_change_unwritten
from .._errors import DecisionError, InputError, StoreError
from .._events import (
    AlwaysAllowChanged,
    ApprovalDecided,
    CallInDoubt,
    Event,
    InputAnswered,
    InputRequested,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestStarted,
    OptionsChanged,
    ReasoningDelta,
    RuleChanged,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    utcnow,
)
from .._extension import ChatHost, Extension, Snapshot, writes_deferred
from .._leases import Release
from .._notice import user_stacklevel
from .._replay import Recordings
from .._rules import Rule
from .._types import FINAL_STATUSES, RUNNABLE_STATUSES, Decision, ForkParent, PendingInput, ToolCall
from . import _codec as codec
from ._follow import follow
from ._process import LIVE_TOKENS, abandoned, new_owner, other_host, this_host
from ._protocol import (
    CallReset,
    ChatInfo,
    ChatRecord,
    ClaimResult,
    Entry,
    Store,
    StoreConflictWarning,
    StoredCall,
    StoredInput,
)
from ._recordings import StoreRecordings, store_recordings
from ._sql import SQLStore, in_doubt_content, same_decider
from ._waiting import LATER, WouldWait, held, here_or_later, may_wait, may_wait_here

_CLAIMS = 3
"""Claims of one call at most, each refused by a decision made anew elsewhere and applied
(a person's overrules the chat's automatic one once: two are the most that can be needed)."""
_FORK_DEPTH = 32  # forks of forks followed for a loaded fork's shared steps


def request_keys(store: Any, chat_id: str) -> dict[int, str]:
    """The key each step of ``chat_id``'s model requests had (its ``model_requests`` rows;
    a fork's shared steps: its parents', up to its fork point), what a loaded chat's
    ``replay_tools`` finds a replayed step's recorded call results by. Empty for a store
    that keeps no such rows."""
    read = getattr(store, "request_keys", None)
    if callable(read):  # a store that names them itself
        return {int(s): str(k) for s, k in dict(read(chat_id)).items()}
    if not isinstance(store, SQLStore):
        return {}
    keys: dict[int, str] = {}
    upto: int | None = None  # the steps a parent shares with the chat
    with store._read() as conn:
        for _ in range(_FORK_DEPTH):
            for step, key in conn.execute(
                "SELECT step, key FROM model_requests WHERE chat_id = ?", (chat_id,)
            ).fetchall():
                if upto is None or int(step) <= upto:
                    keys.setdefault(int(step), str(key))
            row = conn.execute(
                "SELECT parent_id, fork FROM chats WHERE id = ?", (chat_id,)
            ).fetchone()
            if row is None or row[0] is None or not row[1]:
                break
            point = (codec.loads(row[1]) or {}).get("step")
            if not isinstance(point, int):
                break
            upto = point if upto is None else min(upto, point)
            chat_id = row[0]
    return keys


class _ChatRecordings(StoreRecordings):
    """The store's recordings as a chat's extension offers them: and the keys its steps'
    requests had (:func:`request_keys`), read back when the chat is loaded."""

    def step_keys(self, chat_id: str) -> dict[int, str]:
        return request_keys(self.store, chat_id)


class StoreExtension(Extension):
    """Connects one chat object to a store: event writer, claim, step hook, refresh."""

    fragments = False  # stream fragments are not stored (nor needed here)
    commits_claim = True  # its claim records the call running: asked after any veto

    def __init__(self, chat_id: str, store: Store, release: Release | None):
        self.store = store
        self._let_go = release  # the lease on a store shared by path (None: the user's object)
        self.chat_id = chat_id
        self.owner = new_owner()
        self._token = self.owner.rsplit(":", 1)[1]
        LIVE_TOKENS.add(self._token)
        self._host: ChatHost | None = None
        self._lock = threading.RLock()  # the queue (held briefly: events keep coming)
        self._write_lock = threading.RLock()  # one write at a time (held while it waits)
        self._pending: list[tuple[Event, Any]] = []  # (event, what was noted when it came)
        self._unwritten: list[Entry] = []  # encoded, not committed yet (a write failed)
        self._failure: Exception | None = None  # why the last write failed; None: it worked
        self._warned = False  # the user was told the store cannot be written
        self._retry: concurrent.futures.Future[None] | None = None  # the background retry
        self._decided: dict[str, Decision] = {}  # written by decide(), their events to come
        self._answered: set[str] = set()  # inputs answered by answer_input(), events to come
        self._results_due: set[str] = set()  # answered calls whose ToolCallFinished comes next
        self._asked = False  # a user message is queued: written before the next request
        self._wrote_ahead = False  # a step's write failed in before_step: not again at its end
        # whether a question is written before the model is asked it; a batch's chat is
        # not: its batch keeps the prompt and asks a chat stored empty again (attach_batch_chat)
        self.keeps_questions = True
        self._running: set[str] = set()
        self._claimed: set[str] = set()  # claimed by catch_up, not started yet
        # claims whose commit may have gone through though it failed (its answer was lost,
        # its task cancelled): their tools have not started; reset if left unstarted
        self._maybe_claimed: set[str] = set()
        self._owed = False  # a boundary was left to catch_up (the async driver's)
        self._orphans: dict[str, str | None] = {}  # in-doubt call id -> its dead owner
        self._rules_seen: set[tuple[str, str, str]] = set()  # stored rule changes applied
        # the async driver writes on its own thread (catch_up): the store never waits there
        self._inline = bool(getattr(store, "writes_inline", False))
        self._rules_looked: tuple[Any, int] | None = None  # when apply_rules last read them
        self._refresh_failures = _Count()  # refresh() calls that raised (follow_decisions)
        self._rules_lock = threading.Lock()  # one look at a time (a step, a card's refresh)
        self._own_rules: list[tuple[Any, ...]] = []  # made here (_change_key), to be seen
        self._tools_sig: tuple[Any, ...] | None = None
        self._state: dict[str, Any] | None = None
        self._state_key: tuple[Any, ...] | None = None
        self.detached: str | None = None
        self._closed = False
        # a store opened read_only=True: its chats are for looking (refused at once to
        # drive or decide: nothing of theirs can be written, so nothing may happen)
        self._read_only = bool(getattr(store, "read_only", False))
        self._recordings = (
            None
            if store_recordings(store) is None
            else _ChatRecordings(store, self._queue_recording)
        )
        self._recorded: list[tuple[Any, str, int, bool]] = []  # recordings to write, in order
        # whether the store writes recordings with entries, in one transaction (SQLStore)
        self._carry = _takes_recorded(store)
        # whether its claims check the decision held (a store of the older protocol, or a
        # subclass overriding claim/write_job with the older signature, is called without:
        # passed anyway, every claim failed with a TypeError and no approved call ran)
        self._claims_decided = _accepts(store, "claim", "decision")
        self._jobs_decided = _accepts(store, "write_job", "decisions")
        # the async driver's writes as jobs a loop's sender groups (PostgreSQL: _pg_sender)
        self._sends = callable(getattr(store, "send_async", None)) and self._carry

    def recordings(self) -> Recordings | None:
        """The store's recordings (record and replay), while the chat writes to it."""
        return None if self._closed or self.detached else self._recordings

    # -- wiring ------------------------------------------------------------
    def attach(self, host: ChatHost) -> None:
        self._host = host
        # At exit: the background loop's calls end (cancelled) and are recorded before this
        # last write (``_aio._settle_background``, ordered before ``weakref.finalize``'s hook).
        weakref.finalize(host.chat, self._finalize)

    def _attached(self) -> ChatHost:
        host = self._host
        if host is None:
            raise RuntimeError("the store extension is not attached to a chat yet")
        return host

    def create(self, info: ChatInfo, system: str | None, parent: ForkParent | None = None) -> None:
        """Record the chat this extension was just attached to as a new chat of the store.

        ``parent``: the chat is a fork; its link to its parent is recorded with it.

        Raises:
            StoreError: The store has a chat with this id, or cannot be written;
                the extension is closed then.
        """
        state = self._attached().loop_state()
        try:
            link = None if parent is None else parent.as_dict()
            if link is None:
                self.store.create_chat(info, system, state)
            else:  # a store that predates forks still takes a chat that is none
                self.store.create_chat(info, system, state, link)
        except WouldWait:
            raise  # nothing written: the caller creates it again where it may wait
        except BaseException:
            self.detached = "the chat could not be created in the store"
            self.close()
            raise
        self._created(state)

    def _created(self, state: dict[str, Any]) -> None:
        """The chat was created in the store with ``state``."""
        self._state = state
        with may_wait_here():  # created: from here on nothing may be left half done
            self._rules_looked = self._rules_token()  # a new chat: no rule changed elsewhere

    async def created_in_batch(
        self, info: ChatInfo, system: str | None, batch_id: str, key: str
    ) -> bool:
        """:meth:`create`, and the chat recorded as input ``key`` of batch ``batch_id``, as
        one job the store sends from this loop with its other chats' writes (``send_async``,
        see :meth:`_sent`). ``False``: nothing of it was written (a store that cannot, an
        input another process started first, a failure), and the caller creates and records
        the chat as usual, which decides and reports."""
        make = getattr(self.store, "batch_chat_job", None)
        if not self._sends or make is None:
            return False
        state = self._attached().loop_state()
        job = make(info, system, state, batch_id, key)
        if job is None:
            return False
        written, cancelled = await self._send(job)
        if written:
            self._created(state)
        if cancelled is not None:
            raise cancelled
        return bool(written)

    async def _send(self, job: Any) -> tuple[bool, BaseException | None]:
        """Send ``job`` with the loop's other chats' (the store's ``send_async``): whether it
        was written, and a cancellation to raise once the caller has noted that (the job's
        group ends all the same). A failure is "not written": the careful path the caller
        falls back to tries again, and reports."""
        try:
            return bool(await cast(Any, self.store).send_async(job)), None
        except asyncio.CancelledError as exc:
            return bool(job.written), exc
        except Exception:
            return False, None

    def resume(self, record: ChatRecord, snapshot: Snapshot) -> None:
        """Put a stored chat back into the (new) chat this extension was just attached to.

        Restores its state, hands its stored events to every extension, settles
        the calls its last process left running, and applies the decisions made
        while no chat had it open.
        """
        host = self._attached()
        host.restore(snapshot)
        known = {c.id: c for c in host.chat.tool_calls}
        # The rule changes the fold below covers, read first: one made between the two
        # reads is folded and applied again at the first look (a no-op), never missed.
        looked = self._rules_token()
        seen = self.store.rule_changes(self.chat_id)
        events = _answers_reopened(list(self.store.iter_events(self.chat_id, calls=known)), known)
        for e in events:  # the core folds them over the state's rules (``folded_rules``)
            if isinstance(e, RuleChanged):
                self._readable_rule(e.rule)
        host.replay(events)
        self._rules_seen.update(seen)
        self._rules_looked = looked
        self._state = host.loop_state() if record.state.get("options") else None
        if self._read_only:  # settling, taking a decision or an answer: each a write, left
            return  # to a writable copy (the loaded chat shows the stored chat as it is)
        self.settle_orphans(record)
        self.apply_decisions()
        self.apply_inputs()

    def close(self) -> None:
        """Write what is pending and release the store (if the chat opened it).

        Raises:
            StoreError: What is pending cannot be written (the file is locked, the
                disk fails): nothing is released then, so closing again once the
                store can be written loses nothing.
        """
        if self._closed:
            return
        if self._read_only:  # nothing of it was (or could be) written: nothing to write
            self._release()
            return
        try:
            self._unclaim_unstarted()
            self.flush()
        except StoreConflictWarning:
            pass  # another process drives the chat: what it wrote stands
        except Exception as exc:
            self._schedule_retry()
            raise self._unwritten_error(exc, "close the chat again once it can be") from exc
        self._release()

    def _finalize(self) -> None:
        """The chat was garbage-collected, or the interpreter exits: a last write, no raising."""
        if self._closed:
            return
        try:
            with contextlib.suppress(Exception):  # never at the cost of the last write
                self._unclaim_unstarted()
            self.flush()
        except Exception as exc:
            with contextlib.suppress(Exception):
                lost = self._lost_text()
                if lost:  # a chat only loaded here leaves nothing of its own unwritten
                    warnings.warn(
                        f"nbagent store: chat {self.chat_id} was closed without writing {lost} "
                        f"to {self.store.location}: {exc}",
                        RuntimeWarning,
                        stacklevel=2,
                    )
        finally:
            self._release(later=True)

    def _lost_text(self) -> str:
        """What a last write that failed leaves unwritten, in words ("" for nothing of the
        user's: no event, no recording, no setting changed here; the tool schemas a loaded
        chat writes again are rewritten by any later write)."""
        events = len(self._unwritten) + len(self._pending)
        recorded = len(self._recorded)
        parts = [f"its last {events} event(s)"] if events else []
        if recorded:
            parts.append(f"{recorded} recorded model response(s)")
        host = self._host
        if (
            not parts
            and self._state is not None
            and host is not None
            and host.alive
            and host.loop_state() != self._state
        ):
            parts.append("its settings (a budget raised, an option changed)")
        return " and ".join(parts)

    def _unclaim_unstarted(self) -> None:
        """The chat is being closed: a claim of this chat's that its tool never used (a
        round cancelled after its claim committed, a claim whose commit's answer was lost)
        would stay ``running`` under this owner, and the next process to load the chat
        would find it in doubt, "started at ..." for a tool that never ran. Each is made
        runnable again with the chat's next write (the store's ``CallReset``: only if the
        row is still ``running`` under this chat's own owner; a no-op for a claim that never
        committed). Only calls this object never started: claimed and not taken by
        :meth:`claim`, and not running here. A chat already collected has no calls to read
        whether each is gated: its claims stay (reported in doubt by the next load, never
        run twice)."""
        host = self._host
        if host is None or self.detached is not None or not host.alive:
            return
        with self._write_lock:
            ids = self._claimed | self._maybe_claimed  # claim() took none of them
            if not ids:
                return
            at = utcnow().isoformat()
            resets: list[Entry] = []
            for call in host.chat.tool_calls:
                if call.id not in ids or call.status not in RUNNABLE_STATUSES:
                    continue  # running or settled here: its row is the run's to finish
                gated = call.approval is not None and call.approval.required
                change = CallReset(call.id, "approved" if gated else "requested", self.owner)
                resets.append(Entry(-1, "call_reset", at, None, change))
            self._claimed -= ids
            self._maybe_claimed -= ids
            self._running -= ids
            if resets:
                with self._lock:
                    self._batch()  # what was queued goes first
                    self._unwritten.extend(resets)

    def fork_store(self) -> tuple[Store, Release | None]:
        """The store a fork made into this chat's store attaches to, and the fork's own lease
        on it when it is a store shared by path or URL (``None``: the user's object, never
        closed for them). Its parent's lease is the parent's: closed, the parent lets go of
        its own alone, and the fork goes on writing."""
        if self._let_go is None:
            return self.store, None
        from ._shared import lease_again

        return self.store, lease_again(self.store)

    def hold(self, release: Release) -> None:
        """Take ``release`` as this chat's lease on its store (a fork's, see
        :meth:`fork_store`): let go when the chat is closed or collected."""
        if self._let_go is not None or self._closed:
            release(False)
            return
        self._let_go = release

    def _read_only_error(self, what: str) -> StoreError:
        """Why a chat on a store opened ``read_only=True`` is not ``what``."""
        return StoreError(
            f"chat {self.chat_id} is on {self.store.location}, opened read_only: a chat "
            f"loaded from it is for looking (its transcript, calls and chat.log), not "
            f"{what}; nothing was written, asked or run. Load it from the store opened "
            "without read_only=True (as a user who can write it) to go on."
        )

    def _release(self, later: bool = False) -> None:
        self._closed = True
        LIVE_TOKENS.discard(self._token)
        if self._let_go is not None:
            self._let_go(later)

    # -- state ---------------------------------------------------------------
    def _snapshot(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None, Any]:
        """The chat's state and tool schemas, each only when changed since last written.

        Both are checked at every write, so the checks are cheap: the state is
        rebuilt only when its key changed (see ``ChatHost.state_key``), and the
        tools are compared by name and identity. The third value goes to
        :meth:`_wrote` once the write committed (a failed write is not "written").
        """
        host = self._host
        if host is None or not host.alive:
            return None, None, None
        state: dict[str, Any] | None = None
        key = host.state_key()
        marks = (key, self._state, self._tools_sig)
        if key != self._state_key:
            state = host.loop_state()
            if state == self._state:
                state = None
            else:
                marks = (key, state, self._tools_sig)
        tools = None
        current = host.known_tools()  # never chat.tools: a write must not need a server up
        sig = (*(t.name for t in current), *map(id, current))
        if sig != self._tools_sig:
            tools = {t.name: t.input_schema for t in current}
            marks = (marks[0], marks[1], sig)
        return state, tools, marks

    # -- events --------------------------------------------------------------
    def on_event(self, e: Event) -> None:
        """Queue an event; write the queue at a boundary (see the module docstring).

        Runs for every event, on the thread driving the chat, so it only does
        what must happen now: decide whether this event is a boundary, and
        note the live values its entry needs (a ``ToolCall`` changes after its
        event). Encoding is left to :meth:`_take`, which turns the whole queue
        into entries in one pass right before it is written.
        """
        if self._closed:
            return
        noted: Any = None
        match e:
            case TextDelta() | ToolCallDelta() | ReasoningDelta():  # fragments: not stored
                return
            case RuleChanged(elsewhere=True) | AlwaysAllowChanged(elsewhere=True):
                return  # read from the store: it has it already
            case RuleChanged() | AlwaysAllowChanged() if rule_change_undone():
                return  # a change here that could not be written, taken back: nothing to write
            case RuleChanged() | AlwaysAllowChanged():  # the state (its rules) goes with it
                with self._lock:
                    self._own_rules.append(_change_key(e.ts, e.type, vars(e)))
                _RULE_WRITES.bump()  # every chat's next look reads the store's rules
                # written now, or not made (_write_rule_change), under the async driver too
                # (a tool body revoking: left to the driver's catch-up, a kill before it
                # brought the revoked rule back), as a decision is (decide())
                with self._lock:
                    self._pending.append((e, None))
                self._write_rule_change(e)
                return
            case ApprovalDecided():  # written even by a detached copy: deciding is not driving
                noted = self._decided.pop(e.call.id, None) is e.decision  # by decide()
                flush = True
            case _ if self.detached is not None:
                return
            case InputAnswered():  # its answer is in the store already if answer_input wrote it
                with self._lock:
                    noted = e.input_id in self._answered
                    self._answered.discard(e.input_id)
                    # a parked call answered: its result (the ToolCallFinished right after)
                    # is written with this, in one transaction, never this alone (its input
                    # applied and no result: a reloaded chat ran the external tool's body)
                    follows = e.call is not None and e.call.status in FINAL_STATUSES
                    if follows:
                        self._results_due.add(e.call.id)  # type: ignore[union-attr]
                flush = not follows
            case InputRequested():  # listed by store.pending_inputs() (answerable) at once
                noted = None
                if e.resume is not None and e.call is not None:  # a run parked: unclaimed
                    noted = self.owner
                    self._running.discard(e.call.id)
                flush = True
            case MessageAdded() if e.message.role == "user":  # a question: on disk before
                self._asked = self.keeps_questions  # the model is asked it (below)
                flush = False
            case ModelRequestStarted() if self._asked:  # the question goes first
                self._asked = False
                if writes_deferred():  # with this start, by the catch_up before the request
                    flush = True
                else:  # before this start is queued: it rides in its finish's row (fold)
                    self._flush_or_retry()
                    flush = False
            case ToolCallFinished():
                noted, flush = self._finished(e)
            case StepFinished():  # a generated step is written with the next claim or step,
                flush = e.kind != "generated" or self._parked()  # unless the chat parks here
                if self._wrote_ahead:  # the step's write failed before it (_write_ahead):
                    self._wrote_ahead = flush = False  # the background retry has it, no wait
            case CallInDoubt():
                noted, flush = self._reset_status(e), True
            case ModelRequestFailed() | OptionsChanged():
                flush = True  # the chat's state (its options) is written with it
            case _:
                flush = False
        with self._lock:
            self._pending.append((e, noted))
        if not flush:
            return
        if writes_deferred():  # the async driver awaits catch_up before its next request,
            self._owed = True  # its next round and when it stops: written there, off its loop
            if isinstance(e, ToolCallFinished) and self._running:
                spawn(in_worker(self._flush_or_retry))  # others of the round still run
        else:
            self._flush_or_retry()

    def _write_rule_change(self, e: RuleChanged | AlwaysAllowChanged) -> None:
        """A rule change made here (``add_rule``, ``always_allow``, ...) is written at once,
        or not made: if the write fails, the chat takes the change back and raises the
        ``StoreError`` (``_decisions.rule_change_unwritten``), and the change leaves the
        queue (what was queued with it stays, and is retried in the background). Kept
        queued instead, a revocation the user was only warned about came back in the next
        process to load the chat if this one died before the retry wrote it."""
        with self._write_lock:  # no retry writes the change before it leaves the queue
            exc = self._try_flush()
            if exc is None:
                return
            if not rule_change_unwritten(self._rule_error(e, exc)):
                self._warn_unwritten(exc)
                return
            with self._lock:
                self._pending = [x for x in self._pending if x[0] is not e]
                self._unwritten = [
                    x for x in self._unwritten if not (x.seq == e.seq and x.type == e.type)
                ]
                key = _change_key(e.ts, e.type, vars(e))
                if key in self._own_rules:
                    self._own_rules.remove(key)

    def _rule_error(self, e: RuleChanged | AlwaysAllowChanged, exc: BaseException) -> StoreError:
        """What a rule change that could not be written says: which change, why, that
        nothing changed."""
        if isinstance(e, AlwaysAllowChanged):
            what = f"{'always_allow' if e.allowed else 'revoke'}({e.tool!r})"
            stands = "always allowed" if not e.allowed else "not always allowed"
            state = f"{e.tool!r} is still {stands}"
        else:
            try:
                rule = str(Rule.from_dict(e.rule))
            except (ValueError, TypeError, KeyError):
                rule = codec.dumps(e.rule)
            what = f"{'add_rule' if e.added else 'remove_rule'}({rule})"
            state = "the chat's rules are as they were"
        return StoreError(
            f"chat {self.chat_id}: {what} could not be written to {self.store.location} "
            f"({exc}). Nothing changed: {state}, here and in the store; do it again once the "
            "store can be written."
        )

    def _parked(self) -> bool:
        """Whether the chat now waits for an approval (or is gone): nothing follows soon."""
        host = self._host
        return host is None or not host.alive or host.chat.awaiting_approval

    def _finished(self, e: ToolCallFinished) -> tuple[tuple[str | None, datetime | None], bool]:
        """A call finished: who may record its result, when, and whether to write now."""
        call = e.call
        self._running.discard(call.id)
        self._claimed.discard(call.id)
        in_doubt = e.status == "in_doubt"
        owner = self._orphans.pop(call.id, self.owner) if in_doubt else self.owner
        with self._lock:
            answered = call.id in self._results_due  # its InputAnswered waits for it
            self._results_due.discard(call.id)
        # Written at the end of the round, unless other calls of the round still run.
        flush = bool(self._running) or in_doubt or e.status == "denied" or answered
        return (owner, call.finished_at), flush

    def _reset_status(self, e: CallInDoubt) -> str | None:
        """For an in-doubt call that will be rerun: the status it goes back to."""
        if not e.rerun:
            return None
        call = e.call
        self._orphans.pop(call.id, None)
        gated = call.approval is not None and call.approval.required
        return "approved" if gated else "requested"

    def _batch(self) -> list[Entry]:
        """Everything not written yet, as entries in order (call with the write lock).

        The queue is encoded (in one pass) and moved to the entries not yet
        committed; they leave that list only when a write commits them.
        """
        with self._lock:
            if self._pending:
                # Encoded before the queue is emptied: the stop button during the encoding
                # (the longest part) left the events in neither list, never written.
                self._unwritten.extend(codec.encode_batch(self._pending))
                self._pending = []
        return self._unwritten

    def _wrote(self, n: int, marks: Any = None) -> None:
        """The first ``n`` unwritten entries (and the state in ``marks``) are committed."""
        del self._unwritten[:n]
        if marks is not None:
            self._state_key, self._state, self._tools_sig = marks
        self._failure = None
        self._warned = False

    def _queue_recording(self, recording: Any, chat_id: str, step: int, replayed: bool) -> None:
        """A model response to record: written with the next batch, after its message row."""
        with self._lock:
            self._recorded.append((recording, chat_id, step, replayed))

    def _write_recordings(self) -> None:
        """Write the queued recordings (each one transaction); a failure keeps the rest queued."""
        with self._lock:
            todo = list(self._recorded)
        if self.detached is not None:
            todo = []
        done = 0
        try:
            for args in todo:
                self.store.record_response(*args)
                done += 1
        except Exception as exc:
            self._failure = exc
            raise
        finally:
            with self._lock:
                del self._recorded[: done if self.detached is None else len(self._recorded)]

    def flush(self) -> None:
        """Write everything not written yet: the events in one transaction, then the recordings.

        Raises:
            StoreError: The write failed; everything stays queued, for the next
                write (or :meth:`_schedule_retry`).
        """
        with self._write_lock:
            self._flush_events()
            self._write_recordings()
            self._failure = None  # what was queued when it began is written (or was nothing)

    def _queued(self) -> bool:
        """Whether anything waits to be written (events, entries, recordings)."""
        with self._lock:
            return bool(self._pending or self._unwritten or self._recorded)

    def _keep_for_retry(self, exc: Exception) -> None:
        """A store operation failed (a read, a write) while events may wait to be written:
        make sure they are written in the background, whatever failed and in what order.

        Without this, events queued for a later boundary (a model response, written with
        its calls' claim) stayed in memory when the step that should have written them
        failed on a read: a call waiting for approval that no other process could see, and
        that a process dying then lost.
        """
        if not self._queued():
            return
        if self._failure is None:
            self._failure = exc
        self._schedule_retry()

    def _flush_events(self) -> None:
        with self._write_lock:
            entries = self._batch()
            if not entries:
                self._write_settings()
                return
            if self.detached is not None:  # deciding is not driving: only decisions, and
                # rule changes (the driver reads them from the store at its next look; kept
                # here only, a deny rule added on this copy stopped nothing)
                batch = [x for x in entries if x.type in _DETACHED_WRITES]
                state, tools, marks = None, None, None
            else:
                batch = entries
                state, tools, marks = self._snapshot()
            n = len(entries)
            if not batch:
                self._wrote(n)
                return
            with self._lock:  # the responses before them, in the same transaction
                recorded = list(self._recorded) if self._carry and self.detached is None else []
            try:
                if recorded:  # SQLStore.write's recorded= (not in the Store protocol)
                    write: Any = self.store.write
                    conflict = write(self.chat_id, batch, state, tools, recorded)
                else:
                    conflict = self.store.write(self.chat_id, batch, state, tools)
            except Exception as exc:
                self._failure = exc
                raise
            self._wrote(n, marks)
            if recorded and conflict is None:
                with self._lock:
                    del self._recorded[: len(recorded)]
        if conflict is not None:
            self._detach(conflict)

    def _write_settings(self) -> None:
        """A state changed with no event to carry it (``raise_budget()``, ``chat.max_steps =
        7``): written alone. Left for the next event's write, a controller that raised a
        parked chat's budget and closed it lost the raise (the loaded chat was stopped
        again)."""
        if self.detached is not None:
            return
        state, tools, marks = self._snapshot()
        if state is None and tools is None:
            return
        try:
            conflict = self.store.write(self.chat_id, [], state, tools)
        except Exception as exc:
            self._failure = exc
            raise
        self._wrote(0, marks)
        if conflict is not None:
            self._detach(conflict)

    def _flush_or_retry(self) -> None:
        """A boundary that may wait (a step end, a result): write now, or keep it for later.

        A failed write keeps everything queued, is retried in the background
        (so a chat parked on an approval reaches the store as soon as the file
        can be written, for a panel elsewhere to see), and is retried again
        before the next step, which raises if it still fails
        (:meth:`before_step`). The user is told once.
        """
        exc = self._try_flush()
        if exc is not None:
            self._warn_unwritten(exc)

    def _warn_unwritten(self, exc: BaseException) -> None:
        """Tell the user once that what is queued could not be written (and is retried)."""
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"nbagent store: {self._unwritten_text(exc)} Nothing is lost: it is kept "
                "and written as soon as the store can be written (retried in the "
                "background). The chat's next step, a decision or closing the chat "
                "raises StoreError if it still cannot be written.",
                RuntimeWarning,
                stacklevel=4,
            )

    def _try_flush(self) -> Exception | None:
        """Write now; on failure keep everything queued, retry in the background, return why.

        A conflict with another process is not a failure to write: it propagates.
        """
        try:
            self.flush()
        except StoreConflictWarning:
            raise
        except Exception as exc:
            self._schedule_retry()
            return exc
        return None

    def _unwritten_text(self, exc: BaseException) -> str:
        n = len(self._unwritten) + len(self._pending)
        return f"chat {self.chat_id}: {n} event(s) could not be written ({exc})."

    def _unwritten_error(self, exc: BaseException, then: str) -> StoreError:
        return StoreError(
            f"{self._unwritten_text(exc)} Nothing is lost: it is kept in this chat object "
            f"and written at its next write; {then}."
        )

    def _claim_error(self, call: ToolCall, queued: int, exc: BaseException) -> StoreError:
        """What a failed claim says: whose claim, why, what happens to the call and to the
        events that were to be written with it (none, often: then it does not count them)."""
        label = f"{call.name}({call.id})"
        kept = (
            f" The {queued} event(s) to be written with it are kept in this chat object and "
            "written at its next write (retried in the background)."
            if queued
            else ""
        )
        return StoreError(
            f"chat {self.chat_id}: the claim of {label} could not be written to "
            f"{self.store.location} ({type(exc).__name__}: {exc}). {label} was not run, and "
            f"runs at the next step (complete()) once the store can be written.{kept}"
        )

    def _undecided(self, call: ToolCall, decision: Decision, exc: StoreError) -> StoreError:
        """What a decision that could not be written says: which call, why, and that
        nothing is decided (the store's bare "disk I/O error" told none of it)."""
        label = f"{call.name}({call.id})"
        what = "approval" if decision.verdict == "approved" else "denial"
        return StoreError(
            f"chat {self.chat_id}: the {what} of {label} could not be written to "
            f"{self.store.location} ({exc}). Nothing is decided: {label} still awaits "
            "approval, here and in the store; decide it again once the store can be written."
        )

    def _closed_error(self, what: str, done: str) -> StoreError:
        """What a decision or an answer given to a closed chat says: it is not made."""
        return StoreError(
            f"chat {self.chat_id} was closed: {what} cannot be written to "
            f"{self.store.location}, so nothing is {done}. Load the chat again "
            "(Chat.load(chat_id, store=...)) or decide from the store (store.approve, "
            "store.deny)."
        )

    def _unanswered(self, request: PendingInput, exc: StoreError) -> StoreError:
        """What an answer that could not be written says (as :meth:`_undecided`)."""
        return StoreError(
            f"chat {self.chat_id}: the answer to {request.kind} request {request.id} could "
            f"not be written to {self.store.location} ({exc}). Nothing is answered: it still "
            "waits, here and in the store; answer it again once the store can be written."
        )

    def _schedule_retry(self) -> None:
        """Retry writing in the background until it works (or the chat is closed): a task
        on nbagent's background loop, each write on a worker thread (never on the loop)."""
        with self._lock:
            if self._retry is not None or self._closed:
                return
            self._retry = spawn(self._retry_loop())

    async def _retry_loop(self) -> None:
        """Write until nothing is left: a failure is marked or anything is still queued.

        Looping on the mark alone stopped early when another thread's successful write
        cleared it while events queued after that write's start still waited.
        """
        delay = 0.05
        try:
            while not self._closed and (self._failure is not None or self._queued()):
                await asyncio.sleep(delay)
                if self._closed:
                    return
                try:
                    await in_worker(self.flush)
                except Exception:
                    delay = min(delay * 2, 1.0)
        finally:
            with self._lock:
                self._retry = None
            if self._failure is not None and not self._closed:
                self._schedule_retry()  # failed again after the loop looked

    # -- claim -----------------------------------------------------------------
    def claim(self, call: ToolCall) -> bool:
        """Claim ``call`` for this process in the transaction that writes what is pending.

        Raises:
            StoreError: The claim cannot be committed (the file is locked, the disk
                fails): the call is not run, and stays runnable; what was
                pending stays queued.
        """
        if self.detached is not None:
            return False
        if exiting_here():  # claimed by catch_up or not: not started (close() lets it go)
            raise self._exit_error([call])
        with self._write_lock:  # not while close() makes unstarted claims runnable again
            if call.id in self._claimed:  # by catch_up, before its round
                self._claimed.discard(call.id)
                return True
        return self._claim_now(call)

    def _exit_error(self, calls: Sequence[ToolCall]) -> StoreError:
        """A claim refused on the background loop as the interpreter exits: the call is not
        started (it stays runnable, for the next process to load the chat), as Python's pools
        refuse a thread's call then. Started, an async tool was cancelled by the exit while it
        ran: answered "cancelled", the approved call was used up, and maybe half done."""
        names = ", ".join(f"{c.name}({c.id})" for c in calls)
        return StoreError(
            f"chat {self.chat_id}: {names} not started: the interpreter exits. It stays "
            "runnable, and runs when the chat is loaded and continued."
        )

    def _claim_now(self, call: ToolCall, reread: bool = True) -> bool:
        """Claim ``call`` for the decision this chat holds of it (``Store.claim``'s
        ``decision``). A claim refused because the call was decided anew in the store
        applies that decision here (:meth:`_decided_elsewhere`): a denial answers the call
        (``False``: not run), an approval (a person's, with edited arguments or not) is
        claimed again, for it: the call runs once, as the person approved it. Granted for
        the decision the store no longer had, it ran with the arguments of the chat's own
        approval while the store recorded the person's edited ones."""
        for _ in range(_CLAIMS):
            with self._write_lock:  # the step's flush writes the state; the claim writes events
                entries = self._batch()
                mine = call.decision if call.status == "approved" else None
                try:
                    held: dict[str, Any] = {"decision": mine} if self._claims_decided else {}
                    result = self.store.claim(self.chat_id, call.id, self.owner, entries, **held)
                except Exception as exc:
                    self._failure = exc
                    self._maybe_claimed.add(call.id)  # its commit may have gone through
                    self._schedule_retry()
                    raise self._claim_error(call, len(entries), exc) from exc
                self._maybe_claimed.discard(call.id)
                self._wrote(len(entries))
            if result.conflict is not None:
                self._detach(result.conflict)
                return False
            if result.claimed:
                self._running.add(call.id)
                return True
            if result.claimed_by is not None or not self._decided_elsewhere(call, result):
                if result.claimed_by is None and result.status == "awaiting_approval":
                    # not another driver: a decision dropped elsewhere (a round's catch-up
                    # holds the write lock: its start claims again, and reads the rules)
                    return self._dropped_elsewhere(call) if reread else False
                who = f" by {result.claimed_by}" if result.claimed_by else ""
                self._detach(f"{call.name}({call.id}) is already {result.status}{who}")
                return False
            if call.status not in RUNNABLE_STATUSES:
                return False  # answered here with the stored decision: not run, not stale
        self._detach(f"{call.name}({call.id}) was decided anew {_CLAIMS} times as it was claimed")
        return False

    def _dropped_elsewhere(self, call: ToolCall) -> bool:
        """A claim that found the call back at ``awaiting_approval``, claimed by nobody:
        another copy dropped the decision this chat holds (``refuse_decision``: a deny rule
        it added, an edit its checks refuse) and has not written the decision replacing it
        yet (two writes). No other process drives the chat, so it is not detached: the
        rules stored meanwhile are read now (a deny rule denies the call here, which never
        runs, and the round goes on), else the call is not claimed now and the next step
        reads the store again. Taken for another driver's claim, the chat stopped for good
        with the call approved and never run, while the store said denied by ``rule``.

        Returns ``False`` (not claimed), always.
        """
        if self._rules_lock.acquire(blocking=False):  # else a look is under way (a refresh)
            try:
                if self._host is not None and not self._closed:
                    self._apply_rules(self._host)
            except StoreError:
                pass  # not read now: the next step reads them (it stops if it cannot)
            finally:
                self._rules_lock.release()
        if call.status in RUNNABLE_STATUSES:
            warnings.warn(
                f"nbagent store: the decision on {call.name}({call.id}) was dropped in the "
                "store by another copy of the chat, whose decision is not written yet; it is "
                "not run now, and the next step reads the store again.",
                StoreConflictWarning,
                stacklevel=3,
            )
        return False

    def _decided_elsewhere(self, call: ToolCall, result: ClaimResult) -> bool:
        """A claim refused with no claimant: whether the call was decided anew in the store
        (a person overruling the chat's automatic decision from another process's copy,
        after this round was planned) and that decision is now applied here, as
        :meth:`apply_decisions` applies one (``ApprovalDecided(elsewhere=True)``; a denial
        answers the call, which is not run; an approval, its edited arguments with it, is
        claimed again). Taken for another driver's claim, it left this copy stale for
        good: its record said ``approved`` where the store said ``denied``, and every later
        step returned ``busy``.

        ``result.decision``: the stored decision the claim found (else it is read here).
        ``False`` (the caller detaches, as for a claim held elsewhere): the store has no
        other decision, or the chat's rules refuse it.
        """
        host = self._host
        if host is None or not host.alive:
            return False
        stored = result.decision
        if stored is None:
            try:
                stored = self.store.decisions(self.chat_id, [call.id]).get(call.id)
            except StoreError:
                return False
        mine = call.decision
        if stored is None or (mine is not None and same_decider(mine, stored)):
            return False  # the decision this chat holds: the claim was refused for another reason
        try:
            with may_wait_here():  # its events reach every subscriber (see _waiting)
                host.apply_decision(call, stored)
        except DecisionError:
            return False
        return call.decision is not mine

    async def starting(self, call: ToolCall) -> None:
        """Right before a call of an async round starts: its claim, if its round's catch-up
        did not make it (a call queued behind a running one), awaited off the loop."""
        await self.catch_up((call,), starting=True)

    async def catch_up(
        self, calls: Sequence[ToolCall] = (), *, stopping: bool = False, starting: bool = False
    ) -> None:
        """The async driver's turn (see :mod:`nbagent._extension`): claim ``calls`` (the
        round about to run; the first claim's transaction writes what is pending, as
        :meth:`claim` does) and write what ``on_event`` left for now, so the loop driving
        this chat (and a batch's other chats) never waits on the store. Where:

        - a store that sends from the loop (``send_async``: PostgreSQL): all of it as one
          job of the loop's sender, awaited here (:meth:`_sent`), with no thread;
        - a store whose writes wait for nothing but the CPU (``writes_inline``: SQLite in
          WAL with ``synchronous`` NORMAL): on the loop's own thread inside
          :func:`~nbagent.store._waiting.no_wait`, which saves a handoff's cost;
        - else, or when either of those cannot take it (something would wait, the job was
          not written), on a worker thread (:meth:`_catch_up_now`).

        A write that fails is kept and retried in the background, as at any boundary;
        before a request or a round it also stops the drive, as :meth:`before_step` would
        (no tool runs and the model is not asked again before the results are on disk).

        Raises:
            StoreError: A claim cannot be committed (the round does not run, its calls
                stay runnable), or, unless ``stopping``, what the next request or round
                builds on cannot be written. Nothing is dropped.
        """
        if starting:  # one call about to start: its claim, if its round's did not make it
            calls = self._to_claim(calls) if self.detached is None else []
            if not calls or self._closed:
                return
        if self._closed or not (self._owed or calls or self._failure is not None):
            return
        if calls and exiting_here():  # no call starts at exit (the drive's end writes)
            raise self._exit_error(calls)
        # on this thread, unless it would wait (_waiting.py says why): then the rest there
        if self._inline and here_or_later(self._catch_up_now, calls, stopping) is not LATER:
            return
        if self._sends and await self._sent(calls):
            return
        await in_worker(self._catch_up_now, calls, stopping)

    async def _sent(self, calls: Sequence[ToolCall]) -> bool:
        """:meth:`catch_up`'s work as one job the store sends from this loop with its other
        chats' (``send_async``: :mod:`~nbagent.store._pg_sender`), awaited here: what is
        pending, the recordings, and the claims of ``calls``, all or nothing. ``False``:
        not done (nothing of it was written), for :meth:`_catch_up_now` on a worker thread,
        the careful path that decides and reports: a write failed before (it is retried
        there), the chat is detached, another thread is writing, the entries need reads
        (a decision), the group did not commit.

        The write lock is held across the await, as a worker thread holds it across its
        round trips: another thread's write of this chat (a retry, a decision) waits for
        the job's end. Nothing on this loop writes this chat meanwhile: its driver awaits
        here, and what it runs beside (a round's other calls) hands writes to threads.
        """
        if self._failure is not None or self.detached is not None:
            return False
        if not self._write_lock.acquire(blocking=False):
            return False
        try:
            self._owed = False
            to_claim = self._to_claim(calls)
            claims = [c.id for c in to_claim]
            mine = {  # each claim checks the decision held (one decided anew: careful path)
                c.id: c.decision for c in to_claim if c.status == "approved" and c.decision
            }
            with self._lock:
                recorded = list(self._recorded)
            entries = self._batch()
            if not (entries or claims or recorded):
                return True
            state, tools, marks = self._snapshot()
            make = cast(Any, self.store).write_job  # SQLStore's (not in the Store protocol)
            held = {"decisions": mine} if self._jobs_decided else {}
            job = make(self.chat_id, entries, state, tools, recorded, claims, self.owner, **held)
            if job is None:
                return False
            written, cancelled = await self._send(job)
            if written:
                self._wrote(len(entries), marks)
                with self._lock:
                    del self._recorded[: len(recorded)]
                self._running.update(claims)
                self._claimed.update(claims)
                self._maybe_claimed.difference_update(claims)
            elif cancelled is not None:  # not known written (a lost answer): maybe claimed
                self._maybe_claimed.update(claims)
            with self._lock:  # what this did not write: the next boundary does
                self._owed = self._owed or bool(self._pending or self._unwritten)
            if cancelled is not None:
                raise cancelled
            return written
        finally:
            self._write_lock.release()

    def _to_claim(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """Those of a round's ``calls`` a catch-up claims: the ones that start at once (see
        :meth:`_starting`), runnable, not claimed already."""
        return [
            c
            for c in self._starting(calls)
            if c.id not in self._claimed and c.status in RUNNABLE_STATUSES
        ]

    def _starting(self, calls: Sequence[ToolCall]) -> Sequence[ToolCall]:
        """Of a round's ``calls`` (in the order the runner starts them), those it starts at
        once: the first in sequential mode, else the first ``max_concurrency``. The others
        are claimed by :meth:`claim` right before each starts, as the sync driver claims
        every call. Claimed with the first, a call queued behind a running one was left
        ``running`` in the store by a crash during that one, and the next load reported it
        in doubt though it never started (its approval lost)."""
        host = self._host
        if len(calls) <= 1 or host is None or not host.alive:
            return calls
        options = host.chat.tool_options
        if options.effective_concurrency == "sequential":
            return calls[:1]
        return calls[: max(1, options.effective_max_concurrency)]

    def _catch_up_now(self, calls: Sequence[ToolCall], stopping: bool) -> None:
        self._owed = False
        with held(self._write_lock):  # a retry, a decision writing: no_wait waits for neither
            with self._lock:  # a response's recording alone waits for the next events' write
                events = bool(self._pending or self._unwritten)
            if events or self._failure is not None or (self._recorded and not self._carry):
                if calls and self._failure is None:
                    pass  # written by the first claim's transaction, with it
                elif stopping:
                    self._flush_or_retry()
                else:
                    exc = self._try_flush()
                    if exc is not None:
                        raise self._unwritten_error(
                            exc,
                            "the chat stops here, so that no tool runs and the model is not "
                            "asked again before it is on disk: continue (complete()) once the "
                            "store can be written",
                        ) from exc
            for call in self._to_claim(calls):
                if self.detached is not None:
                    return
                if self._claim_now(call, reread=False):
                    self._claimed.add(call.id)
            with self._lock:  # no claim took them: the next boundary does
                self._owed = self._owed or bool(self._pending or self._unwritten)

    # -- decisions made here ------------------------------------------------------
    def decide(self, call: ToolCall, decision: Decision) -> Decision | None:
        """Check a decision against the store and write it there before the chat records it.

        The first decision recorded in the store wins: a call approved through
        ``store.approve`` in another process (or by another copy of the chat)
        cannot be denied here, and the other way round. The check and the write
        are one transaction (the store's conditional update of the call's row).
        Returns the decision the store already has when it differs (the chat
        records that one and raises ``DecisionError`` if it contradicts this
        one), or ``None`` (this decision is written; its event follows).

        A decision overruling an automatic one (a resolver's, a policy's, the call
        not started) is checked and written the same way: the store refuses it if the
        decision it has is not that automatic one, written by a chat (a decision made
        through ``store.approve``/``store.deny`` is never overruled by another decision,
        whatever its ``by``: only a deny rule wins over an approval not started, through
        :meth:`refuse_decision`), and returns the decision that stands.

        A decision is the same as the store's only when it is that decision (its
        decider, time, reason and arguments: the chat applying it). Another one with
        the same verdict, written first, stands: the chat records it (an approval
        with other arguments is a contradiction, ``DecisionError``).

        Raises:
            StoreError: The store cannot be written: nothing is decided. A write
                whose commit went through while its answer was lost (a dropped
                connection) is found by reading the decision back, and counts as
                written; if that read fails too, the chat's next step reads it.
            DecisionError: The store has no decision but the call cannot be
                decided there (it is running, or unknown to it).
        """
        if self._read_only:
            raise self._read_only_error(f"decided ({call.name}({call.id}))")
        overruled = call.decision  # an automatic decision a person overrules, if any
        if self._closed:  # recorded here only, the store would never hear of it
            what = "approval" if decision.verdict == "approved" else "denial"
            raise self._closed_error(f"the {what} of {call.name}({call.id})", "decided")
        with self._write_lock:
            try:
                self.flush()  # the call's row first, if it is still queued
            except Exception as exc:
                self._keep_for_retry(exc)
                if isinstance(exc, StoreError):
                    raise self._undecided(call, decision, exc) from exc
                raise
            try:
                stored = self.store.decisions(self.chat_id, [call.id]).get(call.id)
            except StoreError as exc:
                raise self._undecided(call, decision, exc) from exc
            if stored is None or (overruled is not None and stored == overruled):
                entry = Entry(-1, ApprovalDecided.type, decision.at.isoformat(), None)
                entry = dataclasses.replace(entry, change=codec.decision_change(call.id, decision))
                try:
                    conflict = self.store.write(self.chat_id, [entry])
                except Exception as exc:
                    if self._read_back(self.store.decisions, call.id) != decision:
                        if isinstance(exc, StoreError):
                            raise self._undecided(call, decision, exc) from exc
                        raise
                    conflict = None  # its commit went through; only the answer was lost
                if conflict is None:
                    self._decided[call.id] = decision
                    return None
                stored = self.store.decisions(self.chat_id, [call.id]).get(call.id)
                if stored is None:
                    raise DecisionError(f"{call.name}({call.id}) cannot be decided: {conflict}")
        if stored == decision:  # the stored decision itself, being applied (apply_decision)
            return None
        return stored

    def refuse_decision(self, call: ToolCall, decision: Decision, why: str) -> None:
        """A decision :meth:`decide` handed back that the chat refuses now (its edited
        arguments fail the tool's schema or a deny rule, or a deny rule added since matches
        the call): dropped from the store as :meth:`apply_decisions` drops one it cannot
        apply (the call back to awaiting approval, unless its run was claimed), so no
        process applies it; the chat then writes the decision it was making. Recorded
        unchecked, a person's Deny on the card raised "already approved" and the call ran
        with the arguments the rule refuses.

        Raises:
            StoreError: The store cannot be written: nothing is decided.
        """
        with self._write_lock:
            self.store.reject_decision(self.chat_id, call.id, why)
        if call.decision != decision:  # made elsewhere, never applied here: say so
            warnings.warn(
                f"nbagent store: the decision on {call.name}({call.id}) made elsewhere "
                f"({decision.verdict} by {decision.by}) cannot be applied ({why}); it is "
                "dropped from the store, and the call is decided here anew.",
                StoreConflictWarning,
                stacklevel=user_stacklevel(),  # the click, chat.deny, add_rule
            )

    def answer_input(
        self, request: PendingInput, action: str, data: Any, by: str, reason: str | None
    ) -> Any:
        """Write an answer given here to the store before the chat records it: the first
        answer wins, here or in any process (``store.answer``). Returns the answer the
        store has already (the chat records that one), or ``None`` (written; its event
        follows).

        Raises:
            StoreError: The store cannot be written: nothing is answered (an answer
                whose commit went through, its answer lost, is found as in
                :meth:`decide`).
        """
        if self._read_only:
            raise self._read_only_error(f"answered ({request.kind} request {request.id})")
        if self._closed:
            raise self._closed_error(
                f"the answer to {request.kind} request {request.id}", "answered"
            )
        with self._write_lock:
            try:
                self.flush()  # the input's row first, if it is still queued
            except Exception as exc:
                self._keep_for_retry(exc)
                if isinstance(exc, StoreError):
                    raise self._unanswered(request, exc) from exc
                raise
            at = utcnow().isoformat()
            try:
                first = self.store.record_answer(
                    self.chat_id, request, action, data, by, at, reason
                )
            except Exception as exc:
                found = self._read_back(self.store.input_answers, request.id)
                if found is None or not _answered_here(found, action, by, at):
                    if isinstance(exc, StoreError):
                        raise self._unanswered(request, exc) from exc
                    raise
                first = None  # its commit went through; only the answer was lost
        if first is None:
            with self._lock:
                self._answered.add(request.id)
        return first

    def _read_back(self, read: Callable[[str, list[str]], dict[str, Any]], key: str) -> Any:
        """What the store holds for ``key`` after a write of it failed (``read``: its
        ``decisions`` or ``input_answers``), or ``None`` if that cannot be read either.

        A write whose commit was sent but whose answer was lost (the connection
        dropped during ``COMMIT``) may have been recorded: the caller looks here
        before saying nothing was, or the chat would show a call awaiting approval
        that the store (and every panel reading it) holds decided.
        """
        try:
            return read(self.chat_id, [key]).get(key)
        except Exception:
            return None  # unknown still: the chat's next step reads it again (apply_decisions)

    def _unchecked(self, hosts: list[str]) -> str:
        """What a chat held by a claim made on another host says: that process cannot be
        checked from here (a container replaced, a kernel on another machine), so loading
        the chat again finds it running again; ``claim_timeout`` lets such a claim go."""
        kind = type(self.store).__name__
        store = kind if kind in ("SQLiteStore", "PostgresStore") else "the store"
        names = ", ".join(sorted(set(hosts)))
        now = "" if self.store.claim_timeout is None else f" (now {self.store.claim_timeout:g} s)"
        return (
            f"The claim was made on another host ({names}): this process ({this_host()}) "
            "cannot tell whether that process is still running, so loading the chat again "
            "finds the call running again. If it is gone (a replaced container, a "
            f"restarted machine), open the store with {store}(..., claim_timeout=SECONDS)"
            f"{now} and load the chat: a claim older than that counts as abandoned, and its "
            "call is reported in doubt (rerun if its tool is idempotent), never run twice "
            "silently."
        )

    def _detach(self, why: str, then: str | None = None) -> None:
        if self.detached is not None:
            return
        self.detached = why
        with self._lock:
            self._pending = [x for x in self._pending if isinstance(x[0], ApprovalDecided)]
        with self._write_lock:
            self._unwritten = [x for x in self._unwritten if x.type == ApprovalDecided.type]
        if then is None:
            then = f"; load it again with Chat.load({self.chat_id!r}, store=...) to continue."
        else:
            then = f". {then}"
        warnings.warn(
            f"nbagent store: chat {self.chat_id} is being driven by another process "
            f"({why}). This copy stops here (its steps return 'busy'){then}",
            StoreConflictWarning,
            stacklevel=3,
        )

    # -- the step hook ---------------------------------------------------------
    def before_step(self) -> Literal["busy", "later"] | None:
        """Before each step: apply the rules changed elsewhere, settle calls left running
        elsewhere, apply decisions made elsewhere (:meth:`_before_step`).

        Under the async driver its reads never wait on the driver's loop: the step hook
        runs there inside ``no_wait`` and says ``"later"`` (the driver calls this again on a
        worker thread) when it would wait. A step that needs no read (the rules unchanged
        by the store's token, no round open) costs no handoff, on PostgreSQL as on SQLite;
        one that reads does the read on the worker (PostgreSQL) or, on SQLite, inline
        unless it would wait.
        """
        if not writes_deferred():
            return self._before_step()
        said = here_or_later(self._before_step)
        return "later" if said is LATER else cast(Literal["busy"] | None, said)

    def _before_step(self) -> Literal["busy"] | None:
        """The step hook's work. The rules are read at every step (a cheap look on SQLite);
        the rest only concerns the open round (a call is running or awaiting approval only
        until its round closes), so a step with no open round reads no more, and the
        decisions are read only when a call waits for one.
        """
        if self._read_only:
            raise self._read_only_error("driven (asked, stepped or completed)")
        if self._closed:  # driven on after close(): its events would no longer be written
            raise StoreError(
                f"chat {self.chat_id} was closed: {self.store.location} no longer records it, "
                "so it is not driven here: no model was asked and no tool ran (a question just "
                "asked is in this object only, not stored). Load it again "
                "(Chat.load(chat_id, store=...)) and ask there to continue it."
            )
        if self.detached is not None:
            return "busy"
        host = self._host
        if host is None:
            return None
        if self._failure is not None:  # a write failed: what the step builds on goes first
            exc = self._try_flush()
            if exc is not None:
                chat = host.chat
                if not (chat.awaiting_approval or chat.is_complete):  # it would run or ask
                    raise self._unwritten_error(
                        exc,
                        "the chat stops here, so that no tool runs and the model is not asked "
                        "again before it is on disk: continue (complete()) once the store can "
                        "be written",
                    ) from exc
            if self.detached is not None:
                return "busy"
        elif self._asked or (self.keeps_questions and self._queued() and host.chat.is_complete):
            said = self._write_ahead(host)
            if said is not None:
                return said
        try:
            self.apply_rules()
        except Exception as exc:  # a read failed: the last response may still be queued
            self._keep_for_retry(exc)
            self._raise_unwritten(exc)
            raise
        opened = host.chat.open_calls
        if not opened:
            return None
        try:
            running = self._running
            if any(c.status == "running" and c.id not in running for c in opened):
                self.settle_orphans()
                if self.detached is not None:
                    return "busy"
            self.apply_decisions()
            self.apply_inputs()
        except Exception as exc:  # a read failed: the last response may still be queued
            self._keep_for_retry(exc)
            self._raise_unwritten(exc)
            raise
        return "busy" if self.detached is not None else None

    def _raise_unwritten(self, exc: Exception) -> None:
        """A read of the step hook failed (``exc``) while events wait to be written (the
        async driver writes a round's results at its next boundary, after this hook): try
        them now, and if they cannot be written either, raise what the sync driver says
        then (they are kept, nothing is lost, ``complete()`` again is safe) instead of the
        read's bare error. A bare "cannot connect to PostgreSQL store" once the server was
        gone past its reconnect window told nobody whether the tool that had just run was
        recorded, nor whether running the chat again would run it twice.

        Returns (the caller raises ``exc``): nothing waits, ``exc`` is no store's failure,
        or what waited is written now.
        """
        if not isinstance(exc, StoreError) or not self._queued():
            return
        failed = self._try_flush()
        if failed is None:
            return
        raise self._unwritten_error(
            failed,
            "the chat stops here, so that no tool runs and the model is not asked again "
            "before it is on disk: continue (complete()) once the store can be written",
        ) from exc

    def _write_ahead(self, host: ChatHost) -> Literal["busy"] | None:
        """Before a step that asks the model a question just asked (``_asked``), or that
        completes the chat (its answer still queued): write what is pending now, so that a
        copy of the chat that another process moved on stops here (a conflict detaches it:
        ``"busy"``), before the model is asked a question the store never got, or before
        its step reports an answer the store does not hold.

        A question that cannot be written stops the step (``StoreError``: nothing is lost,
        it stays queued and in the chat; ``complete()`` goes on once the store can be
        written); a completing step's write that fails is retried in the background, as
        at the step's end (the chat needs nothing more on disk), and warned of once.

        A batch's chat (``keeps_questions`` false) is written at its step's end as before:
        its batch drives it, and its chats' last writes stay one commit each.
        """
        if not (may_wait() or self._inline):  # the async driver's loop: never a write that
            raise WouldWait("the store's writes wait")  # waits (a worker thread does it)
        asking = self._asked
        with held(self._write_lock):  # in no_wait: another thread writing, the rest later
            if asking:
                exc = self._try_flush()
                if exc is not None:
                    if self.detached is not None:
                        return "busy"
                    raise self._unwritten_error(
                        exc,
                        "the chat stops here, so that the model is not asked a question "
                        "before it is on disk: continue (complete()) once the store can be "
                        "written",
                    ) from exc
                self._asked = False
            else:
                self._flush_or_retry()
                if self._failure is not None:
                    self._wrote_ahead = True  # the step's end leaves it to the retry
        return "busy" if self.detached is not None else None

    def refresh(self) -> list[ToolCall]:
        """``chat.refresh()``: write what is pending, then apply decisions made elsewhere.

        Raises:
            StoreError: What is pending cannot be written (it stays queued, and is
                retried in the background), or the decisions cannot be read.
        """
        try:
            self.flush()
            if self.detached is not None:
                return []
            self.apply_rules()
            return self.apply_decisions() + self.apply_inputs()
        except Exception as exc:
            self._refresh_failures.bump()
            self._keep_for_retry(exc)
            raise

    def follow_decisions(self, callback: Callable[[], Any]) -> Any:
        """Call ``callback()`` when a decision on this chat is recorded anywhere, and once
        soon (one may have come before): a subscription on the store's follower. A
        callback during which this chat's ``refresh()`` failed (the store could not be
        read, a lock timed out) is called again after a backoff until one works: the
        decision it was told of is never left unapplied for want of more news.

        Raises:
            StoreError: The store cannot be read (closed, unreachable).
        """
        if self._closed:
            return None

        def news(_ids: set[str]) -> None:
            before = self._refresh_failures.value
            callback()
            if self._refresh_failures.value != before:  # its chat.refresh() failed: no more
                # news may ever come for what it could not read, so the follower calls it
                # again, with a backoff, until a refresh works
                raise StoreError(f"chat {self.chat_id}: the refresh for news failed")

        return follow(self.store, [self.chat_id], news)

    # -- orphans and decisions -------------------------------------------------
    def settle_orphans(self, record: ChatRecord | None = None) -> None:
        """Calls left ``running`` by a process that is gone become in doubt (or runnable again).

        A call running in a live process makes this copy of the chat stale (it
        cannot continue the round): it detaches, and its steps return ``busy``.
        """
        host = self._host
        if host is None:
            return
        foreign = [
            c for c in host.chat.tool_calls if c.status == "running" and c.id not in self._running
        ]
        if not foreign:
            return
        if record is not None:
            stored = {sc.id: sc for sc in record.calls}
        else:
            stored = {}
            for c in foreign:
                try:
                    stored[c.id] = self.store.call(c.id, chat_id=self.chat_id)
                except DecisionError:
                    continue
        orphans: list[tuple[ToolCall, StoredCall]] = []
        busy: list[str] = []
        elsewhere: list[str] = []  # the hosts of the claims this process cannot check
        for c in foreign:
            sc = stored.get(c.id)
            if sc is None:
                continue
            if sc.status != "running":
                busy.append(f"{c.name}({c.id}) is {sc.status} in the store")
            elif not abandoned(sc, self.store.claim_timeout):
                busy.append(f"{c.name}({c.id}) is running in {sc.claimed_by}")
                host_name = other_host(sc.claimed_by)
                if host_name is not None:
                    elsewhere.append(host_name)
            else:
                orphans.append((c, sc))
        if busy:
            self._detach("; ".join(busy), self._unchecked(elsewhere) if elsewhere else None)
            return
        for c, sc in orphans:
            tool = host.tool(c.name)
            self._orphans[c.id] = sc.claimed_by  # read by on_event for the events below
            with may_wait_here():  # its events reach every subscriber (see _waiting)
                settled = host.settle_in_doubt(
                    c,
                    claimed_by=sc.claimed_by,
                    claimed_at=sc.claimed_at,
                    rerun=bool(tool is not None and getattr(tool, "idempotent", False)),
                    content=in_doubt_content(c, sc),
                )
            if not settled:
                self._orphans.pop(c.id, None)

    def apply_rules(self) -> None:
        """Apply the rules another process added to (or removed from) the stored chat since
        this chat last looked, in the order they were made: ``add_rule``/``remove_rule``
        (``ChatHost.apply_rule_change``: an added rule decides the waiting calls it
        matches, a deny rule every call the model asks for from now on) and
        ``always_allow``/``revoke`` (``ChatHost.apply_always_allow_change``: a revoked tool
        is not approved here any more). Changes made here are not applied twice.

        Raises:
            StoreError: The store cannot be read, or a stored rule cannot be read (the
                step stops rather than run without it).
        """
        host = self._host
        if host is None or self._closed:
            return
        with self._rules_lock:
            self._apply_rules(host)

    def _apply_rules(self, host: ChatHost) -> None:
        looked = self._rules_token()
        if looked is not None and looked == self._rules_looked:
            return  # no commit from another connection, no rule change in this process
        rows = self.store.rule_changes(self.chat_id)
        for row in [row for row in rows if row not in self._rules_seen]:
            ts, kind, text = row
            data = codec.loads(text)
            rule = self._readable_rule(data.get("rule")) if kind == "rule_changed" else None
            key = _change_key(datetime.fromisoformat(ts), kind, data)
            with self._lock:
                mine = key in self._own_rules
                if mine:
                    self._own_rules.remove(key)
            self._rules_seen.add(row)
            if mine:
                continue
            with may_wait_here():  # its events reach every subscriber (see _waiting)
                if rule is not None:
                    host.apply_rule_change(rule, bool(data.get("added", True)))
                else:
                    host.apply_always_allow_change(
                        str(data.get("tool")),
                        bool(data.get("allowed")),
                        bool(data.get("conditional", False)),
                    )
        self._rules_looked = looked  # only now: a rule that could not be read stops each step

    def _rules_token(self) -> tuple[Any, int] | None:
        """What :meth:`apply_rules` compares to skip a read: ``None`` (a store that cannot
        tell: always read), else the store's ``rules_token()`` (SQLite's ``data_version``,
        PostgreSQL's count of the rule changes announced) and this process's rule changes
        (another chat object's, through the same connection)."""
        token = getattr(self.store, "rules_token", None)
        return None if token is None else (token(), _RULE_WRITES.value)

    def _readable_rule(self, data: Any) -> Rule:
        try:
            return Rule.from_dict(data)
        except ValueError as exc:
            raise StoreError(
                f"chat {self.chat_id} has a rule this version cannot read ({exc}), added in "
                "another process: upgrade nbagent, or correct the stored event; the chat does "
                "not go on without it"
            ) from None

    def apply_decisions(self) -> list[ToolCall]:
        """Apply decisions recorded in the store to this chat's pending calls.

        Each goes through the chat's own decision rules (``ChatHost.apply_decision``:
        the same events as a click, keeping who decided and when). Returns the
        calls decided.
        """
        host = self._host
        if host is None:
            return []
        pending = host.chat.pending_approvals
        if not pending:
            return []
        found = self.store.decisions(self.chat_id, [c.id for c in pending])
        decided: list[ToolCall] = []
        for c in pending:
            d = found.get(c.id)
            if d is None:
                continue
            if d.arguments is not None and not may_wait() and not _known(host, c):
                # its edit is checked against the tool, which an MCP server lists first
                # (it may connect, or time out): not on the async driver's loop
                raise WouldWait("listing the chat's tools waits on a tool source")
            try:
                with may_wait_here():  # its events reach every subscriber (see _waiting)
                    host.apply_decision(c, d)
            except EditUnchecked as exc:
                # not a verdict: the decision stays stored, for a later step or a chat with
                # the tool (rejected, a person's decision was erased by a server's hiccup)
                later = (
                    f"its edited arguments cannot be checked now ({exc}); it stays stored and "
                    "is applied at a later step (complete(), chat.refresh())"
                    if exc.transient
                    else f"{exc}, so its edited arguments cannot be checked here; it stays "
                    "stored, for a chat that offers the tool as the call was made to apply"
                    if exc.offered
                    else f"this chat has no {c.name!r} tool to check its edited arguments; "
                    "it stays stored, for a chat loaded with the tool to apply"
                )
                warnings.warn(
                    f"nbagent store: {c.name}({c.id}) was approved elsewhere by {d.by}, but "
                    f"{later}. The call waits for it here.",
                    StoreConflictWarning,
                    stacklevel=2,
                )
                continue
            except DecisionError as exc:
                self.store.reject_decision(self.chat_id, c.id, str(exc))
                # a plain approval a deny rule added since matches: the rule denies the
                # call (the step's gate); else it waits for a fresh decision
                then = (
                    "the deny rule denies the call, which never runs"
                    if isinstance(exc, RuleRefused) and d.arguments is None
                    else "the call is awaiting approval again"
                )
                warnings.warn(
                    f"nbagent store: the decision on {c.name}({c.id}) made elsewhere cannot be "
                    f"applied ({exc}); {then}.",
                    StoreConflictWarning,
                    stacklevel=2,
                )
                continue
            decided.append(c)
        return decided

    def apply_inputs(self) -> list[ToolCall]:
        """Apply answers given in the store (``store.answer`` in any process, the inbox) to
        this chat's pending inputs, through the chat's own rules (``ChatHost.apply_input``).
        Returns the calls whose inputs were answered."""
        host = self._host
        if host is None:
            return []
        pending = host.chat.pending_inputs
        if not pending:
            return []
        found = self.store.input_answers(self.chat_id, [p.id for p in pending])
        answered: list[ToolCall] = []
        for p in pending:
            si = found.get(p.id)
            if si is None or si.status == "pending":
                continue
            try:
                with may_wait_here():  # its events reach every subscriber (see _waiting)
                    host.apply_input(p, si.status, si.data, si.answered_by or "store", si.reason)
            except InputError as exc:
                if not any(q.id == p.id for q in host.chat.pending_inputs):
                    continue  # answered here meanwhile: the store's first answer was applied
                self.store.reject_answer(self.chat_id, p.id, str(exc))
                warnings.warn(
                    f"nbagent store: the answer to input {p.id!r} given elsewhere cannot be "
                    f"applied ({exc}); the input waits again.",
                    StoreConflictWarning,
                    stacklevel=2,
                )
                continue
            if p.call_id is not None:
                with contextlib.suppress(DecisionError):
                    answered.append(host.chat.get_call(p.call_id))
        return answered


def _known(host: ChatHost, c: ToolCall) -> bool:
    """Whether the chat knows ``c``'s tool without asking a tool source (an edit's check
    then lists nothing)."""
    return c.hosted or any(t.name == c.name and t.server == c.server for t in host.known_tools())


def _answers_reopened(events: list[Event], calls: dict[str, ToolCall]) -> list[Event]:
    """A stored chat's events, less the answer to a parked call (an external tool's,
    ``ask_user``'s) that was written without the call's result: its input waits again, so
    that :meth:`StoreExtension.apply_inputs` applies the stored answer (the call's result
    is written with it), and the call is never run as if nobody had answered.

    Written by a version that wrote the answer's event at once and the result at the end
    of the step: a process that died between the two left the input answered and the
    call runnable, and the next load ran the external tool's body (the model read
    ``null``; ``ask_user`` answered with an error)."""
    parked = {
        e.input_id
        for e in events
        if isinstance(e, InputRequested)
        and e.call is not None
        and e.resume is None
        and e.input_id == e.call.id  # the call's own input, asked before it would run
        and (c := calls.get(e.call.id)) is not None
        and c.status in RUNNABLE_STATUSES
        and c.result is None
    }
    if not parked:
        return events
    return [e for e in events if not (isinstance(e, InputAnswered) and e.input_id in parked)]


def _answered_here(found: StoredInput, action: str, by: str, at: str) -> bool:
    """Whether the store's answer to an input is the one given here at ``at``."""
    when = found.answered_at
    return (
        found.status == action
        and found.answered_by == by
        and when is not None
        and when.isoformat() == at
    )


def _change_key(ts: datetime, kind: str, data: Any) -> tuple[Any, ...]:
    """What tells a stored rule change from another: its time, kind and content."""
    if kind == "rule_changed":
        rule = codec.dumps(data.get("rule"))
        return (ts, kind, rule, bool(data.get("added", True)))
    return (ts, kind, data.get("tool"), bool(data.get("allowed")), bool(data.get("conditional")))


class _Count:
    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def bump(self) -> None:
        with self._lock:
            self.value += 1


_DETACHED_WRITES = frozenset({ApprovalDecided.type, RuleChanged.type, AlwaysAllowChanged.type})
"""What a detached copy (loaded while another process drives) writes: decisions and rule
changes, which the driver reads from the store; never anything of a run."""

_RULE_WRITES = _Count()
"""Rule changes made in this process: one another chat object wrote through the same
connection does not move SQLite's ``data_version``, so each makes every chat read its
rules again at its next look."""


def _takes_recorded(store: Store) -> bool:
    """Whether ``store.write`` takes ``recorded=`` (responses kept in the same transaction)."""
    return _accepts(store, "write", "recorded")


def _accepts(store: Store, method: str, param: str) -> bool:
    """Whether ``store``'s ``method`` takes ``param`` (a store written for an older protocol,
    or a subclass overriding the method with its older signature, does not: it is called
    without it); asked once per class unless the object has the method of its own."""
    if method in getattr(store, "__dict__", {}):
        return _takes(getattr(store, method), param)
    return _class_takes(type(store), method, param)


@functools.lru_cache(maxsize=64)
def _class_takes(cls: type, method: str, param: str) -> bool:
    return _takes(getattr(cls, method, None), param)


def _takes(fn: Any, param: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError, AttributeError):
        return False
    return param in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


__all__ = ["StoreExtension", "in_doubt_content"]
