"""Decisions on gated calls: approve, deny, always-allow policies, rules (``add_rule``).

The rules are in ``_approvals.py``; :meth:`ChatCore._decide` applies them
(finding the call, checking the decision against earlier ones, recording it,
emitting events). This is the public face of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any, Self

from ._approvals import HUMAN, always_allow_policy, not_given
from ._chat_state import ChatCore, apply_always_allow
from ._errors import DecisionError, provider_secrets
from ._events import AlwaysAllowChanged, Event, RuleChanged, is_async_callable
from ._notice import notice
from ._rules import RULE, Rule
from ._tools import tool_name_of
from ._types import ToolCall


class _RuleWrite:
    """A rule change being emitted here: what a store that could not write it reported."""

    __slots__ = ("failures", "undoing")

    def __init__(self, undoing: bool = False):
        self.failures: list[BaseException] = []
        self.undoing = undoing


_RULE_WRITE: ContextVar[_RuleWrite | None] = ContextVar("nbagent_rule_write", default=None)


def rule_change_unwritten(error: BaseException) -> bool:
    """A store (its ``on_event``) could not write a rule change made in this chat
    (``add_rule``, ``remove_rule``, ``always_allow``, ``revoke``): ``True`` when the
    caller takes the change back and raises ``error`` (the store then drops it from
    what it will write); ``False`` (a change not made through those: warn and retry)."""
    write = _RULE_WRITE.get()
    if write is None or write.undoing:
        return False
    write.failures.append(error)
    return True


def rule_change_undone() -> bool:
    """Whether the rule change being emitted takes back one that could not be written
    (:func:`rule_change_unwritten`): nothing of it is to be written either."""
    write = _RULE_WRITE.get()
    return write is not None and write.undoing


@contextlib.contextmanager
def _rule_write(undoing: bool = False) -> Iterator[_RuleWrite]:
    write = _RuleWrite(undoing)
    token = _RULE_WRITE.set(write)
    try:
        yield write
    finally:
        _RULE_WRITE.reset(token)


class DecisionsMixin(ChatCore):
    """``approve``, ``deny`` and ``always_allow`` of :class:`~nbagent.Chat`."""

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

    def always_allow(self, tool: Any, when: Callable[[ToolCall], bool] | None = None) -> Self:
        """Approve every call of ``tool`` from now on (optionally only when ``when(call)``).

        Pending calls it matches are approved at once. Policy decisions are
        recorded as ``policy:always_allow:<tool>`` (or ``...:when``). A stored
        chat keeps the rule (``Chat.load`` restores it, in any process); a
        ``when`` predicate is code, so only that the rule had one is stored, and
        ``Chat.load(..., always_allow={tool: when})`` gives it back.
        """
        name = tool_name_of(tool)
        if when is not None and not callable(when):
            raise TypeError(f"when must be a callable taking the call, got {type(when).__name__}")
        if when is not None and is_async_callable(when):
            label = getattr(when, "__qualname__", None) or type(when).__qualname__
            raise TypeError(
                f"when takes a plain function, got the async callable {label!r}: it is asked "
                "on the thread deciding the call and never awaited, so its body would never "
                "run; write it as a plain `def`"
            )
        policy = always_allow_policy(name, when)
        with self._lock:  # a rule restored without its predicate gives way to the new one
            before = list(self._policies)
            kept = [p for p in self._policies if not (p.tool == name and p.when is not_given)]
            self._policies[:] = [*kept, policy]
            unknown = not (self._sources or self._hosted) and name not in self._tools
            tools = (", ".join(self._tools) or "none yet") if unknown else ""
        if unknown:  # a typo would otherwise leave every call of the real tool asking
            notice(
                f"always_allow({name!r}): this chat has no tool {name!r} (its tools: {tools}); "
                "the rule applies to a tool of that name added later"
            )
        self._emit_rule_change(
            AlwaysAllowChanged(
                chat_id=self.id, tool=name, allowed=True, conditional=when is not None
            ),
            lambda: self._policies_back(before, name, False, when is not None),
        )
        self._decide_waiting(policy.matches, "approved", policy.decider, "always allowed")
        return self

    def revoke(self, tool: Any) -> Self:
        """Stop always allowing ``tool``: remove every :meth:`always_allow` policy for it.

        Calls the policies already approved stay approved (a decision is never
        taken back); the tool's next calls ask again.

        Raises:
            ValueError: No always-allow policy names ``tool``.
        """
        name = tool_name_of(tool)
        with self._lock:
            before = list(self._policies)
            kept = [p for p in self._policies if p.tool != name]
            if len(kept) == len(self._policies):
                allowed = ", ".join(sorted({p.tool for p in self._policies})) or "none"
                raise ValueError(f"{name!r} is not always allowed (always allowed: {allowed})")
            self._policies[:] = kept
        conditional = any(p.when is not None for p in before if p.tool == name)
        self._emit_rule_change(
            AlwaysAllowChanged(chat_id=self.id, tool=name, allowed=False),
            lambda: self._policies_back(before, name, True, conditional),
        )
        return self

    def _policies_back(
        self, before: list[Any], tool: str, allowed: bool, conditional: bool
    ) -> Event:
        """Take an always-allow change that could not be written back: the policies as they
        were, and the event that says so (for the chat's history and view)."""
        with self._lock:
            self._policies[:] = before
        return AlwaysAllowChanged(
            chat_id=self.id, tool=tool, allowed=allowed, conditional=conditional
        )

    def _emit_rule_change(self, event: Event, undo: Callable[[], Event]) -> None:
        """Emit a rule change made here. A store that cannot write it (the file locked, the
        disk full) says so as it hears it (:func:`rule_change_unwritten`): the change is
        taken back (``undo``: the state as it was, and the event saying so, which nothing
        writes) and the store's ``StoreError`` raised. Kept in memory only, a revoked
        always-allow came back in the next process to load the chat."""
        with _rule_write() as write:
            self._emit(event)
        if not write.failures:
            return
        back = undo()
        with _rule_write(undoing=True):
            self._emit(back)
        raise write.failures[0]

    def add_rule(self, rule: Rule) -> Self:
        """Put a :class:`~nbagent.Rule` into the chat: from now on the approval gate applies it.

        A deny rule denies every call it matches as the model asks for it (a call of a
        tool that needs no approval too): the call never runs, and the model is told it
        was denied by the rule (``Denied by rule: tool refund, amount > 500``). An allow
        rule approves the gated calls it matches (after the tool's own resolver, which
        may still deny). Either decision is recorded as decided by ``"rule"`` with the
        rule as its reason (``chat.log``'s ``decided_by`` and ``reason``, the cards),
        and it is final: no later decision changes it. Deny rules come before allow
        rules and ``always_allow``. Calls waiting for a decision now that the rule
        matches are decided at once; a deny rule also denies an approved call it matches
        (as it would run) that has not started yet: the rule wins until the call is
        claimed. A chat's store keeps its rules: ``Chat.load`` (and a resumed batch)
        applies them again. Adding a rule the chat has is a no-op.

        Raises:
            TypeError: ``rule`` is not a :class:`~nbagent.Rule`.
        """
        if not isinstance(rule, Rule):
            raise TypeError(f"add_rule takes an nbagent.Rule, got {type(rule).__name__}")
        self._change_rule(rule, True)
        return self

    def remove_rule(self, rule: Rule) -> Self:
        """Take a rule out of the chat (the decisions it made stand).

        Raises:
            ValueError: The chat has no such rule (the message lists the chat's rules).
        """
        with self._lock:
            if rule not in self._rules:
                have = "; ".join(f"{r.verdict}: {r}" for r in self._rules) or "none"
                raise ValueError(f"the chat has no rule {rule} ({rule.verdict}); its rules: {have}")
        self._change_rule(rule, False)
        return self

    def _change_rule(self, rule: Rule, added: bool, *, elsewhere: bool = False) -> None:
        """Add or remove a rule (a no-op if the chat has it, or lacks it, already), say so,
        and let an added rule decide the calls waiting for a decision that it matches.
        ``elsewhere``: a change another process made to the stored chat (``ChatHost``)."""
        with self._lock:
            if (rule in self._rules) == added:
                return
            before = list(self._rules)
            self._rules[:] = (
                [*self._rules, rule] if added else [r for r in self._rules if r != rule]
            )
        event = RuleChanged(chat_id=self.id, rule=rule.as_dict(), added=added, elsewhere=elsewhere)
        if elsewhere:  # read from the store: nothing to write
            self._emit(event)
        else:

            def undo() -> Event:
                with self._lock:
                    self._rules[:] = before
                return RuleChanged(chat_id=self.id, rule=rule.as_dict(), added=not added)

            self._emit_rule_change(event, undo)
        if not added:
            return
        # the chat's key hidden before a long condition value is cut (reason_hiding)
        why = rule.reason_hiding(provider_secrets(self.provider))
        self._decide_waiting(rule.matches, rule.verdict, RULE, why)

    def _always_allow_elsewhere(self, tool: str, allowed: bool, conditional: bool) -> None:
        """An ``always_allow``/``revoke`` made in another process on the stored chat (see
        ``_chat_state.apply_always_allow``), said with an event that says ``elsewhere``; an
        added rule approves the waiting calls it matches."""
        with self._lock:
            before = list(self._policies)
            after = apply_always_allow(before, tool, allowed, conditional, self._predicates)
            if len(after) == len(before):
                return  # it has (or lacks) it already
            self._policies[:] = after
            added = after[-1] if allowed else None
        self._emit(
            AlwaysAllowChanged(
                chat_id=self.id,
                tool=tool,
                allowed=allowed,
                conditional=conditional,
                elsewhere=True,
            )
        )
        if added is None:
            return
        self._decide_waiting(added.matches, "approved", added.decider, "always allowed")

    def _decide_waiting(
        self, matches: Callable[[Any], bool], verdict: Any, by: str, reason: str
    ) -> None:
        """Decide the calls waiting for a decision that a rule just added matches (one
        decided meanwhile keeps that decision); a deny rule also the approved calls not
        claimed to run yet (a call a deny rule matches never runs: the rule comes first)."""
        for call in self.pending_approvals:
            if matches(call):
                with contextlib.suppress(DecisionError):
                    self._decide(call, verdict, by=by, reason=reason)
        if verdict != "denied":
            return
        for call in self.open_calls:  # as they would run: a person's edit, if any
            ran = SimpleNamespace(name=call.name, arguments=call.effective_arguments)
            if call.status == "approved" and call.started_at is None and matches(ran):
                with contextlib.suppress(DecisionError):
                    self._decide(call, verdict, by=by, reason=reason)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules :meth:`add_rule` put into the chat (restored by ``Chat.load``)."""
        with self._lock:
            return tuple(self._rules)

    @property
    def always_allowed(self) -> tuple[str, ...]:
        """The tools :meth:`always_allow` currently approves (revoke one with :meth:`revoke`).

        A conditional rule restored by ``Chat.load`` without its predicate approves
        nothing and is not listed (``revoke`` still removes it).
        """
        with self._lock:
            return tuple(dict.fromkeys(p.tool for p in self._policies if p.when is not not_given))
