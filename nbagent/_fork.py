"""Forking a chat: a new chat that shares this one's history up to a point, with one change.

``chat.fork(step=N)`` and ``chat.fork(call, result=/arguments=/decision=)``
(:meth:`~nbagent.Chat.fork`). A fork is built from the chat's **event
history** (``chat.events``), never from its private state:

1. the history is cut at the fork point (:func:`at_step`, :func:`at_call`);
2. the cut history is folded by the core's one fold (:func:`nbagent._record.fold`)
   into a :class:`~nbagent._extension.Snapshot` (``ChatRecord.snapshot``): the
   messages, and a fresh :class:`~nbagent.ToolCall` for every call, with the
   lifecycle its events gave it;
3. the cut history is emitted again as the fork's own events (same fields and
   times, the fork's id and its own call objects; a model request's and a
   call's outcome marked ``shared``: the parent's), so every wing of the fork
   (its log, its store, its view) has the shared history with no special case;
4. the one change is applied through the core's usual operations, with their
   events: a decision (the rules of ``chat.approve``/``deny``), an edited
   approval, a result (a call answered as if its tool had returned it), or a
   system prompt, model or tool options set before anything runs.

This module only plans, from the chat's public face (``chat.events`` as it
stands between two transitions: ``_whole_history``,
``get_call``, ``tools``, ``tool_options``); the new chat takes the plan itself
(``BaseChat._take_fork``: restore, emit, change), so nothing here touches a
chat's private state.

**The fork points**, precisely:

- ``step=N`` (``N >= 1``): the chat as it stood **when step N ended** (the
  chat's step numbers: ``chat.steps["step"]`` for the model's steps, the log's
  ``run_step`` for tool rounds). For a model step: its response is in (text
  and the calls it asked for, gated and checked as they were then, decided at
  once by a resolver or a policy if they were); decisions made after it, and
  the tool results of its calls, are not: driving the fork asks for those
  approvals again and runs the calls then. For a tool round: its results are in.
  Nothing after the step ended is (not the next turn's message either).
- ``step=0``: before the first step: the first prompt only.
- no step and no call: the whole history as it is now.
- ``call``: the end of the call's round as the chat has it (every other call
  of the same response decided, run and answered as in the original, never
  run again), the model not asked yet; the call itself changed.

At every point, a call approved but not started by then is asked again in the fork
(:func:`unapproved`): one approval runs a call once, in the chat it was given in.

The original chat is never touched: the fork reads its history and makes new
objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ._approvals import HUMAN
from ._chat_state import HOSTED, checked_edit
from ._config import get_config
from ._errors import DecisionError
from ._events import (
    ApprovalDecided,
    CallInDoubt,
    Event,
    InputAnswered,
    InputRequested,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    ReasoningDelta,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
)
from ._extension import Snapshot
from ._options import ToolOptions
from ._record import fold
from ._result_text import to_result
from ._rules import RULE, Rule, denied_edit
from ._secrets import provider_secrets, redacted, scrub
from ._tools import Tool
from ._types import (
    AssistantToolCallMessage,
    ForkChange,
    ForkParent,
    ToolCall,
    ToolResultMessage,
)
from ._unicode import clean
from .providers import Provider, provider_for_model, resolve_provider, with_model

UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()
"""A keyword not given (``None`` is a value: a tool may return it, a system prompt be cleared)."""

_CALL_CHANGES = ("result", "arguments", "decision")
_WORKING = ("generated", "ran_tools")  # the kinds of step that did work (and took a number)


@dataclass
class Plan:
    """A fork, checked and ready to make: nothing is created before it exists."""

    parent: ForkParent
    events: list[Event]
    snapshot: Snapshot
    change: ForkChange = "none"
    value: Any = None
    call: ToolCall | None = None  # the fork's copy of the call it changes
    provider: Provider | None = None
    system: Any = UNSET
    options: ToolOptions | None = None
    reason: str | None = None
    result_value: Any = None
    result_parts: tuple[Any, ...] = ()
    by: str = HUMAN  # who made the fork's decision (a decision or a gated call's edit)


class Forkable(Protocol):
    """What planning a fork reads of a chat: its public face only."""

    id: str
    provider: Provider
    system: str | None

    @property
    def events(self) -> tuple[Event, ...]: ...

    def _whole_history(self) -> list[Event]:
        """``events`` between two transitions (none seen half-emitted by another thread)."""
        ...

    @property
    def tools(self) -> tuple[Tool, ...]: ...

    @property
    def tool_options(self) -> ToolOptions: ...

    @property
    def rules(self) -> tuple[Rule, ...]: ...

    def get_call(self, call_or_id: ToolCall | str) -> ToolCall: ...


# ------------------------------------------------------------------ the points
def at_step(history: Sequence[Event], step: int | None) -> list[Event]:
    """The history up to the end of step ``step`` (``None``: all of it).

    Raises:
        ValueError: No step of the chat has that number (the message lists them).
    """
    if step is None:
        return list(history)
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError(f"step must be an int, got {type(step).__name__}")
    if step == 0:
        for i, e in enumerate(history):
            if isinstance(e, (ModelRequestStarted, ModelRequestFailed, StepFinished)):
                return list(history[:i])
        return list(history)
    for i, e in enumerate(history):
        if isinstance(e, StepFinished) and e.step == step and e.kind in _WORKING:
            return list(history[: i + 1])
    numbers = [e.step for e in history if isinstance(e, StepFinished) and e.kind in _WORKING]
    shown = ", ".join(map(str, numbers)) if numbers else "none yet"
    raise ValueError(f"this chat has no step {step} to fork at (0, or one of its steps: {shown})")


def at_call(history: Sequence[Event], call_id: str, change: str) -> list[Event]:
    """The history up to the end of the call's round, less what happened to the call itself.

    The round ends when its results join the transcript (cut there: the fork
    closes it again with the changed call). The call keeps its request, and
    an answer given at once when it was requested (an unknown tool, invalid
    arguments, over the calls limit); its decision (kept for a ``result``
    change), its run and its result are left out, for the change to replace them.
    """
    round_ids: set[str] = set()
    for e in history:
        if isinstance(e, MessageAdded) and isinstance(e.message, AssistantToolCallMessage):
            ids = {c.id for c in e.message.tool_calls}
            if call_id in ids:
                round_ids = ids
                break
    out: list[Event] = []
    registering = False  # between the call's request and the end of the step that asked for it
    decided = False  # a decision on the call was seen (its answer, if any, goes with it)
    for e in history:
        if (
            round_ids
            and isinstance(e, MessageAdded)
            and isinstance(e.message, ToolResultMessage)
            and e.message.tool_call_id in round_ids
        ):
            break
        call = getattr(e, "call", None)
        if isinstance(e, StepFinished):
            registering = False
        elif call is not None and call.id == call_id:
            if isinstance(e, ToolCallRequested):
                registering = True
            elif isinstance(e, ApprovalDecided):
                decided = True
                if change != "result":  # the decision is what changes
                    continue
            elif isinstance(e, ToolCallFinished) and (
                e.status == "denied" or (decided and e.mode == HOSTED)
            ):
                if change != "result":  # a decision's own answer (a denial, a hosted approval)
                    continue
            elif isinstance(e, (InputRequested, InputAnswered)) and change == "arguments":
                continue  # an external call's request quotes its arguments: asked anew, edited
            elif not registering or isinstance(e, (ToolCallStarted, CallInDoubt)):
                continue  # it ran (or started): the change replaces that
        out.append(e)
    return out


def settled(events: Sequence[Event]) -> list[Event]:
    """The history less a model request it ends in the middle of (and that request's stream
    fragments): forked while the chat waits for the model, the fork asks it itself.

    Kept, the request was the fork's with no answer: a step that never finished, whose
    number the fork's own first request took again (stored, and reloaded, so). A request
    that failed is over (its failure is the chat's history, and the next request retries
    its step number), so it stays.
    """
    open_at: int | None = None
    step = 0
    for i, e in enumerate(events):
        if isinstance(e, ModelRequestStarted):
            open_at, step = i, e.step
        elif isinstance(e, (ModelRequestFinished, ModelRequestFailed)):
            open_at = None
    if open_at is None:
        return list(events)
    fragments = (TextDelta, ReasoningDelta, ToolCallDelta)
    return [
        e
        for i, e in enumerate(events)
        if i < open_at or (i > open_at and not (isinstance(e, fragments) and e.step == step))
    ]


def unapproved(events: Sequence[Event], keep: str | None) -> list[Event]:
    """The history less the approvals of calls that had not started by its end (but
    ``keep``'s, the call a fork changes): an approval runs its call once, in the chat it was
    given in. Copied, the call would run in the original and again in the fork; the fork
    asks for it again instead (a policy or a resolver decides it again at its first step)."""
    started = {
        e.call.id for e in events if isinstance(e, (ToolCallStarted, ToolCallFinished, CallInDoubt))
    }
    return [
        e
        for e in events
        if not (
            isinstance(e, ApprovalDecided)
            and e.decision.verdict == "approved"
            and e.call.id != keep
            and e.call.id not in started
        )
    ]


# --------------------------------------------------------------------- the events
def restamped(events: Iterable[Event], snapshot: Snapshot, chat_id: str) -> list[Event]:
    """The events again, as the fork's: its id, its call objects and messages (the snapshot's).

    A model request's and a call's outcome are marked ``shared``: made in the
    parent (its tokens, cost and side effects are the parent's).
    """
    calls = {c.id: c for c in snapshot.calls}
    messages = iter(snapshot.messages)  # one per MessageAdded, in order
    out: list[Event] = []
    for e in events:
        changes: dict[str, Any] = {"chat_id": chat_id}
        call = getattr(e, "call", None)
        if isinstance(call, ToolCall):
            changes["call"] = calls[call.id]
        if isinstance(e, MessageAdded):
            changes["message"] = next(messages)
        if isinstance(e, (ModelRequestFinished, ToolCallFinished)):
            changes["shared"] = True  # the parent's request or outcome, not the fork's
        out.append(dataclasses.replace(e, **changes))
    return out


# --------------------------------------------------------------------- planning
def plan(
    chat: Forkable,
    call: ToolCall | str | None,
    *,
    step: int | None,
    result: Any,
    arguments: Any,
    decision: Any,
    reason: str | None,
    system: Any,
    model: Any,
    tool_options: Any,
    by: str | None = None,
) -> Plan:
    """Check a fork and work out everything it needs, creating nothing.

    ``by``: who made the fork's decision (``None``: the user), for ``decision=`` and
    for ``arguments=`` of a gated call (recorded as an approval's edit).

    Raises:
        TypeError: More than one change, or a change that does not go with the point.
        ValueError: A step or change that cannot be (nothing to change, a
            result for a denied call...).
        DecisionError: An unknown call, or arguments the tool refuses.
    """
    asked = {
        name: value
        for name, value in (
            ("result", result),
            ("arguments", arguments),
            ("decision", decision),
            ("system", system),
            ("model", model),
            ("tool_options", tool_options),
        )
        if value is not UNSET
    }
    if len(asked) > 1:
        raise TypeError(
            f"a fork changes one thing, got {', '.join(f'{k}=' for k in asked)}; "
            "fork the fork for another change"
        )
    change, value = next(iter(asked.items()), ("none", None))
    if by is not None:
        if not isinstance(by, str) or not by:
            raise TypeError(f"by= names who decided (a string), got {by!r}")
        if change not in ("decision", "arguments"):
            raise TypeError(
                "by= names who made a fork's decision: it goes with decision= or with "
                "arguments= of a gated call"
            )
    # not chat.events: read while another thread emits a transition's events (a decision
    # and its answer, a response and its calls' gates), that holds half of one
    history = chat._whole_history()
    if call is None:
        if change in _CALL_CHANGES:
            raise TypeError(f"fork({change}=...) needs the call to change: fork(call, ...)")
        events = at_step(history, step)
        c_orig = None
    else:
        if step is not None:
            raise TypeError("fork at a call or at a step, not both")
        if change not in _CALL_CHANGES:
            raise TypeError(
                "a fork at a call changes it: fork(call, result=...), "
                "fork(call, arguments={...}) or fork(call, decision='approved'|'denied')"
            )
        c_orig = chat.get_call(call)
        events = at_call(history, c_orig.id, change)
    events = unapproved(settled(events), keep=c_orig.id if c_orig is not None else None)
    snapshot = fold(events, chat.id).snapshot()
    running = [c for c in snapshot.calls if c.status == "running"]
    if running:
        names = ", ".join(f"{c.name}({c.id})" for c in running)
        raise ValueError(f"{names} is running at that point; fork once it has finished")
    at = snapshot.call_step.get(c_orig.id, snapshot.step) if c_orig is not None else snapshot.step
    p = Plan(
        ForkParent(chat.id, at, c_orig.id if c_orig is not None else None, change),  # type: ignore[arg-type]
        events,
        snapshot,
        change=change,  # type: ignore[arg-type]
        reason=reason,
        by=HUMAN if by is None else by,
    )
    if c_orig is not None:
        found = [c for c in snapshot.calls if c.id == c_orig.id]
        if not found:  # its response is being recorded right now (its events half emitted)
            raise ValueError(
                f"{c_orig.name}({c_orig.id}) is being recorded right now (its response's "
                "events are still being sent to subscribers); fork it once they have been"
            )
        p.call = found[0]
        _plan_call_change(chat, p, c_orig, change, value)
        gated = p.call.approval is not None and p.call.approval.required
        if by is not None and not gated:
            raise TypeError(
                f"{p.call.name}({p.call.id}) never needed a decision, so by= names no one: "
                "it goes with decision= or with arguments= of a gated call"
            )
    else:
        _plan_chat_change(chat, p, change, value)
    # the parent link says what changed, in memory and in the store (the fork's row):
    # edited arguments with a secret's value as *** (the call's decision holds them whole,
    # as an approval's edit does: what the tool runs with)
    shown = redacted(p.value) if change == "arguments" else p.value
    p.parent = dataclasses.replace(p.parent, value=shown)
    p.snapshot = dataclasses.replace(p.snapshot, parent=p.parent)
    return p


def _plan_call_change(chat: Forkable, p: Plan, original: ToolCall, change: str, value: Any) -> None:
    c = p.call
    assert c is not None
    where = f"{c.name}({c.id})"
    gated = c.approval is not None and c.approval.required
    answered_at_once = c.is_final and c.decision is None and c.status != "denied"
    ruled = original.decision
    if change in ("decision", "arguments") and ruled is not None and ruled.by == RULE:
        # a fork keeps the chat's rules, and a rule's decision is final: a sweep's
        # "approve" branch of a call a deny rule decided ran it
        raise DecisionError(
            f"{where} was {ruled.verdict} by a rule ({ruled.reason}); a rule's decision is "
            "final and a fork keeps this chat's rules, so it cannot be decided otherwise"
        )
    if change == "decision":
        if value not in ("approved", "denied"):
            raise ValueError(f"decision must be 'approved' or 'denied', got {value!r}")
        if not gated:
            raise ValueError(f"{where} never needed a decision")
        if answered_at_once:
            raise ValueError(
                f"{where} was answered at once ({c.status}), before anyone could decide it: "
                "there is no decision to change"
            )
        # an approval whose call never ran (cancelled before it started) is a change in a
        # fork, which asks for it again; any other approval in the original stands. One
        # still waiting to run may run there, or may have run in another process this copy
        # has not heard from (a stored chat: approved twice, the refund ran twice), so a
        # fork does not approve it again by itself: fork() asks for it, a person decides.
        # A call in doubt started (its process stopped while running it: it may have gone
        # through), whether or not its start time was kept: approved again, it ran twice
        in_doubt = original.status == "in_doubt"
        never_ran = original.is_final and original.started_at is None and not in_doubt
        if (
            original.decision is not None
            and original.decision.verdict == value
            and not (value == "approved" and never_ran)
        ):
            if in_doubt:
                raise ValueError(
                    f"{where} was approved and started in the original, which stopped while "
                    "it ran (in doubt: it may have gone through); a fork does not run it again"
                )
            if value == "approved" and not original.is_final:
                raise ValueError(
                    f"{where} was approved in the original and has not run there yet (it "
                    "may run there, or have run in another process); a fork does not "
                    "approve it again by itself: chat.fork() asks for it again, decide it "
                    "in the fork"
                )
            raise ValueError(f"{where} was already {value} in the original; nothing would change")
        p.value = value
        return
    if change == "arguments":
        if not isinstance(value, dict):
            raise TypeError(f"arguments must be a dict, got {type(value).__name__}")
        if c.hosted:
            raise DecisionError(
                f"{where} runs on the provider's side with the model's arguments; "
                "they cannot be edited (fork with decision= instead)"
            )
        if answered_at_once and not (c.status == "error" and c.parse_error is None):
            raise ValueError(f"{where} was answered at once ({c.status}); it never ran")
        if value == original.effective_arguments:
            raise ValueError(f"{where} already has these arguments; nothing would change")
        tool = next((t for t in chat.tools if t.name == c.name), None)
        if tool is None:
            raise DecisionError(f"tool {c.name!r} is not available in this chat")
        p.value = checked_edit(tool, c.name, value)
        refused = denied_edit(chat.rules, c, p.value, provider_secrets(chat.provider))
        if refused is not None:
            raise DecisionError(refused)
        if c.is_final:  # rejected at once (invalid arguments): the edit answers that
            _reopen(c)
        return
    # result
    if c.hosted:
        raise ValueError(f"{where} is run by the provider; its result cannot be replaced")
    if c.status in ("denied", "awaiting_approval") or (
        gated and c.decision is None and not answered_at_once
    ):
        state = "denied" if c.status == "denied" else "waiting for a decision"
        raise ValueError(
            f"{where} is {state} in the original, so it has no result to replace; "
            "fork it with decision='approved' first (then fork that fork with result=...)"
        )
    cfg = get_config()
    text, parts = to_result(value, max_rows=cfg.result_max_rows, max_chars=cfg.result_max_chars)
    # what the model reads of it, as of a tool's result (the provider's key, key-shaped
    # tokens, URL credentials as ***): the call's result, the parent link and the store
    # hold this text; the value itself goes only to after_tool_result callbacks
    text = clean(scrub(text, provider_secrets(chat.provider)))
    if original.result is not None and original.result.content == text:
        raise ValueError(f"{where} already returned this; nothing would change")
    p.value, p.result_value, p.result_parts = text, value, parts
    if c.is_final:  # answered at once (an unknown tool, a call over the limit): answer it anew
        _reopen(c)


def _reopen(c: ToolCall) -> None:
    """A call answered at once, open again for the change to answer it (only in the fork)."""
    gated = c.approval is not None and c.approval.required
    c.status = "awaiting_approval" if gated else "requested"
    c.result = c.finished_at = None


def _plan_chat_change(chat: Forkable, p: Plan, change: str, value: Any) -> None:
    if change == "system":
        if value is not None and not isinstance(value, str):
            raise TypeError(f"system must be a str or None, got {type(value).__name__}")
        if value == chat.system:
            raise ValueError("the fork's system prompt is the chat's; nothing would change")
        p.system = p.value = value
    elif change == "model":
        p.provider = _provider(chat.provider, value)
        p.value = f"{p.provider.name}:{p.provider.model}"
    elif change == "tool_options":
        if not isinstance(value, dict) or not value:
            raise TypeError("tool_options must be a dict of tool options (see with_tool_options)")
        p.options = chat.tool_options.updated(value)
        p.value = {k: _jsonable(v) for k, v in value.items()}


def _provider(current: Provider, model: Any) -> Provider:
    """The fork's provider for ``model=``: a provider object, or a model name.

    A model name the current provider also serves (the same family, or a name
    no family claims: a local server's model) keeps the provider (its key,
    its endpoint); another family's name makes that provider.
    """
    if isinstance(model, str):
        family = provider_for_model(model)
        name = current.name
        same = family is None or name == family or name.startswith(f"{family}-")
        if same and (family is not None or name.startswith("openai")):
            return with_model(current, model)
        return resolve_provider(model)
    if model is None or not hasattr(model, "complete"):
        raise TypeError(f"model must be a model name or a provider, got {model!r}")
    return model


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return getattr(value, "__name__", None) or getattr(value, "name", None) or str(value)


__all__ = ["UNSET", "Plan", "at_call", "at_step", "plan", "restamped", "settled"]
