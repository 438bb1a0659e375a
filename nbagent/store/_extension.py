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
- at once: a decision, an options change, a failed request, an in-doubt call,
  a denial, and a result that arrives while other calls of its round still run.

A model response whose calls run right away is written with their claim; a
hard crash before that loses only that response (the next load asks the model
again), never a tool's outcome. What is pending is also written when the chat
object is garbage-collected or the interpreter exits.

**The claim** (``Extension.claim``): right before a call runs, the store moves
its row from ``requested``/``approved`` to ``running`` in one transaction and
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
table. A chat applies them with its own decision rules
(``ChatHost.apply_decision``, so they emit the same events as a click) at the
start of every step, on ``Chat.load``, and on ``chat.refresh()``.

Everything here goes through the :class:`~nbagent.store.Store` protocol, so it
works unchanged with any store that implements it.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from datetime import datetime
from typing import Any, Literal

from .._errors import DecisionError, StoreError
from .._events import (
    ApprovalDecided,
    CallInDoubt,
    Event,
    ModelRequestFailed,
    OptionsChanged,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
)
from .._extension import ChatHost, Extension, Snapshot
from .._types import ToolCall
from . import _codec as codec
from ._process import LIVE_TOKENS, abandoned, new_owner
from ._protocol import (
    ChatInfo,
    ChatRecord,
    DecisionChange,
    Entry,
    Store,
    StoreConflictWarning,
    StoredCall,
)


class StoreExtension(Extension):
    """Connects one chat object to a store: event writer, claim, step hook, refresh."""

    def __init__(self, chat_id: str, store: Store, owned: bool):
        self.store = store
        self.owned = owned
        self.chat_id = chat_id
        self.owner = new_owner()
        self._token = self.owner.rsplit(":", 1)[1]
        LIVE_TOKENS.add(self._token)
        self._host: ChatHost | None = None
        self._lock = threading.RLock()
        self._pending: list[tuple[Event, Any]] = []  # (event, what was noted when it came)
        self._running: set[str] = set()
        self._orphans: dict[str, str | None] = {}  # in-doubt call id -> its dead owner
        self._tools_sig: tuple[Any, ...] | None = None
        self._state: dict[str, Any] | None = None
        self._state_key: tuple[Any, ...] | None = None
        self.detached: str | None = None
        self._closed = False

    # -- wiring ------------------------------------------------------------
    def attach(self, host: ChatHost) -> None:
        self._host = host
        weakref.finalize(host.chat, self.close)

    def _attached(self) -> ChatHost:
        host = self._host
        if host is None:
            raise RuntimeError("the store extension is not attached to a chat yet")
        return host

    def create(self, info: ChatInfo, system: str | None) -> None:
        """Record the chat this extension was just attached to as a new chat of the store.

        Raises:
            StoreError: The store has a chat with this id, or cannot be written;
                the extension is closed then.
        """
        state = self._attached().loop_state()
        try:
            self.store.create_chat(info, system, state)
        except BaseException:
            self.detached = "the chat could not be created in the store"
            self.close()
            raise
        self._state = state

    def resume(self, record: ChatRecord, snapshot: Snapshot) -> None:
        """Put a stored chat back into the (new) chat this extension was just attached to.

        Restores its state, hands its stored events to every extension, settles
        the calls its last process left running, and applies the decisions made
        while no chat had it open.
        """
        host = self._attached()
        host.restore(snapshot)
        known = {c.id: c for c in host.chat.tool_calls}
        host.replay(self.store.iter_events(self.chat_id, calls=known))
        self._state = host.loop_state() if record.state.get("options") else None
        self.settle_orphans(record)
        self.apply_decisions()

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
            LIVE_TOKENS.discard(self._token)
            if self.owned:
                self.store.close()

    # -- state ---------------------------------------------------------------
    def _snapshot(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The chat's state and tool schemas, each only when changed since last written.

        Both are checked at every write, so the checks are cheap: the state is
        rebuilt only when its key changed (see ``ChatHost.state_key``), and the
        tools are compared by name and identity.
        """
        host = self._host
        if host is None or not host.alive:
            return None, None
        state: dict[str, Any] | None = None
        key = host.state_key()
        if key != self._state_key:
            self._state_key = key
            state = host.loop_state()
            if state == self._state:
                state = None
            else:
                self._state = state
        tools = None
        current = host.chat.tools
        sig = (*(t.name for t in current), *map(id, current))
        if sig != self._tools_sig:
            self._tools_sig = sig
            tools = {t.name: t.input_schema for t in current}
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
        if self._closed:
            return
        noted: Any = None
        match e:
            case TextDelta() | ToolCallDelta():  # streaming fragments: not stored
                return
            case ApprovalDecided():  # written even by a detached copy: deciding is not driving
                flush = True
            case _ if self.detached is not None:
                return
            case ToolCallFinished():
                noted, flush = self._finished(e)
            case StepFinished():  # a generated step is written with the next claim or step,
                flush = e.kind != "generated" or self._parked()  # unless the chat parks here
            case CallInDoubt():
                noted, flush = self._reset_status(e), True
            case ModelRequestFailed() | OptionsChanged():
                flush = True
            case _:
                flush = False
        with self._lock:
            self._pending.append((e, noted))
        if flush:
            self.flush()

    def _parked(self) -> bool:
        """Whether the chat now waits for an approval (or is gone): nothing follows soon."""
        host = self._host
        return host is None or not host.alive or host.chat.awaiting_approval

    def _finished(self, e: ToolCallFinished) -> tuple[tuple[str | None, datetime | None], bool]:
        """A call finished: who may record its result, when, and whether to write now."""
        call = e.call
        self._running.discard(call.id)
        in_doubt = e.status == "in_doubt"
        owner = self._orphans.pop(call.id, self.owner) if in_doubt else self.owner
        # Written at the end of the round, unless other calls of the round still run.
        flush = bool(self._running) or in_doubt or e.status == "denied"
        return (owner, call.finished_at), flush

    def _reset_status(self, e: CallInDoubt) -> str | None:
        """For an in-doubt call that will be rerun: the status it goes back to."""
        if not e.rerun:
            return None
        call = e.call
        self._orphans.pop(call.id, None)
        gated = call.approval is not None and call.approval.required
        return "approved" if gated else "requested"

    def _take(self) -> list[Entry]:
        """Everything queued, as entries (encoded now, in order); empties the queue."""
        with self._lock:
            queued, self._pending = self._pending, []
            return codec.encode_batch(queued)

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
            self._pending = [x for x in self._pending if isinstance(x[0], ApprovalDecided)]
        warnings.warn(
            f"nbagent store: chat {self.chat_id} is being driven by another process "
            f"({why}). This copy stops here (its steps return 'busy'); load it again with "
            f"Chat.load({self.chat_id!r}, store=...) to continue.",
            StoreConflictWarning,
            stacklevel=3,
        )

    # -- the step hook ---------------------------------------------------------
    def before_step(self) -> Literal["busy"] | None:
        """Before each step: settle calls left running elsewhere, apply decisions made elsewhere.

        Both can only concern the open round (a call is running or awaiting
        approval only until its round closes), so a step with no open round
        costs nothing, and the store is read only when a call waits for a decision.
        """
        if self.detached is not None:
            return "busy"
        host = self._host
        if host is None:
            return None
        opened = host.chat.open_calls
        if not opened:
            return None
        running = self._running
        if any(c.status == "running" and c.id not in running for c in opened):
            self.settle_orphans()
            if self.detached is not None:
                return "busy"
        self.apply_decisions()
        return "busy" if self.detached is not None else None

    def refresh(self) -> list[ToolCall]:
        """``chat.refresh()``: write what is pending, then apply decisions made elsewhere."""
        self.flush()
        if self.detached is not None:
            return []
        return self.apply_decisions()

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
        for c in foreign:
            sc = stored.get(c.id)
            if sc is None:
                continue
            if sc.status != "running":
                busy.append(f"{c.name}({c.id}) is {sc.status} in the store")
            elif not abandoned(sc, self.store.claim_timeout):
                busy.append(f"{c.name}({c.id}) is running in {sc.claimed_by}")
            else:
                orphans.append((c, sc))
        if busy:
            self._detach("; ".join(busy))
            return
        for c, sc in orphans:
            tool = host.tool(c.name)
            self._orphans[c.id] = sc.claimed_by  # read by on_event for the events below
            if not host.settle_in_doubt(
                c,
                claimed_by=sc.claimed_by,
                claimed_at=sc.claimed_at,
                rerun=bool(tool is not None and getattr(tool, "idempotent", False)),
                content=in_doubt_content(c, sc),
            ):
                self._orphans.pop(c.id, None)

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
            try:
                host.apply_decision(c, d)
            except DecisionError as exc:
                if host.tool(c.name) is None:  # another process with the tool can apply it
                    warnings.warn(
                        f"nbagent store: {c.name}({c.id}) was approved elsewhere with edited "
                        f"arguments, but this chat has no {c.name!r} tool to check them; it "
                        "stays pending here.",
                        StoreConflictWarning,
                        stacklevel=2,
                    )
                    continue
                self.store.reject_decision(self.chat_id, c.id, str(exc))
                warnings.warn(
                    f"nbagent store: the decision on {c.name}({c.id}) made elsewhere cannot be "
                    f"applied ({exc}); the call is awaiting approval again.",
                    StoreConflictWarning,
                    stacklevel=2,
                )
                continue
            decided.append(c)
        return decided


def in_doubt_content(call: ToolCall, stored: StoredCall) -> str:
    """What the model is told about a call whose outcome is unknown."""
    when = f" at {stored.claimed_at.isoformat()}" if stored.claimed_at else ""
    return codec.dumps(
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


__all__ = ["StoreExtension", "in_doubt_content"]
