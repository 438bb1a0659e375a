"""The chat's state and its lifecycle: step results, tool results, effects, :class:`ChatCore`.

:class:`ChatCore` declares the chat's state (one place to read it), the small
helpers every part uses (emitting events, finding calls, appending messages)
and **every change to a call's lifecycle**: answering a call, recording a
decision, settling a call in doubt, restoring a stored chat. Nothing outside
the core assigns a call's status, result or decision; extensions ask for these
changes through :class:`~nbagent._extension.ChatHost`. The loop (``_loop.py``),
the decisions API (``_decisions.py``) and the public :class:`~nbagent.Chat`
(``_chat.py``) build on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import concurrent.futures

from ._aio import stop_held
from ._approvals import (
    HUMAN,
    Policy,
    always_allow_policy,
    call_secrets_hidden,
    denial_content,
    not_given,
    policy_rules,
    restored_policies,
)
from ._config import get_config
from ._drive import Drive
from ._errors import DecisionError, InputError, ToolDefinitionError, redact_keys
from ._events import (
    AlwaysAllowChanged,
    ApprovalDecided,
    CallbackWarning,
    CallInDoubt,
    Event,
    EventBus,
    InputAnswered,
    InputRequested,
    MessageAdded,
    ModelRequestFinished,
    RuleChanged,
    ToolCallFinished,
    raised,
    unawaited,
    utcnow,
)
from ._extension import Extension, Snapshot
from ._frozen import frozen
from ._hosted import HostedTool
from ._notice import notice
from ._options import ToolOptions
from ._output import Output
from ._record import FRAGMENTS, ChatRecord, keeper
from ._replay import Recordings, Replayer
from ._result_text import to_result
from ._rules import RULE, Rule, denied_edit, first_match
from ._runner import Job, Mode, ToolRunner
from ._schema import validate_json_schema
from ._secrets import provider_secrets, scrub, scrub_keys
from ._tools import (
    CancelEvent,
    InputsRequired,
    SchemaValidationError,
    Tool,
    ToolSource,
    _cancelled_by,
)
from ._types import (
    RUNNABLE_STATUSES,
    AssistantToolCallMessage,
    Decision,
    DecisionVerdict,
    ForkParent,
    InputAction,
    InputKind,
    LLMToolResponse,
    Message,
    PendingInput,
    ResultStatus,
    ToolCall,
    ToolResultMessage,
    short_id,
)
from ._unicode import TooDeep, clean, clean_json
from .providers import ModelRequest, Provider

StepKind = Literal[
    "generated", "ran_tools", "awaiting_approval", "complete", "budget_exhausted", "busy"
]
RUNNABLE = RUNNABLE_STATUSES
HOSTED = "hosted"
"""The ``mode`` of a hosted call's events: the provider runs it, never this process."""
_ALREADY = "\x00already-decided"
SETTINGS = (
    "max_steps",
    "max_cost_usd",
    "max_total_tokens",
    "cache",
    "on_tool_error",
    "stream",
    "reasoning",
)
"""The chat's settings a store keeps in its loop state (``Chat.load`` gives them back)."""
_LATER_OPTIONS = {"order": "ready"}
"""Options added after stores existed, with their defaults: stored only when set otherwise,
so a chat that does not use them stays readable by the nbagent before them."""


def checked_edit(tool: Tool, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments a human edited (an approval's edit, a fork's), checked: valid text,
    JSON the wire can carry, and what ``tool``'s schema accepts.

    Raises:
        DecisionError: Saying which check failed (a value it quotes with a key or a URL's
            password in it shows them as ``***``).
    """
    try:
        arguments = clean_json(arguments)
        json.dumps(arguments, allow_nan=False)  # what the wire will need
    except TooDeep as exc:
        raise DecisionError(f"edited arguments for {name} are {exc}") from None
    except (TypeError, ValueError) as exc:
        why = redact_keys(str(exc))
        raise DecisionError(f"edited arguments for {name} are not JSON ({why})") from None
    try:
        tool.validate_arguments(arguments)
    except SchemaValidationError as exc:
        why = redact_keys(str(exc))
        raise DecisionError(f"edited arguments for {name} are invalid: {why}") from None
    return dict(arguments)


class EditUnchecked(DecisionError):
    """An approval's edited arguments could not be checked against the call's tool, so
    nothing was decided: the chat does not have the tool (a chat loaded without it), or
    its tool sources could not list their tools now (``transient``: an MCP server not
    reachable). Not a verdict on the decision: a store keeps one made elsewhere, to be
    applied by a later step (``transient``) or by a chat that has the tool. ``offered``:
    the chat's MCP server lists the tool, which this chat's own setup leaves out (a
    ``tools(exclude=...)`` view, another ``prefix=``, a local tool of that name)."""

    def __init__(self, message: str, *, transient: bool, offered: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
        self.offered = offered


class RuleRefused(DecisionError):
    """An approval a deny rule of the chat refuses: what would run (the edited arguments, or
    the model's) matches it. A call a deny rule matches never runs, whoever approved it and
    whenever the rule came (an approval stored before it: the chat then denies the call by
    the rule when its own arguments match)."""


_Listed = Literal["unlooked", "own", "absent", "offered", "gone"]
"""What :meth:`ChatCore._list_tool_of` found of a call's tool: nothing (not looked), the
chat's own tool of the call (``own``), no source of the call's MCP server in the chat
(``absent``), a server that lists a tool that may be the call's while this chat does not offer
it as the call named it (``offered``: a ``tools(include=/exclude=)`` view, another
``prefix=``, a local tool of that name), or a server whose whole listing has no such tool
(``gone``: the only verdict)."""


class _Unlisted(Exception):
    """A decision a ``decide`` hook handed back (made elsewhere first) carries edited
    arguments of a tool this chat does not know yet: its sources are listed outside the
    lock, then the decision is made again."""

    def __init__(self, stored: Decision) -> None:
        super().__init__()
        self.stored = stored


def _may_name(name: str, t: Tool) -> bool:
    """Whether a call named ``name`` may be of ``t``, one of an MCP server's tools, under
    any prefix (``p_charge`` of remote ``charge``), cut or told apart from another by a
    suffix (``mcp/_server.py``'s ``local_names``): the call records the name it was offered
    under, not the server's own. Generous on purpose: a yes keeps a decision made elsewhere
    stored; only a no rejects it."""
    if t.name == name:
        return True
    remote = getattr(t, "remote_name", None)
    if not isinstance(remote, str):
        return False
    own = _NOT_IN_A_NAME.sub("_", remote)
    bases = {name, _SUFFIXED.sub("", name)}
    for base in bases:
        if base == own or base.endswith(f"_{own}"):
            return True
        if (
            len(base) >= _CUT
            and any(  # cut to fit: its end is the start of the remote's
                own.startswith(base[i + 1 :]) for i, ch in enumerate(base) if ch == "_"
            )
        ):
            return True
    return False


_NOT_IN_A_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_SUFFIXED = re.compile(r"_[0-9a-f]{8}$")
_CUT = 55  # a tool name is cut to 64 characters, 55 before a suffix


def same_arguments(given: Any, own: Mapping[str, Any]) -> bool:
    """Whether approving with ``given`` is approving the call's ``own`` arguments: the same
    JSON, key order aside (``1`` and ``1.0`` or ``True`` are other values: the tool would get
    another value). Such an approval is a plain one: nothing was edited, so no edit is
    recorded, shown or told to the model (an editor approved unchanged, its ``***`` put back)."""
    try:
        dumped = json.dumps(given, sort_keys=True, allow_nan=False, ensure_ascii=False)
        return dumped == json.dumps(own, sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # not JSON: checked_edit says why
        return False


def _with(standing: Decision, verdict: str) -> str:
    """What a refused approval is told of the ``standing`` approval: the arguments it stands
    with (``""`` for a contradicting verdict, which says enough)."""
    if standing.verdict != verdict:
        return ""
    if standing.arguments is None:
        return " with the model's arguments"
    return " with edited arguments"


def _gated(c: ToolCall) -> bool:
    return c.approval is not None and c.approval.required


def listed_ready(calls: Sequence[ToolCall]) -> list[ToolCall]:
    """The calls that may run now under ``order="listed"``, in the response's order.

    Gated calls are barriers: the calls before an unfinished gated call may
    run (ungated ones together, as one round), the gated call runs alone once
    everything before it is final, and nothing after it runs until it is final
    (denied, or approved and run). Final calls (answered, denied, rejected)
    never hold anything up.
    """
    ready: list[ToolCall] = []
    for i, c in enumerate(calls):
        if c.is_final:
            continue
        if _gated(c):
            runnable = c.status in RUNNABLE and not c.hosted
            if runnable and all(x.is_final for x in calls[:i]):
                return [c]  # alone: everything before it has finished
            break  # undecided, or waiting for earlier calls: nothing after it runs
        if c.status in RUNNABLE and not c.hosted:
            ready.append(c)
    return ready


class SkipToolCall(Exception):
    """Raise in a ``before_tool_call`` callback to skip that call.

    The model receives the message as the call's (error) result.
    """


@dataclass(frozen=True)
class StepResult:
    """What one ``step()`` did.

    Attributes:
        kind: ``generated`` (one model request), ``ran_tools`` (one round of
            runnable calls), ``awaiting_approval`` (nothing runnable until
            someone decides), ``complete`` (the model answered),
            ``budget_exhausted`` (a budget ran out with work left: ``max_steps``, or the
            chat's ``max_cost_usd`` / ``max_total_tokens``, from ``step()`` too), or ``busy``
            (with a store: another process drives this chat, and this copy is
            stale; ``Chat.load`` it again). Another driver in this process is
            never ``busy``: the step waits for it (see :meth:`Chat.step`).
        message: The assistant message generated, or the chat's last one.
        calls: The calls run (``ran_tools``) or waiting (``awaiting_approval``).
        response: The provider's response (``generated``).
    """

    kind: StepKind
    message: Message | None = None
    calls: tuple[ToolCall, ...] = ()
    response: LLMToolResponse | None = None


@dataclass(frozen=True)
class ToolResult:
    """What ``after_tool_result`` callbacks receive (``str(result)`` is its ``content``).

    Attributes:
        call: The call answered, its ``arguments`` those it ran with (a person's edit
            at approval; :meth:`~nbagent.ToolCall.as_run`).
        content: The text sent to the model.
        status: ``ok``, ``error``, ``denied``, ``cancelled``, ``skipped``, ``timed_out``.
        value: The tool's return value (``None`` unless it ran and returned).
        error: The exception, when the tool raised.
        duration_ms: Run time, when it ran.
    """

    call: ToolCall
    content: str
    status: str
    value: Any = None
    error: BaseException | None = None
    duration_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "call", self.call.as_run())  # its arguments: what ran

    @property
    def is_error(self) -> bool:
        return self.status != "ok"

    def __str__(self) -> str:
        """The text the model reads: ``print(f"Tool returned: {result}")`` shows the result."""
        return self.content


@dataclass
class _ModelRequest:
    step: int
    request: ModelRequest
    t0: float = 0.0


@dataclass
class _RunRound:
    step: int
    jobs: list[Job]
    mode: Mode
    errors: list[tuple[ToolCall, BaseException]] = field(default_factory=list)
    declined: set[str] = field(default_factory=set)
    """The calls an extension's ``claim`` said not to run here (another process has them)."""


@dataclass
class _SyncTools:
    """Take the tool sources' current tools before a request (a source may connect)."""


@dataclass
class _StepHook:
    """Call a ``before_step`` hook that said ``"later"`` again, off the async driver's loop:
    its work would wait on the loop's thread (the store's reads, behind another writer)."""

    hook: Callable[[], Any]


_Effect = _ModelRequest | _RunRound | _SyncTools | _StepHook


class ChatCore:
    """The chat's state and shared helpers (see the module docstring)."""

    # the configuration, set by ``BaseChat`` from its arguments
    provider: Provider
    system: str | None
    max_steps: int | None
    max_cost_usd: float | None
    max_total_tokens: int | None
    cache: bool
    on_tool_error: Literal["result", "raise"]
    stream: bool | None
    reasoning: str | int | None
    display: bool | None
    _replayer: Replayer
    _cost_step: float | None  # what the budget card's Continue adds (the budget as created)
    _tokens_step: int | None

    def __init__(self, chat_id: str) -> None:
        """The state of a new, empty chat (every attribute the core keeps)."""
        self.id = chat_id
        self._messages: list[Message] = []
        self._tools: dict[str, Tool] = {}  # what the model sees: local tools, then sources'
        self._hosted: dict[str, HostedTool] = {}
        self._local_tools: dict[str, Tool] = {}
        self._sources: list[ToolSource] = []
        self._source_tools: tuple[tuple[Tool, ...], ...] = ()  # as last merged
        self._hidden_noted: set[str] = set()  # notices of one tool hiding another, said once
        self._options = ToolOptions()
        self._bus = EventBus(chat_id)
        # a raising subscriber's warning, as the screen shows it: through a weak reference,
        # as a bound method the bus would hold its chat in a cycle, freed only by the
        # garbage collector (a batch's done chats piled up: +25 MiB peak per 1,000)
        self._bus.shown = _shown_through(weakref.ref(self))
        self._history: list[Event] = []  # every event but the streaming fragments (chat.events)
        # the batches of events being emitted now, one per transition (see _whole_history)
        self._emitting: list[list[Event]] = []
        self._record = ChatRecord(chat_id)  # the history folded (chat.record)
        # the first subscriber; it skips the fragments (a stream nobody hears makes none)
        self._bus.subscribe(None, keeper(self._history, self._record), fragments=False)
        self._parent: ForkParent | None = None  # where this chat was forked from
        self._lock = threading.RLock()
        self._before: list[Callable[[ToolCall], Any]] = []
        self._after: list[Callable[[ToolResult], Any]] = []
        self._policies: list[Policy] = []
        self._predicates: dict[str, Any] = {}  # given back to Chat.load(always_allow=)
        self._rules: list[Rule] = []  # chat.add_rule: data, applied by the gate, stored
        self._calls: dict[str, ToolCall] = {}
        self._call_turn: dict[str, int] = {}
        self._call_step: dict[str, int] = {}
        self._open: AssistantToolCallMessage | None = None
        self._turn = 0
        self._step = 0
        self._forced_spent = False
        self._cancel = CancelEvent()
        self._drive = Drive()  # one driver at a time (``_drive.py``)
        self._last_step: StepResult | None = None
        self._last_error: BaseException | None = None
        self._exhausted: str | None = None  # the budget the last step stopped on
        self._runner = ToolRunner()
        self._extensions: tuple[Extension, ...] = ()
        self._ext_hooks: dict[str, tuple[Callable[..., Any], ...]] = {}  # hook -> implementations
        self._deferred: list[Event] = []
        self._deferred_after: list[ToolResult] = []
        self._output: Output | None = None  # the structured answer the current turn asks for
        self._outputs: dict[int, Output] = {}  # every turn's that asked for one (a fork's turn)
        self._output_retried = False  # the turn's one retry of an invalid answer is spent
        self._uncounted_warned: set[str] = set()  # budgets that said they cannot count
        self._inputs: dict[str, PendingInput] = {}  # what waits for an answer, by id
        self._input_waiters: dict[str, concurrent.futures.Future[tuple[str, Any]]] = {}
        # inputs a cancel freed (their call's code read ("cancel", None)) whose withdrawal is
        # recorded when their call ends, by whoever drives the call: the input and why
        self._withdrawing: dict[str, tuple[PendingInput, str]] = {}
        # a parked call's answers accepted here, as typed (the record keeps them scrubbed):
        # input id -> (call id, the answer); what the retry sends, until the call ends
        self._typed: dict[str, tuple[str, Any]] = {}

    @property
    def model(self) -> str:
        return self.provider.model

    @property
    def is_running(self) -> bool:
        """True while a thread or task is driving the chat (``complete``, ``step``...)."""
        return self._drive.held

    def _sync_tools(self) -> None:
        """Take the sources' current tools (a source may connect here, outside the lock)."""
        sources = list(self._sources)
        if not sources:
            return
        with _cancelled_by(self._cancel):  # chat.cancel() frees a source's wait
            current = tuple(s.source_tools() for s in sources)
        _one_source_per_label(current)
        with self._lock:
            if sources != self._sources:
                return  # changed meanwhile; the next step syncs again
            if len(current) != len(self._source_tools) or any(
                a is not b for a, b in zip(current, self._source_tools, strict=True)
            ):
                self._merge_tools(current)

    def _merge_tools(self, source_tools: tuple[tuple[Tool, ...], ...]) -> None:
        """Rebuild what the model sees (under the lock): sources in order, local tools on top.

        A tool hidden by another of the same name (a later source's, or a local
        one) is said once per chat with a notice naming both.
        """
        merged: dict[str, Tool] = {}
        hidden: list[tuple[Tool, Tool]] = []
        for group in (*source_tools, tuple(self._local_tools.values())):
            for t in group:
                prior = merged.get(t.name)
                if prior is not None and prior is not t:
                    hidden.append((prior, t))
                merged[t.name] = t
        self._source_tools = source_tools
        self._tools = merged
        for prior, winner in hidden:
            line = (
                f"two tools are named {winner.name!r}: {_whose(winner)} hides {_whose(prior)} "
                "(give an MCP server a prefix= to keep both)"
            )
            if line not in self._hidden_noted:
                self._hidden_noted.add(line)
                notice(line)

    def _hook(self, name: str) -> tuple[Callable[..., Any], ...]:
        """The extensions' implementations of one hook (see ``_extension.py``)."""
        return self._ext_hooks.get(name, ())

    def _recordings(self) -> list[Recordings]:
        """Where the chat's extensions keep recordings (a store), after the process's."""
        return [r for r in (hook() for hook in self._hook("recordings")) if r is not None]

    def _emit(self, event: Event) -> None:
        self._bus.emit(event)

    def _emit_all(self, events: Iterable[Event]) -> None:
        """Emit ``events`` (one transition's) in order; the stop button during one still lets
        the rest be heard (they are recorded already), and is raised after the last.

        The batch is known as being emitted until its last event was heard, so a reader of
        the history on another thread (a fork) can leave out a transition it sees half of
        (:meth:`_whole_history`). The lock is held only to note it, never while a subscriber
        runs (a subscriber may wait for a thread that needs the lock).
        """
        batch = list(events)
        if not batch:
            return
        with self._lock:
            self._emitting.append(batch)
        interrupt: KeyboardInterrupt | None = None
        try:
            for e in batch:
                try:
                    self._bus.emit(e)
                except KeyboardInterrupt as exc:
                    interrupt = interrupt or exc
        finally:
            with self._lock:
                self._emitting.remove(batch)
        if interrupt is not None:
            raise interrupt

    def _whole_history(self) -> list[Event]:
        """``chat.events`` as it stood between transitions: cut before the first event of a
        transition whose events are only partly in (another thread is emitting the rest).

        A transition's events are made together under the lock and emitted one by one
        after it (a subscriber may take its time: a store's write, a dashboard). Read in
        between, the history held half a decision (a denial with no answer: the fork's
        call was final with no result) or half a model response (its message and some of
        its calls' requests: the others came without their approval gate and a driven
        fork ran them unapproved). Everything from that transition's first event on is
        left out: an event after it may be another thread's, made after this
        transition's change.
        """
        with self._lock:
            history = list(self._history)
            batches = [[e for e in b if not isinstance(e, FRAGMENTS)] for b in self._emitting]
        if not batches:
            return history
        at = {id(e): i for i, e in enumerate(history)}
        cut = len(history)
        for batch in batches:
            seen = [at[id(e)] for e in batch if id(e) in at]
            if seen and len(seen) < len(batch):
                cut = min(cut, min(seen))
        return history[:cut]

    @property
    def open_calls(self) -> tuple[ToolCall, ...]:
        """Calls of the last response that are not answered yet."""
        with self._lock:
            if self._open is None:
                return ()
            return tuple(c for c in self._open.tool_calls if not c.is_final)

    def _ready(self, calls: list[ToolCall]) -> list[ToolCall]:
        """The calls of the open round that may run now (under the lock), by ``order``."""
        if self._options.order == "listed":
            return listed_ready(calls)
        return [c for c in calls if c.status in RUNNABLE and not c.hosted]

    @property
    def pending_approvals(self) -> list[ToolCall]:
        """Gated calls waiting for a decision."""
        return [c for c in self.open_calls if c.status == "awaiting_approval"]

    def get_call(self, call_or_id: ToolCall | str) -> ToolCall:
        """The chat's call for a :class:`ToolCall` or its id.

        A call object must be this chat's (or one another copy of this chat holds):
        ids repeat across chats (the demo model's ``demo_call_1``, a fork keeps its
        parent's), and approving another chat's call ran this chat's call of that id.
        """
        if not isinstance(call_or_id, ToolCall | str):
            raise TypeError(
                f"a call is a ToolCall or its id, got {type(call_or_id).__name__}"
                + (" (decide each call: for call in calls: ...)" if _many(call_or_id) else "")
            )
        cid = call_or_id.id if isinstance(call_or_id, ToolCall) else call_or_id
        try:
            mine = self._calls[cid]
        except KeyError:
            raise DecisionError(
                f"no tool call {cid!r} in this chat"
                + (f"; pending: {[c.id for c in self.pending_approvals]}" if self._calls else "")
            ) from None
        if isinstance(call_or_id, ToolCall) and call_or_id is not mine:
            owner = call_or_id.chat_id
            if (owner is not None and owner != self.id) or (owner is None and call_or_id != mine):
                where = f"of chat {short_id(owner)}" if owner else "not the one this chat has"
                raise DecisionError(
                    f"{call_or_id!r} is {where}, not a call of this chat "
                    f"({short_id(self.id)}), whose {cid} is {mine!r}: decide it on "
                    "its own chat"
                )
        return mine

    @property
    def last_assistant_message(self) -> Message | None:
        for m in reversed(self._messages):
            if getattr(m, "role", None) == "assistant":
                return m
        return None

    def _finished_event(
        self,
        c: ToolCall,
        result: ToolResultMessage,
        error: str | None,
        duration_ms: float | None,
        mode: str | None,
        replayed: bool = False,
        ran_before: tuple[str, ...] = (),
    ) -> ToolCallFinished:
        with self._lock:
            self._forget_typed(c.id)  # its retry sent the answers kept as typed, if any
        return ToolCallFinished(
            chat_id=self.id,
            ts=c.finished_at or utcnow(),
            call=c,
            step=self._call_step.get(c.id, self._step),
            turn=self._call_turn.get(c.id, self._turn),
            status=c.status,
            result=result,
            error=error,
            duration_ms=duration_ms,
            started_at=c.started_at,
            mode=mode,
            replayed=replayed,
            ran_before=ran_before,
        )

    def _append(self, message: Message) -> list[Event]:
        self._messages.append(message)
        return [
            MessageAdded(
                chat_id=self.id,
                message=message,
                index=len(self._messages) - 1,
                turn=getattr(message, "turn", self._turn),
            )
        ]

    def _run_after(self, results: Iterable[ToolResult]) -> None:
        """Call the ``after_tool_result`` callbacks; one that raises never changes an outcome.

        Its error is reported as a :class:`~nbagent.CallbackWarning` (like a
        subscriber's), and every other call of the round still runs and is recorded.
        """
        for r in results:
            for fn in list(self._after):
                try:
                    wrong = unawaited(fn(r))
                except Exception as exc:
                    wrong = f"raised {raised(exc)}"
                if wrong is not None:
                    warnings.warn(
                        f"nbagent after_tool_result callback {getattr(fn, '__qualname__', fn)!r} "
                        f"{self._shown(wrong, r.call)} (on {r.call.name}({r.call.id}))",
                        CallbackWarning,
                        stacklevel=2,
                    )

    def _shown(self, text: str, call: ToolCall | None = None) -> str:
        """A raising callback's, subscriber's or predicate's exception text, as its
        ``CallbackWarning`` shows it on the screen: the chat's provider key (any shape), key
        shapes, URL credentials and named secrets as ``***``, and ``call``'s own values under
        a secret's name (``password``) wherever the text quotes them."""
        if call is not None:
            text = call_secrets_hidden(text, call)
        return scrub(text, provider_secrets(self.provider))

    def _composed(self, text: str) -> str:
        """Text nbagent composed around others' pieces (each already scrubbed alone), as a
        warning shows it: the chat's provider key (of any shape), key shapes and URL
        credentials as ``***`` (:func:`~nbagent._secrets.scrub_keys`)."""
        return scrub_keys(text, provider_secrets(self.provider))

    def _said(self, text: str) -> str:
        """A piece of text the model (or the provider) wrote, quoted in an answer nbagent
        writes (:meth:`_answer`): scrubbed in full, alone (the chat's provider key, key
        shapes, URL credentials, a value under a secret's name: ``password=***``), before it
        is put into nbagent's words, which are not read for names given values."""
        return scrub(text, provider_secrets(self.provider))

    def _scrubbed_reason(self, reason: str) -> str:
        """A decision's reason as the model, the log and the store read it: the chat's
        provider's key and anything shaped like a key, URL credentials or a password as
        ``***``."""
        return scrub(reason, provider_secrets(self.provider))

    def _record_decision(
        self, c: ToolCall, decision: Decision, after: list[ToolResult], *, elsewhere: bool = False
    ) -> list[Event]:
        """Put a decision on a call (under the lock); a denial answers the call at once.

        So does an approval of a hosted call: the provider runs it, so its answer
        is the verdict itself (see :meth:`_answer_hosted`). ``elsewhere``: the
        decision was made outside this chat object (a store).
        """
        if decision.reason:  # a rule's (its conditions), one stored elsewhere (the store
            # cannot know this chat's provider's key): as the chat's own are scrubbed
            reason = self._scrubbed_reason(decision.reason)
            if reason != decision.reason:
                decision = replace(decision, reason=reason)
        c.decision = decision
        events: list[Event] = [
            ApprovalDecided(
                chat_id=self.id,
                call=c,
                decision=decision,
                turn=self._call_turn.get(c.id, self._turn),
                elsewhere=elsewhere,
            )
        ]
        if decision.verdict == "approved":
            c.result = None  # a human may overrule an automatic denial before the call ran
            c.status = "approved"
            if c.hosted:
                events.extend(self._answer_hosted(c, after))
            else:
                events.extend(self._park_if_external(c))  # an external tool's call now waits
            return events
        # its reason is scrubbed above; a hosted call's name is the provider's text
        name = self._said(c.name)
        shown = c if name == c.name else replace(c, name=name)
        text = denial_content(shown, decision.reason, decision.by)
        events.extend(self._answer(c, "denied", text, after, hosted=c.hosted))
        return events

    def _answer(
        self,
        c: ToolCall,
        status: ResultStatus,
        text: str,
        after: list[ToolResult] | None,
        *,
        hosted: bool = False,
        value: Any = None,
        parts: tuple[Any, ...] = (),
        error: str | None = None,
    ) -> list[Event]:
        """Answer a call the runner does not run (under the lock): its result and its event.

        A denial, a hosted call's verdict, a call rejected at once, a fork's
        given result, a call in doubt. ``after`` collects what the
        ``after_tool_result`` callbacks are given (``None``: nothing).

        ``text`` and ``error`` are nbagent's own words around pieces of other text, each
        piece scrubbed in full where the text is composed (:meth:`_said`: the model's
        unparsable arguments, an unknown tool's name, what a schema check quotes back; a
        person's reason, as :meth:`_scrubbed_reason` does; a fork's given result); here
        the whole is scrubbed of the chat's provider key and key-shaped tokens only
        (:func:`~nbagent._secrets.scrub_keys`). Read whole, the name-value rule took nbagent's own
        ``invalid arguments for reset_password: password: expected string`` for a
        password given a value, and the model lost which parameter was wrong.
        """
        secrets = provider_secrets(self.provider)
        text = scrub_keys(text, secrets)
        error = scrub_keys(error, secrets) if error is not None else None
        turn = self._call_turn.get(c.id, self._turn)
        result = ToolResultMessage(
            c.id,
            text,
            status != "ok",
            status,
            c.name,
            turn=turn,
            value=value,
            hosted=hosted,
            parts=parts,
        )
        c.status, c.result, c.finished_at = status, result, utcnow()
        self._drop_inputs(c)
        if after is not None:
            after.append(ToolResult(c, text, status, value))
        return [self._finished_event(c, result, error, None, HOSTED if hosted else None)]

    def _drop_inputs(self, c: ToolCall) -> None:
        """A call answered without its inputs (under the lock): they wait for nothing now.

        Its record closes them with its end (``cancel``, "the call ended"); kept here, a
        fork given an ``ask_user`` call's result still listed the question as pending, and
        answering it recorded an answer the call never read.
        """
        for key in [k for k, p in self._inputs.items() if p.call_id == c.id]:
            del self._inputs[key]
            waiter = self._input_waiters.pop(key, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(("cancel", None))
        for key in [k for k, (p, _why) in self._withdrawing.items() if p.call_id == c.id]:
            del self._withdrawing[key]

    def _answer_hosted(self, c: ToolCall, after: list[ToolResult]) -> list[Event]:
        """Answer an approved hosted call (under the lock): never run here, the provider runs it.

        Its result is the approval sent to the provider (OpenAI
        ``mcp_approval_response``, ``approve: true``) in the next request; its
        status is ``ok`` (the answer is given) and its events say ``mode="hosted"``.
        What the provider's run gave comes back as a :class:`~nbagent.ProviderItem`
        (``mcp_call``) in the next response.
        """
        if c.status != "approved" or c.result is not None:
            return []
        # the hosted call's name and server label are the provider's text
        where = f" on {self._said(c.server)}" if c.server else ""
        text = f"Approved: sent to the provider, which runs {self._said(c.name)}{where}."
        return self._answer(c, "ok", text, after, hosted=True)

    def _approve_edit(self, c: ToolCall, arguments: dict[str, Any], reason: str | None) -> None:
        """An ungated call's arguments edited (a fork's change): recorded as an approval's edit."""
        after: list[ToolResult] = []
        decision = Decision("approved", HUMAN, utcnow(), reason, dict(arguments))
        with self._lock:
            # an external call's (or ask_user's) request, parked with the model's arguments
            # and not heard yet (the fork's history leaves the original's out): asked anew
            # below with the edited ones, else its card showed the old arguments and the
            # answer became the edited call's result
            own = self._inputs.get(c.id)
            if own is not None and own.call_id == c.id and self._record.input(c.id) is None:
                del self._inputs[c.id]
                self._deferred = [
                    e
                    for e in self._deferred
                    if not (isinstance(e, InputRequested) and e.input_id == c.id)
                ]
                if c.status == "awaiting_input":
                    c.status = "requested"
            events = self._record_decision(c, decision, after)
        self._emit_all(events)
        self._run_after(after)

    def _answer_with(self, c: ToolCall, text: str, value: Any, parts: tuple[Any, ...]) -> None:
        """A call answered as if its tool had returned ``value`` (a fork's change): never run."""
        after: list[ToolResult] = []
        with self._lock:
            events = self._answer(c, "ok", text, after, value=value, parts=parts)
        self._emit_all(events)
        self._run_after(after)

    def _decide(
        self,
        call: ToolCall | str,
        verdict: DecisionVerdict,
        *,
        by: str,
        reason: str | None,
        arguments: dict[str, Any] | None = None,
        at: datetime | None = None,
        elsewhere: bool = False,
    ) -> ToolCall:
        """Decide a gated call by the rules of ``_approvals.py``; the one way decisions are made.

        ``at`` keeps the time of a decision made elsewhere (a store), and
        ``elsewhere`` says it was (its ``ApprovalDecided`` says so too). Before the
        decision is recorded, the ``decide`` hooks may veto it (``DecisionError``)
        or return the decision already made elsewhere, which is recorded instead
        (with its events); if it contradicts this one, ``DecisionError`` follows.

        Every approval recorded passes the same checks, whether made here, applied from a
        store or handed back by one: edited arguments against the call's own tool, and what
        would run against the chat's deny rules as they are now. One handed back that fails
        them is never recorded: a verdict drops it where it was kept (``refuse_decision``)
        and this decision is made again, the lock held (no claim comes between); one that
        cannot be checked now raises
        ``DecisionError`` and decides nothing.
        """
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"a decision's reason is a string, got {type(reason).__name__}")
        if not isinstance(by, str) or not by:
            raise TypeError(f"a decision's by= names who decided (a string), got {by!r}")
        listed: _Listed = "unlooked"
        if arguments is not None and verdict == "approved":
            # outside the lock and the hold: a source may connect
            listed = self._list_tool_of(call, arguments, elsewhere)
        dropped: list[Decision] = []  # handed back, refused, dropped where they were kept
        while True:
            try:
                with stop_held():  # written to the store, then recorded here: never half of it
                    decided = self._decide_held(
                        call, verdict, by, reason, arguments, at, elsewhere, listed, dropped
                    )
            except _Unlisted as unlisted:  # an edit made elsewhere, of a tool not known yet
                listed = self._list_handed_back(call, unlisted.stored)
                continue
            break
        c, after, stored, edited = decided
        self._run_after(after)  # user callbacks: the stop button reaches them as ever
        if stored is not None and (stored.verdict != verdict or edited != stored.arguments):
            raise DecisionError(
                f"{c.name}({c.id}) was already {stored.verdict} by {stored.by}"
                f"{_with(stored, verdict)} at {stored.at.isoformat(timespec='seconds')} "
                "(decided elsewhere first); "
                "a decision cannot be changed"
            )
        return c

    def _decide_held(
        self,
        call: ToolCall | str,
        verdict: DecisionVerdict,
        by: str,
        reason: str | None,
        arguments: dict[str, Any] | None,
        at: datetime | None,
        elsewhere: bool,
        listed: _Listed,
        dropped: list[Decision],
    ) -> tuple[ToolCall, list[ToolResult], Decision | None, dict[str, Any] | None]:
        """:meth:`_decide`'s change, held from the stop button: the call, the results whose
        ``after_tool_result`` callbacks are due, the decision made elsewhere (if any), the
        edited arguments.

        Raises:
            _Unlisted: A decision handed back has edited arguments of a tool not known yet
                (nothing was written or recorded).
        """
        events: list[Event] = []
        after: list[ToolResult] = []
        with self._lock:
            c = self.get_call(call)
            if c.approval is None or not c.approval.required:
                raise DecisionError(f"{c.name}({c.id}) does not need approval")
            # the call's own: a plain approval, nothing edited (one made elsewhere, a
            # store's, is applied as it is stored: the store judges it so itself)
            mine = arguments is not None and verdict == "approved" and not elsewhere
            if mine and same_arguments(arguments, c.arguments):
                arguments = None
            existing = c.decision
            if existing is not None:
                # an approval without arguments is not one with edited arguments (nor the
                # other way round): joining it would run what this caller did not approve
                if existing.verdict == verdict and arguments == existing.arguments:
                    return c, [], None, None
                overridable = (
                    # a person overrules an automatic decision; a deny rule comes first,
                    # over any approval, until the call is claimed to run
                    ((existing.automatic and by == HUMAN) or (by == RULE and verdict == "denied"))
                    and c.status in ("approved", "denied")
                    and c.started_at is None
                    and self._open is not None
                    and any(x is c for x in self._open.tool_calls)
                )
                if not overridable:
                    # an external call waiting for its result was handed to whoever does it
                    # (its request may be answered in the store already: a denial here would
                    # drop that answer and tell the model nothing ran): decline the request
                    waiting = c.status == "awaiting_input" and verdict == "denied"
                    raise DecisionError(
                        f"{c.name}({c.id}) was already {existing.verdict} by {existing.by}"
                        f"{_with(existing, verdict)}; a decision cannot be changed"
                        + (
                            " (its request for a result is out: chat.decline(...) refuses it)"
                            if waiting
                            else ""
                        )
                    )
            elif c.status != "awaiting_approval":
                raise DecisionError(f"{c.name}({c.id}) is {c.status}; it cannot be decided now")
            edited: dict[str, Any] | None = None
            # a reason is sent to the model with a denial, and kept in the log and the
            # store: the provider's key and key-like tokens as ***, as a decline's reason
            reason = self._scrubbed_reason(clean(reason)) if reason is not None else None
            if arguments is not None:
                if verdict != "approved":
                    raise DecisionError("only an approval can carry edited arguments")
                if c.hosted:
                    raise DecisionError(
                        f"{c.name}({c.id}) runs on the provider's side with the model's "
                        "arguments; they cannot be edited (approve or deny it)"
                    )
                edited = checked_edit(self._edit_tool(c, listed), c.name, arguments)
            decision = Decision(verdict, by, at or utcnow(), reason, edited)
            refused = self._rule_refusal(c, decision)
            if refused is not None:
                raise RuleRefused(refused)
            while True:  # the lock held throughout: no claim comes between a drop and this
                stored = None
                for decide in self._hook("decide"):  # e.g. the store: first decision wins
                    stored = decide(c, decision)
                    if stored is not None:
                        break
                if stored is None or stored.verdict != "approved":
                    break
                if not self._dropped(c, stored, listed, dropped):
                    break
            if stored is None or stored != existing:  # else: the decision overruled stands
                events.extend(
                    self._record_decision(
                        c, stored or decision, after, elsewhere=elsewhere or stored is not None
                    )
                )
        self._emit_all(events)
        return c, after, stored, edited

    def _rule_refusal(self, c: ToolCall, decision: Decision) -> str | None:
        """Why the chat's deny rules refuse approval ``decision`` of ``c`` now (what would
        run matches one), else ``None`` (under the lock)."""
        if decision.verdict != "approved" or not self._rules:
            return None
        secrets = provider_secrets(self.provider)
        if decision.arguments is not None:
            return denied_edit(self._rules, c, decision.arguments, secrets)
        rule = first_match(self._rules, c, "denied")
        if rule is None:
            return None
        return (
            f"{c.name}({c.id}) cannot be approved: {rule.reason_hiding(secrets)} "
            "(a call a deny rule matches never runs; the rule denies it)"
        )

    def _dropped(
        self, c: ToolCall, stored: Decision, listed: _Listed, dropped: list[Decision]
    ) -> bool:
        """Check an approval a ``decide`` hook handed back (made elsewhere first, or the one
        this chat holds, which a deny rule's denial met in the store) as one applied from a
        store is checked (under the lock). Recorded unchecked, a person's click on the card
        recorded an edit no one checked, and the call ran with arguments a deny rule
        refuses. ``True``: a verdict refused it, and it was dropped where it was kept
        (``refuse_decision``): decide again; ``False``: it passes.

        Raises:
            _Unlisted: Its edit is of a tool not known yet: list the sources first.
            DecisionError: It cannot be checked here now (nothing recorded; it stays
                stored), or it was dropped before and is handed back still (its run was
                claimed meanwhile).
        """
        said = (
            f"{c.name}({c.id}) was already approved by {stored.by}"
            f"{' with edited arguments' if stored.arguments is not None else ''} at "
            f"{stored.at.isoformat(timespec='seconds')} (decided elsewhere first)"
        )
        why: str | None = None
        if stored.arguments is not None:
            if c.hosted:
                why = f"{c.name}({c.id}) runs on the provider's side with the model's arguments"
            elif listed == "unlooked" and self._own_tool(c) is None:
                raise _Unlisted(stored)
            else:
                try:
                    checked_edit(self._edit_tool(c, listed), c.name, stored.arguments)
                except EditUnchecked as exc:
                    raise DecisionError(
                        f"{said}, which cannot be checked here ({exc}): nothing was decided "
                        "here; it stays stored, for a step that can check it to apply"
                    ) from None
                except DecisionError as exc:
                    why = str(exc)
        if why is None:
            why = self._rule_refusal(c, stored)
        if why is None:
            return False
        if stored in dropped:  # dropped, and handed back still: claimed to run meanwhile
            raise DecisionError(
                f"{said}, which cannot be applied ({why}); its run was claimed before it "
                "could be dropped, so nothing was decided here"
            )
        for refuse in self._hook("refuse_decision"):  # e.g. the store: it is never applied
            refuse(c, stored, why)
        dropped.append(stored)
        return True

    def _list_handed_back(self, call: ToolCall | str, stored: Decision) -> _Listed:
        """:meth:`_list_tool_of` for the edit of a decision handed back (outside the lock);
        sources that cannot list now leave it stored and decide nothing here."""
        try:
            return self._list_tool_of(call, stored.arguments, True)
        except EditUnchecked as exc:
            c = self.get_call(call)
            raise DecisionError(
                f"{c.name}({c.id}) was already approved by {stored.by} with edited arguments "
                f"at {stored.at.isoformat(timespec='seconds')} (decided elsewhere first), "
                f"which cannot be checked here now ({exc}); it stays stored, for a later "
                "step to apply"
            ) from None

    def _list_tool_of(
        self, call: ToolCall | str, arguments: dict[str, Any] | None, elsewhere: bool
    ) -> _Listed:
        """Before an approval's edited arguments are checked against the call's tool: list
        the tool sources' tools when the chat does not know that tool yet, and say what
        they offer of it (see :data:`_Listed`).

        An MCP server lists its tools only when something asks for them (a request, a
        call to run, ``chat.tools``), so right after ``Chat.load`` its tools are not known:
        checked then, ``chat.approve(call, arguments=...)`` said the tool was not available,
        and a decision made elsewhere (``store.approve(..., arguments=...)``) was rejected
        by the first step, the person's decision erased. A source that cannot list its
        tools now raises :class:`EditUnchecked` (``transient``): nothing is decided, and a
        store keeps the decision for a later step.
        """
        with self._lock:
            c = self.get_call(call)
            if c.hosted or self._own_tool(c) is not None:
                return "own"
            if not self._sources:
                return "absent"
            if not elsewhere and arguments is not None and same_arguments(arguments, c.arguments):
                return "unlooked"  # a plain approval (see _decide_held): no edit to check
            sources = list(self._sources)
        try:
            self._sync_tools()
            return self._served(c, sources)
        except Exception as exc:  # a server down, a timeout, the chat cancelled meanwhile
            shown = self._shown(f"{type(exc).__name__}: {exc}", c)
            raise EditUnchecked(
                f"the edited arguments of {c.name}({c.id}) cannot be checked now: the chat's "
                f"tools could not be listed ({shown}); nothing was decided",
                transient=True,
            ) from exc

    def _served(self, c: ToolCall, sources: list[ToolSource]) -> _Listed:
        """What the chat's source of ``c``'s MCP server lists of its tool (outside the lock,
        the sources just listed): its whole listing (``all_tools``, not this chat's view of
        it) decides whether the server still has a tool the call may be of."""
        with self._lock:
            if self._own_tool(c) is not None:
                return "own"
        if c.server is None:
            return "absent"  # a local tool's call: a source's tool of its name would be it
        for source in sources:
            tools = [t for t in source.all_tools() if t.server == c.server]
            if tools:  # one source per server label (_one_source_per_label)
                return "offered" if any(_may_name(c.name, t) for t in tools) else "gone"
        return "absent"

    def _own_tool(self, c: ToolCall) -> Tool | None:
        """The tool ``c`` was made for, as last listed: of its name and its server (under
        the lock). Another tool of that name (a local one hiding an MCP server's, another
        server's) is not: an edit checked against its schema would not be the call's."""
        tool = self._tools.get(c.name)
        return tool if tool is not None and tool.server == c.server else None

    def _edit_tool(self, c: ToolCall, listed: _Listed) -> Tool:
        """The tool an approval's edit of ``c`` is checked against (under the lock; the
        sources were listed by :meth:`_list_tool_of` if it was not known: ``listed``).

        Raises:
            EditUnchecked: The chat does not offer the tool: it lacks the tool (nor, for an
                MCP server's call, that server), or its setup leaves out a tool the server
                still lists (``server.tools(exclude=...)``, another ``prefix=``, a local tool
                of that name): a chat that offers it may check the edit.
            DecisionError: The call's MCP server lists its tools, all of them, without one
                the call may be of (removed): the edit cannot be checked, and the call
                cannot run whatever the arguments.
        """
        tool = self._own_tool(c)
        if tool is not None:
            return tool
        taken = self._tools.get(c.name)
        if listed == "offered":
            why = (
                "a local tool of that name hides it"
                if taken is not None and taken.server is None
                else "its tools(include=/exclude=), prefix= or another tool of that name "
                "leave it out"
            )
            raise EditUnchecked(
                f"this chat does not offer tool {c.name!r} of MCP server {c.server!r}, "
                f"which the server lists ({why})",
                transient=False,
                offered=True,
            )
        if listed != "gone":
            raise EditUnchecked(f"tool {c.name!r} is not available in this chat", transient=False)
        why = (
            "it no longer offers it"
            if taken is None
            else f"the name now belongs to MCP server {taken.server!r}'s tool"
            if taken.server is not None
            else "the name now belongs to a local tool"
        )
        raise DecisionError(
            f"MCP server {c.server!r} does not list tool {c.name!r} now ({why}), so the "
            f"edited arguments of {c.name}({c.id}) cannot be checked; deny the call, or "
            "approve it as it is (it is then answered that the tool is not offered, never run)"
        )

    def _settle_in_doubt(
        self,
        c: ToolCall,
        *,
        claimed_by: str | None,
        claimed_at: datetime | None,
        rerun: bool,
        content: str,
    ) -> bool:
        """A call left running by a process that is gone: runnable again, or final ``in_doubt``."""
        with self._lock:
            if c.status != "running" or self._calls.get(c.id) is not c:
                return False
            turn = self._call_turn.get(c.id, self._turn)
            step = self._call_step.get(c.id, self._step)
            events: list[Event] = []
            if rerun:
                gated = c.approval is not None and c.approval.required
                c.status = "approved" if gated else "requested"
                c.started_at = None
            events.append(
                CallInDoubt(
                    chat_id=self.id,
                    call=c,
                    step=step,
                    turn=turn,
                    claimed_by=claimed_by,
                    claimed_at=claimed_at,
                    rerun=rerun,
                )
            )
            if not rerun:
                if c.started_at is None:  # it started when it was claimed (a loaded call)
                    c.started_at = claimed_at
                error = "outcome unknown: the process running it stopped"
                events.extend(self._answer(c, "in_doubt", content, None, error=error))
        self._emit_all(events)
        return True

    # ------------------------------------------------------------ pending inputs
    def _park_if_external(self, c: ToolCall, step: int | None = None) -> list[Event]:
        """A runnable call of an external tool (or ``ask_user``) parks for its input (under
        the lock): status ``awaiting_input`` and, the first time, an :class:`InputRequested`.

        A call whose input was asked for already (a loaded chat: its stored events say
        so) parks again quietly, with the request as it was asked.
        """
        if c.hosted or c.status not in RUNNABLE:
            return []
        parked = self._record.parked_round(c.id)  # a run that ended on its inputs (2026-07-28)
        if parked is not None:
            waiting = [i.request for i in parked if i.status == "pending"]
            if waiting:  # still waits (a loaded chat): parked again quietly; else: runnable
                c.status = "awaiting_input"
                self._inputs.update((p.id, p) for p in waiting)
            return []
        known = self._record.input(c.id)
        if known is not None:  # asked before this chat object existed: its record says so
            if known.status == "pending":  # (its tool need not be given back to answer it)
                c.status = "awaiting_input"
                self._inputs[c.id] = known.request
            return []
        tool = self._tools.get(c.name)
        asks = getattr(tool, "input_request", None)
        request = asks(c) if asks is not None else None
        if request is None:
            return []
        c.status = "awaiting_input"
        kind, message, content, schema = request
        pending = PendingInput(c.id, kind, c.id, c.name, message, content, schema, c.server)
        return [self._park_input(c, pending, step)]

    def _park_input(
        self,
        c: ToolCall,
        pending: PendingInput,
        step: int | None = None,
        resume: dict[str, Any] | None = None,
    ) -> Event:
        """Keep ``pending`` (of call ``c``) as waiting (under the lock); its event to emit."""
        self._inputs[pending.id] = pending
        return InputRequested(
            chat_id=self.id,
            call=c,
            input_id=pending.id,
            kind=pending.kind,
            prompt=pending.message,
            content=pending.content,
            schema=pending.schema,
            server=pending.server,
            step=self._call_step.get(c.id, self._step) if step is None else step,
            turn=self._call_turn.get(c.id, self._turn),
            resume=resume,
        )

    def _park_call(self, c: ToolCall, asked: InputsRequired) -> bool:
        """A run that ended asking for inputs (``InputsRequired``): the call parks on
        them (``awaiting_input``), to be retried once every one is answered. False: the
        call had already ended (nothing parked)."""
        round_id = os.urandom(6).hex()
        events: list[Event] = []
        with self._lock:
            if c.is_final or c.status != "running":
                return False
            self._forget_typed(c.id)  # the last round's answers were sent: a new round
            c.status, c.started_at = "awaiting_input", None
            for key, kind, message, content, schema in asked.requests:
                pending = PendingInput(
                    f"in_{os.urandom(8).hex()}",
                    kind,
                    c.id,
                    c.name,
                    clean(message),
                    clean_json(content),
                    schema,
                    asked.server,
                )
                resume = {
                    "round": round_id,
                    "key": key,
                    "request_state": asked.state,
                    "ready": asked.ready,
                }
                events.append(self._park_input(c, pending, resume=resume))
        self._emit_all(events)
        return True

    def _resume_of(self, c: ToolCall) -> dict[str, Any] | None:
        """What a parked call's run retries with: its last round's answers (``None``: it never
        parked, or an input of that round still waits). An answer accepted in this process
        is sent as typed; one given elsewhere (the store, another process) or before a
        reload as the record keeps it (a key in it as ``***``)."""
        inputs = self._record.parked_round(c.id)
        if not inputs or any(i.status == "pending" for i in inputs):
            return None
        typed = dict(self._typed)
        first = inputs[0].resume or {}
        return {
            "request_state": first.get("request_state"),
            "ready": dict(first.get("ready") or {}),
            "answers": {
                (i.resume or {})["key"]: {
                    "input_id": i.input_id,
                    "kind": i.kind,
                    "action": i.status,
                    "data": typed[i.input_id][1] if i.input_id in typed else i.data,
                    "content": i.request.content,
                }
                for i in inputs
            },
        }

    def _adopt_inputs(self) -> None:
        """Parked calls of a loaded chat or a fork: their requests, read off the record."""
        with self._lock:
            for c in self._calls.values():
                if c.status in RUNNABLE:
                    self._deferred.extend(self._park_if_external(c))
                elif c.status == "awaiting_input" and c.id not in self._inputs:
                    known = self._record.input(c.id)
                    if known is not None and known.status == "pending":
                        self._inputs[c.id] = known.request

    def _find_input(self, ref: PendingInput | ToolCall | str) -> PendingInput:
        """The pending input ``ref`` names (itself, its call, or either's id), under the lock.

        Raises:
            InputError: Nothing of that id waits for an answer.
        """
        key = ref.id if isinstance(ref, PendingInput | ToolCall) else ref
        if not isinstance(key, str):
            raise TypeError(f"answer a PendingInput, a ToolCall or an id, not {type(ref).__name__}")
        pending = self._inputs.get(key)
        if pending is not None:
            return pending
        if key in self._withdrawing:  # a cancel freed its call's wait
            raise InputError(
                f"input {key!r} is closed: {self._withdrawing[key][1]}; it takes no answer"
            )
        known = self._record.input(key)
        if known is not None:
            if known.answered_by is None:  # closed by its call's end, not by an answer
                raise InputError(
                    f"input {key!r} is closed: {known.reason or known.status} "
                    "(its call was answered without it); it takes no answer"
                )
            raise InputError(
                f"input {key!r} was already answered ({known.status} by {known.answered_by}); "
                "an answer cannot be changed"
            )
        c = self._calls.get(key)
        if c is not None:  # a call's id: the one input it waits for (an MCP server's form)
            mine = [p for p in self._inputs.values() if p.call_id == c.id]
            if len(mine) == 1:
                return mine[0]
            if mine:
                ids = ", ".join(repr(p.id) for p in mine)
                raise InputError(
                    f"{c.name}({c.id}) waits for several inputs ({ids}); answer each by its id"
                )
            raise InputError(f"{c.name}({c.id}) is {c.status} and waits for no input")
        waiting = ", ".join(repr(k) for k in self._inputs) or "none"
        raise InputError(f"no pending input {key!r} in this chat (pending: {waiting})")

    def _settle_input(
        self,
        ref: PendingInput | ToolCall | str,
        action: InputAction,
        data: Any,
        *,
        by: str,
        reason: str | None,
        elsewhere: bool = False,
    ) -> PendingInput:
        """Answer, decline or cancel a pending input: the one way inputs are settled.

        Checked before anything changes (a bad answer leaves the input pending and
        loses nothing); recorded once, under the lock: an :class:`InputAnswered`, and
        for a parked call its result (an accepted external call's is ``data`` as a
        tool's return value would be; a declined one's is ``denied``, a cancelled
        one's ``cancelled``). An extension's ``answer_input`` hook (the store: the first
        answer wins across processes) sees it first and may return the answer given
        elsewhere: that one is recorded instead and :class:`InputError` says so.
        ``elsewhere``: an answer given outside this chat object (a store), being applied.
        """
        after: list[ToolResult] = []
        if reason is not None and not isinstance(reason, str):  # as store.decline says too
            raise TypeError(f"reason must be a string, got {type(reason).__name__}")
        # a reason is sent to the model with the refusal: the provider's key and key-like
        # tokens as ***, as an accepted answer's text (store.decline does the same)
        reason = (
            scrub(clean(reason), provider_secrets(self.provider)) if reason is not None else None
        )
        if not isinstance(by, str) or not by:
            raise TypeError("by must be a non-empty string naming who answered")
        first: Any = None
        with stop_held():  # written to the store, then recorded here: never half of it
            with self._lock:
                pending = self._find_input(ref)
                value: Any = None
                typed: Any = None
                if action == "accept":
                    value, text, parts = checked_answer(pending, data)
                    typed = answer_json(value, text)  # what a parked call's retry sends
                    text, data = self._scrubbed_answer(value, text)
                else:
                    data, text, parts = None, _refusal_text(pending, action, by, reason), ()
                if not elsewhere:
                    for hook in self._hook("answer_input"):  # e.g. the store: the first answer wins
                        first = hook(pending, action, data, by, reason)
                        if first is not None:
                            break
                if first is not None:  # answered elsewhere first: that answer is the one recorded
                    action, by, elsewhere = first.status, first.answered_by, True
                    # its reason as the store keeps it, which cannot know the provider's key
                    reason = first.reason
                    if reason is not None:
                        reason = scrub(clean(reason), provider_secrets(self.provider))
                    value = None
                    if action == "accept":
                        value, text, parts = checked_answer(pending, first.data)
                        text, data = self._scrubbed_answer(value, text)
                    else:
                        data, text, parts = None, _refusal_text(pending, action, by, reason), ()
                del self._inputs[pending.id]
                events: list[Event] = []
                c = self._calls.get(pending.call_id) if pending.call_id is not None else None
                events.append(
                    InputAnswered(
                        chat_id=self.id,
                        call=c,
                        input_id=pending.id,
                        action=action,
                        data=data,
                        by=by,
                        reason=reason,
                        elsewhere=elsewhere,
                    )
                )
                rec = self._record.input(pending.id)
                if (
                    c is not None
                    and c.status == "awaiting_input"
                    and rec is not None
                    and rec.resume
                ):
                    if first is None and action == "accept":
                        self._typed[pending.id] = (c.id, typed)
                    if not any(p.call_id == c.id for p in self._inputs.values()):
                        gated = c.approval is not None and c.approval.required
                        c.status = "approved" if gated else "requested"  # retried with the answers
                elif c is not None and c.status == "awaiting_input":
                    status: ResultStatus = (
                        "ok"
                        if action == "accept"
                        else "denied"
                        if action == "decline"
                        else "cancelled"
                    )
                    events.extend(self._answer(c, status, text, after, value=value, parts=parts))
                waiter = self._input_waiters.pop(pending.id, None)
            self._emit_all(events)
            if waiter is not None and not waiter.done():  # a call waiting mid-run carries on
                waiter.set_result((action, value if action == "accept" else None))
        self._run_after(after)
        if first is not None:
            raise InputError(
                f"input {pending.id!r} was already answered elsewhere ({action} by {by}); "
                "that answer is the one recorded (an answer cannot be changed)"
            )
        return pending

    def _forget_typed(self, call_id: str) -> None:
        """Drop the answers kept as typed for a call's retry (under the lock): it parked
        again (they were sent) or it ended."""
        for key in [k for k, (cid, _v) in self._typed.items() if cid == call_id]:
            del self._typed[key]

    def _scrubbed_answer(self, value: Any, text: str) -> tuple[str, Any]:
        """An accepted answer as the model reads it and as it is recorded (the event, the
        record, a store): the chat's provider's key and key-like tokens as ``***``, as a
        tool's result is scrubbed (an external tool's answer is its result). The value a
        call's code waits for (an MCP server's form, asked mid-call or by a parked call's
        retry from this process: :attr:`_typed`) is the answer as given."""
        secrets = provider_secrets(self.provider)
        text = scrub(text, secrets)
        return text, _scrubbed_json(answer_json(value, text), secrets)

    def _ask_input(
        self,
        c: ToolCall,
        kind: InputKind,
        message: str,
        content: dict[str, Any],
        schema: dict[str, Any] | None,
        server: str | None,
    ) -> tuple[str, concurrent.futures.Future[tuple[str, Any]]]:
        """A running call's request for input (an MCP server's, mid-call): parked on the
        chat, answered through :meth:`_settle_input`; its id and a future of the answer."""
        import concurrent.futures  # only once a call waits for an input

        future: concurrent.futures.Future[tuple[str, Any]] = concurrent.futures.Future()
        input_id = f"in_{os.urandom(8).hex()}"
        message, content = clean(message), clean_json(content)
        with self._lock:
            pending = PendingInput(input_id, kind, c.id, c.name, message, content, schema, server)
            self._input_waiters[input_id] = future
            event = self._park_input(c, pending)
        self._emit(event)
        # chat.cancel() (the stop button) ends the wait: the input is withdrawn (cancelled by
        # nbagent, as when the call times out) and the call's code reads ("cancel", None);
        # else nothing freed it and the run never stopped
        withdraw = self._cancel.register(lambda: self._free_input(input_id))
        future.add_done_callback(lambda _done: withdraw())
        self._follow_answers(future)
        return input_id, future

    def _follow_answers(self, future: concurrent.futures.Future[tuple[str, Any]]) -> None:
        """While a running call waits for an input, an answer given elsewhere (the store's
        ``answer`` in another process) reaches it: the extension that can follow such news
        (the store's follower) calls for the chat's refresh, until the input is settled.
        Nobody else drives the chat meanwhile (its driver waits inside the call), so
        without this the answer waited for a step that came only after the call gave up."""
        subscriptions = []
        for follow in self._hook("follow_decisions")[:1]:
            with contextlib.suppress(Exception):  # no news then: the answer waits for a step
                subscriptions.append(follow(self._refresh_inputs))
        live = [sub for sub in subscriptions if sub is not None]
        if live:
            future.add_done_callback(lambda _done: _close_all(live))

    def _refresh_inputs(self) -> None:
        """Apply what the store has for this chat (answers, decisions), on the follower's
        worker thread; a read that fails waits for the next news."""
        with contextlib.suppress(Exception):
            self._refreshed()

    def _refreshed(self) -> list[ToolCall]:
        """``chat.refresh()``: every extension applies what was decided elsewhere; the
        calls decided."""
        decided: list[ToolCall] = []
        for refresh in self._hook("refresh"):
            decided.extend(refresh())
        return decided

    def _inputs_of(self, c: ToolCall) -> list[str]:
        """The ids of the inputs a running call still waits for (asked mid-call), and those
        a cancel freed whose withdrawal waits for the call's end."""
        with self._lock:
            return [
                i for i, p in self._inputs.items() if p.call_id == c.id and i in self._input_waiters
            ] + [i for i, (p, _why) in self._withdrawing.items() if p.call_id == c.id]

    def _free_input(self, input_id: str) -> None:
        """``chat.cancel()`` while a call waits for this input: the call's code reads
        ``("cancel", None)`` at once and the input takes no answer from now on. Only a
        signal, on the cancelling thread: the withdrawal is recorded when the call ends
        (:meth:`_withdraw_input`, by whoever drives the call), since recording writes to
        the chat's store, and a write on the cancelling thread stalled it (a task on the
        driver's own event loop, waiting out a PostgreSQL lock)."""
        with self._lock:
            pending = self._inputs.pop(input_id, None)
            waiter = self._input_waiters.pop(input_id, None)
            if pending is None:
                return
            self._withdrawing[input_id] = (pending, "the chat was cancelled before an answer")
        if waiter is not None and not waiter.done():
            waiter.set_result(("cancel", None))

    def _withdraw_input(self, input_id: str, why: str) -> None:
        """An input its call stopped waiting for (a timeout, a cancel): cancelled, once."""
        with self._lock:
            pending = self._inputs.pop(input_id, None)
            waiter = self._input_waiters.pop(input_id, None)
            freed = self._withdrawing.pop(input_id, None)
            if freed is not None:  # freed by a cancel: recorded now, saying so
                pending, why = freed
            if pending is None:
                return
            c = self._calls.get(pending.call_id) if pending.call_id is not None else None
            event = InputAnswered(
                chat_id=self.id,
                call=c,
                input_id=input_id,
                action="cancel",
                data=None,
                by="nbagent",
                reason=clean(why),
            )
        self._emit(event)
        if waiter is not None and not waiter.done():
            waiter.set_result(("cancel", None))

    def _loop_state(self) -> dict[str, Any]:
        """The loop state a reloaded chat needs besides its messages, calls and events.

        Usage, cost, the step counter and the last step's kind are in the events
        (``ModelRequestFinished``, ``StepFinished``), so this changes rarely.
        """
        o = self._options
        return {
            "turn": self._turn,
            "forced_spent": self._forced_spent,
            "options": {
                f.name: getattr(o, f.name)
                for f in fields(o)
                if f.name not in _LATER_OPTIONS or getattr(o, f.name) != _LATER_OPTIONS[f.name]
            },
            **{name: getattr(self, name) for name in SETTINGS},
            "always_allow": policy_rules(list(self._policies)),  # a copy: no lock here
            "rules": [r.as_dict() for r in list(self._rules)],
        }

    def _loop_state_key(self) -> tuple[Any, ...]:
        # ToolOptions is frozen: changing options replaces the object.
        o = self._options
        return (
            self._turn,
            self._forced_spent,
            o,
            *(getattr(self, name) for name in SETTINGS),
            tuple((p.tool, p.when is not None) for p in list(self._policies)),
            tuple(self._rules),
        )

    def _replay(self, events: Iterable[Event]) -> None:
        """A loaded chat's stored events: first in ``chat.events``, refolded, then read."""
        events = [e for e in events if not isinstance(e, FRAGMENTS)]
        with self._lock:
            self._history[:0] = events  # the stored events come before any made since
            self._record._refold(self._history)
            self._replayer.replayed_steps.update(
                e.step for e in events if isinstance(e, ModelRequestFinished) and e.replayed
            )
            self._rules = folded_rules(self._rules, events)
            self._policies = folded_policies(self._policies, events, self._predicates)
        # the key each step's request had (a store noted them): replay_tools finds the
        # results of a replayed step's calls, as it did before the chat was loaded
        self._replayer.restore_keys(self._recordings())
        self._adopt_inputs()
        for read in self._hook("on_history"):
            read(events)

    def _restore(self, snap: Snapshot) -> None:
        """Put back a stored chat's state (``Chat.load``)."""
        with self._lock:
            self._messages = list(snap.messages)
            self._calls = {c.id: c for c in snap.calls}
            for c in snap.calls:
                c.chat_id, c.arguments = self.id, frozen(c.arguments)
            self._call_turn, self._call_step = dict(snap.call_turn), dict(snap.call_step)
            last = self._messages[-1] if self._messages else None
            self._open = last if isinstance(last, AssistantToolCallMessage) else None
            self._turn, self._step, self._forced_spent = snap.turn, snap.step, snap.forced_spent
            if snap.options is not None:
                self._options = ToolOptions(**snap.options)
            # the predicates given before (adopt_code: a batch's template), then Chat.load's
            self._predicates = {**self._predicates, **snap.predicates}
            if snap.always_allow is not None:
                self._policies = restored_policies(snap.always_allow, self._predicates)
            if snap.rules is not None:
                self._rules = list(snap.rules)
            if snap.last_step == "budget_exhausted":
                self._last_step = StepResult("budget_exhausted", self.last_assistant_message)
                self._exhausted = snap.last_budget
            self._parent = snap.parent
            self._bus.resume_at(snap.next_seq)


def _close_all(subscriptions: Iterable[Any]) -> None:
    for sub in subscriptions:
        with contextlib.suppress(Exception):
            sub.close()


def folded_rules(snapshot: Sequence[Rule], events: Iterable[Event]) -> list[Rule]:
    """A stored chat's rules: its state's list, changed by its ``rule_changed`` events.

    The state is written whole by whichever process wrote last, which may not have
    known of a rule another process added or removed meanwhile; the events are every
    process's changes, in order. So a rule with events is what its last event says,
    one without keeps its place in the state (a fork's, copied with no event).

    Raises:
        ValueError: A stored rule cannot be read.
    """
    last: dict[Rule, bool] = {}
    for e in events:
        if isinstance(e, RuleChanged):
            rule = Rule.from_dict(e.rule)
            last.pop(rule, None)  # re-added: it goes to the end
            last[rule] = e.added
    if not last:
        return list(snapshot)
    kept = [r for r in snapshot if last.get(r, True)]
    return kept + [r for r, added in last.items() if added and r not in kept]


def folded_policies(
    snapshot: Sequence[Policy], events: Iterable[Event], predicates: Mapping[str, Any]
) -> list[Policy]:
    """A stored chat's always-allow policies: its state's, changed by its
    ``always_allow_changed`` events (see :func:`folded_rules` for why). A tool revoked in
    the events has the rules added after its last revocation; any other keeps the state's
    and gains those its events added (a conditional one takes its predicate from
    ``predicates``, else it approves nothing: ``not_given``)."""
    changes = [e for e in events if isinstance(e, AlwaysAllowChanged)]
    if not changes:
        return list(snapshot)
    out = list(snapshot)
    for e in changes:
        out = apply_always_allow(out, e.tool, e.allowed, e.conditional, predicates)
    return out


def apply_always_allow(
    policies: Sequence[Policy],
    tool: str,
    allowed: bool,
    conditional: bool,
    predicates: Mapping[str, Any],
) -> list[Policy]:
    """One ``always_allow``/``revoke`` change made elsewhere, applied to a list of policies:
    a revocation drops the tool's; an addition adds one unless the tool has one of that
    kind (with or without a predicate) already."""
    if not allowed:
        return [p for p in policies if p.tool != tool]
    if any(p.tool == tool and (p.when is not None) == conditional for p in policies):
        return list(policies)
    when = predicates.get(tool, not_given) if conditional else None
    return [*policies, always_allow_policy(tool, when)]


def answer_json(value: Any, text: str) -> Any:
    """What an answer's event keeps (a store writes it): the value if it is JSON, else its text."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return text
    return value


def _scrubbed_json(value: Any, secrets: tuple[str, ...]) -> Any:
    """JSON data with every string (dict keys too) through :func:`scrub`."""
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {scrub(str(k), secrets): _scrubbed_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed_json(v, secrets) for v in value]
    return value


_NO_SHAPE = ": matches none of the allowed shapes"


def _answer_problems(problems: list[str], schema: dict[str, Any]) -> list[str]:
    """The schema check's problems as an answer's: the whole value is "the answer" (not
    the "(arguments)" of a tool call's check), and a field of titled choices (``oneOf``
    of ``const``s, as a form's list shows them) names them rather than "shapes"."""
    out = []
    props = schema.get("properties")
    for problem in problems:
        if problem.startswith("(arguments)"):
            problem = "(the answer)" + problem[len("(arguments)") :]
        if problem.endswith(_NO_SHAPE) and isinstance(props, dict):
            spec = props.get(problem[: -len(_NO_SHAPE)])
            options = spec.get("oneOf") if isinstance(spec, dict) else None
            if (
                isinstance(options, list)
                and options
                and all(isinstance(o, dict) and "const" in o for o in options)
            ):
                named = ", ".join(
                    f"{o['const']!r}" + (f" ({o['title']})" if o.get("title") else "")
                    for o in options
                )
                problem = f"{problem[: -len(_NO_SHAPE)]}: should be one of {named}"
        out.append(problem)
    return out


def _unasked_fields(pending: PendingInput, data: Any) -> list[str]:
    """A form's answer with fields the form does not ask for (they were sent to the server
    as given): each named, unless the schema says what else it takes
    (``additionalProperties``, then the schema check's)."""
    schema = pending.schema or {}
    props = schema.get("properties")
    if (
        pending.kind != "elicitation"
        or not isinstance(data, dict)
        or not isinstance(props, dict)
        or "additionalProperties" in schema  # said: the schema check applies it
    ):
        return []
    extra = [k for k in data if k not in props]
    if not extra:
        return []
    asked = ", ".join(map(repr, props)) or "none"
    return [f"{', '.join(map(repr, extra))}: not a field of the form (its fields: {asked})"]


def checked_answer(pending: PendingInput, data: Any) -> tuple[Any, str, tuple[Any, ...]]:
    """An accepted answer checked against its request: (the value, the text the model
    reads, image parts). The one check of an answer, wherever it is given (``chat.answer``,
    ``store.answer`` in another process, the inbox).

    Raises:
        InputError: It does not match the request's schema, or cannot become text.
    """
    if isinstance(data, str):
        data = clean(data)
    if pending.kind == "elicitation_url":
        return None, "The user completed the requested step.", ()
    if pending.schema is not None:
        try:
            data = clean_json(data)
        except (TooDeep, TypeError, ValueError) as exc:
            raise InputError(f"the answer to {pending.id!r} is not JSON data ({exc})") from None
        problems = [
            *_answer_problems(validate_json_schema(data, pending.schema), pending.schema),
            *_unasked_fields(pending, data),
        ]
        if problems:
            where = f" ({pending.tool})" if pending.tool else ""
            raise InputError(
                f"the answer to {pending.id!r}{where} does not match what was asked: "
                + "; ".join(problems[:5])
                + " (the input still waits)"
            )
    cfg = get_config()
    try:
        text, parts = to_result(data, max_rows=cfg.result_max_rows, max_chars=cfg.result_max_chars)
    except Exception as exc:
        raise InputError(
            f"the answer to {pending.id!r} cannot be turned into text for the model "
            f"({type(exc).__name__}: {exc})"
        ) from None
    return data, text, tuple(parts)


def _refusal_text(pending: PendingInput, action: str, by: str, reason: str | None) -> str:
    """What the model reads when a parked call's input was declined or cancelled."""
    who = "the user" if by == "user" else by
    if action == "cancel":
        text = f"Cancelled by {who}: no answer was given"
    elif pending.kind == "ask_user":
        text = f"{who[0].upper()}{who[1:]} declined to answer"
    else:
        text = f"Declined by {who}: no result was given"
    return f"{text}: {reason}" if reason else f"{text}."


def _whose(t: Tool) -> str:
    """A tool in words for a notice: an MCP server's (by its label and own name) or local."""
    server = getattr(t, "server", None)
    if server:
        return f"the {server} server's tool {getattr(t, 'remote_name', t.name)!r}"
    return "the local tool"


def _one_source_per_label(listed: tuple[tuple[Tool, ...], ...]) -> None:
    """Refuse two tool sources of one chat whose tools carry one server label (two unlabelled
    instances of one MCP program, each named by what the server calls itself): a call
    records its server by label and a person approves "server A's charge", so the record
    could not say which one, and an approved call ran on the other (B charged for A's).

    Raises:
        ToolDefinitionError: Naming the label and what to do.
    """
    seen: dict[str, int] = {}
    for i, tools in enumerate(listed):
        for label in {t.server for t in tools if t.server is not None}:
            if seen.setdefault(label, i) != i:
                raise ToolDefinitionError(
                    f"two tool sources of this chat are labelled {label!r} (two MCP servers of "
                    "one program, say: a call records which server it is for, and an approval "
                    "names it): give each its own label= (or prefix=)"
                )


def _many(value: Any) -> bool:
    """Whether ``value`` is a collection of calls (a list of them, ``pending_approvals``)."""
    return isinstance(value, list | tuple | set | frozenset | ValuesView)


def _shown_through(ref: weakref.ref[ChatCore]) -> Callable[[str, ToolCall | None], str]:
    """The chat's :meth:`ChatCore._shown`, held weakly (key shapes alone once it is gone)."""

    def shown(text: str, call: ToolCall | None = None) -> str:
        chat = ref()
        return redact_keys(text) if chat is None else chat._shown(text, call)

    return shown
