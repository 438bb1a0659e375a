"""The extension seam: how a wing (the store, the log, the notebook view, yours) plugs into a chat.

A chat knows its extensions only through this module. An extension is an
:class:`Extension` whose hooks the chat calls at fixed points; every hook's
default does nothing, so an extension overrides only what it needs, and a hook
nobody overrides costs nothing (the chat keeps one list per hook)::

    class Audit(Extension):
        def on_event(self, event):          # every event, in emission order
            print(event.seq, event.type)

    chat.extend(Audit())

The hooks, in the order a turn meets them:

- :meth:`Extension.attach` once, from ``chat.extend(ext)``, with the
  :class:`ChatHost`: the chat's public API plus the few lifecycle operations an
  extension may ask the core to perform (below);
- :meth:`~Extension.turn_started` after ``ask_later`` added a user message;
- :meth:`~Extension.before_step` at the start of every step, before planning,
  on the driving thread; returning ``"busy"`` ends the step with
  ``StepResult("busy")`` (another process owns the chat);
- :meth:`~Extension.claim` right before a call starts, under the chat's lock:
  ``False`` means someone else has it and it is not run here (the store's
  at-most-once claim);
- :meth:`~Extension.decide` right before a decision on a gated call is
  recorded, under the chat's lock: it may refuse it, or return the decision
  already made elsewhere, which the chat records instead (the store checks a
  decision against, and writes it to, the stored state in one transaction);
- :meth:`~Extension.answer_input` right before an answer to a pending input is
  recorded, under the chat's lock: it may return the answer given elsewhere first,
  which the chat records instead (the store: first answer wins across processes);
- :meth:`~Extension.on_event` for every event (the store's writer, the log,
  the view); :meth:`~Extension.on_history` once with the stored events of a
  chat loaded from a store;
- :meth:`~Extension.wait_for_decision` when ``await chat.ask_async()`` finds
  the chat parked on an approval (the notebook view waits for a click);
- :meth:`~Extension.refresh` from ``chat.refresh()`` (the store applies
  decisions made in other processes), :meth:`~Extension.follow_decisions`
  from whoever wants to call ``refresh()`` only when it has news (a displayed
  pending card, a parked batch row; the store subscribes to its follower), and
  :meth:`~Extension.close` from ``chat.close()`` (the store writes what is
  pending and lets its file go);
- :meth:`~Extension.recordings` at every model request and tool round: where
  the extension keeps recorded responses and results (the store), searched
  after the process's and written with them (see :mod:`nbagent._replay`);
- :meth:`~Extension.catch_up` only under the async driver (``await
  chat.complete_async()``, a batch): awaited on the driving loop before each
  model request and each tool round (with the round's calls) and when the
  driver stops, and :meth:`~Extension.starting` before each call of a round
  starts. While that driver runs, :func:`writes_deferred` is true in
  ``on_event``: an extension that would block the loop there (the store's
  writes) may leave the work to ``catch_up``, which does it off the loop.

**The core owns every lifecycle change.** An extension never assigns a call's
status, result or decision: it asks the host, which applies the change with the
chat's own rules and emits its event (:meth:`ChatHost.apply_decision`,
:meth:`ChatHost.apply_input`, :meth:`ChatHost.settle_in_doubt`, :meth:`ChatHost.restore`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ._events import Event
from ._replay import Recordings
from ._rules import Rule
from ._types import Decision, ForkParent, Message, PendingInput, ToolCall

if TYPE_CHECKING:
    from ._tools import Tool


class Extension:
    """Base of chat extensions: override the hooks you need (see the module docstring).

    Attributes:
        fragments: Whether :meth:`on_event` wants the streaming fragments
            (``TextDelta``, ``ReasoningDelta``, ``ToolCallDelta``). An extension
            that ignores them says ``False``: a stream nobody else hears then
            makes no fragment events at all.
        commits_claim: Whether :meth:`claim` records the call as started where others
            read it (a store's at-most-once claim). Such claims are asked after every
            other extension's, so that one vetoing the start leaves nothing recorded
            (asked first, the store said the call ran, and it was in doubt for ever).
    """

    fragments: ClassVar[bool] = True
    commits_claim: ClassVar[bool] = False

    def attach(self, host: ChatHost) -> None:
        """Called once by ``chat.extend(self)``; keep ``host`` to act on the chat later."""

    def on_event(self, event: Event) -> None:
        """Every event of the chat, on the emitting thread, in ``seq`` order."""

    def on_history(self, events: Iterable[Event]) -> None:
        """The stored events of a chat just loaded from a store, oldest first."""

    def turn_started(self) -> None:
        """``ask_later`` added a user message (the turn is ``host.chat.turn``)."""

    def before_step(self) -> Literal["busy", "later"] | None:
        """At the start of every step; ``"busy"`` ends it (another process drives the chat).

        ``"later"`` (only while :func:`writes_deferred`: the async driver's loop): its work
        would wait on this thread; the driver calls it again on a worker thread, outside the
        driver's context, and takes what that call says.
        """
        return None

    def claim(self, call: ToolCall) -> bool:
        """Right before ``call`` starts, under the chat's lock; ``False``: do not run it here."""
        return True

    def decide(self, call: ToolCall, decision: Decision) -> Decision | None:
        """Before the chat records ``decision`` on ``call`` (a gated call), under the chat's lock.

        Return ``None`` to let it be recorded, or the decision already made
        elsewhere (the store's first decision wins): the chat records that one
        instead, with its events, and raises ``DecisionError`` if it contradicts
        ``decision``. Raise ``DecisionError`` to refuse it (nothing is recorded).
        """
        return None

    def refuse_decision(self, call: ToolCall, decision: Decision, why: str) -> None:
        """A decision :meth:`decide` returned (made elsewhere) that the chat's checks refuse
        now, under the chat's lock: edited arguments the call's tool or a deny rule refuses,
        or an approval a deny rule added since matches. Drop it where it is kept, so that it
        is never applied (the store puts the call back to awaiting approval, unless its run
        was claimed already); the chat then records the decision it was making, if the
        store takes it.
        """

    def answer_input(
        self, request: PendingInput, action: str, data: Any, by: str, reason: str | None
    ) -> Any:
        """Before the chat records an answer to ``request``, under the chat's lock.

        Return ``None`` to let it be recorded, or the answer already given elsewhere
        (an object with ``status``, ``data``, ``answered_by`` and ``reason``: the store's
        first answer wins): the chat records that one instead and raises ``InputError``.
        """
        return None

    async def wait_for_decision(self, wait: bool | None) -> bool:
        """``ask_async`` parked on an approval: wait for a decision; True to continue the loop."""
        return False

    def run_stopped(self, error: BaseException) -> None:
        """A run of the loop (``complete()``, ``ask()``, ``step()``, their async twins)
        ended by raising ``error`` (a failed request, the stop button, ``chat.cancel()``, an
        invalid structured answer, a tool error raised): no step event says so. Called on the
        driver's thread, after every event of the run; what it raises is ignored."""

    def refresh(self) -> list[ToolCall]:
        """``chat.refresh()``: apply decisions made elsewhere now; return the calls decided."""
        return []

    def follow_decisions(self, callback: Callable[[], Any]) -> Any:
        """Call ``callback()`` (on a worker thread, never under the chat's lock) whenever
        :meth:`refresh` may have something to apply (a decision recorded elsewhere), and
        once soon. Returns what stops it (its ``close()``); None: no news can come."""
        return None

    def close(self) -> None:
        """``chat.close()``: write what is pending and release resources (may be called twice)."""

    def recordings(self) -> Recordings | None:
        """Where this extension keeps recorded model responses and tool results, if anywhere.

        Called at every model request (to find and write recordings) and tool
        round (``replay_tools``); the store returns its recordings table.
        """
        return None

    async def catch_up(self, calls: Sequence[ToolCall] = (), *, stopping: bool = False) -> None:
        """The async driver, on its loop: before each model request, before each tool round
        (``calls``: the round's calls, about to run) and when it stops (``stopping``).

        Do now, without blocking the loop (awaiting a worker thread), what ``on_event``
        left for later while :func:`writes_deferred` was true; ``calls`` may be claimed
        here (``claim`` is still called for each, right before it starts). Raising
        stops the drive before the request or the round (nothing of the round runs).
        """

    async def starting(self, call: ToolCall) -> None:
        """The async driver, on its loop, right before one call of a round starts (after the
        round's :meth:`catch_up`): what the call's start needs that may wait, done without
        blocking the loop (the store claims here a call its round did not claim ahead:
        one queued behind a running one). Raising: the call does not start and stays
        runnable (``claim`` is still called right after).
        """


_DEFERRED: ContextVar[bool] = ContextVar("nbagent_writes_deferred", default=False)


def writes_deferred() -> bool:
    """Whether the event being handled comes from the async driver, which awaits every
    extension's :meth:`Extension.catch_up` before its next request, its next tool round
    and when it stops (so blocking work may wait for it)."""
    return _DEFERRED.get()


def defer_writes() -> Any:
    """Mark this context as driven asynchronously (the driver's); returns the reset token."""
    return _DEFERRED.set(True)


def undefer_writes(token: Any) -> None:
    _DEFERRED.reset(token)


HOOKS = tuple(name for name in vars(Extension) if name[0] != "_" and name != "attach")
"""Every hook of :class:`Extension` but ``attach``, in the order the class declares them."""


def overrides(ext: Extension, hook: str) -> bool:
    """Whether ``ext`` implements ``hook`` (the chat calls only those)."""
    return getattr(type(ext), hook) is not getattr(Extension, hook)


@dataclass(frozen=True)
class Snapshot:
    """A chat's state as a store rebuilt it, for :meth:`ChatHost.restore`.

    Usage and cost are not in it: the chat's record folds them from the stored
    events handed to :meth:`ChatHost.replay`.

    Attributes:
        messages: The transcript.
        calls: Every tool call, in request order, with its stored lifecycle.
        call_turn / call_step: The turn and step that asked for each call, by id.
        turn / step: The chat's turn and step counters.
        forced_spent: Whether this turn's forced tool choice was used up.
        options: The tool options (``ToolOptions`` fields), or ``None`` for the defaults.
        last_step: The kind of the last step (only ``budget_exhausted`` matters).
        last_budget: The budget that step stopped on (``steps``, ``cost``, ``tokens``).
        next_seq: The number of the next event.
        parent: Where the chat was forked from (``chat.parent``), if it is a fork.
        always_allow: The chat's ``always_allow`` rules as ``(tool, conditional)``
            (``conditional``: it had a ``when`` predicate), or ``None`` to keep the
            chat's own.
        predicates: The ``when`` predicates given back for conditional rules, by tool
            name; a conditional rule without one is kept but approves nothing.
        rules: The chat's rules (``chat.add_rule``), or ``None`` to keep the chat's own.
    """

    messages: tuple[Message, ...]
    calls: tuple[ToolCall, ...]
    call_turn: dict[str, int] = field(default_factory=dict)
    call_step: dict[str, int] = field(default_factory=dict)
    turn: int = 0
    step: int = 0
    forced_spent: bool = False
    options: dict[str, Any] | None = None
    last_step: str | None = None
    last_budget: str | None = None
    next_seq: int = 0
    parent: ForkParent | None = None
    always_allow: tuple[tuple[str, bool], ...] | None = None
    predicates: Mapping[str, Callable[[ToolCall], bool]] = field(default_factory=dict)
    rules: tuple[Rule, ...] | None = None


class ChatHost:
    """What an extension may read and ask of the chat it is attached to.

    Reads go through the public ``chat`` (``transcript``, ``tool_calls``,
    ``open_calls``, ``pending_approvals``...); the rest are the core operations
    below, each applied under the chat's lock and announced with its event.
    The host holds the chat weakly: an extension keeping it never keeps the
    chat alive.
    """

    __slots__ = ("_ref",)

    def __init__(self, chat: Any):
        self._ref = weakref.ref(chat)

    @property
    def chat(self) -> Any:
        """The chat (a :class:`~nbagent._base_chat.BaseChat`; its public API).

        Raises:
            ReferenceError: The chat was garbage-collected.
        """
        chat = self._ref()
        if chat is None:
            raise ReferenceError("the chat this extension was attached to is gone")
        return chat

    @property
    def chat_id(self) -> str:
        return self.chat.id

    @property
    def alive(self) -> bool:
        """False once the chat was garbage-collected."""
        return self._ref() is not None

    def tool(self, name: str) -> Tool | None:
        """The chat's tool called ``name``, if it has one."""
        chat = self.chat
        chat._sync_tools()
        return chat._tools.get(name)

    def remove(self, extension: Extension) -> None:
        """Take ``extension`` out of the chat: none of its hooks is called again (an
        extension that stops for good, such as a tracer after ``uninstrument()``, so a chat
        does not keep one per start and stop). Does nothing when the chat is gone."""
        chat = self._ref()
        if chat is not None:
            chat._unextend(extension)

    def known_tools(self) -> tuple[Tool, ...]:
        """The chat's tools as it has them now, without asking a tool source (an MCP
        server) for its list: what may be read beside a write, which must neither wait on
        a server nor fail with one (``chat.tools`` connects a source not connected yet)."""
        return self.chat.known_tools

    def loop_state(self) -> dict[str, Any]:
        """The loop state a reloaded chat needs besides its messages, calls and events."""
        return self.chat._loop_state()

    def state_key(self) -> tuple[Any, ...]:
        """A cheap key that changes whenever :meth:`loop_state` may have changed."""
        return self.chat._loop_state_key()

    def restore(self, snapshot: Snapshot) -> None:
        """Put back a stored chat's state (a chat being loaded; emits nothing)."""
        self.chat._restore(snapshot)

    def replay(self, events: Iterable[Event]) -> None:
        """Hand a loaded chat's stored events to every extension's ``on_history``.

        The chat keeps them too, as the start of ``chat.events`` (what ``fork`` builds on).
        """
        self.chat._replay(events)

    def apply_decision(self, call: ToolCall | str, decision: Decision) -> ToolCall:
        """Apply a decision made elsewhere (a store) with the chat's own rules and events.

        The decision keeps its ``by``, ``at``, ``reason`` and edited arguments;
        its ``ApprovalDecided`` event says ``elsewhere=True``.

        Raises:
            DecisionError: As ``chat.approve``/``chat.deny`` would.
        """
        return self.chat._decide(
            call,
            decision.verdict,
            by=decision.by,
            reason=decision.reason,
            arguments=decision.arguments,
            at=decision.at,
            elsewhere=True,
        )

    def apply_rule_change(self, rule: Rule, added: bool) -> None:
        """Apply a rule another process added to, or removed from, the stored chat: as
        ``chat.add_rule``/``remove_rule`` would (an added rule decides the waiting calls it
        matches), with a ``RuleChanged`` event that says ``elsewhere=True``; a no-op if the
        chat has (or lacks) it already."""
        self.chat._change_rule(rule, added, elsewhere=True)

    def apply_always_allow_change(self, tool: str, allowed: bool, conditional: bool) -> None:
        """Apply an ``always_allow``/``revoke`` another process made on the stored chat: a
        revocation drops the tool's rules here too; an added rule approves the waiting
        calls it matches (a conditional one only with the predicate this chat was given
        back on load, else it approves nothing); its event says ``elsewhere=True``."""
        self.chat._always_allow_elsewhere(tool, allowed, conditional)

    def apply_input(
        self, request: PendingInput | str, action: str, data: Any, by: str, reason: str | None
    ) -> PendingInput:
        """Apply an answer given elsewhere (a store) to a pending input, with the chat's own
        rules and events (its ``InputAnswered`` says ``elsewhere=True``).

        Raises:
            InputError: As ``chat.answer`` would (the input no longer waits here, or the
                answer does not match what was asked).
        """
        return self.chat._settle_input(
            request,
            action,
            data,
            by=by,
            reason=reason,
            elsewhere=True,
        )

    def settle_in_doubt(
        self,
        call: ToolCall,
        *,
        claimed_by: str | None,
        claimed_at: datetime | None,
        rerun: bool,
        content: str,
    ) -> bool:
        """A call left ``running`` by a process that is gone: in doubt, or runnable again.

        Emits ``CallInDoubt``, then (unless ``rerun``) a ``ToolCallFinished``
        with status ``in_doubt`` whose result is ``content``. Returns False
        (and does nothing) when the call is no longer running here.
        """
        return self.chat._settle_in_doubt(
            call, claimed_by=claimed_by, claimed_at=claimed_at, rerun=rerun, content=content
        )


# ---------------------------------------------------------------- process-wide extensions
# An extension every chat of the process gets, old and new (``nbagent.instrument()``): a
# factory kept here, called once per chat. With none (the usual case), making a chat costs
# one weak reference and an empty loop, and an event costs nothing at all.
_AUTO: tuple[Callable[[Any], Extension | None], ...] = ()
_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()
_AUTO_LOCK = threading.Lock()


def auto_extend(factory: Callable[[Any], Extension | None]) -> None:
    """Give every chat of this process, made before or after, ``factory(chat)``'s extension.

    ``factory`` returns the extension (or ``None``: not this chat); it is called now for
    every live chat and then once for each new chat, at the end of its ``__init__``.
    """
    with _AUTO_LOCK:
        global _AUTO
        if factory in _AUTO:
            return
        _AUTO = (*_AUTO, factory)
        live = list(_LIVE)
    for chat in live:
        _extend_with(chat, factory)


def stop_auto_extend(factory: Callable[[Any], Extension | None]) -> bool:
    """New chats no longer get ``factory``'s extension; whether it was registered.

    Chats that already have it keep it: the extension is told to stop by its owner.
    """
    with _AUTO_LOCK:
        global _AUTO
        before = len(_AUTO)
        _AUTO = tuple(f for f in _AUTO if f != factory)  # a bound method is a new object each time
        return len(_AUTO) != before


def auto_extensions(chat: Any) -> None:
    """A new chat joins the process's chats and gets the process-wide extensions."""
    with _AUTO_LOCK:
        _LIVE.add(chat)
        factories = _AUTO
    for factory in factories:
        _extend_with(chat, factory)


def _extend_with(chat: Any, factory: Callable[[Any], Extension | None]) -> None:
    ext = factory(chat)
    if ext is not None:
        chat.extend(ext)


__all__ = [
    "HOOKS",
    "ChatHost",
    "Extension",
    "Snapshot",
    "auto_extend",
    "auto_extensions",
    "overrides",
    "stop_auto_extend",
]
