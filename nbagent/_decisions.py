"""Decisions on gated calls: approve, deny, always-allow policies.

The rules are in ``_approvals.py``; this is the chat's side: finding the call,
checking the decision against earlier ones, recording it, emitting events.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Literal, Self

from ._approvals import HUMAN, Policy
from ._errors import (
    DecisionError,
)
from ._events import (
    Event,
    utcnow,
)
from ._steps import ChatCore, ToolResult
from ._tools import SchemaValidationError, tool_name_of
from ._types import (
    Decision,
    ToolCall,
)


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
        """Approve every call of ``tool`` for the session (optionally only when ``when(call)``).

        Pending calls it matches are approved at once. Policy decisions are
        recorded as ``policy:always_allow:<tool>`` (or ``...:when``).
        """
        name = tool_name_of(tool)
        policy = Policy(f"always_allow:{name}" + (":when" if when else ""), name, when)
        with self._lock:
            self._policies.append(policy)
        for call in self.pending_approvals:
            if policy.matches(call):
                with contextlib.suppress(DecisionError):  # decided meanwhile: that decision stands
                    self._decide(call, "approved", by=policy.decider, reason="always allowed")
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
                    existing.automatic
                    and by == HUMAN
                    and c.status in ("approved", "denied")
                    and c.started_at is None
                    and self._open is not None
                    and any(x is c for x in self._open.tool_calls)
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
                    raise DecisionError(
                        f"edited arguments for {c.name} are invalid: {exc}"
                    ) from None
                edited = dict(arguments)
            decision = Decision(verdict, by, utcnow(), reason, edited)
            c.decision = decision
            events.extend(self._record_decision(c, decision, after))
        self._emit_all(events)
        self._run_after(after)
        return c
