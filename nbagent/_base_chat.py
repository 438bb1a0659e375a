"""BaseChat: everything a chat does (transcript, options, the loop, approvals, callbacks,
extensions), with no wing plugged in. :class:`~nbagent.Chat` (``_chat.py``) is
this plus the standard wings: the log, the store, the notebook view.

The loop is written once, as generators that *yield effects* (a model request,
a round of tool calls) and receive their results. The sync API performs the
effects with blocking calls, the async API awaits them: one implementation,
two thin drivers. The chat never renders and never runs a tool itself: it
hands rounds to the :class:`~nbagent._runner.ToolRunner` and reports every
change as an event.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import AsyncIterator, Callable, Collection, Generator, Iterator, Sequence
from typing import Any, Literal, Self

from ._aio import stop_held
from ._approvals import not_given
from ._chat_state import RUNNABLE, SkipToolCall, StepResult, ToolResult, _Effect
from ._config import (
    check_budgets,
    check_flag,
    check_replay,
    check_replay_tools,
    check_steps,
    get_config,
)
from ._decisions import DecisionsMixin
from ._drive import WaitCancelled
from ._errors import (
    DriverError,
    PendingToolCallsError,
    StoreError,
    ToolDefinitionError,
)
from ._events import (
    Event,
    OptionsChanged,
    is_async_callable,
)
from ._extension import HOOKS, ChatHost, Extension, auto_extensions, overrides
from ._fork import UNSET, Plan, restamped
from ._fork import plan as fork_plan
from ._hosted import HostedMCP, HostedTool
from ._inputs import InputsMixin
from ._loop import LoopMixin
from ._media import as_parts, attached
from ._options import ToolOptions, resolve_choice
from ._output import as_output
from ._reasoning import normalize_reasoning
from ._record import ChatRecord
from ._recording import Prefix, Recording
from ._replay import DirectoryRecordings, Replayer
from ._tools import Tool, ToolSource, as_tool, tool_difference
from ._types import (
    ChatMessage,
    ForkParent,
    Message,
    ToolCall,
    Usage,
    short_id,
)
from ._unicode import clean
from .providers import Provider, resolve_provider


def new_chat_id() -> str:
    """A new chat id: a version-7 UUID as 32 hex digits, so ids sort by creation time.

    The first 48 bits are the Unix time in milliseconds, the rest random (74
    bits). Sorting matters to a store: a new chat's rows are keyed by its id,
    and increasing ids put them at the end of the tables' B-trees, where an
    insert touches fewer pages than one in the middle (random ids).
    """
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & (1 << 48) - 1) << 80 | 0x7 << 76 | (rand >> 68) << 64 | 0b10 << 62
    return f"{value | rand & (1 << 62) - 1:032x}"  # what uuid.UUID(int=...).hex spells


class BaseChat(LoopMixin, DecisionsMixin, InputsMixin):
    """A conversation with a model that can call tools: :class:`~nbagent.Chat` without wings.

    Takes the arguments of :class:`~nbagent.Chat` (documented there) except
    ``store``: persistence, like the log and the notebook view, is a wing that
    ``Chat`` plugs in through :meth:`extend`.
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
        id: str | None = None,
        display: bool | None = None,
        reasoning: str | int | None = None,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
        cache: bool = False,
        replay: str | None = None,
        replay_tools: bool | Collection[str] | None = None,
        recordings: str | os.PathLike[str] | None = None,
    ):
        if on_tool_error not in ("result", "raise"):
            raise ValueError(f"on_tool_error must be 'result' or 'raise', got {on_tool_error!r}")
        check_steps(max_steps)
        for name, flag in (("stream", stream), ("display", display)):
            if flag is not None:
                check_flag(flag, name)
        max_cost_usd, max_total_tokens = check_budgets(max_cost_usd, max_total_tokens)
        super().__init__(id or new_chat_id())
        self._replayer = Replayer(
            self.id,
            check_replay(replay) if replay is not None else None,
            check_replay_tools(replay_tools) if replay_tools is not None else None,
            DirectoryRecordings(recordings) if recordings is not None else None,
        )
        self.provider: Provider = resolve_provider(
            model, provider, base_url=base_url, api_key=api_key
        )
        self.system = _system(system)
        self.reasoning = normalize_reasoning(reasoning)
        check = getattr(self.provider, "check_reasoning", None)
        if callable(check):
            check(self.reasoning)
        self.max_steps = max_steps
        self.max_cost_usd = max_cost_usd
        self.max_total_tokens = max_total_tokens
        self.cache = bool(cache)
        self._cost_step, self._tokens_step = max_cost_usd, max_total_tokens
        self.on_tool_error = on_tool_error
        self.stream = stream
        self.display = display
        # by id(extension): it and what its attach() registered on this chat (adopt_code)
        self._wired_by: dict[int, tuple[Extension, _Hooks]] = {}
        auto_extensions(self)  # the process-wide ones (nbagent.instrument()), usually none

    def extend(self, extension: Extension) -> Self:
        """Plug an :class:`~nbagent.Extension` into this chat; returns the chat.

        The store, the log and the notebook view are extensions too. Each hook
        the extension overrides is called from now on; ``attach`` is called
        once, with the chat's :class:`~nbagent.ChatHost`. Extending twice with
        the same object does nothing.
        """
        if not isinstance(extension, Extension):
            raise TypeError(f"extend() takes an nbagent.Extension, got {type(extension).__name__}")
        if overrides(extension, "on_event"):  # a subscriber, called, never awaited
            _callable(extension.on_event, f"{type(extension).__name__}.on_event: extend")
        with self._lock:
            if any(e is extension for e in self._extensions):
                return self
            self._extensions = (*self._extensions, extension)
            self._index_hooks()
        hooked = self._hooks_now()
        try:
            extension.attach(ChatHost(self))
        finally:  # what it hooked up itself: a chat it moves to attaches it anew (adopt_code)
            self._wired_by[id(extension)] = (extension, _added(hooked, self._hooks_now()))
        if overrides(extension, "on_event"):
            self._bus.subscribe(None, extension.on_event, fragments=extension.fragments)
        return self

    def _index_hooks(self) -> None:
        """Which extensions implement each hook (under the lock)."""
        self._ext_hooks = {
            hook: tuple(getattr(e, hook) for e in self._extensions if overrides(e, hook))
            for hook in HOOKS
        }
        # a claim that records the call as started (a store's) is asked last: a veto asked
        # after it left the call recorded as running, never run (Extension.commits_claim)
        claiming = [e for e in self._extensions if overrides(e, "claim")]
        self._ext_hooks["vetoes"] = tuple(e.claim for e in claiming if not e.commits_claim)
        self._ext_hooks["commits"] = tuple(e.claim for e in claiming if e.commits_claim)
        self._ext_hooks["claim"] = self._ext_hooks["vetoes"] + self._ext_hooks["commits"]

    def _unextend(self, extension: Extension) -> None:
        """Take ``extension`` out (``ChatHost.remove``): no hook of it is called again."""
        with self._lock:
            self._extensions = tuple(e for e in self._extensions if e is not extension)
            self._index_hooks()
            wired = self._wired_by.get(id(extension))
            if wired is not None and wired[0] is extension:
                del self._wired_by[id(extension)]
        self._bus.unsubscribe(extension.on_event)

    def _hooks_now(self) -> _Hooks:
        """The callbacks and subscribers as they are now: before, after, subscribed."""
        return (
            tuple(self._before),
            tuple(self._after),
            tuple(fn for _, fn, _ in self._bus.subscribers()),
        )

    def _wired(self) -> _Hooks:
        """What this chat's extensions registered on it themselves, in their ``attach``."""
        records: list[_Hooks] = []
        with self._lock:
            for e in self._extensions:
                wired = self._wired_by.get(id(e))
                if wired is not None and wired[0] is e:
                    records.append(wired[1])
        return (
            tuple(fn for r in records for fn in r[0]),
            tuple(fn for r in records for fn in r[1]),
            tuple(fn for r in records for fn in r[2]),
        )

    @property
    def extensions(self) -> tuple[Extension, ...]:
        """The extensions plugged into this chat, in the order they were added."""
        return self._extensions

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={short_id(self.id)!r}, model={self.model!r}, "
            f"provider={self.provider.name!r}, "
            f"messages={len(self._messages)}, tools={list(self._tools)}, status={self.status!r})"
        )

    def with_tools(self, *tools: Any, replace: bool = False) -> Self:
        """Add tools (``@tool`` functions, ``Tool`` classes or instances); returns the chat.

        Provider-hosted tools (:class:`~nbagent.HostedMCP`) go beside them; a
        provider whose API cannot host them raises
        :class:`~nbagent.ToolOptionError` here. A tool source (an MCP server,
        ``nbagent.MCPServer``, or a selection of its tools,
        ``server.tools(include=...)``) adds all its tools; the chat asks it for
        its current list at every step, so a server's changes show up, and
        closes it with the chat (``chat.close()``).

        ``with_tools(None)`` removes every tool and keeps the tool options.
        ``replace=True`` replaces the current tools with the ones given. A tool
        with the name of an existing one replaces it; a tool defined here wins
        over a source's tool of the same name (give a server a ``prefix=``).
        """
        with self._lock:
            if len(tools) == 1 and tools[0] is None:
                self._local_tools, self._sources = {}, []
                self._hosted = {}
                self._merge_tools(())
                return self
            given = self._checked_tools(tools)  # all or nothing: a bad one adds none
            _one_per_name(given)
            if replace:
                self._local_tools, self._sources = {}, []
                self._hosted = {}
            for t in given:
                if isinstance(t, HostedMCP):
                    self._hosted[t.server_label] = t
                elif isinstance(t, ToolSource):
                    if all(s is not t for s in self._sources):
                        self._sources.append(t)
                        t.attach(self)
                else:
                    self._local_tools[t.name] = t
            self._merge_tools(self._source_tools if not replace else ())
        return self

    def _checked_tools(self, tools: Sequence[Any]) -> list[Any]:
        """What ``with_tools`` was given, flattened and checked: tools, sources, hosted tools."""
        out: list[Any] = []
        for t in tools:
            if t is None:
                raise TypeError("with_tools(None) clears tools; don't mix None with tools")
            if isinstance(t, (list, tuple)):
                out.extend(self._checked_tools(t))
            elif isinstance(t, HostedMCP):
                check = getattr(self.provider, "check_hosted", None)
                if check is not None:
                    check(t)
                out.append(t)
            elif isinstance(t, ToolSource):
                out.append(t)
            else:
                out.append(as_tool(t))
        return out

    with_tool = with_tools

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools the model sees now (a tool source not connected yet connects)."""
        self._sync_tools()
        return tuple(self._tools.values())

    @property
    def known_tools(self) -> tuple[Tool, ...]:
        """The tools as the chat has them now, asking no tool source (an MCP server) for
        its list: what a display or a write reads, which must neither wait on a server nor
        fail with one. A source not connected yet adds nothing here until a step (or
        :attr:`tools`) connects it."""
        return tuple(self._tools.values())

    @property
    def hosted_tools(self) -> tuple[HostedTool, ...]:
        """The provider-hosted tools (:class:`~nbagent.HostedMCP`) given to ``with_tools``."""
        return tuple(self._hosted.values())

    def with_tool_options(self, **options: Any) -> Self:
        """Set tool options; only the keys given change, ``None`` resets a key.

        Keys:
            choice: ``"auto"``, ``"required"``, ``"none"``, a tool name, a Tool
                class, or a tool function. A required or specific choice lasts
                until the turn has used its tool (it ran or was decided), then the model answers.
            calls: ``"one"`` (or ``1``), ``"many"``, or a positive int: most calls
                run per response. Sent to providers with a switch; always
                enforced here (extra calls are answered as skipped).
            concurrency: ``False`` (sequential), ``True``/``"threads"``, ``"async"``.
            max_concurrency: Most calls of a round running at once.
            timeout: Default per-call timeout in seconds.
            order: ``"ready"`` (default): calls that need no approval run
                while gated calls of the same response wait. ``"listed"``:
                calls keep the response's order around gated ones: a call
                waits until every earlier gated call of its response is
                decided and, if approved, has run (a denied one counts as
                done once its denial is recorded), and a gated call runs only
                after every earlier call finished.

        Raises:
            TypeError: An unknown key.
            ToolOptionError: An invalid value.
        """
        with self._lock:
            self._options = self._options.updated(options)
            opts = self._options.as_dict()
        self._emit(OptionsChanged(chat_id=self.id, options=opts))
        return self

    @property
    def tool_options(self) -> ToolOptions:
        return self._options

    def with_instructions(self, system: str | None) -> Self:
        """Set (or clear) the system instructions; returns the chat."""
        self.system = _system(system)
        return self

    def before_tool_call(self, fn: Callable[[ToolCall], Any]) -> Self:
        """Call ``fn(call)`` right before each call runs; raise :class:`SkipToolCall` to skip it.

        Runs on the thread driving the chat, never concurrently with another callback.
        ``fn`` is a plain function: an ``async def`` is refused with ``TypeError`` here
        (it would never be awaited, so its guard would let every call run).
        """
        self._before.append(_callable(fn, "before_tool_call"))
        return self

    def after_tool_result(self, fn: Callable[[ToolResult], Any]) -> Self:
        """Call ``fn(result)`` for every result sent back (ran, failed, denied, skipped).

        ``fn`` is a plain function (an ``async def`` is refused with ``TypeError``).
        """
        self._after.append(_callable(fn, "after_tool_result"))
        return self

    def on(self, event_type: type[Event] | str | None, fn: Callable[[Event], Any]) -> Self:
        """Subscribe ``fn`` to one event type (class or name), or to all with ``None``.

        ``fn`` is a plain function (an ``async def`` is refused with ``TypeError``).
        """
        self._bus.subscribe(event_type, _callable(fn, "on"))
        return self

    def off(self, fn: Callable[..., Any]) -> Self:
        """Remove ``fn`` from every callback list and subscription it is in."""
        self._before = [f for f in self._before if f is not fn and f != fn]
        self._after = [f for f in self._after if f is not fn and f != fn]
        self._bus.unsubscribe(fn)
        return self

    @property
    def transcript(self) -> tuple[Message, ...]:
        """Every message so far, in order (tool results appear once a round is complete)."""
        return tuple(self._messages)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Every tool call of the chat, in request order."""
        return tuple(self._calls.values())

    @property
    def awaiting_approval(self) -> bool:
        """True when nothing can run until someone decides a pending approval, or answers a
        pending input (an external tool's call, ``ask_user``): ``chat.pending_approvals``
        and ``chat.pending_inputs`` say which."""
        with self._lock:
            opened = self.open_calls
            if not opened or self._open is None:
                return False
            people = ("awaiting_approval", "awaiting_input")  # a decision, or an input
            if self._options.order != "listed":
                return all(c.status in people for c in opened)
            # listed: calls held behind an undecided gated call wait for that decision too
            waiting = (*people, *RUNNABLE)
            return (
                any(c.status in people for c in opened)
                and all(c.status in waiting for c in opened)
                and not self._ready(list(self._open.tool_calls))
            )

    @property
    def is_complete(self) -> bool:
        """True when the model has answered and nothing is left to do."""
        with self._lock:
            if self._open is not None:
                return False
            last = self._messages[-1] if self._messages else None
            return (
                isinstance(last, ChatMessage)
                and last.role == "assistant"
                and (last.stop_reason != "pause_turn")
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
    def outputs(self) -> dict[int, Any]:
        """What each turn that asked for a structured answer asked for, by turn:
        ``{1: Invoice, 3: {"type": "object", ...}}`` (the ``output=`` given to ``ask``).

        Kept by this chat object and its forks; a chat loaded from a store starts
        without (a type is code, not data).
        """
        return {t: o.schema if o.kind == "schema" else o.target for t, o in self._outputs.items()}

    @property
    def last_error(self) -> BaseException | None:
        """The exception of this chat's latest failed model request (``None``: none failed).

        In a notebook a failed request shows as one line; for a
        :class:`~nbagent.ProviderError` ``print(chat.last_error.details())``
        shows the whole traceback (the SDK's chained errors included, keys redacted).
        """
        return self._last_error

    @property
    def usage(self) -> Usage:
        """Tokens used by every request of this chat (all turns; per request: ``chat.steps``)."""
        return self._record.usage

    @property
    def cost_usd(self) -> float | None:
        """Estimated dollars spent by every request of this chat (all turns).

        ``None`` when a request's model has no known price (see
        :func:`~nbagent.providers.register_model`): a total leaving some
        requests out would understate the bill. Per request and per turn:
        ``chat.steps`` (``cost_usd`` is NA for an unpriced request).
        """
        with self._record.reading() as r:
            return None if r.unpriced else r.cost_usd

    @property
    def replay(self) -> str:
        """How this chat answers model requests: ``"auto"``, ``"only"`` or ``"off"``.

        Set with ``Chat(replay=...)`` (default: ``nbagent.configure(replay=)``,
        ``"off"``); assignable. See the README's "Record and replay".
        """
        return self._replayer.effective_mode

    @replay.setter
    def replay(self, value: str) -> None:
        self._replayer.mode = check_replay(value)

    @property
    def replay_tools(self) -> bool | frozenset[str]:
        """Whether a call of a replayed step gets its recorded result instead of running
        its tool: ``True``, ``False`` or the names of the tools that do.

        Set with ``Chat(replay_tools=...)`` (default: ``nbagent.configure(replay_tools=)``,
        ``False``); assignable, from the next round of calls the chat runs. See
        "Record and replay" in the docs.
        """
        tools = self._replayer.tools
        return get_config().replay_tools if tools is None else tools

    @replay_tools.setter
    def replay_tools(self, value: bool | Collection[str]) -> None:
        checked = check_replay_tools(value)
        with self._lock:  # a round reads it under the lock as it starts its calls
            self._replayer.tools = checked

    def recordings(self) -> dict[int, Recording]:
        """The recorded response of each model request of this chat object, by step.

        The chat's own (kept while it lives), else found where recordings live
        (the process, the recordings directory, the store); a step whose
        recording is nowhere now is left out. What
        :func:`nbagent.testing.to_pytest` exports.
        """
        extra = self._recordings()
        out: dict[int, Recording] = {}
        for step in sorted(self._replayer.keys):
            found = self._replayer.recorded(step, extra)
            if found is not None:
                out[step] = found
        return out

    @property
    def replayed_steps(self) -> frozenset[int]:
        """The steps this chat answered from a recording (not from the model)."""
        return frozenset(self._replayer.replayed_steps)

    @property
    def exhausted_budget(self) -> str | None:
        """Which budget stopped the chat: ``"cost"``, ``"tokens"``, ``"steps"``, or ``None``.

        ``None`` unless ``status`` is ``budget_exhausted``. It stays what
        stopped the chat after :meth:`raise_budget`, until the chat runs again.
        """
        if self.status != "budget_exhausted":
            return None
        return self._exhausted or self._spent_budget() or "steps"

    def budget_increment(self, which: str) -> float | int | None:
        """What :meth:`raise_budget` adds to ``"cost"`` or ``"tokens"`` (``None``: no budget)."""
        if which == "cost":
            return self._cost_step or self._cap("cost")
        if which == "tokens":
            step = self._tokens_step or self._cap("tokens")
            return None if step is None else int(step)
        raise ValueError(f"which must be 'cost' or 'tokens', got {which!r}")

    def raise_budget(self, which: str | None = None) -> float | int:
        """Allow the chat to spend one more increment of a budget; returns the increment.

        The new cap is what the chat has spent (or the old cap, if higher)
        plus the increment, so the chat can always make progress; the
        increment is the budget as this chat was created (or loaded) with,
        else the configured one: ``Chat(max_cost_usd=0.5)`` gains $0.50 each
        time. ``which`` is ``"cost"`` or ``"tokens"`` (default: the one that is
        spent). Call :meth:`complete` afterwards to resume (the budget card's
        Continue does both). What the chat has spent counts what replayed
        responses cost when they were recorded, as the budget check does.

        The step budget is not raised here: a chat it stopped resumes with
        :meth:`complete` (``complete(max_steps=...)`` for another allowance).

        Raises:
            ValueError: No cost or token budget is spent (or set), and none was named;
                or the step budget stopped the chat (``complete()`` resumes it).
        """
        if which is None:
            which = self._spent_budget()
            if which is None and self.exhausted_budget == "steps":
                raise ValueError(
                    "the step budget stopped this chat, not a cost or token budget: "
                    "complete() resumes it (complete(max_steps=...) to allow more steps)"
                )
        if which == "cost":
            step = self.budget_increment("cost")
            if not step:
                raise ValueError("this chat has no cost budget to raise")
            with self._lock:
                spent = self._record.cost_usd + self._record.replayed_cost_usd  # as budgets count
                self.max_cost_usd = max(self._cap("cost") or 0.0, spent) + step
            return step
        if which == "tokens":
            step_t = int(self.budget_increment("tokens") or 0)
            if not step_t:
                raise ValueError("this chat has no token budget to raise")
            with self._lock:
                used = self._record.usage.total_tokens
                self.max_total_tokens = max(int(self._cap("tokens") or 0), used) + step_t
            return step_t
        if which == "steps":
            raise ValueError(
                "raise_budget() raises a cost or token budget: for more steps call "
                "complete() again (complete(max_steps=...) to allow a different number)"
            )
        if which is None:
            raise ValueError(
                "no cost or token budget is spent: name the one to raise, "
                "raise_budget('cost') or raise_budget('tokens')"
            )
        raise ValueError(f"which must be 'cost' or 'tokens', got {which!r}")

    @property
    def turn(self) -> int:
        return self._turn

    def turn_messages(self, turn: int | None = None) -> tuple[Message, ...]:
        """Every message of one turn (default: the latest)."""
        t = self._turn if turn is None else turn
        return tuple(m for m in self._messages if getattr(m, "turn", None) == t)

    def refresh(self) -> list[ToolCall]:
        """Apply decisions made elsewhere (another process, through the store); returns them."""
        return self._refreshed()

    def close(self) -> None:
        """Write what is pending and release what the chat's extensions hold (a store file),
        and close its tool sources (an MCP server's connection and process; a server
        used again reconnects).

        Also done when the chat is garbage-collected or the interpreter exits;
        ``with Chat(store=...) as chat:`` closes at the end of the block.

        A chat another thread or task is driving is stopped first, as :meth:`cancel`
        stops it (the calls already running settle and are recorded; that driver's
        ``ask``/``complete`` raises :class:`~nbagent.ChatCancelled` or returns what is
        settled), and waited for: closed under a running call, its tool source was shut
        and the run went on, asking the model again with nothing written.

        Raises:
            StoreError: What is pending could not be written (the store's file is
                locked, say); nothing is lost, and closing again retries.
            DriverError: Called by the run itself (its tool or callback), or by a
                blocking call on the event loop its async driver runs on: waiting for
                the run to stop would never end (return, or await the task, first).
        """
        if self._drive.held:
            if self._drive.driving_here():
                raise DriverError(
                    "close() was called from inside this chat's own run (its tool or callback, "
                    "or a blocking call on its driver's event loop): the run cannot stop while "
                    "this waits; close the chat once the run has returned"
                )
            self.cancel()
            self._drive.wait_idle()
        try:
            for close in self._hook("close"):
                close()
        finally:
            for source in list(self._sources):
                source.release(self)  # a server another open chat shares stays up

    # ---------------------------------------------------------------- history and forks
    @property
    def events(self) -> tuple[Event, ...]:
        """Every event of this chat so far, oldest first, but the streaming fragments.

        A chat loaded from a store starts with its stored events. A fork starts
        with the events of the history it shares with its parent (their fields
        and times, its own id). This is what :meth:`fork` and
        :func:`nbagent.compare` read.
        """
        with self._lock:
            return tuple(self._history)

    @property
    def record(self) -> ChatRecord:
        """The chat's calls, steps, messages and totals, folded from its events by the core.

        Read-only: ``record.calls`` (one :class:`~nbagent._record.CallRecord` per call,
        in request order), ``record.steps``, ``record.messages``, ``record.usage``,
        ``record.cost_usd``...; ``record.subscribe(fn)`` calls ``fn(change)`` after each
        change. ``chat.log``, the view, fork and compare read it. A loaded chat's record
        is folded from its stored events; ``nbagent._record.fold(chat.events)`` equals it.
        """
        return self._record

    @property
    def parent(self) -> ForkParent | None:
        """Where this chat was forked from (chat id, step, call, what changed), else ``None``."""
        return self._parent

    def fork(
        self,
        call: ToolCall | str | None = None,
        /,
        *,
        step: int | None = None,
        result: Any = UNSET,
        arguments: Any = UNSET,
        decision: Any = UNSET,
        reason: str | None = None,
        system: Any = UNSET,
        model: Any = UNSET,
        tool_options: Any = UNSET,
        by: str | None = None,
        **wings: Any,
    ) -> Self:
        """A new chat sharing this one's history up to a point, with at most one thing changed.

        The point:

        - ``step=N``: the chat as it stood when its step ``N`` ended (the step
          numbers of ``chat.steps`` and of the log's ``run_step``). For a model
          step, its response (text and calls) is in; the decisions made after
          it and its calls' results are not: driving the fork asks for those
          approvals again and runs the calls then. ``step=0``: the first prompt
          only. No step: the whole history as it is now.
        - ``call`` (a call of this chat, or its id): the end of that call's
          round, the other calls of the same response exactly as they are here
          (never run again), the model not asked yet; then exactly one of:

          - ``result=value``: the call answered as if its tool had returned
            ``value`` (an approved or ungated call; it does not run in the fork);
          - ``arguments={...}``: approved with these arguments instead (recorded
            as an approval's edit, checked against the tool's schema); it runs
            once the fork is driven;
          - ``decision="approved" | "denied"``: decided the other way (or
            decided, if it waits here). Approved, it runs exactly once when the
            fork is driven; denied, it never runs in the fork. ``reason=`` goes
            with the decision (a denial's is sent to the model).

          ``by=`` names who made that decision (default ``"user"``;
          ``nbagent.evaluation.sweep`` gives ``"evaluate"``, so its branches teach
          ``suggest_policies`` nothing); it goes with ``decision=`` and with
          ``arguments=`` of a gated call.

        At a step (or no point), change at most one of ``system=`` (a prompt, or
        ``None``), ``model=`` (a model name, or a provider object) or
        ``tool_options={...}`` (as :meth:`with_tool_options`). Without a change
        the fork is the same history, to run again (another sample).

        The fork has this chat's tools, tool options, budgets and approval
        policies (``always_allow``); callbacks and ``chat.on`` subscriptions are
        not copied. It has its own id; ``fork.parent`` says where it came from.
        This chat is not touched (but for :meth:`refresh`, run first: decisions made
        elsewhere are read before the fork is planned). A call approved but not run yet at
        the fork point is asked for again in the fork: an approval runs its call once, in
        the chat it was given in.

        ``**wings``: what the chat's class takes for its wings. For a
        :class:`~nbagent.Chat`, ``store``: where the fork is stored (default:
        this chat's store, if it has one; ``None``: nowhere). A stored fork is
        a chat of its own with a link to its parent: ``Chat.load(fork_id,
        store=...)`` brings it back, ``parent`` included, in any process.

        Raises:
            TypeError: Two changes, or a change that does not go with the point.
            ValueError: No such step; a change that changes nothing or cannot
                be (a result for a denied call, a decision for an ungated one).
            DecisionError: An unknown call, arguments the tool refuses or a deny rule
                matches, or another decision for a call a rule decided (a rule's
                decision is final, and the fork keeps this chat's rules).
        """
        return self._fork(
            call,
            wings,
            step=step,
            result=result,
            arguments=arguments,
            decision=decision,
            reason=reason,
            system=system,
            model=model,
            tool_options=tool_options,
            by=by,
        )

    def _fork(
        self, call: ToolCall | str | None, wings: dict[str, Any] | None = None, **point: Any
    ) -> Self:
        """Plan (check everything), make the fork with its wings, give it history and change."""
        # Decisions made elsewhere first (a store): planned from a copy that missed one, a
        # fork would approve again a call another process approved and ran. A store that
        # cannot be read (its file deleted) leaves what this chat knows: forking into
        # another store is how such a chat is saved.
        with contextlib.suppress(StoreError):
            self.refresh()
        p = fork_plan(self, call, **point)
        fork = self._spawn(p, **(wings or {}))
        self._share_recordings(fork)
        fork._take_fork(p)
        fork.refresh()  # its wings write what is pending (a store: the shared history)
        return fork

    def _share_recordings(self, fork: Self) -> None:
        """The recordings of the steps ``fork`` shares, kept where it keeps them and this
        chat does not (a fork stored in another store, or this chat in none), as answered
        to the fork at those steps: queued, they are written with its shared history.

        A store keeps which request each step of a chat asked (its recordings' step keys),
        and finds a call's recorded result by it (``replay_tools``); a fork's shared steps
        are found through its parent link in the parent's store only. Without them in the
        fork's store, the fork loaded in a new process (or a fork of it) ran the tool of a
        shared step's call again.
        """
        extra = self._recordings()
        places = {id(getattr(r, "store", r)) for r in extra}
        elsewhere = [r for r in fork._recordings() if id(getattr(r, "store", r)) not in places]
        if not elsewhere:
            return
        for step, key in sorted(fork._replayer.keys.items()):  # the shared steps' keys
            found = self._replayer.recorded(step, extra, quiet=True)
            if found is None or found.key != key:
                continue  # nowhere now (its store unreadable): the fork asks it again
            for place in elsewhere:
                place.add(found, fork.id, step, True)  # replayed: never replaces one there

    def _take_fork(self, p: Plan) -> None:
        """A new fork takes its history (state, then events) and the one change, with its events."""
        self._restore(p.snapshot)
        self._emit_all(restamped(p.events, p.snapshot, self.id))
        self._adopt_inputs()  # a call waiting for an input waits in the fork too
        if p.options is not None:
            with self._lock:
                self._options = p.options
            self._emit(OptionsChanged(chat_id=self.id, options=p.options.as_dict()))
        c = p.call
        if c is None:
            return
        gated = c.approval is not None and c.approval.required
        if p.change == "decision":
            self._decide(c, p.value, by=p.by, reason=p.reason)
        elif p.change == "arguments" and gated:
            self._decide(c, "approved", by=p.by, reason=p.reason, arguments=p.value)
        elif p.change == "arguments":
            self._approve_edit(c, p.value, p.reason)
        else:
            self._answer_with(c, p.value, p.result_value, p.result_parts)

    def _spawn(self, p: Plan, **wings: Any) -> Self:
        """The fork as a new chat of this class: this chat's configuration, tools and policies."""
        fork = type(self)(
            provider=p.provider or self.provider,
            system=self.system if p.system is UNSET else p.system,
            max_steps=self.max_steps,
            on_tool_error=self.on_tool_error,
            stream=self.stream,
            display=self.display,
            reasoning=self.reasoning,
            max_cost_usd=self.max_cost_usd,
            max_total_tokens=self.max_total_tokens,
            cache=self.cache,
            **wings,
        )
        with self._lock:
            local, sources, hosted = (
                dict(self._local_tools),
                list(self._sources),
                dict(self._hosted),
            )
            source_tools, policies = self._source_tools, list(self._policies)
            rules = list(self._rules)
            options = self._options
        shared = p.snapshot.step  # the replay keys of the shared steps: to find their recordings
        r = self._replayer
        replayer = dataclasses.replace(
            r,
            chat_id=fork.id,
            keys={s: k for s, k in r.keys.items() if s <= shared},
            replayed_steps={s for s in r.replayed_steps if s <= shared},
            prefix=Prefix(),
            own={s: rec for s, rec in r.own.items() if s <= shared},
        )
        with fork._lock:
            fork._replayer = replayer
            fork._local_tools, fork._sources, fork._hosted = local, sources, hosted
            for source in sources:
                source.attach(fork)
            fork._merge_tools(source_tools)
            fork._policies = policies
            fork._rules = rules
            fork._options = options
            fork._cost_step, fork._tokens_step = self._cost_step, self._tokens_step
            # the structured answers of the turns it shares; the one its own turn asked for,
            # if any, goes on (forked in an earlier turn, it was lost: the answer came back
            # as text with parsed=None)
            fork._outputs = {t: o for t, o in self._outputs.items() if t <= p.snapshot.turn}
            fork._output = self._outputs.get(p.snapshot.turn)
            fork._parent = p.parent
        return fork

    @property
    def max_steps(self) -> int | None:
        """Model requests one ``ask``/``complete`` may make (``None``: the configured)."""
        return self._max_steps

    @max_steps.setter
    def max_steps(self, value: Any) -> None:
        # checked when set, as at Chat(): a bad value set later failed deep inside a request
        self._max_steps = check_steps(value)

    @property
    def max_cost_usd(self) -> float | None:
        """Dollars the whole chat may spend (``None``: ``configure(max_cost_usd=)``)."""
        return self._max_cost_usd

    @max_cost_usd.setter
    def max_cost_usd(self, value: Any) -> None:
        self._max_cost_usd = check_budgets(value, None)[0]

    @property
    def max_total_tokens(self) -> int | None:
        """Input plus output tokens the whole chat may use (``None``: the configured)."""
        return self._max_total_tokens

    @max_total_tokens.setter
    def max_total_tokens(self, value: Any) -> None:
        self._max_total_tokens = check_budgets(None, value)[1]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cancel(self) -> None:
        """Stop the running loop after the calls already running settle.

        Calls not started yet are answered as cancelled, so the transcript
        stays valid; ``complete()`` resumes (the model sees what was cancelled).
        A model request under way is waited for (its answer is kept: it is paid
        for), and the calls it asks for that would run now are cancelled the
        same way; a call waiting for a person's decision goes on waiting.
        Calls waiting for their turn to drive (see :meth:`complete`) are sent
        back without running anything: ``ask()`` and ``step()`` at once, by
        raising :class:`~nbagent.ChatCancelled`; ``complete()`` once the driver
        at work has stopped (this cancel stops it), with the chat's last
        assistant message then, never one of a round still in flight.
        A wait that can be abandoned stops at once: an MCP server connecting
        or listing its tools (the step raises ``ChatCancelled``), an MCP
        tool's request (an error result: the server is told to cancel, and
        whether the tool did anything is unknown, so it is not re-sent).
        """
        self._cancel.set()
        self._drive.cancel()

    def ask_later(
        self, text: str, *, images: Any = None, output: Any = None, resources: Any = None
    ) -> Self:
        """Add a user message without running anything; returns the chat, so it chains.

        ``chat = Chat().with_tools(Weather).ask_later("...")`` then
        ``chat.step()``, as RubyLLM writes it. The queued message is
        ``chat.transcript[-1]``. While another driver is at work, it waits for
        it to stop first: a message never lands in the middle of a running turn.

        Args:
            text: The message.
            images: Images or PDFs sent after the text (see :meth:`ask`).
            output: Ask for a structured answer (see :meth:`ask`).
            resources: MCP resources attached to the message (see :meth:`ask`).

        Raises:
            PendingToolCallsError: Calls of the last response are unanswered.
            OutputSchemaError: ``output`` is not a type a structured answer can
                have, or the provider cannot express its schema (nothing is added).
            MediaError: An image or file the provider would refuse (format,
                size); nothing is added.
        """
        asked = self._checked_ask(text, images, output, resources)
        self._drive_sync(self._asking(asked, None, run=False))
        return self

    def _checked_ask(
        self, text: Any, images: Any, output: Any, resources: Any = None
    ) -> tuple[str, Any, Any, tuple[ChatMessage, ...]]:
        """What ``ask`` was given, checked before it waits for its turn (nothing is added).

        ``text`` may carry messages to add before it (``before``: an MCP prompt's
        earlier messages, ``server.prompt(...)``) and its own ``parts``.
        """
        if not isinstance(text, str):
            raise TypeError(f"ask() takes text, got {type(text).__name__}")
        before = tuple(getattr(text, "before", ()) or ())
        if not all(isinstance(m, ChatMessage) and m.role in ("user", "assistant") for m in before):
            raise TypeError(
                "ask(): the messages before the text must be user or assistant messages"
            )
        own = tuple(getattr(text, "parts", ()) or ())
        extra, attached_parts = attached(resources)
        text = str(text) if not extra else (f"{text}\n\n{extra}" if text else extra)
        parts = (*own, *as_parts(images), *attached_parts)
        check_parts = getattr(self.provider, "check_parts", None)
        if parts and check_parts is not None:
            check_parts(parts)  # too large / unsupported fails here, before any request
        if not text.strip() and not parts and not before:
            raise ValueError(
                "ask() needs a question: the text is empty (to go on with the chat as it "
                "stands, use chat.complete())"
            )
        spec = as_output(output) if output is not None else None
        check = getattr(self.provider, "check_output", None)
        if spec is not None and check is not None:
            check(spec)  # a schema the provider cannot express fails here, before any request
        return text, parts, spec, before

    def _asking(
        self,
        asked: tuple[str, Any, Any, tuple[ChatMessage, ...]],
        max_steps: int | None,
        *,
        run: bool,
    ) -> Generator[_Effect, Any, StepResult]:
        """Add the user message (its turn to drive has come), then complete if ``run``."""
        text, parts, spec, before = asked
        with stop_held():  # the message and its turn are added whole, and recorded
            with self._lock:
                unanswered = self.open_calls
                if unanswered:
                    raise PendingToolCallsError(unanswered)
                if not self._sources:  # the tools are known: a choice they cannot meet fails here,
                    resolve_choice(  # before the message is kept, not at the request it makes
                        self._options.choice,
                        list(self._local_tools),
                        forced_spent=False,
                        hosted=list(self._hosted),
                    )
                # Every call of the last response is answered (denied, say) but its results wait
                # for the next step to join the transcript: they go in first, in call order, as
                # a step would add them (a user message between a response's calls and their
                # results is a request no provider takes, and loses the model the denial).
                events = self._close_round_if_done()
                after, self._deferred_after = self._deferred_after, []
                msg = self._unanswered_same(text, parts, spec) if not (events or before) else None
                if msg is None:
                    self._turn += 1
                    self._forced_spent = False
                    self._last_step = None
                    self._output, self._output_retried = spec, False
                    if spec is not None:
                        self._outputs[self._turn] = spec
                    for m in before:  # an MCP prompt's earlier messages, in its turn
                        earlier = dataclasses.replace(m, content=clean(m.content), turn=self._turn)
                        events.extend(self._append(earlier))
                    msg = ChatMessage("user", clean(text), turn=self._turn, parts=parts)
                    events.extend(self._append(msg))
                    new_turn = True
                else:  # asked again as it stands, unanswered: its turn goes on (complete())
                    new_turn = False
            self._emit_all(events)
        self._run_after(after)
        for turn_started in self._hook("turn_started") if new_turn else ():
            turn_started()
        if not run:
            return StepResult("generated", msg)  # ask_later: nothing driven
        return (yield from self._complete_gen(max_steps))

    def _unanswered_same(self, text: str, parts: tuple[Any, ...], spec: Any) -> ChatMessage | None:
        """The current turn's question, if it is this very question still unanswered: a
        request that failed (a network error, a cancel; before or after the turn's tool
        rounds) or a message queued by ``ask_later``.

        Asked again, its turn goes on, as ``complete()`` would: the question is not sent
        twice (the model read it twice, after its own tool rounds an invitation to do the
        work again, and the transcript kept both).
        """
        last: ChatMessage | None = None
        for m in reversed(self._messages):
            if isinstance(m, ChatMessage):
                if m.role == "user":
                    last = m
                break  # an answer (or a system message) ends the search: no open question
            # a tool round of the turn (the model's calls, their results): look further back
        if last is None:
            return None
        same_output = (spec is None and self._output is None) or (
            spec is not None
            and self._output is not None
            and (spec.name, spec.schema) == (self._output.name, self._output.schema)
        )
        if last.content == clean(text) and last.parts == parts and same_output:
            return last
        return None

    def ask(
        self,
        text: str,
        *,
        images: Any = None,
        output: Any = None,
        resources: Any = None,
        max_steps: int | None = None,
    ) -> Message | None:
        """Ask and run the loop: ``ask_later(text)`` then ``complete()``.

        Args:
            text: The message.
            images: One image or a list, sent after the text: PNG/JPEG/GIF/WebP
                bytes, a path, a PIL image, a matplotlib figure, an IPython
                ``Image``, an :class:`~nbagent.ImagePart`; a PDF (bytes, path or
                :class:`~nbagent.FilePart`) goes as a document. Checked against
                the provider's limits before anything is sent
                (:class:`~nbagent.MediaError`).
            output: Ask for a structured answer: a pydantic model, a dataclass,
                a TypedDict or a JSON Schema dict. The model may call tools
                first; its final answer is JSON in the provider's native
                structured output, validated into ``reply.parsed`` (an instance
                of the model or dataclass; a dict for a TypedDict or a schema).
                An invalid answer is sent back once with what was wrong, then
                :class:`~nbagent.OutputValidationError` is raised.
            resources: One MCP resource or a list, attached to the message: what
                ``server.resources()`` lists (read now) or ``server.read_resource(uri)``
                gave. Each one's text follows the question in a
                ``<resource uri="...">`` block; its images and PDFs are sent like ``images``.
            max_steps: Most steps for this call (default: the chat's).

        ``text`` may be what ``server.prompt(name, ...)`` gave: its earlier
        messages are added first, then its last user message is asked.

        Returns:
            The turn's last assistant message. Check ``chat.status``: it may be
            ``awaiting_approval`` or ``budget_exhausted`` instead of ``complete``.
            While another driver is at work, the message is added only once it
            has stopped (see :meth:`complete`).

        Raises:
            OutputSchemaError: ``output`` cannot be asked of this provider
                (before anything is sent).
            OutputValidationError: The answer was invalid twice (both answers
                stay in the transcript).
        """
        check_steps(max_steps)
        asked = self._checked_ask(text, images, output, resources)
        return self._drive_sync(self._asking(asked, max_steps, run=True)).message

    async def ask_async(
        self,
        text: str,
        *,
        images: Any = None,
        output: Any = None,
        resources: Any = None,
        max_steps: int | None = None,
        wait_for_approval: bool | None = None,
    ) -> Message | None:
        """Async twin of :meth:`ask`.

        In a notebook on ipykernel >= 7.4 it waits for a click on a pending
        approval card (up to ``configure(approval_wait=)`` seconds, then
        ``approval_fallback``) and carries on; ``wait_for_approval=False``
        returns at once with the approval pending, as ``ask()`` does.
        """
        check_steps(max_steps)
        asked = self._checked_ask(text, images, output, resources)
        return await self._ask_async(asked, max_steps, wait_for_approval)

    async def _ask_async(
        self,
        asked: tuple[str, Any, Any, tuple[ChatMessage, ...]],
        max_steps: int | None,
        wait_for_approval: bool | None,
        mine: list[bool] | None = None,
    ) -> Message | None:
        """:meth:`ask_async` once its input is checked. ``mine`` (``astream_events``) holds
        ``True`` exactly while one of this turn's drives holds the chat, or the turn waits
        for a person's decision between them (the decision's events are the turn's)."""
        first = self._asking(asked, max_steps, run=True)
        reply = (await self._drive_async(_marked(first, mine))).message
        waiters = self._hook("wait_for_decision")  # the notebook view, inside a kernel
        if not waiters:
            return reply
        while not self.is_complete:
            with _marking(mine):
                decided = await waiters[0](wait_for_approval)
            if not decided:
                break
            try:
                gen = _marked(self._complete_gen(max_steps), mine)
                reply = (await self._drive_async(gen)).message
            except WaitCancelled:  # as complete_async()
                await self._drive.wait_stopped_async()
                reply = self.last_assistant_message
        # what the turn's last drive returned, as ask() does: not the chat's last answer,
        # which is the previous turn's when a budget stopped this one before it asked
        return reply

    def step(self) -> StepResult:
        """Do exactly one unit of work and say which (see :class:`StepResult`).

        While another driver is at work, it waits for it to stop, then does one
        unit of work from where the chat stands then (``complete`` if the other
        driver finished the turn).
        """
        return self._drive_sync(self._step_gen())

    async def step_async(self) -> StepResult:
        """Async twin of :meth:`step`."""
        return await self._drive_async(self._step_gen())

    def complete(
        self,
        *,
        max_steps: int | None = None,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
    ) -> Message | None:
        """Run until the model answers, approval is needed, or a budget is spent.

        Approved calls run, denials are sent, and the model continues. Calling
        again after ``budget_exhausted`` resumes where it stopped.

        Args:
            max_steps: Most steps for this call (default: the chat's).
            max_cost_usd: A new whole-chat cost budget (it replaces
                ``chat.max_cost_usd``; it counts what the chat spent before this call too).
            max_total_tokens: A new whole-chat token budget (it replaces
                ``chat.max_total_tokens``, counting likewise).

        One driver at a time: called while another is at work (a thread, a
        click's continuation, a batch), it waits for that driver to stop, then
        runs whatever is left (nothing, if the turn is answered), so the reply
        is never one from before the other driver finished. The async twins
        await instead, and their event loop runs on. Calling it from inside the
        chat's own run (a tool or callback of this chat), or blocking the event
        loop the running driver is on, raises :class:`~nbagent.DriverError`.
        ``chat.cancel()`` while it waits stops that driver and sends this call
        back without running anything, once that driver has stopped.

        Returns:
            The last assistant message.
        """
        self._set_budgets(max_cost_usd, max_total_tokens, max_steps)
        try:
            return self._drive_sync(self._complete_gen(max_steps)).message
        except WaitCancelled:  # cancel() while it waited: what is settled once the driver
            # stopped (read at once, it was the running round's message, its calls running)
            self._drive.wait_stopped()
            return self.last_assistant_message

    async def complete_async(
        self,
        *,
        max_steps: int | None = None,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
    ) -> Message | None:
        """Async twin of :meth:`complete`."""
        self._set_budgets(max_cost_usd, max_total_tokens, max_steps)
        try:
            return (await self._drive_async(self._complete_gen(max_steps))).message
        except WaitCancelled:
            await self._drive.wait_stopped_async()
            return self.last_assistant_message

    def _set_budgets(
        self, cost: float | None, tokens: int | None, steps: int | None = None
    ) -> None:
        check_steps(steps)
        cost, tokens = check_budgets(cost, tokens)
        if cost is not None:
            self.max_cost_usd = cost
        if tokens is not None:
            self.max_total_tokens = tokens

    async def astream_events(self, text: str, *, output: Any = None) -> AsyncIterator[Event]:
        """Ask and iterate over the events of the turn as they happen (``output``: see ask).

        Only this turn's: started while another driver is at work, it waits for it (as
        :meth:`ask_async` does) and yields none of that driver's events. Leaving the
        iteration early (``break``, an exception in the loop's body, a timeout
        around it) cancels the turn as cancelling :meth:`ask_async` does, and waits for it
        to settle (running calls end and are recorded) before going on: left running, the
        turn's tools ran on, unseen, after the caller had moved on.
        """
        import asyncio

        from ._runner import _all_settled

        asked = self._checked_ask(text, None, output)
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        mine: list[bool] = []  # True while this turn's drive holds the chat

        def push(e: Event) -> None:
            # Subscribed before the turn's drive begins: an event of another driver's turn
            # (one at work as this one waits for it) is not this turn's, and is not passed on.
            if mine:
                loop.call_soon_threadsafe(queue.put_nowait, e)

        self.on(None, push)

        async def run() -> None:
            try:
                await self._ask_async(asked, None, None, mine)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        task = asyncio.ensure_future(run())
        try:
            while (item := await queue.get()) is not None:
                yield item
            await task
        finally:
            try:
                if not task.done():
                    task.cancel()
                await _all_settled([task])  # however often this task is cancelled meanwhile
            finally:
                self.off(push)


def adopt_code(chat: BaseChat, template: BaseChat) -> None:
    """Give ``chat`` what ``template`` was set up with in code, which no store keeps:
    ``nbagent.batch`` continuing a stored row in a new process (a Ray worker, a rerun) loads
    its chat with the chat its ``make_chat`` made just now as the template, so the row goes
    on as the chat ``make_chat`` made first would have (in this process it goes on with that
    very chat). Call it on a chat being loaded, before its store restores it.

    Moved from ``template`` (closed next: it calls none of them again): its
    ``before_tool_call`` and ``after_tool_result`` callbacks, its ``chat.on`` subscriptions
    and its extensions (``chat.extend``), in their order, after ``chat``'s own. An extension
    moved is attached to ``chat`` anew, so what its ``attach`` registered on ``template``
    itself (``host.chat.on(...)``, ``host.chat.before_tool_call(...)``) is left behind: its
    new ``attach`` registers it again, once (a callback of it that ``make_chat`` registered
    moves, once). What ``chat`` has already is left where it is: what every chat of its
    class gets as it is made (a process-wide extension, the notebook view's, a subclass's
    ``__init__``). Each of ``chat``'s extensions stands for one of the template's: the same
    object, else an equal one of its type, else the first of its type not yet paired; an
    extension of that type beyond those (``make_chat``'s own, configured otherwise) moves.
    A callback or subscription of a function ``chat`` has registered itself (not through an
    extension's ``attach``) stays too.
    Copied: the ``when`` predicates of the template's conditional ``always_allow`` rules,
    by tool: a stored conditional rule of that tool gets its predicate back as ``chat`` is
    restored (the last one given, if the template has several for one tool), as
    ``Chat.load(always_allow=)`` gives one.
    """
    if template is chat:
        return
    kept = _paired(chat.extensions, template.extensions)
    moved = [e for e in template.extensions if not any(e is k for k in kept)]
    listening = {e.on_event for e in template.extensions if overrides(e, "on_event")}
    own_listening = {e.on_event for e in chat.extensions if overrides(e, "on_event")}
    own_before, own_after, own_subs = _without(chat._hooks_now(), chat._wired())
    own_code = {_code_of(fn) for fn in (*own_before, *own_after)}
    own_code.update(_code_of(fn) for fn in own_subs if fn not in own_listening)
    wired_before, wired_after, wired_subs = template._wired()  # its extensions' attach did
    with template._lock:
        before = _unwired(template._before, wired_before)
        after = _unwired(template._after, wired_after)
        before = [fn for fn in before if _code_of(fn) not in own_code]
        after = [fn for fn in after if _code_of(fn) not in own_code]
        template._before = _without_all(template._before, before)
        template._after = _without_all(template._after, after)
        predicates = {
            p.tool: p.when
            for p in template._policies
            if p.when is not None and p.when is not not_given
        }
    subs = template._bus.subscribers()
    mine = set(map(id, _unwired([fn for _, fn, _ in subs], wired_subs)))
    subscribed = [
        (event_type, fn, fragments)
        for event_type, fn, fragments in subs
        if id(fn) in mine and fn not in listening and _code_of(fn) not in own_code
    ]
    for ext in moved:
        template._unextend(ext)
    for _, fn, _ in subscribed:
        template._bus.unsubscribe(fn)
    with chat._lock:
        chat._before.extend(before)
        chat._after.extend(after)
        chat._predicates.update(predicates)
    for event_type, fn, fragments in subscribed:
        chat._bus.subscribe(event_type, fn, fragments=fragments)
    for ext in moved:
        chat.extend(ext)


_Hooks = tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]


def _added(before: _Hooks, after: _Hooks) -> _Hooks:
    """What is in ``after`` and was not in ``before``, list by list (by identity, counted:
    an object registered once more is added once)."""
    out = []
    for old, new in zip(before, after, strict=True):
        counts: dict[int, int] = {}
        for fn in old:
            counts[id(fn)] = counts.get(id(fn), 0) + 1
        added = []
        for fn in new:
            if counts.get(id(fn), 0):
                counts[id(fn)] -= 1
            else:
                added.append(fn)
        out.append(tuple(added))
    return (out[0], out[1], out[2])


def _unwired(fns: Sequence[Any], wired: Sequence[Any]) -> list[Any]:
    """``fns`` less ``wired`` (by identity, counted; the last ones registered go first)."""
    counts: dict[int, int] = {}
    for fn in wired:
        counts[id(fn)] = counts.get(id(fn), 0) + 1
    out: list[Any] = []
    for fn in reversed(fns):
        if counts.get(id(fn), 0):
            counts[id(fn)] -= 1
        else:
            out.append(fn)
    return out[::-1]


def _without(hooks: _Hooks, wired: _Hooks) -> _Hooks:
    return (
        tuple(_unwired(hooks[0], wired[0])),
        tuple(_unwired(hooks[1], wired[1])),
        tuple(_unwired(hooks[2], wired[2])),
    )


def _without_all(fns: Sequence[Any], gone: Sequence[Any]) -> list[Any]:
    ids = set(map(id, gone))
    return [fn for fn in fns if id(fn) not in ids]


def _paired(own: Sequence[Extension], theirs: Sequence[Extension]) -> list[Extension]:
    """The extensions of ``theirs`` that ``own`` has already, one for each of ``own``: the
    same object, else an equal one of its type, else the first of its type left."""
    left = list(theirs)
    paired: list[Extension] = []
    for ext in own:
        same = [t for t in left if type(t) is type(ext)]
        match = next((t for t in same if t is ext), None)
        if match is None:
            match = next((t for t in same if _equal(t, ext)), None)
        if match is None and same:
            match = same[0]
        if match is not None:
            paired.append(match)
            left = [t for t in left if t is not match]
    return paired


def _code_of(fn: Any) -> Any:
    """What a callback is, whichever chat it was made for: its function's code (a bound
    method's, a closure's, a ``functools.partial``'s), else its type (a callable object)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None) or type(fn)


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an extension's own __eq__ failing pairs nothing
        return False


__all__ = ["BaseChat", "SkipToolCall", "StepResult", "ToolResult", "adopt_code", "new_chat_id"]


def _marked(
    gen: Generator[_Effect, Any, StepResult], mine: list[bool] | None
) -> Generator[_Effect, Any, StepResult]:
    """``gen``, with ``mine`` holding ``True`` while it runs (only once its drive took the
    chat: a drive starts its generator then)."""
    with _marking(mine):
        return (yield from gen)


@contextlib.contextmanager
def _marking(mine: list[bool] | None) -> Iterator[None]:
    """``mine`` holds ``True`` inside the block (``None``: nobody watches)."""
    if mine is None:
        yield
        return
    mine.append(True)
    try:
        yield
    finally:
        mine.clear()


def _system(system: Any) -> str | None:
    """System instructions as given (cleaned), or ``None``; else ``TypeError``."""
    if system is None:
        return None
    if not isinstance(system, str):
        raise TypeError(f"system instructions are a string, got {type(system).__name__}")
    return clean(system)


def _callable(fn: Any, name: str) -> Any:
    """``fn`` when it can be called, as a plain function; else ``TypeError`` (at once, not
    when a call runs).

    An ``async def`` (or an object with an ``async def __call__``, an async generator
    function) is refused: callbacks and subscribers are called, never awaited, on the
    thread driving the chat, so its body never ran ("coroutine was never awaited"), and a
    ``before_tool_call`` guard raising :class:`SkipToolCall` in it let every call run.
    """
    if not callable(fn):
        raise TypeError(f"{name}() takes a function, got {fn!r}")
    if is_async_callable(fn):
        label = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        raise TypeError(
            f"{name}() takes a plain function, got the async callable {label!r}: callbacks "
            "and subscribers are called on the thread driving the chat and never awaited, so "
            "its body would never run (a before_tool_call guard in it would let every call "
            "run); write it as a plain `def` (to start async work from it, use "
            "asyncio.run_coroutine_threadsafe with your loop)"
        )
    return fn


def _one_per_name(given: Sequence[Any]) -> None:
    """Refuse two different tools of one name in one ``with_tools`` call: the last silently
    replaced the first, almost always by mistake (two ``lookup`` functions from two
    modules; one function given gated and ungated, whose ungated copy would then run
    without a decision; two configured instances of one class). The same tool twice (a
    method tool read twice from its instance too), or a ``Tool`` class and an instance
    equal to it, is one tool (see :func:`~nbagent._tools.tool_difference`)."""
    seen: dict[str, Any] = {}
    for t in given:
        if not isinstance(t, Tool):
            continue
        first = seen.setdefault(t.name, t)
        why = tool_difference(first, t)
        if why is not None:
            raise ToolDefinitionError(
                f"two different tools are named {t.name!r} ({first!r} and {t!r}: {why}); "
                "give both with different names (@tool(name=...), name = ... on a Tool "
                "class or its instance), or only one of them"
            )
