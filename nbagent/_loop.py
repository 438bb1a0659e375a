"""The tool loop, written once as generators that yield effects.

``_step_gen`` does one unit of work; ``_complete_gen`` repeats it within a
budget. Each yields :class:`_ModelRequest`, :class:`_RunRound` or
:class:`_SyncTools` (tool sources, only before a request: a step that asks no
model never waits on an MCP server) effects and receives their results;
``_drive_sync`` performs them with blocking calls and ``_drive_async`` awaits
them, so the sync and async APIs share every line of the loop. ``_RoundHooks``
is the chat's side of the runner protocol.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from . import _aio
from ._approvals import consult_resolver, requirement
from ._budget import spent_budget, uncounted
from ._chat_state import (
    _ALREADY,
    RUNNABLE,
    ChatCore,
    SkipToolCall,
    StepResult,
    ToolResult,
    _Effect,
    _ModelRequest,
    _RunRound,
    _StepHook,
    _SyncTools,
)
from ._config import get_config
from ._drive import WaitCancelled
from ._errors import (
    ChatCancelled,
    MediaError,
    OutputValidationError,
    ProviderError,
    ToolExecutionError,
    ToolUnavailableError,
    provider_secrets,
    scrub,
)
from ._events import (
    ApprovalRequested,
    Event,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    ReasoningDelta,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallLog,
    ToolCallProgress,
    ToolCallRequested,
    ToolCallStarted,
    raised,
    unawaited,
    utcnow,
)
from ._extension import defer_writes, undefer_writes
from ._frozen import frozen, thawed
from ._hosted import HostedCallWarning, Verdict, audit_items
from ._inputs import CallAsker
from ._notice import notice, user_stacklevel
from ._options import FORCED_IGNORED_ROUNDS, Forced, forced_after, resolve_choice
from ._recording import RecordedResult, result_slot
from ._result_text import edit_note, to_result, without_edit_note
from ._rules import RULE, first_match
from ._runner import Job, Mode, Outcome, _shared_pool, held_by, needs_event_loop
from ._tools import InputsRequired, SchemaValidationError, Tool, current_tool_call
from ._types import (
    Approval,
    AssistantToolCallMessage,
    ChatMessage,
    Decision,
    LLMToolResponse,
    Message,
    Part,
    ToolCall,
    ToolResultMessage,
)
from ._unicode import TooDeep, clean, clean_json
from .providers import ModelRequest, Provider, StreamDelta, UnknownModelWarning, cost_of

if TYPE_CHECKING:
    import asyncio

R = TypeVar("R")
_WAITING = ("awaiting_approval", "awaiting_input")
"""A call waiting for a person: a decision, or an input (an external tool's result)."""


class LoopMixin(ChatCore):
    """Planning, model requests, tool rounds, and the sync/async drivers."""

    # the turn's forced tool choice as this chat closed its rounds: (turn, state); None
    # until it closes one (a chat loaded or forked reads its record, the same rule)
    _forced: tuple[int, Forced] | None = None

    def _forced_state(self) -> Forced:
        """Where this turn stands with a ``required`` or named tool choice."""
        held = self._forced
        if held is None:
            return self._record.forced(self._turn)
        return held[1] if held[0] == self._turn else Forced()

    def _drive_sync(self, gen: Generator[_Effect, Any, R]) -> R:
        """Run ``gen`` once it is this caller's turn to drive (``_drive.py``), blocking.

        ``_perform_sync`` blocks and never suspends, so the shared driver loop
        finishes in one pass with no event loop (``_aio.run_inline``).
        """
        with self._driving(self._drive.enter(own_call=self._in_own_call()), gen):
            return _aio.run_inline(_performed(gen, self._perform_sync))

    async def _drive_async(self, gen: Generator[_Effect, Any, R]) -> R:
        """Run ``gen`` once it is this caller's turn to drive, awaiting it (the loop runs on).

        Extensions may leave blocking work (the store's writes) to their ``catch_up``
        while this driver runs: it is awaited before each effect and when the drive
        stops, however it stops (``_extension.writes_deferred``).
        """
        with self._driving(await self._drive.enter_async(own_call=self._in_own_call()), gen):
            token = defer_writes()
            try:
                return await _performed(gen, self._perform_async)
            finally:
                undefer_writes(token)
                for catch_up in self._hook("catch_up"):
                    await catch_up((), stopping=True)

    @contextlib.contextmanager
    def _driving(self, entered: bool, gen: Generator[Any, Any, Any]) -> Iterator[None]:
        """The caller's turn to drive came (``entered``), or ``cancel()`` sent it back."""
        if not entered:
            gen.close()
            raise WaitCancelled
        self._cancel.clear()
        with self._drive.held_here():
            try:
                yield
            except BaseException as exc:  # the run ends with no step event to say so
                for stopped in self._hook("run_stopped"):
                    with contextlib.suppress(Exception):
                        stopped(exc)
                raise

    def _in_own_call(self) -> bool:
        """Whether the caller runs inside a running tool call of this chat (any thread)."""
        c = current_tool_call()
        return c is not None and c.status == "running" and self._calls.get(c.id) is c

    async def _perform_sync(self, effect: _Effect) -> Any:
        """Perform an effect with blocking calls (it never awaits: see ``_drive_sync``)."""
        if isinstance(effect, _SyncTools):
            return self._sync_tools()
        if isinstance(effect, _StepHook):
            return effect.hook()
        if isinstance(effect, _ModelRequest):
            return self._model(effect).complete(effect.request)
        coro = self._runner.run_round(effect.jobs, effect.mode, self._round_hooks(effect))
        if needs_event_loop(effect.jobs, effect.mode):
            return _aio.run_sync(coro)
        return _aio.run_inline(coro)

    async def _perform_async(self, effect: _Effect) -> Any:
        import asyncio

        # on the shared pool, not the loop's small default executor (on the background loop,
        # nbagent's own background work uses that one: a server slow to connect starved it)
        if isinstance(effect, _SyncTools):  # a source may connect (seconds): not on this loop
            return await asyncio.get_running_loop().run_in_executor(
                _shared_pool(), self._sync_tools
            )
        if isinstance(effect, _StepHook):  # the worker's context is not the driver's: it waits
            return await asyncio.get_running_loop().run_in_executor(_shared_pool(), effect.hook)
        if isinstance(effect, _ModelRequest):
            for catch_up in self._hook("catch_up"):  # e.g. the store's writes, off this loop
                await catch_up(())
            return await self._model(effect).complete_async(effect.request)
        # made before the catch-up claims the round's first calls: the hooks know what each
        # job was prepared with (``_RoundHooks.decided``)
        hooks = self._round_hooks(effect)
        calls = hooks.vetoes_asked()  # before the catch-up claims any of them (for good)
        for catch_up in self._hook("catch_up"):
            await catch_up(calls)
        hooks.catching_up = True  # each call the round's catch-up did not claim: claimed here
        return await self._runner.run_round(effect.jobs, effect.mode, hooks)

    def _model(self, effect: _ModelRequest) -> Provider:
        """The chat's provider behind its recordings (``_replay.py``): replays or records."""
        return self._replayer.provider(self.provider, effect.step, self._recordings())

    def _complete_gen(self, max_steps: int | None) -> Generator[_Effect, Any, StepResult]:
        """Steps until the turn is answered, parks, or ``max_steps`` steps did work.

        The budget is checked where the step plans, not before it: once the
        budget is spent, a step that would finish (``complete``) or park
        (``awaiting_approval``) still says so, and only a step that would do
        more work (ask the model, run tools) stops with ``budget_exhausted``.
        So an answer landing on the last allowed step is ``complete``, and
        ``budget_exhausted`` always means work was left undone.
        """
        budget = max_steps or self.max_steps or get_config().max_steps
        taken = 0
        while True:
            result = yield from self._step_gen(may_work=taken < budget)
            if result.kind in ("awaiting_approval", "complete", "busy", "budget_exhausted"):
                return result  # busy: a step hook says another process drives this chat
            taken += 1

    def _step_gen(self, may_work: bool = True) -> Generator[_Effect, Any, StepResult]:
        """One unit of work; with ``may_work`` false, only finish or park (the budget is spent)."""
        cancelling = self._cancel.is_set()
        if cancelling and not self._has_ready_calls():
            raise ChatCancelled("the chat was cancelled; call complete() to resume")
        # else cancelled as a response came in: its calls that would run now are answered
        # as cancelled by the round below (the runner starts none), then the run stops.
        # Left unanswered, they ran at the next complete(), and ask() refused to go on.
        for before_step in self._hook("before_step"):
            said = before_step()
            if said == "later":  # its work would wait on the async driver's loop
                said = yield _StepHook(before_step)  # so it runs on a worker thread
            if said == "busy":  # e.g. the store: another process drives this chat; no
                # answer to give: none was asked for yet, or the one this copy got could
                # not be stored (another copy answered first): it is not the chat's
                result = StepResult("busy", None)
                self._finish_step(result)
                return result
        with self._lock:
            self._refresh_pending()
            events = self._close_round_if_done()
            action, calls = self._plan()
            after, self._deferred_after = self._deferred_after, []
        self._emit_all(events)
        self._run_after(after)
        if action == "awaiting_approval":
            result = StepResult("awaiting_approval", self.last_assistant_message, tuple(calls))
            self._finish_step(result)
            return result
        if action == "complete":
            result = StepResult("complete", self.last_assistant_message)
            self._finish_step(result)
            return result
        spent = self._spent_budget() if action == "generate" else None
        if (not may_work or spent) and not cancelling:
            # work is left and a budget is spent (steps; or cost or tokens, checked
            # before a request): the one budget stop
            # the turn's own last answer: none yet is None (the last turn's was returned by
            # ask() as if it answered this question)
            result = StepResult("budget_exhausted", self._turns_answer())
            self._finish_step(result, budget=spent or "steps")
            return result
        if self._sources and (
            action == "generate" or any(not self._has_own_tool(c) for c in calls)
        ):
            # tool sources (MCP servers) connect lazily and follow list changes: only a
            # request (or a call of a tool not listed yet: a loaded chat) needs their
            # tools, so a step that runs listed tools or parks never waits on a server
            yield _SyncTools()
        if action == "run_tools":
            with self._lock:
                missing = [c for c in calls if self._missing_tool(c)]
            if missing:  # before anything runs or is numbered: every decision is kept
                raise ToolUnavailableError(missing)
        self._step += 1
        if action == "generate":
            request = self._build_request()
            try:
                response = yield request
                self._check_hosted_ids(response)
            except BaseException as exc:
                self._request_failed(request, exc)
                raise
            try:
                result = self._apply_response(request, response)
            except OutputValidationError as exc:  # invalid twice: the answers stay, the turn ends
                self._last_error = exc
                self._finish_step(StepResult("generated", self.last_assistant_message))
                raise
        else:
            round_ = self._prepare_round(calls)
            try:
                if round_.jobs:
                    yield round_
            finally:
                with self._lock:
                    events = self._close_round_if_done()
                self._emit_all(events)
            if round_.jobs and len(round_.declined) == len(calls):
                # every call was claimed elsewhere (an extension's claim said no): nothing
                # ran, and asking again would spin; the step ends as a busy before_step ends
                # it, the calls still runnable (the store's claim also detaches the chat)
                self._step -= 1
                result = StepResult("busy", self._turns_answer())
                self._finish_step(result)
                return result
            result = StepResult("ran_tools", self.last_assistant_message, tuple(calls))
            self._finish_step(result)
            if round_.errors and self.on_tool_error == "raise":
                raise _tool_errors(round_.errors, provider_secrets(self.provider))
            if self._cancel.is_set():
                raise ChatCancelled("the chat was cancelled; call complete() to resume")
            return result
        self._finish_step(result)
        return result

    def _turns_answer(self) -> Message | None:
        """The last assistant message if it belongs to this turn, else ``None``: a step that
        stops before the model answered (a budget, another process driving) must not hand
        ``ask()`` the last turn's answer as if it answered this question."""
        last = self.last_assistant_message
        return last if last is not None and last.turn == self._turn else None

    def _warn_uncounted(self, model: str, cost: float | None, reported: bool) -> None:
        """Say once a chat that a budget cannot count a response (no usage reported, no
        price): the chat's own requests' and its tools' sampling requests' alike."""
        blind = uncounted(
            model, cost, reported, self._cap("cost"), self._cap("tokens"), self._uncounted_warned
        )
        if blind is not None:
            warnings.warn(f"nbagent: {blind}", UnknownModelWarning, stacklevel=user_stacklevel(5))

    def _cap(self, which: str) -> float | None:
        """The chat's cost or token budget, else the configured one (``None``: no budget)."""
        if which == "cost":
            own = self.max_cost_usd
            return own if own is not None else get_config().max_cost_usd
        tokens = self.max_total_tokens
        return tokens if tokens is not None else get_config().max_total_tokens

    def _spent_budget(self) -> str | None:
        """``"cost"`` or ``"tokens"`` when that whole-chat budget is reached."""
        cap_tokens = self._cap("tokens")
        with self._record.reading() as r:  # the totals of every request folded so far
            return spent_budget(
                r.usage,
                r.cost_usd + r.replayed_cost_usd,  # a replayed run stops where the recorded did
                self._cap("cost"),
                None if cap_tokens is None else int(cap_tokens),
            )

    def _finish_step(self, result: StepResult, budget: str | None = None) -> None:
        self._last_step = result
        self._exhausted = budget
        self._emit(
            StepFinished(
                chat_id=self.id,
                step=self._step,
                turn=self._turn,
                kind=result.kind,
                budget=budget,
            )
        )

    def _has_ready_calls(self) -> bool:
        with self._lock:
            return self._plan()[0] == "run_tools"

    def _plan(self) -> tuple[str, list[ToolCall]]:
        if self._open is not None:
            calls = list(self._open.tool_calls)
            ready = self._ready(calls)
            if ready:
                return "run_tools", ready
            return "awaiting_approval", [c for c in calls if c.status in _WAITING]
        last = self._messages[-1] if self._messages else None
        if last is None:
            return "complete", []
        if isinstance(last, ToolResultMessage):
            return "generate", []
        if isinstance(last, ChatMessage) and (last.role == "user" or _stop(last) == "pause_turn"):
            return "generate", []
        return "complete", []

    def _build_request(self) -> _ModelRequest:
        with self._lock:
            tools = tuple(t.spec for t in self._tools.values())
            choice = resolve_choice(
                self._options.choice,
                list(self._tools),
                forced_spent=self._forced_state().spent,
                hosted=list(self._hosted),
            )
            calls = self._options.calls_wire
            stream = self.stream if self.stream is not None else get_config().stream
            step = self._step
            request = ModelRequest(
                messages=tuple(self._messages),
                system=self.system,
                tools=tools,
                tool_choice=choice,
                calls=calls,
                stream=stream,
                on_delta=self._delta_sink(step) if stream and self._hears_fragments() else None,
                hosted=tuple(self._hosted.values()),
                output=self._output,
                reasoning=self.reasoning,
                cache=self.cache,
            )
        self._emit(
            ModelRequestStarted(
                chat_id=self.id,
                step=step,
                turn=self._turn,
                model=self.model,
                provider=self.provider.name,
                n_messages=len(request.messages),
                tool_choice=choice,
                calls=calls,
            )
        )
        return _ModelRequest(step, request, time.perf_counter())

    def _hears_fragments(self) -> bool:
        """Whether anyone would get a stream fragment of this chat's: else a streamed request
        has no ``on_delta``, so its provider makes none, nor its recording keeps them (a
        replay plays made-up ones): 2.7% of a streamed 10-round Anthropic loop's client
        instructions, with nothing watching it."""
        hears = self._bus.hears
        return hears(TextDelta) or hears(ToolCallDelta) or hears(ReasoningDelta)

    def _delta_sink(self, step: int) -> Callable[[StreamDelta], None]:
        hears = self._bus.hears  # a fragment nobody hears is not made (nor numbered)

        def sink(delta: StreamDelta) -> None:
            if delta.kind == "text":
                if hears(TextDelta):
                    self._emit(TextDelta(chat_id=self.id, step=step, text=delta.text))
            elif delta.kind == "reasoning":
                if hears(ReasoningDelta):
                    self._emit(ReasoningDelta(chat_id=self.id, step=step, text=delta.text))
            elif hears(ToolCallDelta):
                self._emit(
                    ToolCallDelta(
                        chat_id=self.id,
                        step=step,
                        index=delta.index,
                        call_id=delta.call_id,
                        name=delta.name,
                        arguments_delta=delta.text,
                    )
                )

        return sink

    def _request_failed(self, request: _ModelRequest, exc: BaseException) -> None:
        self._last_error = exc
        if isinstance(exc, ProviderError):
            exc.via_chat = True  # its one-line form in a cell points to chat.last_error
        self._emit(
            ModelRequestFailed(
                chat_id=self.id,
                step=request.step,
                turn=self._turn,
                model=self.model,
                provider=self.provider.name,
                error_type=type(exc).__name__,
                error=scrub(clean(str(exc)), provider_secrets(self.provider)),
                latency_ms=(time.perf_counter() - request.t0) * 1000.0,
            )
        )
        self._step -= 1  # a failed request is not a step; retrying reuses the number

    def _apply_response(self, request: _ModelRequest, response: LLMToolResponse) -> StepResult:
        latency = (time.perf_counter() - request.t0) * 1000.0
        if not isinstance(response, LLMToolResponse):
            raise ProviderError(f"provider returned {type(response).__name__}, not LLMToolResponse")
        response = _clean_response(response)
        usage = response.usage
        model = response.model or self.model
        # no usage reported: its tokens read 0 but its cost is unknown, not $0
        cost = cost_of(model, usage) if response.usage_reported else None
        replayed = response.replayed  # nothing spent now: its cost counts for budgets only
        if not replayed:  # a budget that cannot count this response says so, once a chat
            self._warn_uncounted(model, cost, response.usage_reported)
        events: list[Event] = [
            ModelRequestFinished(
                chat_id=self.id,
                step=request.step,
                turn=self._turn,
                model=model,
                provider=response.provider or self.provider.name,
                usage=usage,
                latency_ms=latency,
                stop_reason=response.stop_reason,
                raw_stop_reason=response.raw_stop_reason,
                n_tool_calls=len(response.tool_calls),
                text=response.text,
                cost_usd=0.0 if replayed else cost,
                replayed=replayed,
                recorded_cost_usd=cost if replayed else None,
            )
        ]
        after: list[ToolResult] = []
        invalid: OutputValidationError | None = None
        # the response is applied whole or not at all, and recorded: the stop button
        # landing between two of its changes left a call "requested" that nothing ran
        # or recorded (found by the stop-button property under load)
        with _aio.stop_held():
            with self._lock:
                items, breaches = audit_items(
                    response.items, self._hosted, self._hosted_verdict(response.tool_calls)
                )
                message: Message
                if response.tool_calls:
                    calls = self._admit_calls(c.copy_identity() for c in response.tool_calls)
                    message = AssistantToolCallMessage(
                        response.text or None,
                        calls,
                        turn=self._turn,
                        stop_reason=response.stop_reason,
                        items=items,
                    )
                    events.extend(self._append(message))
                    self._open = message
                    events.extend(
                        self._register_calls(
                            calls,
                            response,
                            request.step,
                            after,
                            request.request.tool_choice,
                            own_tools=bool(request.request.tools),
                        )
                    )
                    events.extend(self._close_round_if_done())
                else:
                    text = response.text
                    if response.stop_reason == "refusal" and response.refusal and not text:
                        text = response.refusal
                    parsed, invalid = self._parse_output(text, response.stop_reason)
                    message = ChatMessage(
                        "assistant",
                        text,
                        turn=self._turn,
                        stop_reason=response.stop_reason,
                        items=items,
                        parsed=parsed,
                    )
                    events.extend(self._append(message))
                    if invalid is not None and response.stop_reason in _CUT_OFF:
                        # cut off by a limit: a paid retry would be cut off too
                        invalid = _cut_off(
                            invalid, response.stop_reason, self.provider, self._output_retried
                        )
                    elif invalid is not None and not self._output_retried:
                        self._output_retried = True  # once per turn: tell the model what was wrong
                        retry = ChatMessage("user", retry_text(invalid), turn=self._turn)
                        events.extend(self._append(retry))
                        invalid = None
            self._emit_all(events)
        for line in breaches:  # after recording: made an error, it loses nothing
            warnings.warn(
                self._composed(f"nbagent: {line}"),
                HostedCallWarning,
                stacklevel=user_stacklevel(4),
            )
        self._run_after(after)
        _show_unknown(response)
        if invalid is not None:
            raise invalid
        return StepResult("generated", message, tuple(getattr(message, "tool_calls", ())), response)

    def _hosted_verdict(self, new: Iterable[ToolCall]) -> Callable[[str], Verdict | None]:
        """The chat's decision on a hosted approval request, by id (under the lock).

        ``new``: the calls of the response being applied (not admitted yet: undecided).
        """
        arriving = {c.id for c in new if c.hosted}

        def verdict(request_id: str) -> Verdict | None:
            c = self._calls.get(request_id)
            if c is None or not c.hosted:
                return "undecided" if request_id in arriving else None
            if c.status == "denied":
                return "denied"
            return "approved" if c.status in ("ok", "approved") else "undecided"

        return verdict

    def _parse_output(self, text: str, stop: str) -> tuple[Any, OutputValidationError | None]:
        """The turn's structured answer read from ``text``: (value, None) or (None, the error).

        Nothing to read when the turn asks for none, or the model refused.
        """
        if self._output is None or stop == "refusal":
            return None, None
        try:
            return self._output.parse(text), None
        except OutputValidationError as exc:
            return None, exc

    def _check_hosted_ids(self, response: Any) -> None:
        """Refuse a response that repeats a hosted approval request's id.

        A hosted call is answered under the provider's own id (the provider
        looks its approval request up by it), so it is never renamed like a
        local call: a response whose hosted call repeats an id of this chat
        (one already asked for, or twice in this response) fails as a
        :class:`ProviderError` before anything of it is kept, and nothing is
        answered under an id the provider never issued.
        """
        calls = getattr(response, "tool_calls", ())
        if not any(c.hosted for c in calls):
            return
        seen: set[str] = set()
        with self._lock:
            taken = set(self._calls)
        for c in calls:
            if c.hosted and (c.id in taken or c.id in seen):
                earlier = "an earlier response" if c.id in taken else "this response"
                raise ProviderError(
                    f"{self.provider.name}: the provider asked again for approval under "
                    f"{c.id!r} ({c.name} on {c.server or 'its server'}), an id it already used in "
                    f"{earlier}; nbagent answers a hosted call only under the provider's own "
                    "id and never makes one up, so the response is not used (ask again)",
                    provider=self.provider.name,
                )
            seen.add(c.id)

    def _admit_calls(self, calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
        """Admit a response's calls (under the lock): valid text, sane nesting, unique ids.

        Strings are cleaned of lone surrogates (``_unicode.py``); arguments nested
        deeper than ``_unicode.MAX_DEPTH`` count as unparseable (the call is
        answered with an error, never run).

        Every call gets its own id, whatever the wire sent: some servers
        repeat an id within a response or reuse one in a later turn. A
        repeated id becomes ``<id>_2`` (the first free suffix), decided when
        the response arrives, so it is deterministic; that id is what the
        chat sends back, and a stateless API only needs the ids of one request
        to be consistent. Never a hosted call's: the provider looks its
        approval request up by its id (a repeat is refused first:
        :meth:`_check_hosted_ids`).
        """
        out: list[ToolCall] = []
        earlier = self._calls  # every call so far: looked into, not copied (O(1) a call)
        taken: set[str] = set()  # this response's

        def used(ident: str) -> bool:
            return ident in taken or ident in earlier

        for c in calls:
            c = _admitted(c)
            if used(c.id):
                n = 2
                while used(f"{c.id}_{n}"):
                    n += 1
                c = dataclasses.replace(c, id=f"{c.id}_{n}")
            taken.add(c.id)
            out.append(c)
        return tuple(out)

    def _register_calls(
        self,
        calls: Sequence[ToolCall],
        response: LLMToolResponse,
        step: int,
        after: list[ToolResult],
        choice: str = "auto",
        *,
        own_tools: bool = True,
    ) -> list[Event]:
        """Record the calls of a response: gate each once, answer the ones that can't run.

        ``choice``: the request's tool choice; ``own_tools``: whether the request offered
        tools of the chat's own (without any, its choice is the chat's ``auto``, ``none`` or
        ``required`` when it has hosted tools, else ``none``: nothing of the chat's to call,
        which says nothing of hosted tools an ``extra_body`` may offer).
        """
        events: list[Event] = []
        limit = self._options.calls
        hosted_choice = choice
        if not own_tools:  # the hosted tools stand under the chat's option: auto or none
            hosted_choice = "none" if self._options.choice == "none" else "auto"
        # a response the provider stopped (a limit, a refusal or content filter, a stop
        # nbagent does not know) may hold calls it never meant to be run: none of them runs
        stopped = response if response.stop_reason in _NOT_RUN else None
        n = 0  # the calls counted against the limit (one the choice excluded is not)
        for c in calls:
            self._calls[c.id] = c
            c.chat_id, c.arguments = self.id, frozen(c.arguments)  # the record: read-only
            self._call_turn[c.id] = self._turn
            self._call_step[c.id] = step
            tool = None if c.hosted else self._tools.get(c.name)
            c.approval = _provider_gate(c) if c.hosted else requirement(tool)
            if not c.approval.required and self._rules:
                denying = first_match(self._rules, c, "denied")
                if denying is not None:  # a deny rule gates even an ungated tool's call
                    # the chat's key hidden before a long condition value is cut
                    why = denying.reason_hiding(provider_secrets(self.provider))
                    c.approval = Approval(True, RULE, why)
            if tool is not None and tool.server is not None and c.server is None:
                c.server = tool.server  # an MCP server's tool: its label, for cards, log, store
            events.append(
                ToolCallRequested(
                    chat_id=self.id,
                    call=c,
                    step=step,
                    turn=self._turn,
                    approval=c.approval,
                )
            )
            # a hosted approval request is a call like any (approved, the provider runs it):
            # off the choice, in a stopped response or beyond the limit it is refused as a
            # function call there is skipped, but by a denial (approve: false, the same text),
            # nobody asked and no policy consulted
            problem: tuple[Literal["error", "skipped"], str] | None = _off_choice(
                c, hosted_choice if c.hosted else choice
            )
            if problem is None:
                problem = self._reject_reason(c, tool, n, limit, stopped)
                n += 1
            if problem is not None:
                status, text = problem
                if c.hosted:
                    refused = _refused(self._said(c.name), text)  # its name: the provider's
                    events.extend(self._answer(c, "denied", refused, after, hosted=True))
                else:
                    events.extend(self._answer(c, status, text, after))
                continue
            if c.hosted:  # only the chat's rules and policies may decide it at once
                events.extend(self._gate(c, None, step, after))
            elif c.approval.required:
                events.extend(self._gate(c, tool, step, after))
            else:
                events.extend(self._park_if_external(c, step))  # an external tool's call waits
        return events

    def _gate(
        self, c: ToolCall, tool: Tool | None, step: int, after: list[ToolResult]
    ) -> list[Event]:
        """A gated call waits for a decision: a resolver or policy may decide it at once,
        else the approval is requested."""
        assert c.approval is not None
        c.status = "awaiting_approval"
        events = self._auto_decide(c, tool, after)
        if c.status == "awaiting_approval":
            events.append(
                ApprovalRequested(
                    chat_id=self.id,
                    call=c,
                    step=step,
                    turn=self._turn,
                    reason=c.approval.reason,
                    source=c.approval.source,
                )
            )
        return events

    def _reject_reason(
        self,
        c: ToolCall,
        tool: Tool | None,
        n: int,
        limit: int | None,
        stopped: LLMToolResponse | None,
    ) -> tuple[Literal["error", "skipped"], str] | None:
        # each piece of the model's (or provider's) text is scrubbed alone (_said), then put
        # into nbagent's words, which _answer reads for keys only: read whole, the words
        # "invalid arguments for reset_password: password: ..." were taken for a password
        if stopped is not None:
            return "skipped", _stopped_text(stopped, self._said)
        if limit is not None and n >= limit:
            return "skipped", _limit_text(limit)
        if c.hosted:  # the provider's tool: nothing of it to check here
            return None
        if tool is None:
            names = ", ".join(sorted(self._tools)) or "none"
            return "error", f"Error: unknown tool {self._said(c.name)!r}. Available tools: {names}."
        if c.parse_error is not None:
            raw = c.raw_arguments or ""
            return "error", (
                f"Error: the arguments for {c.name} were not valid JSON "
                f"({self._said(c.parse_error)}); received: {_quoted(self._said(raw), len(raw))}. "
                "The tool was not run."
            )
        try:
            tool.validate_arguments(c.arguments)
        except SchemaValidationError as exc:  # it may quote a value or a key of the model's
            problem = self._said(str(exc))
            return (
                "error",
                f"Error: invalid arguments for {c.name}: {problem}. The tool was not run.",
            )
        return None

    def _auto_decide(self, c: ToolCall, tool: Tool | None, after: list[ToolResult]) -> list[Event]:
        """Let the rules, the resolver, then the policies decide an undecided gated call.

        A deny rule comes first (a call it matches never runs, whatever a resolver
        says); an allow rule after the tool's resolver (which may deny what it matches).
        """
        verdict: bool | None = None
        by = ""
        reason: str | None = None
        rules = self._rules
        denying = first_match(rules, c, "denied") if rules else None
        if denying is not None:
            # the chat's key hidden before a long condition value is cut (reason_hiding)
            verdict, by = False, RULE
            reason = denying.reason_hiding(provider_secrets(self.provider))
        elif tool is not None and tool.has_resolver:
            verdict, note = consult_resolver(tool, c)
            # its text becomes the reason the log, the store and the card show
            note = scrub(clean(note), provider_secrets(self.provider)) if note else note
            by = "resolver"
            if note and c.approval is not None:
                # asked again at every step: the reason says why it could not decide, once
                c.approval = Approval(
                    True, c.approval.source, f"{requirement(tool).reason} ({note})"
                )
        if verdict is None and rules:
            allowing = first_match(rules, c, "approved")
            if allowing is not None:
                verdict, by = True, RULE
                reason = allowing.reason_hiding(provider_secrets(self.provider))
        if verdict is None:
            for policy in self._policies:
                if policy.matches(c, shown=self._composed):
                    verdict, by, reason = True, policy.decider, "always allowed"
                    break
        if verdict is None:
            return []
        decision = Decision("approved" if verdict else "denied", by, utcnow(), reason)
        return self._record_decision(c, decision, after)

    def _refresh_pending(self) -> None:
        if self._open is None:
            return
        events: list[Event] = []
        for c in self._open.tool_calls:
            if c.status == "awaiting_approval":
                events.extend(self._auto_decide(c, self._tools.get(c.name), self._deferred_after))
            elif c.hosted and c.status == "approved":  # approved, answer not recorded (a store)
                events.extend(self._answer_hosted(c, self._deferred_after))
            else:  # an external tool's call approved elsewhere, or a loaded chat's
                events.extend(self._park_if_external(c))
        self._deferred.extend(events)

    def _close_round_if_done(self) -> list[Event]:
        """Once every call of the open round is answered, add the results in call order."""
        events, self._deferred = self._deferred, []
        if self._open is None or not all(c.is_final for c in self._open.tool_calls):
            return events
        for c in self._open.tool_calls:
            assert c.result is not None
            events.extend(self._append(c.result))
        calls = self._open.tool_calls
        self._open = None
        before = self._forced_state()
        step = self._call_step.get(calls[0].id) if calls else None
        choice = self._record.request_choice(step) if step is not None else None
        now = forced_after(before, choice, calls)
        self._forced, self._forced_spent = (self._turn, now), now.spent
        if now.dropped and not before.spent:
            notice(
                f"the model did not follow tool choice {choice!r} ({FORCED_IGNORED_ROUNDS} "
                "tool rounds in a row without a call of it that could run); the choice is "
                "dropped for the rest of this turn, so the model may answer"
            )
        return events

    def _missing_tool(self, c: ToolCall) -> bool:
        """A call ready to run whose tool this chat does not have: it waits for the tool
        instead of being answered "not available", which used up an approval for good.

        The tool is the one the call was made for: of the same name *and* server (a local
        tool, or another server's tool of that name, is not an MCP server's tool: the
        record would name the server the person approved while another tool ran). An
        MCP server's call while that server is in the chat is the exception: the server
        no longer listing the tool, or the name now meaning another tool, is answered
        (the call errs, ``_prepare_round``).
        """
        if c.hosted or self._has_own_tool(c):
            return False
        return c.server is None or not self._serves(c.server)

    def _has_own_tool(self, c: ToolCall) -> bool:
        """The chat has the tool ``c`` was made for, as last listed (name and server)."""
        tool = self._tools.get(c.name)
        return tool is not None and tool.server == c.server

    def _serves(self, server: str) -> bool:
        """Whether one of the chat's tool sources is the MCP server of that label (as listed)."""
        return any(t.server == server for tools in self._source_tools for t in tools)

    def _prepare_round(self, calls: Sequence[ToolCall]) -> _RunRound:
        jobs: list[Job] = []
        after: list[ToolResult] = []
        events: list[Event] = []
        with self._lock:
            default_timeout = self._options.timeout or get_config().tool_timeout
            for c in calls:
                if c.hosted:  # never run here (``_plan`` does not offer them): belt and braces
                    events.extend(self._answer_hosted(c, after))
                    continue
                tool = self._tools.get(c.name)
                if tool is None or tool.server != c.server:  # its server is here, not its tool
                    name = self._said(c.name)  # the call's, as it came (a loaded chat's too)
                    server = self._said(c.server) if c.server is not None else None
                    why = (
                        f"tool {name!r} was removed from this chat"  # meanwhile, elsewhere
                        if tool is None and c.server is None
                        else f"MCP server {server!r} no longer offers tool {name!r}"
                        if tool is None
                        else f"tool {name!r} of MCP server {server!r} is hidden: that "
                        f"name now belongs to {_owner(tool)}"
                    )
                    events.extend(self._answer(c, "error", f"Error: {why}; not run.", after))
                    continue
                try:
                    # a copy: the tool's own changes to its inputs reach nobody else
                    kwargs = tool.validate_arguments(thawed(c.effective_arguments))
                except SchemaValidationError as exc:  # may quote the model's (or an edit's) text
                    problem = self._said(str(exc))
                    events.extend(
                        self._answer(
                            c,
                            "error",
                            f"Error: invalid arguments for {c.name}: {problem}. "
                            "The tool was not run.",
                            after,
                        )
                    )
                    continue
                replayed = None
                if self._replayer.replays_tool(c.name):
                    replayed = self._recorded_result(c)
                report = _CallReporter(self, c, self._step)
                timeout = tool.timeout or default_timeout
                asker = CallAsker(self, c)  # a server may ask a person mid-call (elicitation)
                jobs.append(Job(c, tool, kwargs, timeout, replayed, self._cancel, report, asker))
            mode = self._options.effective_concurrency
            self._runner.max_concurrency = self._options.effective_max_concurrency
        self._emit_all(events)
        self._run_after(after)
        return _RunRound(self._step, jobs, mode)

    def _recorded_result(self, c: ToolCall) -> RecordedResult | None:
        """The recorded outcome of ``c`` run with the arguments it runs with now, if any.

        Results are kept by call id and arguments (:func:`result_slot`): a run with other
        arguments (an edit, a fork's) never answers this one, nor replaces its result. A
        recording made before that keeps one result per call id: used when its arguments
        are these."""
        step = self._call_step.get(c.id, self._step)
        sources = self._recordings()
        args = c.effective_arguments
        found = self._replayer.find_result(step, result_slot(c.id, args), sources)
        if found is None:
            found = self._replayer.find_result(step, c.id, sources)
        ran_with = getattr(found, "arguments", None)
        if ran_with is not None and ran_with != args:
            return None  # it ran with other arguments then: run it now
        return found

    def _round_hooks(self, round_: _RunRound) -> _RoundHooks:
        return _RoundHooks(self, round_)


async def _performed(
    gen: Generator[_Effect, Any, R], perform: Callable[[_Effect], Awaitable[Any]]
) -> R:
    """Drive the loop ``gen``: perform each effect it yields and send back the result (or
    throw the error in), until it returns; the one driver loop of both APIs."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        try:
            value = await perform(effect)
        except BaseException as exc:
            error = exc


_shown_unknown: set[tuple[str, str]] = set()


def _show_unknown(response: LLMToolResponse) -> None:
    """Say once per process and item type that a response held something nbagent does not know.

    The item is kept in the transcript (``message.items``) and sent back as it
    came; the log has a row for it. Never dropped silently.
    """
    for item in response.items:
        key = (item.api, item.type)
        if not item.known and key not in _shown_unknown:
            _shown_unknown.add(key)
            notice(
                f"{response.provider or item.api} sent a {item.type!r} item that nbagent does "
                "not know; it is kept in the transcript (message.items) and sent back as it came"
            )


def _off_choice(c: ToolCall, choice: str) -> tuple[Literal["skipped"], str] | None:
    """Why a call the request's tool choice did not allow is not run (``None``: allowed).

    Not every server honours ``tool_choice`` (compatible servers, some models): the
    chat does, as it does the calls-per-response limit.
    """
    if choice == "none":
        return "skipped", (
            "Not executed: no tool calls were allowed in this response (tool choice 'none'). "
            "Answer without calling tools."
        )
    if choice not in ("auto", "required") and c.name != choice:
        return "skipped", (
            f"Not executed: this response was to call {choice} only (tool choice). "
            "Call it again in a later response if it is still needed."
        )
    return None


def _limit_text(limit: int) -> str:
    """What a call beyond the calls-per-response limit is answered with (it did not run)."""
    word = "one tool call per response is" if limit == 1 else f"{limit} tool calls per response are"
    return (
        f"Not executed: only {word} allowed. "
        "Call it again in a later response if it is still needed."
    )


def _refused(name: str, text: str) -> str:
    """A hosted approval request's answer when nbagent refuses it itself (off the tool
    choice, in a stopped response, beyond the limit): a denial nobody was asked for, its
    reason the text a skipped function call there gets (sent as ``approve: false`` with it).
    ``name``: the call's, scrubbed (the provider's text)."""
    return json.dumps({"status": "denied", "tool": name, "reason": text}, ensure_ascii=False)


def _owner(tool: Tool) -> str:
    """Whose a tool is, in words: an MCP server's, or the chat's own."""
    if tool.server is None:
        return "a tool of the chat's own"
    return f"MCP server {tool.server!r}"


RAW_SHOWN = 400
"""How much of a call's unparsable argument text its error result quotes back."""


def _quoted(shown: str, total: int) -> str:
    """The model's own text, bounded: a 160,000-character mistake is not read back whole.

    ``shown``: the text scrubbed whole (a secret across the cut is hidden, no part of it
    left; scrubbed after the cut, ``password='...`` read the count after it as the
    password's value); ``total``: its length as the model sent it."""
    if len(shown) <= RAW_SHOWN:
        return repr(shown)
    return f"{shown[:RAW_SHOWN]!r}... ({total:,} characters in all)"


def _provider_gate(c: ToolCall) -> Approval:
    """A hosted call (the provider runs it once someone decides) is always gated."""
    server = c.server or "the provider"
    return Approval(
        True, "provider", f"{server} (run by the provider) asks before running {c.name}"
    )


def _waiting_before(calls: Sequence[ToolCall], c: ToolCall) -> tuple[str, ...]:
    """The ids of the calls before ``c`` in its response that still wait for a decision."""
    out: list[str] = []
    for x in calls:
        if x is c:
            return tuple(out)
        if x.status == "awaiting_approval":
            out.append(x.id)
    return ()  # not in this response (cannot happen): claim nothing


_CUT_OFF = ("max_tokens", "context_window")
_NOT_RUN = (*_CUT_OFF, "refusal", "other")
"""Stop reasons whose response's calls are answered ``skipped``, never run."""


def _stopped_text(response: LLMToolResponse, said: Callable[[str], str]) -> str:
    """What a call of a response the provider stopped is answered with (it did not run).
    ``said`` scrubs the provider's own stop reason (:meth:`ChatCore._said`)."""
    if response.stop_reason in _CUT_OFF:
        return (
            "Not executed: the response was cut off by the token limit, so these "
            "arguments may be incomplete. Call the tool again if it is still needed."
        )
    raw = said(clean(str(response.raw_stop_reason or "")))[:60]
    why = response.stop_reason + (f", {raw}" if raw and raw != response.stop_reason else "")
    return (
        f"Not executed: the provider stopped this response (stop reason {why}) instead of "
        "finishing it, so its tool calls were not run."
    )


def _cut_off(
    error: OutputValidationError, stop: str, provider: Any, retried: bool
) -> OutputValidationError:
    """``error`` of a structured answer the model stopped writing at a limit (``stop``),
    saying so: not sent back for a retry, which the same limit would cut off again (the
    answer is invalid because it is unfinished, so its JSON error alone misleads).
    ``retried``: this answer was itself the turn's retry (then both answers are kept)."""
    if stop == "max_tokens":
        limit = getattr(provider, "max_tokens", None)
        at = f" ({limit} tokens)" if isinstance(limit, int) else ""
        why = (
            f"the answer was cut off at the output token limit{at} (stop reason max_tokens); "
            "not retried, as a retry would be cut off too: raise the provider's max_tokens= "
            "(OpenAIProvider(model, max_tokens=...), AnthropicProvider(model, max_tokens=...))"
        )
    else:
        why = (
            "the answer was cut off: the model's context window is full (stop reason "
            "context_window); not retried, as a retry would be cut off too: shorten the "
            "conversation or use a model with a larger context window"
        )
    return OutputValidationError(error.output, error.raw, [why, *error.errors], retried=retried)


def retry_text(error: OutputValidationError) -> str:
    """What the model is told once when its structured answer was invalid."""
    return (
        f"Your answer is not a valid {error.output}: " + "; ".join(error.errors) + ". "
        "Answer again with only the corrected JSON object, matching the schema."
    )


def _stop(message: ChatMessage) -> str:
    return message.stop_reason


def _clean_response(response: LLMToolResponse) -> LLMToolResponse:
    """The response with its text valid UTF-8 (calls are admitted one by one later)."""
    text, refusal, model = clean(response.text), response.refusal, response.model
    refusal = clean(refusal) if refusal is not None else None
    model = clean(model) if model else model
    if text is response.text and refusal is response.refusal and model is response.model:
        return response
    return dataclasses.replace(response, text=text, refusal=refusal, model=model)


def _admitted(c: ToolCall) -> ToolCall:
    """``c`` with valid text, or answered-at-once as unparseable when nested too deeply."""
    try:
        arguments = clean_json(c.arguments)
    except TooDeep as exc:
        return dataclasses.replace(
            c, arguments={}, raw_arguments="(not shown)", parse_error=f"the arguments are {exc}"
        )
    changes: dict[str, Any] = {} if arguments is c.arguments else {"arguments": arguments}
    for name in ("id", "name", "raw_arguments", "parse_error", "server"):
        text = getattr(c, name)
        if text is not None and clean(text) is not text:
            changes[name] = clean(text)
    return dataclasses.replace(c, **changes) if changes else c


def _tool_errors(
    errors: list[tuple[ToolCall, BaseException]], secrets: tuple[str, ...]
) -> BaseException:
    """What ``on_tool_error="raise"`` raises: each message scrubbed as the call's error result
    is (the chat's provider's key of any shape, key-shaped text, URL credentials)."""
    excs = [
        ToolExecutionError(c, e, shown=scrub(clean(f"{type(e).__name__}: {e}"), secrets))
        for c, e in errors
    ]
    if len(excs) == 1:
        return excs[0]
    return ExceptionGroup(f"{len(excs)} tools raised", excs)


PROGRESS_EVERY = 0.1
"""Seconds between two progress events of one call (unless the message changes or the
call reaches its total): a server reporting every byte does not flood the chat."""
MAX_CALL_LOGS = 200
"""Server log messages kept as events per call (the rest go to Python logging only)."""


class _CallReporter:
    """A running call's reports (progress, a server's log lines) as the chat's events.

    Made per call by the round that runs it; bound while the tool runs
    (``_tools.report_progress``, ``_tools.call_reporter``) and usable from any
    thread. A report after the call finished is dropped, so nothing is folded
    after its ``ToolCallFinished``.

    Its subscribers run where the round's other events are heard: a report is handed to the
    event loop coordinating the round (:meth:`bind`, as the call starts) and emitted there,
    while the tool goes on; on a worker thread they held the tool up, and a listener's
    ``SystemExit`` landed inside the tool, as its error. A round run without a loop (sync
    tools one by one on the driving thread), and a sync tool run on the loop's own thread
    (a sequential round under the async API: the loop waits for it), emit on the reporting
    thread. A ``BaseException`` a subscriber raises there stops the round
    (:meth:`_RoundHooks.escape`), never the tool; only a ``KeyboardInterrupt`` heard inside a
    tool run on the driving thread goes on into it, as the stop button pressed there does.
    """

    __slots__ = (
        "_at",
        "_chat",
        "_driver",
        "_hooks",
        "_last",
        "_lock",
        "_logs",
        "_loop",
        "call",
        "step",
    )

    def __init__(self, chat: LoopMixin, call: ToolCall, step: int):
        self._chat = chat
        self.call = call
        self.step = step
        self._lock = threading.Lock()
        self._last: tuple[float, float | None, str | None] | None = None
        self._at = 0.0
        self._logs = 0
        self._hooks: _RoundHooks | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._driver: int | None = None

    def bind(self, hooks: _RoundHooks) -> None:
        """As the call starts, on the thread coordinating its round: emit there from now on."""
        import asyncio

        self._hooks = hooks
        self._driver = threading.get_ident()
        self._loop = None if _aio.running_inline() else asyncio.get_running_loop()

    def _turn(self) -> int:
        chat = self._chat
        return chat._call_turn.get(self.call.id, chat._turn)

    def progress(self, progress: float, total: float | None, message: str | None) -> bool:
        message = clean(message)[:500] if message else None
        now = time.monotonic()
        with self._lock:
            if self.call.status != "running":
                return False
            last = self._last
            if last == (progress, total, message):
                return False
            if (
                last is not None
                and message == last[2]
                and not (total is not None and progress >= total)
                and now - self._at < PROGRESS_EVERY
            ):
                return False
            self._last, self._at = (progress, total, message), now
        self._send(
            ToolCallProgress(
                chat_id=self._chat.id,
                call=self.call,
                step=self.step,
                turn=self._turn(),
                progress=progress,
                total=total,
                message=message,
            )
        )
        return True

    def log(self, level: str, message: str, logger: str | None) -> bool:
        with self._lock:
            if self.call.status != "running" or self._logs >= MAX_CALL_LOGS:
                return False
            self._logs += 1
        self._send(
            ToolCallLog(
                chat_id=self._chat.id,
                call=self.call,
                step=self.step,
                turn=self._turn(),
                level=level,
                message=clean(message),
                logger=logger,
            )
        )
        return True

    def _send(self, event: Event) -> None:
        """Emit ``event`` on the round's loop (in its turn, after what the loop was asked to
        do before: a report made before the tool returned is heard before its end is
        recorded), else here: where no loop runs the round, and where this call's sync tool
        runs on the loop's own thread (a sequential round under the async API), which holds
        the loop up until the call is over (a report queued there came too late, dropped)."""
        loop = self._loop
        if loop is None or held_by(self._driver or 0) is self:
            self._deliver(event, inside=self._driver == threading.get_ident())
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: its round is over
            loop.call_soon_threadsafe(self._deliver, event, False)

    def _deliver(self, event: Event, inside: bool) -> None:
        """``inside``: heard inside the tool, run on the driving thread."""
        if self.call.status != "running":  # it ended while the report waited its turn
            return
        try:
            self._chat._emit(event)
        except BaseException as exc:
            # Inside a tool run on the driving thread, a KeyboardInterrupt is the stop
            # button's (pressed while a subscriber ran): it stops the tool where it is.
            stop_button = inside and isinstance(exc, KeyboardInterrupt)
            if stop_button or self._hooks is None or not self._hooks.escape(exc):
                raise


class _RoundHooks:
    """The chat's side of the runner protocol: claim, record, emit, callbacks."""

    def __init__(self, chat: LoopMixin, round_: _RunRound):
        self.chat = chat
        self.round = round_
        self.modes: dict[str, Mode] = {}  # what each call actually ran under
        # the decision each job's arguments were validated with: a claim that applies one
        # made anew elsewhere (a person's edited approval, _rearmed) changes it
        self.decided = {job.call.id: job.call.decision for job in round_.jobs}
        self.ran_before: dict[str, tuple[str, ...]] = {}  # see ToolCallFinished.ran_before
        self.catching_up = False  # the async driver's: extensions catch up before a call
        # call id -> whether the extensions that only veto (Extension.claim, not committing)
        # let it start, asked before a claim that commits is made ahead of the start
        self.let: dict[str, bool] = {}
        self._escaped: BaseException | None = None  # a report subscriber's (``escape``)
        self._over = False
        self._escape_lock = threading.Lock()

    def cancelled(self) -> bool:
        return self.chat._cancel.is_set() or self._escaped is not None

    def escape(self, exc: BaseException) -> bool:
        """A ``BaseException`` a report's subscriber raised (``_CallReporter``): the round
        stops as ``chat.cancel()`` stops it (the calls running end, the others are not
        started) and raises it; False once the round is over (then it is raised where it
        came from). The first one is kept."""
        with self._escape_lock:
            if self._over:
                return False
            if self._escaped is None:
                self._escaped = exc
            return True

    def escaped(self) -> BaseException | None:
        with self._escape_lock:
            self._over = True
            return self._escaped

    def vetoes_asked(self) -> list[ToolCall]:
        """The round's runnable calls no extension vetoes (its ``claim`` says ``False``),
        asked now, under the chat's lock, before the async driver's catch-up claims them
        ahead of their start (a store's claim, one commit for many calls): asked at the
        start, as the sync driver does, a veto came after the store had recorded the call
        running, and it was in doubt though it never ran. :meth:`start` takes the answer."""
        chat = self.chat
        vetoes = chat._hook("vetoes")
        calls = [job.call for job in self.round.jobs]
        if not vetoes:
            return calls
        with chat._lock:
            for c in calls:
                if c.status in RUNNABLE:
                    self.let[c.id] = all(veto(c) for veto in vetoes)
        return [c for c in calls if self.let.get(c.id, True)]

    async def ready(self, job: Job) -> None:
        """Under the async driver, the extensions' ``starting`` for one call about to start:
        the store claims there, off the loop, a call its round's catch-up did not claim
        ahead (queued behind a running one); claimed in ``start``, a PostgreSQL round
        trip, or a row lock's wait, held up every chat on the loop. A call an extension
        vetoed (:meth:`vetoes_asked`) is not claimed."""
        if not self.catching_up or job.call.status not in RUNNABLE:
            return
        if not self.let.get(job.call.id, True):
            return
        for starting in self.chat._hook("starting"):
            await starting(job.call)

    def start(self, job: Job, mode: Mode) -> str | None:
        chat = self.chat
        c = job.call
        self.modes[c.id] = mode
        with chat._lock:
            if c.status not in RUNNABLE:
                return _ALREADY
            let = self.let.pop(c.id, None)  # the vetoes asked before the round's claims
            claims = chat._hook("claim" if let is None else "commits")
            # vetoes first, then e.g. the store's at-most-once claim
            if let is False or not all(claim(c) for claim in claims):
                if c.status in RUNNABLE:  # else the hook answered it (a decision made
                    self.round.declined.add(c.id)  # elsewhere, found by the claim)
                return _ALREADY
            if isinstance(job.report, _CallReporter):  # its reports are heard here
                job.report.bind(self)
            c.status = "running"
            c.started_at = utcnow()
            waiting = _waiting_before(chat._open.tool_calls if chat._open else (), c)
            if waiting:
                self.ran_before[c.id] = waiting
            if c.decision is not self.decided.get(c.id, c.decision):
                wrong = self._rearmed(job)
                if wrong is not None:
                    return wrong
        seen = c.as_run()  # what runs: a guard sees an approver's edit, not the model's ask
        for fn in list(chat._before):
            try:
                wrong = unawaited(fn(seen))  # a guard whose verdict nobody awaited: not run
            except SkipToolCall as exc:
                return str(exc) or "skipped by a before_tool_call callback"
            except Exception as exc:
                return f"not run: a before_tool_call callback raised {raised(exc)}"
            if wrong is not None:
                return f"not run: a before_tool_call callback {wrong}"
        chat._emit(
            ToolCallStarted(
                chat_id=chat.id,
                call=c,
                step=self.round.step,
                turn=chat._call_turn.get(c.id, chat._turn),
                mode=mode,
                arguments=c.effective_arguments,
            )
        )
        return None

    def _rearmed(self, job: Job) -> str | None:
        """The job of a call decided anew as it was claimed (a person's approval made in
        another process while the round ran, applied by the store's claim: with edited
        arguments, or the model's after an automatic edit) made to run as that decision
        says: its arguments validated again, its recorded outcome (``replay_tools``) found
        for them. Run with those it was prepared with, it ran the arguments of a decision
        that no longer stood. A reason not to run it (an edit its schema refuses), or
        ``None``."""
        chat, c = self.chat, job.call
        try:
            job.kwargs = job.tool.validate_arguments(thawed(c.effective_arguments))
        except SchemaValidationError as exc:
            return f"not run: invalid arguments for {c.name}: {chat._said(str(exc))}"
        job.replayed = chat._recorded_result(c) if chat._replayer.replays_tool(c.name) else None
        return None

    def finish(self, outcome: Outcome) -> None:
        chat = self.chat
        c = outcome.call
        if outcome.message == _ALREADY:
            return
        if isinstance(outcome.error, InputsRequired) and chat._park_call(c, outcome.error):
            return  # parked on its inputs: retried once they are answered (no result yet)
        cfg = get_config()
        text = ""
        parts: tuple[Part, ...] = ()
        if outcome.replayed is not None:
            text, parts = outcome.replayed.content, outcome.replayed.parts
        elif outcome.status == "ok":
            try:
                text, parts = to_result(
                    outcome.value, max_rows=cfg.result_max_rows, max_chars=cfg.result_max_chars
                )
                text = scrub(text, provider_secrets(chat.provider))
                text, parts = _checked(chat.provider, text, parts)
            except Exception as exc:  # str() raised, nesting too deep...: the call still ends
                kind = type(outcome.value).__name__
                outcome.status, outcome.error = "error", exc
                outcome.message = (
                    f"the tool returned a {kind} value that could not be turned into text "
                    f"({type(exc).__name__}: {str(exc)[:200]})"
                )
                outcome.value = None
        if outcome.message is not None:  # a tool's own client may quote its key
            outcome.message = scrub(clean(outcome.message), provider_secrets(chat.provider))
        with _aio.stop_held():  # the call's end is recorded whole, here and in the store
            result = self._recorded(outcome, text, parts)
        if result is not None:
            chat._run_after([result])

    def _recorded(self, outcome: Outcome, text: str, parts: tuple[Part, ...]) -> ToolResult | None:
        """Record ``outcome``'s call as ended (its status, its result, the event, the recorded
        result for replay): the result its ``after_tool_result`` callbacks get, or ``None``
        when the call had ended already."""
        chat = self.chat
        c = outcome.call
        with chat._lock:
            if c.is_final:
                return None
            if outcome.replayed is not None or outcome.status == "ok":
                content = clean(text)  # replayed: as recorded, the same text for the model
            elif outcome.status == "error":
                content = f"Error: {outcome.message}"
                if outcome.error is not None and chat.on_tool_error == "raise":
                    self.round.errors.append((c, outcome.error))
            elif outcome.status == "timed_out":  # not "not completed": it may have done its work
                content = f"Timed out: {outcome.message}"
            else:
                content = f"Not completed ({outcome.status.replace('_', ' ')}): {outcome.message}"
            if c.decision is not None and c.decision.arguments is not None:
                content = f"{edit_note(c.decision.arguments)}\n{content}"
            result = ToolResultMessage(
                c.id,
                content,
                outcome.status != "ok",
                outcome.status,
                c.name,
                turn=chat._call_turn.get(c.id, chat._turn),
                value=outcome.value,
                parts=parts if outcome.status == "ok" else (),
            )
            c.status = outcome.status
            c.result = result
            c.finished_at = outcome.finished_at
            event = chat._finished_event(
                c,
                result,
                outcome.message if outcome.status != "ok" else None,
                outcome.duration_ms,
                self.modes.get(c.id),
                replayed=outcome.replayed is not None,
                ran_before=self.ran_before.get(c.id, ()),
            )
        if outcome.replayed is None and outcome.status in ("ok", "error", "timed_out"):
            edited = c.decision is not None and c.decision.arguments is not None
            recorded = RecordedResult(
                outcome.status,
                without_edit_note(content, edited),
                parts,
                c.effective_arguments,
            )
            chat._replayer.add_result(
                chat._call_step.get(c.id, self.round.step),
                result_slot(c.id, c.effective_arguments),
                recorded,
                chat._recordings(),
            )
        for input_id in chat._inputs_of(c):  # asked mid-call, unanswered: the call ended first
            chat._withdraw_input(input_id, f"the call ended ({outcome.status}) before an answer")
        chat._emit(event)
        return ToolResult(
            c, content, outcome.status, outcome.value, outcome.error, outcome.duration_ms
        )


def _checked(provider: Any, text: str, parts: tuple[Part, ...]) -> tuple[str, tuple[Part, ...]]:
    """A tool's images the provider would refuse (too large...) become a note instead.

    Each part is checked alone: the ones the provider takes are kept (sent, shown, stored);
    only a refused one is left out, and the note names each (``image 2 is 4.0 MB...``)."""
    check = getattr(provider, "check_parts", None)
    if not parts or check is None:
        return text, parts
    kept: list[Part] = []
    refused: list[str] = []
    for n, part in enumerate(parts, 1):
        try:
            check((part,))
        except MediaError as exc:
            why, alone = str(exc), f"{part.kind} 1"  # checked alone, it is numbered 1
            if why.startswith(alone):
                why = f"{part.kind} {n}{why[len(alone) :]}"
            refused.append(why)
        else:
            kept.append(part)
    if not refused:
        return text, parts
    return f"{text}\n[images not sent: {'; '.join(refused)}]", tuple(kept)
