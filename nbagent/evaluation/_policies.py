"""Policies learned from decisions: always-allow / always-deny rules a store's history supports.

:func:`suggest_policies` reads every decided call of a store (or chats, or a log frame)
through :func:`nbagent.read_log`, keeps the decisions people made (not those of a rule, a
resolver, a policy, the notebook's fallback denial or ``evaluate``: the core's
``MACHINE_DECIDERS``), and proposes per tool: a rule for the whole tool, else rules on one
argument (``amount <= 50``, ``region == "eu"``). Each says its support (the
decisions it agrees with) and the decisions it would have changed (those it contradicts;
none unless ``min_agreement`` is below 1). A person accepts one into a chat
(:meth:`PolicySuggestion.accept`), or into a batch's factory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._html import esc, style_tag
from .._rules import Condition, Rule
from .._secrets import redacted, secret_field
from .._types import by_machine

Verdict = Literal["approved", "denied"]
EDITED = "edited"
"""The decision an approval with edited arguments counts as: the person did not approve
the call as the model asked for it, so it supports no allow rule of those arguments (an
allow rule matching it would have changed it, and so would a deny rule)."""


@dataclass(frozen=True)
class PolicySuggestion:
    """A rule the decision history supports.

    Attributes:
        tool: The tool it decides.
        verdict: ``approved`` (always allow) or ``denied`` (always deny).
        conditions: The argument conditions (all must hold); empty: every call.
        support: Decisions it matches that agree with it.
        changed: Decisions it matches that it would have changed (dicts: ``chat_id``,
            ``call_id``, ``decision``, ``decided_by``, ``arguments``: a secret's as ``***``).
    """

    tool: str
    verdict: Verdict
    conditions: tuple[Condition, ...] = ()
    support: int = 0
    changed: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)

    @property
    def agreement(self) -> float:
        """The share of the decisions it matches that agree with it."""
        total = self.support + len(self.changed)
        return self.support / total if total else float("nan")

    @property
    def rule(self) -> str:
        """The rule in words: ``always allow issue_refund when amount <= 50``."""
        head = f"always {'allow' if self.verdict == 'approved' else 'deny'} {self.tool}"
        if not self.conditions:
            return head
        return head + " when " + " and ".join(map(str, self.conditions))

    def matches(self, call: Any) -> bool:
        """Whether the rule decides ``call`` (a :class:`~nbagent.ToolCall` or a call record)."""
        name = getattr(call, "name", None) or getattr(call, "tool", None)
        if name != self.tool:
            return False
        arguments = getattr(call, "arguments", None)
        return all(c.holds(arguments) for c in self.conditions)

    def as_rule(self) -> Rule:
        """The suggestion as the :class:`~nbagent.Rule` it proposes (data a store keeps)."""
        return Rule(self.tool, self.verdict, self.conditions)

    def accept(self, chat: Any) -> Any:
        """Put the rule into ``chat`` (:meth:`~nbagent.Chat.add_rule`) and return the chat
        (so a batch's factory can use it: ``lambda: rule.accept(Chat(...))``).

        The chat's store keeps the rule, so ``Chat.load`` and a resumed batch apply it
        again. An allow rule approves the gated calls it matches; a deny rule denies
        every call it matches before it runs, and the model reads why. Either decision
        is recorded as decided by ``"rule"``, with the rule as its reason
        (``Denied by rule: tool refund, amount > 500``), which the cards and
        ``chat.log`` show.
        """
        return chat.add_rule(self.as_rule())

    def __repr__(self) -> str:
        return f"<{self.rule}: support {self.support}, would have changed {len(self.changed)}>"


class Suggestions(list[PolicySuggestion]):
    """What :func:`suggest_policies` returns: a list of suggestions, best supported
    first, shown as a table (``frame()`` as a DataFrame)."""

    def frame(self) -> Any:
        """One row per suggestion: rule, tool, verdict, conditions, support, changed, agreement."""
        import pandas as pd

        return pd.DataFrame(
            {
                "rule": [s.rule for s in self],
                "tool": [s.tool for s in self],
                "verdict": [s.verdict for s in self],
                "conditions": [" and ".join(map(str, s.conditions)) for s in self],
                "support": [s.support for s in self],
                "changed": [len(s.changed) for s in self],
                "agreement": [s.agreement for s in self],
            }
        )

    def _repr_html_(self) -> str:
        if not self:
            return "<p>no policy the decisions support</p>"
        rows = "".join(
            f"<tr><td>{i}</td><td>{esc(s.rule)}</td><td>{s.support}</td>"
            f"<td>{len(s.changed)}</td><td>{s.agreement:.0%}</td></tr>"
            for i, s in enumerate(self)
        )
        return (
            f"{style_tag()}<div class='nba-chat'><table class='nba-cmp-table'><thead><tr>"
            "<th></th><th>rule</th><th>support</th><th>would change</th><th>agreement</th>"
            f"</tr></thead><tbody>{rows}</tbody></table></div>"
        )

    def __repr__(self) -> str:
        if not self:
            return "no policy the decisions support"
        return "\n".join(f"[{i}] {s!r}" for i, s in enumerate(self))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _people(frame: Any) -> list[dict[str, Any]]:
    """The decisions people made, as dicts, each once.

    Left out: decisions of a rule, a resolver or ``evaluate``; the rows a fork copied from
    its parent (the log's ``shared``: the parent's row is that decision); and a hosted
    call's provider row whose decision is its approval request's (the same decision, the
    log's two rows of one hosted call: same chat, same ``decided_at``). An approval with
    edited arguments counts as :data:`EDITED`.
    """
    out = []
    records = frame.to_dict("records")
    asked = {
        (r.get("chat_id"), r.get("decided_at"))
        for r in records
        if r.get("item_type") == "mcp_approval_request" and _present(r.get("decided_at"))
    }
    for row in records:
        if row.get("decision") not in ("approved", "denied"):
            continue
        by = str(row.get("decided_by") or "")
        if by_machine(by):
            continue
        shared = row.get("shared")
        if _present(shared) and bool(shared):
            continue
        if (
            row.get("item_type") == "mcp_call"
            and (row.get("chat_id"), row.get("decided_at")) in asked
        ):
            continue
        if not isinstance(row.get("arguments"), Mapping):
            row["arguments"] = {}
        edited = row.get("edited_arguments")
        approved = row["decision"] == "approved"
        if approved and isinstance(edited, Mapping) and dict(edited) != dict(row["arguments"]):
            row["decision"] = EDITED
        out.append(row)
    return out


def _present(value: Any) -> bool:
    """Not None, NaN, NA or NaT."""
    if value is None:
        return False
    try:
        return not bool(value != value)
    except (TypeError, ValueError):
        return True


def _decided(row: Mapping[str, Any]) -> dict[str, Any]:
    """A decision a rule would change, as shown (a secret argument's value as ``***``)."""
    keep = ("chat_id", "call_id", "decision", "decided_by")
    return {**{k: row.get(k) for k in keep}, "arguments": redacted(row.get("arguments"))}


def _suggestion(
    tool: str, verdict: Verdict, conditions: tuple[Condition, ...], rows: Sequence[Any]
) -> PolicySuggestion:
    matched = [r for r in rows if all(c.holds(r["arguments"]) for c in conditions)]
    agree = [r for r in matched if r["decision"] == verdict]
    other = tuple(_decided(r) for r in matched if r["decision"] != verdict)
    return PolicySuggestion(tool, verdict, conditions, len(agree), other)


def _good(s: PolicySuggestion, min_support: int, min_agreement: float) -> bool:
    return s.support >= min_support and s.agreement >= min_agreement


def _thresholds(
    tool: str, key: str, rows: Sequence[Any], min_support: int, min_agreement: float
) -> list[PolicySuggestion]:
    """The widest ``key <= t`` / ``key >= t`` rules that hold (allow below, deny above, and
    the other way round)."""
    values = sorted({r["arguments"][key] for r in rows})
    best: list[PolicySuggestion] = []
    for verdict in ("approved", "denied"):
        for op in ("<=", ">="):
            order = values if op == "<=" else list(reversed(values))
            chosen = None
            for t in order:  # widen while the rule holds; keep the widest that does
                s = _suggestion(tool, verdict, (Condition(key, op, t),), rows)
                if s.agreement >= min_agreement:
                    chosen = s
                else:
                    break
            if chosen is not None and _good(chosen, min_support, min_agreement):
                best.append(chosen)
    return best


def suggest_policies(
    source: Any,
    *,
    min_support: int = 3,
    min_agreement: float = 1.0,
    tools: Iterable[str] | None = None,
) -> Suggestions:
    """Rules the decisions people made support: always allow / always deny a tool, or its
    calls whose arguments meet a condition.

    Example::

        rules = nbagent.suggest_policies(store)
        rules                      # rule, support, the decisions it would have changed
        rules[0].accept(chat)      # e.g. always allow issue_refund when amount <= 50

    Args:
        source: A store or a store's path (every chat in it), what
            :func:`nbagent.read_log` reads (chats, a batch result, a scorecard), or a
            calls frame it returned.
        min_support: Fewest agreeing decisions a rule needs.
        min_agreement: Least share of the decisions it matches it must agree with
            (default 1.0: it changes none; lower it to see rules with exceptions, each
            exception listed in ``changed``).
        tools: Only these tools (default: every tool a person decided).

    Each decision counts once (a fork's copied rows and a hosted call's provider row are
    left out), and an approval with edited arguments counts as ``"edited"``: it supports
    no rule, and every rule matching it would have changed it.

    Returns:
        :class:`Suggestions`, most supported first: for each tool, a rule for the whole
        tool when the decisions were all one way, else rules on one argument: values
        (``region == "eu"``) and thresholds (``amount <= 50``, ``amount >= 500``). No
        rule is proposed on a secret's argument (``password``, ``api_key``): it would
        have to hold the secret.
    """
    import pandas as pd

    from ..log import read_log

    if min_support < 1:
        raise ValueError(f"min_support must be at least 1, got {min_support!r}")
    if not 0.5 < min_agreement <= 1.0:
        raise ValueError(f"min_agreement must be in (0.5, 1], got {min_agreement!r}")
    if isinstance(source, str | os.PathLike):
        from ..store import open_store

        source = open_store(source)
    frame = source if isinstance(source, pd.DataFrame) else read_log(source)
    rows = _people(frame)
    wanted = set(tools) if tools is not None else None
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if wanted is None or r["tool"] in wanted:
            by_tool.setdefault(str(r["tool"]), []).append(r)
    found: list[PolicySuggestion] = []
    for tool, decided in by_tool.items():
        whole = [_suggestion(tool, v, (), decided) for v in ("approved", "denied")]
        good = [s for s in whole if _good(s, min_support, min_agreement)]
        if good:
            found += good
            continue
        # no rule on a secret (password, api_key, ...): it would have to hold the secret,
        # shown wherever the rule reads as text and kept by the chat's store
        keys = sorted({k for r in decided for k in r["arguments"] if not secret_field(k)})
        for key in keys:
            have = [r for r in decided if key in r["arguments"]]
            values = [r["arguments"][key] for r in have]
            if values and all(_number(v) for v in values):
                found += _thresholds(tool, key, have, min_support, min_agreement)
                continue
            for value in _hashable(values):
                for verdict in ("approved", "denied"):
                    s = _suggestion(tool, verdict, (Condition(key, "==", value),), decided)
                    if _good(s, min_support, min_agreement):
                        found.append(s)
    found.sort(key=lambda s: (-s.support, len(s.changed), s.rule))
    return Suggestions(_distinct(found, by_tool))


def _hashable(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, str | bool) or _number(v):
            if v in out:
                continue
            out.append(v)
    return out


def _distinct(
    found: Sequence[PolicySuggestion], rows: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[PolicySuggestion]:
    """One suggestion per (tool, verdict, the decisions it matches): a wider threshold that
    decides the same calls as a narrower one is the same rule; rules on one argument that
    match other decisions (``region == "eu"``, ``region == "uk"``) are both kept."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for s in found:
        matched = frozenset(
            i
            for i, r in enumerate(rows.get(s.tool, ()))
            if all(c.holds(r["arguments"]) for c in s.conditions)
        )
        key = (s.tool, s.verdict, matched)
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
    return out
