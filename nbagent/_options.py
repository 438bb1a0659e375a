"""Tool options of a chat, and their resolution into what a request sends.

``with_tool_options`` changes only the keys given; ``None`` resets a key to its
default (for ``concurrency``, to the process-wide ``nbagent.configure`` value).
Tool choice is resolved here, once, into a neutral value (``"auto"``,
``"required"``, ``"none"`` or a tool name); adapters only translate it.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from difflib import get_close_matches
from typing import Any, Literal

from ._config import get_config, normalize_concurrency, positive_int, seconds
from ._errors import ToolOptionError
from ._tools import Tool, tool_name_of
from ._types import ConcurrencyMode, ToolCall

FORCED_IGNORED_ROUNDS = 2
"""How many tool rounds in a row the model may ignore a ``required`` or named tool choice
(call only other tools, or call the forced one malformed or unknown) before the choice is
dropped for the rest of the turn: a model or server that ignores ``tool_choice`` then
answers instead of being forced, skipped and asked again until ``max_steps``."""

Order = Literal["ready", "listed"]
ORDERS: tuple[Order, ...] = ("ready", "listed")

_CHOICE_WORDS = ("auto", "required", "none")


def normalize_calls(value: Any) -> int | None:
    """``"one"``/``1`` -> 1, ``"many"`` -> None (unlimited), a positive int -> that limit.

    An int only (NumPy's too): ``True`` and ``1.0`` are equal to 1 but are no count.
    """
    if value == "one":
        return 1
    if value == "many":
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1:
        return int(value)
    raise ToolOptionError(f"calls must be 'one', 'many' or a positive int, got {value!r}")


def normalize_choice(value: Any) -> str:
    """A choice word or the name of the tool designated by ``value``."""
    if isinstance(value, str):
        if value in _CHOICE_WORDS:
            return value
        return value  # a tool name; checked against the chat's tools per request
    if (
        isinstance(value, Tool)
        or (isinstance(value, type) and issubclass(value, Tool))
        or (callable(value))
    ):
        name = tool_name_of(value)
        if name in _CHOICE_WORDS:  # sent as the word, it would not force the tool
            raise ToolOptionError(
                f"the tool {name!r} cannot be forced: its name is a tool choice word "
                f"({', '.join(sorted(_CHOICE_WORDS))}); give it another name "
                f"(@tool(name=...)) to force it"
            )
        return name
    raise ToolOptionError(
        f"choice must be 'auto', 'required', 'none', a tool name, a Tool or a tool function; "
        f"got {value!r}"
    )


@dataclass(frozen=True)
class ToolOptions:
    """A chat's tool options (see ``Chat.with_tool_options``).

    Attributes:
        choice: ``auto``, ``required``, ``none`` or a tool name.
        calls: Most calls run per response (``None``: no limit).
        concurrency: ``None`` (use ``nbagent.configure``), or a mode.
        max_concurrency: ``None`` (use ``nbagent.configure``), or a bound.
        timeout: Default per-call timeout in seconds (a tool's own wins).
        order: When a call of a response may run. ``"ready"`` (default, the
            seed's rule): as soon as it is runnable, so ungated calls run while
            gated ones wait. ``"listed"``: a gated call is a barrier in the
            response's order: a call waits until every earlier gated call of
            its response is decided and, if approved, has run; a gated call
            runs after every earlier call has finished. A denied call's
            denial counts as its outcome (the later calls run after it).
    """

    choice: str = "auto"
    calls: int | None = None
    concurrency: str | None = None
    max_concurrency: int | None = None
    timeout: float | None = None
    order: Order = "ready"

    def updated(self, changes: Mapping[str, Any]) -> ToolOptions:
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise TypeError(f"unknown tool option(s) {sorted(unknown)}; known: {sorted(known)}")
        defaults = ToolOptions()
        new: dict[str, Any] = {}
        for key, value in changes.items():
            if value is None:
                new[key] = getattr(defaults, key)
            elif key == "choice":
                new[key] = normalize_choice(value)
            elif key == "calls":
                new[key] = normalize_calls(value)
            elif key == "concurrency":
                new[key] = normalize_concurrency(value)
            elif key == "max_concurrency":
                try:
                    new[key] = positive_int(value, "max_concurrency")
                except ValueError as exc:
                    raise ToolOptionError(str(exc)) from None
            elif key == "timeout":
                try:
                    new[key] = seconds(value, "timeout")
                except ValueError as exc:
                    raise ToolOptionError(str(exc)) from None
            elif key == "order":
                if value not in ORDERS:
                    raise ToolOptionError(f"order must be 'ready' or 'listed', got {value!r}")
                new[key] = value
        return replace(self, **new)

    @property
    def effective_concurrency(self) -> ConcurrencyMode:
        if self.concurrency is not None:
            return normalize_concurrency(self.concurrency)
        return normalize_concurrency(get_config().tool_concurrency)

    @property
    def effective_max_concurrency(self) -> int:
        return self.max_concurrency or get_config().max_concurrency

    @property
    def calls_wire(self) -> Literal["one", "many"]:
        """What is sent to providers that have a switch: only a limit of 1 maps to it."""
        return "one" if self.calls == 1 else "many"

    def as_dict(self) -> dict[str, Any]:
        return {
            "choice": self.choice,
            "calls": "one" if self.calls == 1 else ("many" if self.calls is None else self.calls),
            "concurrency": self.effective_concurrency,
            "max_concurrency": self.effective_max_concurrency,
            "timeout": self.timeout,
            "order": self.order,
        }


@dataclass(frozen=True)
class Forced:
    """Where a turn stands with its ``required`` or named tool choice.

    ``spent``: the choice no longer applies (the model answers with ``auto``); ``ignored``:
    the forced rounds in a row in which the model did not use it; ``dropped``: spent
    because it was ignored ``FORCED_IGNORED_ROUNDS`` times, not because it was used.
    """

    spent: bool = False
    ignored: int = 0
    dropped: bool = False


def forced_after(state: Forced, choice: str | None, calls: Sequence[ToolCall]) -> Forced:
    """The turn's :class:`Forced` once a round of ``calls`` (every one answered) closed.

    The one rule, for the loop and for the chat's record (forks, loads) alike: ``choice``
    is the tool choice the round's request was sent with (``None``: not known, taken as
    ``auto``). A round of a request sent ``auto`` or ``none`` changes nothing (a choice
    set later in the turn is not spent by it); one with a call that used the forced tool
    (:func:`uses_choice`) spends the choice; one without counts as ignored, and the
    ``FORCED_IGNORED_ROUNDS``-th in a row drops it.
    """
    if state.spent or choice in (None, "auto", "none"):
        return state
    if any(uses_choice(c, choice) for c in calls):
        return Forced(spent=True)
    ignored = state.ignored + 1
    if ignored >= FORCED_IGNORED_ROUNDS:
        return Forced(spent=True, ignored=ignored, dropped=True)
    return Forced(ignored=ignored)


def uses_choice(c: ToolCall, choice: str) -> bool:
    """Whether ``c`` (answered) spends a ``required`` or named tool choice: a call of the
    forced tool (any tool, for ``required``) that ran (its result, its own error, timed
    out, in doubt, a guard's skip) or that someone decided or answered (a denial too: else
    the model is forced into the tool just refused, again and again).

    A hosted approval request is a call of the provider's tool, never the named one; for
    ``required`` it counts once someone decided it (approved, the provider runs it).

    Not one nbagent answered itself without running it: skipped by the choice, the limit
    or a stopped response, rejected as malformed or of an unknown tool (an ``error`` never
    started, nobody deciding), or a hosted request nbagent denied itself (for the same
    reasons: off the choice, in a stopped response, beyond the limit).
    """
    if choice != "required" and (c.hosted or c.name != choice):
        return False
    if c.started_at is not None or c.decision is not None:
        return True
    # a hosted request without a decision was denied by nbagent itself
    return not c.hosted and c.status not in ("skipped", "error")


def resolve_choice(
    choice: str, tool_names: list[str], *, forced_spent: bool, hosted: Sequence[str] = ()
) -> str:
    """The neutral choice for one request.

    A ``required`` or specific choice applies until a call of its tool (any tool,
    for ``required``) has run or been decided in the turn, or the model ignored it
    ``FORCED_IGNORED_ROUNDS`` rounds in a row (``forced_spent``, :func:`forced_after`);
    then the model answers with ``auto``. With no tools, the choice is ``none``.

    ``hosted``: the labels of the provider-hosted tools the request offers. They are
    tools the model may call, so with them ``auto``, ``none`` and ``required`` hold
    (and are sent) even when the chat has no tools of its own; a specific choice
    still names one of the chat's own tools only (a hosted tool cannot be named).
    Without hosted tools the result is what it always was (a request's key holds it).

    Raises:
        ToolOptionError: A specific tool that the chat does not have (or a hosted
            tool's label), or ``required`` with no tools at all.
    """
    if not tool_names and not hosted:
        if choice not in ("auto", "none"):
            raise ToolOptionError(
                f"tool choice {choice!r} needs tools, but the chat has none; "
                "add them with chat.with_tools(...)"
            )
        return "none"
    if choice in ("auto", "none"):
        return choice
    if choice != "required" and choice not in tool_names:
        near = get_close_matches(choice, ["auto", "none", "required"], n=1, cutoff=0.75)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        own = (
            f"one of the chat's tools: {sorted(tool_names)}"
            if tool_names
            else "a tool of the chat's own (it has none)"
        )
        if hosted:
            hint += (
                f"; a provider-hosted tool ({', '.join(sorted(hosted))}) and the tools of "
                "its server cannot be named: only 'auto', 'none' and 'required' apply to them"
            )
        raise ToolOptionError(
            f"tool choice {choice!r} is neither 'auto', 'none', 'required' nor {own}{hint}"
        )
    return "auto" if forced_spent else choice
