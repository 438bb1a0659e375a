"""Approval gates: which calls need a decision, policies, and decision rules.

The rules, in one place:

1. **Gated or not is decided when the call is requested**, and recorded on the
   call as an :class:`~nbagent.Approval` (``source`` is ``"tool"`` for
   ``requires_approval=True``, ``"resolver"`` for a tool's resolver: a
   callable ``requires_approval``, or ``approval``).
   A process that resumes the call later cannot run it ungated.
2. While a gated call is undecided, the tool's resolver and the chat's
   policies are consulted at request time and again at every step; the first
   of them to answer decides. Resolvers must be idempotent reads.
3. **An explicit decision (``chat.approve``/``chat.deny``, a click, the store)
   wins**: it may overrule a resolver's or policy's decision as long as the
   call has not started. Repeating the same decision is a no-op; contradicting
   an earlier explicit decision raises :class:`~nbagent.DecisionError`, and
   so does any decision once the call has started or finished.
4. A denied call never runs. The model gets a structured denial (see
   :func:`denial_content`), sent as an error result.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._errors import redact_keys
from ._events import CallbackWarning, raised
from ._notice import user_stacklevel
from ._secrets import named_values, token_masks
from ._tools import Tool
from ._types import Approval, ToolCall

Predicate = Callable[[ToolCall], bool]

HUMAN = "user"
WARNED_CALLS = 1024
"""How many calls a :class:`Policy` remembers having warned about (the oldest forgotten
first): a predicate failing on every call of a long chat does not grow it for ever."""
_warned_lock = threading.Lock()  # a chat's workers may ask its policies at once


@dataclass(frozen=True)
class Policy:
    """A session rule that approves calls of one tool (optionally when a predicate holds).

    Attributes:
        name: Recorded as the decider (``"policy:<name>"``).
        tool: Tool name the policy applies to.
        when: Optional predicate on the call; the policy applies only when it returns true.
    """

    name: str
    tool: str
    when: Predicate | None = None
    _warned: dict[tuple[str | None, str], None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """The calls (chat id, call id) already warned about, oldest first: kept with the policy,
    so freed with its chat, and keyed by chat too, as call ids repeat across chats (a
    server's ``call_0``; a fork shares its parent's policies and call ids)."""

    def matches(self, call: ToolCall, shown: Callable[[str], str] | None = None) -> bool:
        """Whether the policy approves ``call``: only a predicate returning ``True`` does.

        A predicate that returns anything else (``"false"``, ``1``, ``None``) or
        raises never approves; a raise or a non-bool is reported once per call (of
        each chat) as a :class:`~nbagent.CallbackWarning`, since it is almost surely a bug:
        what it raised as :func:`failure` says it, what it returned by its type alone;
        ``shown`` (the chat's) hides what else the warning may not show (its provider's key).
        """
        if call.name != self.tool:
            return False
        if self.when is None:
            return True
        try:
            verdict = self.when(call)
        except Exception as exc:
            self._warn(call, f"raised {failure(call, exc)}", shown)
            return False
        if isinstance(verdict, bool):
            return verdict
        self._warn(call, f"returned {type_of(verdict)}, not True or False", shown)
        return False

    def _warn(self, call: ToolCall, what: str, shown: Callable[[str], str] | None) -> None:
        key = (call.chat_id, call.id)
        with _warned_lock:
            if key in self._warned:
                return
            self._warned[key] = None
            while len(self._warned) > WARNED_CALLS:
                del self._warned[next(iter(self._warned))]
        # a tool's name may be the model's (a hosted call's, always allowed from its card)
        text = (
            f"nbagent: the always_allow predicate of {redact_keys(repr(self.tool))} {what}; "
            f"{redact_keys(call.name)}({call.id}) was not approved by it"
        )
        warnings.warn(
            text if shown is None else shown(text),
            CallbackWarning,
            stacklevel=user_stacklevel(4),
        )

    @property
    def decider(self) -> str:
        return f"policy:{self.name}"


def failure(call: ToolCall, exc: BaseException) -> str:
    """What a resolver or a predicate raised, as said in a reason or a warning: its type and
    text, the values ``call`` was given under a secret's name (``password``, all of a
    ``credentials`` dict: :func:`~nbagent._secrets.named_values`) masked where they stand as a
    whole token (as they are, or quoted by ``repr()`` or JSON), then all
    :func:`~nbagent._errors.redact_keys` hides. Code judging a call often quotes its
    arguments (``ValueError(f"password {password} is too long")``), and ``redact_keys`` alone
    knows a value is a password only after ``password=``."""
    text = raised(exc)  # its __str__ may raise in turn: said by its type, never a crash
    return redact_keys(call_secrets_hidden(text, call))


def call_secrets_hidden(text: str, call: ToolCall) -> str:
    """``text`` with the values ``call`` was given under a secret's name (its arguments, and
    a decision's edited ones) as ``***`` where they stand as a whole token: what a user's
    code quoting the call (a rule, a predicate, a callback) may show of it."""
    edited = call.decision.arguments if call.decision is not None else None
    named = named_values(call.arguments, edited)
    return token_masks(tokens=named).hide(text) if named else text


def type_of(value: Any) -> str:
    """A wrong answer said by its type alone (``a str``, ``an int``, ``a tuple``): the value
    itself may quote the call's arguments (a password returned, ``(True, f"... {password}")``)."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def not_given(call: ToolCall) -> bool:
    """The predicate of a stored conditional rule whose predicate was not given back (on
    ``Chat.load``): it never approves. The rule is kept (and stored again), so a later load
    that gives the predicate restores it; it is never widened into an unconditional one."""
    return False


def always_allow_policy(tool: str, when: Predicate | None = None) -> Policy:
    """The policy ``chat.always_allow(tool, when)`` adds (decider ``policy:always_allow:<tool>``,
    ``...:when`` with a predicate)."""
    return Policy(f"always_allow:{tool}" + (":when" if when is not None else ""), tool, when)


def restored_policies(
    rules: Sequence[tuple[str, bool]], predicates: Mapping[str, Predicate]
) -> list[Policy]:
    """Stored always-allow rules, ``(tool, conditional)``, as policies again: a conditional
    one takes its predicate from ``predicates`` (by tool name), else :func:`not_given`."""
    return [
        always_allow_policy(tool, predicates.get(tool, not_given) if conditional else None)
        for tool, conditional in rules
    ]


def policy_rules(policies: Sequence[Policy]) -> list[dict[str, Any]]:
    """The always-allow rules as a store keeps them: the tool, and whether it had a predicate."""
    return [
        {"tool": p.tool, "when": True} if p.when is not None else {"tool": p.tool} for p in policies
    ]


def requirement(tool: Tool | None) -> Approval:
    """Whether calls of ``tool`` need a decision, and why."""
    if tool is None:
        return Approval(False, "none", "")
    if tool.has_resolver:
        return Approval(True, "resolver", f"{tool.name} decides per call with an approval rule")
    if tool.requires_approval:
        note = f" ({tool.approval_note})" if tool.approval_note else ""
        return Approval(True, "tool", f"{tool.name} requires approval before it runs{note}")
    return Approval(False, "none", "")


def consult_resolver(tool: Tool, call: ToolCall) -> tuple[bool | None, str | None]:
    """Ask a tool's resolver: ``(verdict, note)``; one that raises leaves the call pending.

    So does one that returns anything but ``True``, ``False`` or ``None``; the
    note says why (it joins the call's approval reason, which the log, the store and
    the card show): what it raised as :func:`failure` says it (the call's values under a
    secret's name, anything shaped like a key, URL credentials or a password as ``***``; the
    chat scrubs its provider's own key too), what it returned by its type alone.
    """
    resolver = tool.resolver
    if resolver is None:
        return None, None
    try:
        verdict = resolver(call)
    except Exception as exc:
        return None, f"approval rule raised {failure(call, exc)}"
    if verdict is None or isinstance(verdict, bool):
        return verdict, None
    return None, f"approval rule returned {type_of(verdict)} (expected True, False or None)"


def denial_content(call: ToolCall, reason: str | None, by: str) -> str:
    """The structured denial the model receives (JSON, so it is unambiguous)."""
    who = {HUMAN: "the user", "rule": "a rule"}.get(by, by)
    payload: dict[str, Any] = {
        "status": "denied",
        "tool": call.name,
        "message": f"The call to {call.name} was denied by {who} and was not executed.",
    }
    if reason:
        payload["reason"] = reason
    payload["instruction"] = (
        "Do not retry this call with the same arguments; continue without it or ask the user."
    )
    return json.dumps(payload, ensure_ascii=False)
