"""The Chat: transcript, options, the tool loop, approvals and callbacks.

The loop is written once, as generators that *yield effects* (a model request,
a round of tool calls) and receive their results. The sync API performs the
effects with blocking calls, the async API awaits them: one implementation,
two thin drivers. The chat never renders and never runs a tool itself: it
hands rounds to the :class:`~nbagent._runner.ToolRunner` and reports every
change as an event.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from . import _aio
from ._approvals import HUMAN, Policy, consult_resolver, denial_content, requirement
from ._config import get_config
from ._errors import (
    ChatCancelled,
    DecisionError,
    PendingToolCallsError,
    ProviderError,
    ToolExecutionError,
)
from ._events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    EventBus,
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
from ._options import ToolOptions, resolve_choice
from ._runner import Job, Mode, Outcome, ToolRunner, needs_event_loop
from ._serialize import to_content
from ._tools import SchemaValidationError, Tool, as_tool, tool_name_of
from ._types import (
    Approval,
    AssistantToolCallMessage,
    ChatMessage,
    Decision,
    LLMToolResponse,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from .providers._base import Provider, StreamDelta
from .providers._registry import resolve_provider

StepKind = Literal[
    "generated", "ran_tools", "awaiting_approval", "complete", "budget_exhausted", "busy"
]
RUNNABLE = ("requested", "approved")
_ALREADY = "\x00already-decided"


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
            ``budget_exhausted`` (``complete(max_steps=)`` ran out), or ``busy``
            (another thread is driving this chat; it will pick up decisions; or,
            with a store, another process is: ``Chat.load`` the chat again).
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
    """What ``after_tool_result`` callbacks receive.

    Attributes:
        call: The call answered.
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

    @property
    def is_error(self) -> bool:
        return self.status != "ok"


@dataclass
class _ModelRequest:
    step: int
    kwargs: dict[str, Any]
    t0: float = 0.0


@dataclass
class _RunRound:
    step: int
    jobs: list[Job]
    mode: Mode
    errors: list[tuple[ToolCall, BaseException]] = field(default_factory=list)


_Effect = _ModelRequest | _RunRound


class Chat:
    """A conversation with a model that can call tools.

    Args:
        model: Model name (``"gpt-4.1-mini"``, ``"claude-sonnet-4-5"``, ``"demo"``).
            The provider is inferred from it. ``Chat()`` alone picks the best
            provider with an API key in the environment, else the offline demo.
        provider: A provider object, or a name (``"openai"``, ``"openai-responses"``,
            ``"openai-compatible"``, ``"anthropic"``, ``"demo"``).
        system: System instructions.
        base_url: Endpoint of an OpenAI-compatible server (Ollama, vLLM...) or a proxy.
        api_key: API key (else the provider's environment variable). Never logged.
        max_steps: Steps ``complete()`` takes before stopping with
            ``budget_exhausted`` (default: ``nbagent.configure(max_steps=)``, 25).
        on_tool_error: ``"result"`` (a raising tool's error is sent to the model
            and the loop goes on) or ``"raise"`` (raise :class:`ToolExecutionError`;
            the transcript stays valid and ``complete()`` resumes).
        stream: Stream responses (default from ``nbagent.configure``).
        store: A path or store object to persist the chat (see ``nbagent.store``).
        id: The chat id (default: a new UUID).
        display: Render live in a notebook (default from ``nbagent.configure``).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: Provider | str | None = None,
        system: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_steps: int | None = None,
        on_tool_error: Literal["result", "raise"] = "result",
        stream: bool | None = None,
        store: Any = None,
        id: str | None = None,
        display: bool | None = None,
    ):
        if on_tool_error not in ("result", "raise"):
            raise ValueError(f"on_tool_error must be 'result' or 'raise', got {on_tool_error!r}")
        if max_steps is not None and max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.id = id or uuid.uuid4().hex
        self.provider: Provider = resolve_provider(
            model, provider, base_url=base_url, api_key=api_key
        )
        self.system = system
        self.max_steps = max_steps
        self.on_tool_error = on_tool_error
        self.stream = stream
        self.display = display
        self._messages: list[Message] = []
        self._tools: dict[str, Tool] = {}
        self._options = ToolOptions()
        self._bus = EventBus(self.id)
        self._lock = threading.RLock()
        self._before: list[Callable[[ToolCall], Any]] = []
        self._after: list[Callable[[ToolResult], Any]] = []
        self._policies: list[Policy] = []
        self._calls: dict[str, ToolCall] = {}
        self._call_turn: dict[str, int] = {}
        self._call_step: dict[str, int] = {}
        self._open: AssistantToolCallMessage | None = None
        self._turn = 0
        self._step = 0
        self._forced_spent = False
        self._cancel = threading.Event()
        self._drive_lock = threading.Lock()
        self._rerun = False
        self._last_step: StepResult | None = None
        self._usage = Usage()
        self._runner = ToolRunner()
        self._claim: Callable[[ToolCall], bool] | None = None
        self._turn_hooks: list[Callable[[Chat], Any]] = []
        self._step_hooks: list[Callable[[Chat], Any]] = []
        self._approval_waiter: Callable[[Chat, bool | None], Awaitable[bool]] | None = None
        self._deferred: list[Event] = []
        from ._log import CallLog

        self._log = CallLog(self)
        self._bus.subscribe(None, self._log.on_event)
        self._store: Any = None
        if store is not None:
            from ._store import attach_store

            attach_store(self, store)
        from .notebook import _install_auto_display  # no-op outside a Jupyter kernel

        _install_auto_display(self)

    # ------------------------------------------------------------------ repr
    def __repr__(self) -> str:
        return (
            f"Chat(id={self.id[:8]!r}, model={self.model!r}, provider={self.provider.name!r}, "
            f"messages={len(self._messages)}, tools={list(self._tools)}, status={self.status!r})"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .notebook._fallback import chat_mimebundle

        return chat_mimebundle(self)

    def _ipython_display_(self) -> None:
        from .notebook._fallback import display_chat

        display_chat(self)

    def review(self) -> Message | None:
        """Decide pending approvals at an ``input()`` prompt (a terminal), then continue."""
        from .notebook import review

        return review(self)

    @property
    def model(self) -> str:
        return self.provider.model

    # --------------------------------------------------------------- tools
    def with_tools(self, *tools: Any, replace: bool = False) -> Chat:
        """Add tools (``@tool`` functions, ``Tool`` classes or instances); returns the chat.

        ``with_tools(None)`` removes every tool and keeps the tool options.
        ``replace=True`` replaces the current tools with the ones given. A tool
        with the name of an existing one replaces it.
        """
        with self._lock:
            if len(tools) == 1 and tools[0] is None:
                self._tools = {}
                return self
            if replace:
                self._tools = {}
            for t in tools:
                if t is None:
                    raise TypeError("with_tools(None) clears tools; don't mix None with tools")
                if isinstance(t, (list, tuple)):
                    self.with_tools(*t)
                    continue
                inst = as_tool(t)
                self._tools[inst.name] = inst
        return self

    with_tool = with_tools

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(self._tools.values())

    def with_tool_options(self, **options: Any) -> Chat:
        """Set tool options; only the keys given change, ``None`` resets a key.

        Keys:
            choice: ``"auto"``, ``"required"``, ``"none"``, a tool name, a Tool
                class, or a tool function. A required or specific choice lasts
                until the turn has run one tool round, then the model answers.
            calls: ``"one"`` (or ``1``), ``"many"``, or a positive int: most calls
                run per response. Sent to providers with a switch; always
                enforced here (extra calls are answered as skipped).
            concurrency: ``False`` (sequential), ``True``/``"threads"``, ``"async"``.
            max_concurrency: Most calls of a round running at once.
            timeout: Default per-call timeout in seconds.

        Raises:
            TypeError: An unknown key.
            ToolOptionError: An invalid value.
        """
        with self._lock:
            self._options = self._options.updated(options)
            opts = self._options.as_dict()
        self._emit(OptionsChanged(chat_id=self.id, seq=self._bus.next_seq(), options=opts))
        return self

    @property
    def tool_options(self) -> ToolOptions:
        return self._options

    def with_instructions(self, system: str | None) -> Chat:
        """Set (or clear) the system instructions; returns the chat."""
        self.system = system
        return self

    # ------------------------------------------------------------ callbacks
    def before_tool_call(self, fn: Callable[[ToolCall], Any]) -> Chat:
        """Call ``fn(call)`` right before each call runs; raise :class:`SkipToolCall` to skip it.

        Runs on the thread driving the chat, never concurrently with another callback.
        """
        self._before.append(fn)
        return self

    def after_tool_result(self, fn: Callable[[ToolResult], Any]) -> Chat:
        """Call ``fn(result)`` for every result sent back (ran, failed, denied, skipped)."""
        self._after.append(fn)
        return self

    def on(self, event_type: type[Event] | str | None, fn: Callable[[Event], Any]) -> Chat:
        """Subscribe ``fn`` to one event type (class or name), or to all with ``None``."""
        self._bus.subscribe(event_type, fn)
        return self

    def off(self, fn: Callable[..., Any]) -> Chat:
        """Remove ``fn`` from every callback list and subscription it is in."""
        self._before = [f for f in self._before if f is not fn and f != fn]
        self._after = [f for f in self._after if f is not fn and f != fn]
        self._bus.unsubscribe(fn)
        return self

    def _emit(self, event: Event) -> None:
        self._bus.emit(event)

    def _emit_all(self, events: Iterable[Event]) -> None:
        for e in events:
            self._bus.emit(e)

    # ------------------------------------------------------------- state
    @property
    def transcript(self) -> tuple[Message, ...]:
        """Every message so far, in order (tool results appear once a round is complete)."""
        return tuple(self._messages)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Every tool call of the chat, in request order."""
        return tuple(self._calls.values())

    @property
    def open_calls(self) -> tuple[ToolCall, ...]:
        """Calls of the last response that are not answered yet."""
        with self._lock:
            if self._open is None:
                return ()
            return tuple(c for c in self._open.tool_calls if not c.is_final)

    @property
    def pending_approvals(self) -> list[ToolCall]:
        """Gated calls waiting for a decision."""
        return [c for c in self.open_calls if c.status == "awaiting_approval"]

    @property
    def awaiting_approval(self) -> bool:
        """True when nothing can run until someone decides a pending approval."""
        with self._lock:
            opened = self.open_calls
            return bool(opened) and all(c.status == "awaiting_approval" for c in opened)

    @property
    def is_complete(self) -> bool:
        """True when the model has answered and nothing is left to do."""
        with self._lock:
            if self._open is not None:
                return False
            last = self._messages[-1] if self._messages else None
            return isinstance(last, ChatMessage) and last.role == "assistant" and (
                _stop(last) != "pause_turn"
            )

    @property
    def status(self) -> str:
        """``idle``, ``complete``, ``awaiting_approval``, ``budget_exhausted`` or ``ready``."""
        if not self._messages:
            return "idle"
        if self.is_complete:
            return "complete"
        if self.awaiting_approval:
            return "awaiting_approval"
        if self._last_step is not None and self._last_step.kind == "budget_exhausted":
            return "budget_exhausted"
        return "ready"

    @property
    def last_step(self) -> StepResult | None:
        return self._last_step

    @property
    def usage(self) -> Usage:
        """Tokens used by every request of this chat."""
        return self._usage

    @property
    def turn(self) -> int:
        return self._turn

    def turn_messages(self, turn: int | None = None) -> tuple[Message, ...]:
        """Every message of one turn (default: the latest)."""
        t = self._turn if turn is None else turn
        return tuple(m for m in self._messages if getattr(m, "turn", None) == t)

    def get_call(self, call_or_id: ToolCall | str) -> ToolCall:
        """The chat's call for a :class:`ToolCall` or its id."""
        cid = call_or_id.id if isinstance(call_or_id, ToolCall) else call_or_id
        try:
            return self._calls[cid]
        except KeyError:
            raise DecisionError(
                f"no tool call {cid!r} in this chat"
                + (f"; pending: {[c.id for c in self.pending_approvals]}" if self._calls else "")
            ) from None

    # --------------------------------------------------------------- log
    @property
    def log(self) -> Any:
        """One row per tool call (a pandas DataFrame); see ``nbagent.log``."""
        return self._log.calls()

    @property
    def steps(self) -> Any:
        """One row per model request (a pandas DataFrame)."""
        return self._log.steps()

    @property
    def messages(self) -> Any:
        """One row per message (a pandas DataFrame); the values are in ``transcript``."""
        return self._log.messages()

    # -------------------------------------------------------- persistence
    @classmethod
    def load(
        cls,
        chat_id: str,
        *,
        store: Any,
        tools: Sequence[Any] = (),
        provider: Provider | str | None = None,
        model: str | None = None,
        **chat_kwargs: Any,
    ) -> Chat:
        """Rebuild a stored chat, in this or any other process, and keep persisting it.

        Tools and callbacks are code, so pass the tools again. A gated call whose
        tool is missing here is refused, never run ungated. Decisions made
        through the store are applied; a call left running by a process that is
        gone is in doubt (see ``nbagent.store``).

        Args:
            chat_id: The chat's id (``chat.id``; ``store.chats()`` lists them).
            store: A path or store object.
            tools: The chat's tools.
            provider / model: Default: the stored provider name and model.
            **chat_kwargs: Other ``Chat`` arguments (``api_key``, ``base_url``,
                ``system``, ``max_steps``...); stored values are the defaults.

        Raises:
            StoreError: Unknown chat id, or the store cannot be read.
        """
        from ._store import load_chat

        return load_chat(cls, chat_id, store=store, tools=tools, provider=provider,
                         model=model, **chat_kwargs)

    def refresh(self) -> list[ToolCall]:
        """Apply decisions made elsewhere (another process, through the store); returns them."""
        from ._store import refresh_chat

        return refresh_chat(self)

    def _restore(
        self,
        *,
        messages: Sequence[Message],
        calls: Sequence[ToolCall],
        call_turn: dict[str, int],
        call_step: dict[str, int],
        turn: int,
        step: int,
        forced_spent: bool,
        usage: Usage,
        options: dict[str, Any] | None,
        last_step: str | None,
        next_seq: int,
    ) -> None:
        """Put back a stored chat's state (``Chat.load``)."""
        import itertools

        with self._lock:
            self._messages = list(messages)
            self._calls = {c.id: c for c in calls}
            self._call_turn, self._call_step = dict(call_turn), dict(call_step)
            last = self._messages[-1] if self._messages else None
            self._open = last if isinstance(last, AssistantToolCallMessage) else None
            self._turn, self._step, self._forced_spent = turn, step, forced_spent
            self._usage = usage
            if options is not None:
                self._options = ToolOptions(**options)
            if last_step == "budget_exhausted":
                self._last_step = StepResult("budget_exhausted", self.last_assistant_message)
            self._bus._seq = itertools.count(next_seq)

    # ---------------------------------------------------------- decisions
    def approve(
        self,
        call: ToolCall | str,
        arguments: dict[str, Any] | None = None,
        *,
        reason: str | None = None,
        by: str = HUMAN,
    ) -> ToolCall:
        """Approve a gated call (optionally with edited, validated arguments).

        Approving records the decision; ``complete()`` (or the notebook view)
        runs the call. Approving twice is a no-op; the call runs at most once.

        Raises:
            DecisionError: Unknown call, a call that needs no approval, invalid
                edited arguments, or a contradiction of an earlier decision.
        """
        return self._decide(call, "approved", by=by, reason=reason, arguments=arguments)

    def deny(self, call: ToolCall | str, reason: str | None = None, *, by: str = HUMAN) -> ToolCall:
        """Deny a gated call: it will never run; the model is told why."""
        return self._decide(call, "denied", by=by, reason=reason, arguments=None)

    def always_allow(self, tool: Any, when: Callable[[ToolCall], bool] | None = None) -> Chat:
        """Approve every call of ``tool`` for the rest of the session (optionally when ``when(call)``).

        Pending calls it matches are approved at once. Policy decisions are
        recorded as ``policy:always_allow:<tool>`` (or ``...:when``).
        """
        name = tool_name_of(tool)
        policy = Policy(f"always_allow:{name}" + (":when" if when else ""), name, when)
        with self._lock:
            self._policies.append(policy)
        for call in self.pending_approvals:
            if policy.matches(call):
                try:
                    self._decide(call, "approved", by=policy.decider, reason="always allowed")
                except DecisionError:
                    pass
        return self

    def _decide(
        self,
        call: ToolCall | str,
        verdict: Literal["approved", "denied"],
        *,
        by: str,
        reason: str | None,
        arguments: dict[str, Any] | None = None,
    ) -> ToolCall:
        events: list[Event] = []
        after: list[ToolResult] = []
        with self._lock:
            c = self.get_call(call)
            if c.approval is None or not c.approval.required:
                raise DecisionError(f"{c.name}({c.id}) does not need approval")
            existing = c.decision
            if existing is not None:
                same = existing.verdict == verdict and (
                    arguments is None or arguments == existing.arguments
                )
                if same:
                    return c
                overridable = (
                    existing.automatic and by == HUMAN and c.status in ("approved", "denied")
                    and c.started_at is None and (c.id not in self._closed_ids())
                )
                if not overridable:
                    raise DecisionError(
                        f"{c.name}({c.id}) was already {existing.verdict} by {existing.by}; "
                        f"a decision cannot be changed"
                    )
            elif c.status != "awaiting_approval":
                raise DecisionError(f"{c.name}({c.id}) is {c.status}; it cannot be decided now")
            edited: dict[str, Any] | None = None
            if arguments is not None:
                if verdict != "approved":
                    raise DecisionError("only an approval can carry edited arguments")
                tool = self._tools.get(c.name)
                if tool is None:
                    raise DecisionError(f"tool {c.name!r} is not available in this chat")
                try:
                    tool.validate_arguments(arguments)
                except SchemaValidationError as exc:
                    raise DecisionError(f"edited arguments for {c.name} are invalid: {exc}") from None
                edited = dict(arguments)
            decision = Decision(verdict, by, utcnow(), reason, edited)
            c.decision = decision
            events.append(
                ApprovalDecided(
                    chat_id=self.id, seq=self._bus.next_seq(), call=c, decision=decision,
                    turn=self._call_turn.get(c.id, self._turn),
                )
            )
            if verdict == "approved":
                if existing is not None and existing.verdict == "denied":
                    c.result = None
                c.status = "approved"
            else:
                c.status = "denied"
                result = ToolResultMessage(
                    c.id, denial_content(c, reason, by), True, "denied", c.name,
                    turn=self._call_turn.get(c.id, self._turn),
                )
                c.result = result
                c.finished_at = utcnow()
                events.append(self._finished_event(c, result, None, None, None))
                after.append(ToolResult(c, result.content, "denied"))
        self._emit_all(events)
        self._run_after(after)
        return c

    def _closed_ids(self) -> set[str]:
        if self._open is None:
            return set(self._calls)
        open_ids = {c.id for c in self._open.tool_calls}
        return set(self._calls) - open_ids

    def cancel(self) -> None:
        """Stop the running loop after the calls already running settle.

        Calls not started yet are answered as cancelled, so the transcript
        stays valid; ``complete()`` resumes (the model sees what was cancelled).
        """
        self._cancel.set()

    # ------------------------------------------------------------ the API
    def ask_later(self, text: str) -> ChatMessage:
        """Add a user message without running anything.

        Raises:
            PendingToolCallsError: Calls of the last response are unanswered.
        """
        if not isinstance(text, str):
            raise TypeError(f"ask() takes text, got {type(text).__name__}")
        with self._lock:
            unanswered = self.open_calls
            if unanswered:
                raise PendingToolCallsError(unanswered)
            self._turn += 1
            self._forced_spent = False
            self._last_step = None
            msg = ChatMessage("user", text, turn=self._turn)
            events = self._append(msg)
        self._emit_all(events)
        for hook in list(self._turn_hooks):
            hook(self)
        return msg

    def ask(self, text: str, *, max_steps: int | None = None) -> Message | None:
        """Ask and run the loop: ``ask_later(text)`` then ``complete()``.

        Returns:
            The turn's last assistant message. Check ``chat.status``: it may be
            ``awaiting_approval`` or ``budget_exhausted`` instead of ``complete``.
        """
        self.ask_later(text)
        return self.complete(max_steps=max_steps)

    async def ask_async(
        self, text: str, *, max_steps: int | None = None, wait_for_approval: bool | None = None
    ) -> Message | None:
        """Async twin of :meth:`ask`.

        In a notebook on ipykernel >= 7.4 it waits for a click on a pending
        approval card (up to ``configure(approval_wait=)`` seconds, then
        ``approval_fallback``) and carries on; ``wait_for_approval=False``
        returns at once with the approval pending, as ``ask()`` does.
        """
        self.ask_later(text)
        reply = await self.complete_async(max_steps=max_steps)
        waiter = self._approval_waiter  # set by the notebook view inside a kernel
        if waiter is None:
            return reply
        while not self.is_complete and await waiter(self, wait_for_approval):
            await self.complete_async(max_steps=max_steps)
        return self.last_assistant_message

    def step(self) -> StepResult:
        """Do exactly one unit of work and say which (see :class:`StepResult`)."""
        return self._drive_sync(self._guarded(self._step_gen()))

    async def step_async(self) -> StepResult:
        """Async twin of :meth:`step`."""
        return await self._drive_async(self._guarded(self._step_gen()))

    def complete(self, *, max_steps: int | None = None) -> Message | None:
        """Run until the model answers, approval is needed, or the budget is spent.

        Approved calls run, denials are sent, and the model continues. Calling
        again after ``budget_exhausted`` resumes where it stopped.

        Returns:
            The last assistant message.
        """
        self._drive_sync(self._guarded(self._complete_gen(max_steps)))
        return self.last_assistant_message

    async def complete_async(self, *, max_steps: int | None = None) -> Message | None:
        """Async twin of :meth:`complete`."""
        await self._drive_async(self._guarded(self._complete_gen(max_steps)))
        return self.last_assistant_message

    async def astream_events(self, text: str) -> AsyncIterator[Event]:
        """Ask and iterate over the events of the turn as they happen."""
        import asyncio

        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def push(e: Event) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, e)

        self.on(None, push)

        async def run() -> None:
            try:
                await self.ask_async(text)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        task = asyncio.ensure_future(run())
        try:
            while (item := await queue.get()) is not None:
                yield item
            await task
        finally:
            self.off(push)

    @property
    def last_assistant_message(self) -> Message | None:
        for m in reversed(self._messages):
            if getattr(m, "role", None) == "assistant":
                return m
        return None

    # ------------------------------------------------------------ drivers
    def _drive_sync(self, gen: Generator[_Effect, Any, StepResult]) -> StepResult:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = gen.send(value) if error is None else gen.throw(error)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                value = self._perform_sync(effect)
            except BaseException as exc:
                error = exc

    async def _drive_async(self, gen: Generator[_Effect, Any, StepResult]) -> StepResult:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = gen.send(value) if error is None else gen.throw(error)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                value = await self._perform_async(effect)
            except BaseException as exc:
                error = exc

    def _perform_sync(self, effect: _Effect) -> Any:
        if isinstance(effect, _ModelRequest):
            return self.provider.complete_with_tools(**effect.kwargs)
        coro = self._runner.run_round(effect.jobs, effect.mode, self._hooks(effect))
        if needs_event_loop(effect.jobs, effect.mode):
            return _aio.run_sync(coro)
        return _aio.run_inline(coro)

    async def _perform_async(self, effect: _Effect) -> Any:
        if isinstance(effect, _ModelRequest):
            return await self.provider.complete_with_tools_async(**effect.kwargs)
        return await self._runner.run_round(effect.jobs, effect.mode, self._hooks(effect))

    # ----------------------------------------------------------- the loop
    def _guarded(
        self, gen: Generator[_Effect, Any, StepResult]
    ) -> Generator[_Effect, Any, StepResult]:
        """Run ``gen`` holding the drive lock; if another driver holds it, ask it to rerun."""
        if not self._drive_lock.acquire(blocking=False):
            with self._lock:
                self._rerun = True
            gen.close()
            return StepResult("busy", self.last_assistant_message)
        self._cancel.clear()
        try:
            return (yield from gen)
        finally:
            self._drive_lock.release()

    def _complete_gen(self, max_steps: int | None) -> Generator[_Effect, Any, StepResult]:
        budget = max_steps or self.max_steps or get_config().max_steps
        taken = 0
        while True:
            if taken >= budget:
                result = StepResult("budget_exhausted", self.last_assistant_message)
                self._finish_step(result, count=False)
                return result
            result = yield from self._step_gen()
            if result.kind == "busy":  # a step hook said another process drives this chat
                return result
            if result.kind in ("awaiting_approval", "complete"):
                with self._lock:
                    if self._rerun:
                        self._rerun = False
                        continue
                return result
            taken += 1

    def _step_gen(self) -> Generator[_Effect, Any, StepResult]:
        if self._cancel.is_set():
            raise ChatCancelled("the chat was cancelled; call complete() to resume")
        for hook in list(self._step_hooks):
            if hook(self) == "busy":  # e.g. the store: another process drives this chat
                result = StepResult("busy", self.last_assistant_message)
                self._finish_step(result, count=False)
                return result
        with self._lock:
            self._refresh_pending()
            events = self._close_round_if_done()
            action, calls = self._plan()
        self._emit_all(events)
        if action == "awaiting_approval":
            result = StepResult("awaiting_approval", self.last_assistant_message, tuple(calls))
            self._finish_step(result, count=False)
            return result
        if action == "complete":
            result = StepResult("complete", self.last_assistant_message)
            self._finish_step(result, count=False)
            return result
        self._step += 1
        if action == "generate":
            request = self._build_request()
            try:
                response = yield request
            except BaseException as exc:
                self._request_failed(request, exc)
                raise
            result = self._apply_response(request, response)
        else:
            round_ = self._prepare_round(calls)
            try:
                if round_.jobs:
                    yield round_
            finally:
                with self._lock:
                    events = self._close_round_if_done()
                self._emit_all(events)
            result = StepResult("ran_tools", self.last_assistant_message, tuple(calls))
            self._finish_step(result)
            if round_.errors and self.on_tool_error == "raise":
                raise _tool_errors(round_.errors)
            if self._cancel.is_set():
                raise ChatCancelled("the chat was cancelled; call complete() to resume")
            return result
        self._finish_step(result)
        return result

    def _finish_step(self, result: StepResult, count: bool = True) -> None:
        self._last_step = result
        self._emit(
            StepFinished(
                chat_id=self.id, seq=self._bus.next_seq(), step=self._step, turn=self._turn,
                kind=result.kind,
            )
        )

    def _plan(self) -> tuple[str, list[ToolCall]]:
        if self._open is not None:
            calls = list(self._open.tool_calls)
            ready = [c for c in calls if c.status in RUNNABLE]
            if ready:
                return "run_tools", ready
            return "awaiting_approval", [c for c in calls if c.status == "awaiting_approval"]
        last = self._messages[-1] if self._messages else None
        if last is None:
            return "complete", []
        if isinstance(last, ToolResultMessage):
            return "generate", []
        if isinstance(last, ChatMessage) and (last.role == "user" or _stop(last) == "pause_turn"):
            return "generate", []
        return "complete", []

    # ---------------------------------------------------------- requests
    def _build_request(self) -> _ModelRequest:
        with self._lock:
            tools = [t.spec for t in self._tools.values()]
            choice = resolve_choice(
                self._options.choice, list(self._tools), forced_spent=self._forced_spent
            )
            calls = self._options.calls_wire
            stream = self.stream if self.stream is not None else get_config().stream
            step = self._step
            kwargs: dict[str, Any] = {
                "messages": tuple(self._messages),
                "system": self.system,
                "tools": tools,
                "tool_choice": choice,
                "calls": calls,
                "stream": stream,
                "on_delta": self._delta_sink(step) if stream else None,
            }
        self._emit(
            ModelRequestStarted(
                chat_id=self.id, seq=self._bus.next_seq(), step=step, turn=self._turn,
                model=self.model, provider=self.provider.name, n_messages=len(kwargs["messages"]),
                tool_choice=choice, calls=calls,
            )
        )
        return _ModelRequest(step, kwargs, time.perf_counter())

    def _delta_sink(self, step: int) -> Callable[[StreamDelta], None]:
        def sink(delta: StreamDelta) -> None:
            if delta.kind == "text":
                self._emit(TextDelta(chat_id=self.id, seq=self._bus.next_seq(), step=step,
                                     text=delta.text))
            else:
                self._emit(
                    ToolCallDelta(
                        chat_id=self.id, seq=self._bus.next_seq(), step=step, index=delta.index,
                        call_id=delta.call_id, name=delta.name, arguments_delta=delta.text,
                    )
                )

        return sink

    def _request_failed(self, request: _ModelRequest, exc: BaseException) -> None:
        self._emit(
            ModelRequestFailed(
                chat_id=self.id, seq=self._bus.next_seq(), step=request.step, turn=self._turn,
                model=self.model, provider=self.provider.name, error_type=type(exc).__name__,
                error=str(exc), latency_ms=(time.perf_counter() - request.t0) * 1000.0,
            )
        )
        self._step -= 1  # a failed request is not a step; retrying reuses the number

    def _apply_response(self, request: _ModelRequest, response: LLMToolResponse) -> StepResult:
        latency = (time.perf_counter() - request.t0) * 1000.0
        if not isinstance(response, LLMToolResponse):
            raise ProviderError(f"provider returned {type(response).__name__}, not LLMToolResponse")
        from ._log import cost_of

        events: list[Event] = [
            ModelRequestFinished(
                chat_id=self.id, seq=self._bus.next_seq(), step=request.step, turn=self._turn,
                model=response.model or self.model, provider=response.provider or self.provider.name,
                usage=response.usage, latency_ms=latency, stop_reason=response.stop_reason,
                raw_stop_reason=response.raw_stop_reason, n_tool_calls=len(response.tool_calls),
                text=response.text, cost_usd=cost_of(response.model or self.model, response.usage),
            )
        ]
        after: list[ToolResult] = []
        with self._lock:
            self._usage = self._usage + response.usage
            message: Message
            if response.tool_calls:
                calls = tuple(c.copy_identity() for c in response.tool_calls)
                message = AssistantToolCallMessage(
                    response.text or None, calls, turn=self._turn, stop_reason=response.stop_reason
                )
                events.extend(self._append(message))
                self._open = message
                events.extend(self._register_calls(calls, response, request.step, after))
                events.extend(self._close_round_if_done())
            else:
                text = response.text
                if response.stop_reason == "refusal" and response.refusal and not text:
                    text = response.refusal
                message = ChatMessage(
                    "assistant", text, turn=self._turn, stop_reason=response.stop_reason
                )
                events.extend(self._append(message))
        self._emit_all(events)
        self._run_after(after)
        return StepResult("generated", message, tuple(getattr(message, "tool_calls", ())), response)

    def _register_calls(
        self,
        calls: Sequence[ToolCall],
        response: LLMToolResponse,
        step: int,
        after: list[ToolResult],
    ) -> list[Event]:
        """Record the calls of a response: gate each once, answer the ones that can't run."""
        events: list[Event] = []
        limit = self._options.calls
        truncated = response.stop_reason in ("max_tokens", "context_window")
        for n, c in enumerate(calls):
            self._calls[c.id] = c
            self._call_turn[c.id] = self._turn
            self._call_step[c.id] = step
            tool = self._tools.get(c.name)
            c.approval = requirement(tool)
            events.append(
                ToolCallRequested(
                    chat_id=self.id, seq=self._bus.next_seq(), call=c, step=step, turn=self._turn,
                    approval=c.approval,
                )
            )
            problem = self._reject_reason(c, tool, n, limit, truncated)
            if problem is not None:
                status, text = problem
                events.extend(self._answer(c, status, text, after))
                continue
            if c.approval.required:
                c.status = "awaiting_approval"
                events.extend(self._auto_decide(c, tool))
                if c.status == "awaiting_approval":
                    events.append(
                        ApprovalRequested(
                            chat_id=self.id, seq=self._bus.next_seq(), call=c, step=step,
                            turn=self._turn, reason=c.approval.reason, source=c.approval.source,
                        )
                    )
        return events

    def _reject_reason(
        self, c: ToolCall, tool: Tool | None, n: int, limit: int | None, truncated: bool
    ) -> tuple[Literal["error", "skipped"], str] | None:
        if truncated:
            return "skipped", (
                "Not executed: the response was cut off by the token limit, so these "
                "arguments may be incomplete. Call the tool again if it is still needed."
            )
        if limit is not None and n >= limit:
            word = "one tool call" if limit == 1 else f"{limit} tool calls"
            return "skipped", (
                f"Not executed: only {word} per response is allowed. "
                "Call it again in a later response if it is still needed."
            )
        if tool is None:
            names = ", ".join(sorted(self._tools)) or "none"
            return "error", f"Error: unknown tool {c.name!r}. Available tools: {names}."
        if c.parse_error is not None:
            return "error", (
                f"Error: the arguments for {c.name} were not valid JSON ({c.parse_error}); "
                f"received: {c.raw_arguments!r}. The tool was not run."
            )
        try:
            tool.validate_arguments(c.arguments)
        except SchemaValidationError as exc:
            return "error", f"Error: invalid arguments for {c.name}: {exc}. The tool was not run."
        return None

    def _auto_decide(self, c: ToolCall, tool: Tool | None) -> list[Event]:
        """Let the resolver, then the policies, decide an undecided gated call."""
        verdict: bool | None = None
        by = ""
        reason: str | None = None
        if tool is not None and tool.has_resolver:
            verdict, note = consult_resolver(tool, c)
            by = "resolver"
            if note and c.approval is not None:
                c.approval = Approval(True, c.approval.source, f"{c.approval.reason} ({note})")
        if verdict is None:
            for policy in self._policies:
                if policy.matches(c):
                    verdict, by, reason = True, policy.decider, "always allowed"
                    break
        if verdict is None:
            return []
        decision = Decision("approved" if verdict else "denied", by, utcnow(), reason)
        c.decision = decision
        events: list[Event] = [
            ApprovalDecided(chat_id=self.id, seq=self._bus.next_seq(), call=c, decision=decision,
                            turn=self._call_turn.get(c.id, self._turn))
        ]
        if verdict:
            c.status = "approved"
        else:
            c.status = "denied"
            result = ToolResultMessage(
                c.id, denial_content(c, reason, by), True, "denied", c.name,
                turn=self._call_turn.get(c.id, self._turn),
            )
            c.result = result
            c.finished_at = utcnow()
            events.append(self._finished_event(c, result, None, None, None))
        return events

    def _refresh_pending(self) -> None:
        if self._open is None:
            return
        events: list[Event] = []
        for c in self._open.tool_calls:
            if c.status == "awaiting_approval":
                events.extend(self._auto_decide(c, self._tools.get(c.name)))
        self._deferred.extend(events)

    def _answer(
        self, c: ToolCall, status: Any, text: str, after: list[ToolResult]
    ) -> list[Event]:
        result = ToolResultMessage(c.id, text, status != "ok", status, c.name,
                                   turn=self._call_turn.get(c.id, self._turn))
        c.status = status
        c.result = result
        c.finished_at = utcnow()
        after.append(ToolResult(c, text, status))
        return [self._finished_event(c, result, None, None, None)]

    def _finished_event(
        self,
        c: ToolCall,
        result: ToolResultMessage,
        error: str | None,
        duration_ms: float | None,
        mode: str | None,
    ) -> ToolCallFinished:
        return ToolCallFinished(
            chat_id=self.id, seq=self._bus.next_seq(), call=c,
            step=self._call_step.get(c.id, self._step), turn=self._call_turn.get(c.id, self._turn),
            status=c.status, result=result, error=error, duration_ms=duration_ms,
            started_at=c.started_at, mode=mode,
        )

    def _append(self, message: Message) -> list[Event]:
        self._messages.append(message)
        return [
            MessageAdded(
                chat_id=self.id, seq=self._bus.next_seq(), message=message,
                index=len(self._messages) - 1, turn=getattr(message, "turn", self._turn),
            )
        ]

    def _close_round_if_done(self) -> list[Event]:
        """Once every call of the open round is answered, add the results in call order."""
        events, self._deferred = self._deferred, []
        if self._open is None or not all(c.is_final for c in self._open.tool_calls):
            return events
        for c in self._open.tool_calls:
            assert c.result is not None
            events.extend(self._append(c.result))
        self._open = None
        if self._options.choice not in ("auto", "none"):
            self._forced_spent = True
        return events

    # ------------------------------------------------------------ rounds
    def _prepare_round(self, calls: Sequence[ToolCall]) -> _RunRound:
        jobs: list[Job] = []
        after: list[ToolResult] = []
        events: list[Event] = []
        with self._lock:
            default_timeout = self._options.timeout or get_config().tool_timeout
            for c in calls:
                tool = self._tools.get(c.name)
                if tool is None:
                    events.extend(self._answer(
                        c, "error",
                        f"Error: tool {c.name!r} is not available in this process; not run.",
                        after,
                    ))
                    continue
                try:
                    kwargs = tool.validate_arguments(c.effective_arguments)
                except SchemaValidationError as exc:
                    events.extend(self._answer(
                        c, "error", f"Error: invalid arguments for {c.name}: {exc}", after
                    ))
                    continue
                jobs.append(Job(c, tool, kwargs, tool.timeout or default_timeout))
            mode = self._options.effective_concurrency
            self._runner.max_concurrency = self._options.effective_max_concurrency
        self._emit_all(events)
        self._run_after(after)
        return _RunRound(self._step, jobs, mode)

    def _hooks(self, round_: _RunRound) -> _Hooks:
        return _Hooks(self, round_)

    def _run_after(self, results: Iterable[ToolResult]) -> None:
        for r in results:
            for fn in list(self._after):
                fn(r)


def _stop(message: ChatMessage) -> str:
    return message.stop_reason


def _tool_errors(errors: list[tuple[ToolCall, BaseException]]) -> BaseException:
    excs = [ToolExecutionError(c, e) for c, e in errors]
    if len(excs) == 1:
        return excs[0]
    return ExceptionGroup(f"{len(excs)} tools raised", excs)


class _Hooks:
    """The chat's side of the runner protocol: claim, record, emit, callbacks."""

    def __init__(self, chat: Chat, round_: _RunRound):
        self.chat = chat
        self.round = round_

    def cancelled(self) -> bool:
        return self.chat._cancel.is_set()

    def start(self, job: Job, mode: Mode) -> str | None:
        chat = self.chat
        c = job.call
        with chat._lock:
            if c.status not in RUNNABLE:
                return _ALREADY
            if chat._claim is not None and not chat._claim(c):
                return _ALREADY
            c.status = "running"
            c.started_at = utcnow()
        for fn in list(chat._before):
            try:
                fn(c)
            except SkipToolCall as exc:
                return str(exc) or "skipped by a before_tool_call callback"
            except Exception as exc:
                return f"not run: a before_tool_call callback raised {type(exc).__name__}: {exc}"
        chat._emit(
            ToolCallStarted(
                chat_id=chat.id, seq=chat._bus.next_seq(), call=c, step=self.round.step,
                turn=chat._call_turn.get(c.id, chat._turn), mode=mode,
                arguments=c.effective_arguments,
            )
        )
        return None

    def finish(self, outcome: Outcome) -> None:
        chat = self.chat
        c = outcome.call
        if outcome.message == _ALREADY:
            return
        cfg = get_config()
        with chat._lock:
            if c.is_final:
                return
            if outcome.status == "ok":
                content = to_content(
                    outcome.value, max_rows=cfg.result_max_rows, max_chars=cfg.result_max_chars
                )
            elif outcome.status == "error":
                content = f"Error: {outcome.message}"
                if outcome.error is not None and chat.on_tool_error == "raise":
                    self.round.errors.append((c, outcome.error))
            else:
                content = f"Not completed ({outcome.status.replace('_', ' ')}): {outcome.message}"
            if c.decision is not None and c.decision.arguments is not None:
                edited = json.dumps(c.decision.arguments, ensure_ascii=False, default=str)
                content = (
                    f"[The user edited the arguments before approving; the tool ran with {edited}]"
                    f"\n{content}"
                )
            result = ToolResultMessage(
                c.id, content, outcome.status != "ok", outcome.status, c.name,
                turn=chat._call_turn.get(c.id, chat._turn), value=outcome.value,
            )
            c.status = outcome.status
            c.result = result
            c.finished_at = outcome.finished_at
            event = chat._finished_event(
                c, result, outcome.message if outcome.status != "ok" else None,
                outcome.duration_ms, self.round.mode,
            )
        chat._emit(event)
        chat._run_after([
            ToolResult(c, content, outcome.status, outcome.value, outcome.error, outcome.duration_ms)
        ])


__all__ = ["Chat", "SkipToolCall", "StepResult", "ToolResult"]
