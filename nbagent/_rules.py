"""Rules as data: always allow / always deny a tool's calls whose arguments meet conditions.

A :class:`Rule` names a tool, a verdict and argument :class:`Condition` s (all must hold;
none: every call of the tool). It is plain data, so a chat's store keeps it and
``Chat.load`` (or a resumed batch) applies it again in any process, and it reads as
text: ``tool refund, amount > 500``. ``chat.add_rule(rule)`` puts one into a chat; the
approval gate applies it (see ``_approvals.py``): a deny rule denies every call it
matches as it is requested (a call of an ungated tool too), with a structured denial
naming the rule; an allow rule approves the gated calls it matches. Either is recorded
as decided by ``"rule"`` with the rule in the reason (``Denied by rule: tool refund,
amount > 500``), which the cards and ``chat.log`` show.

Conditions: ``==``, ``!=``, ``in`` (one of a list), ``<``, ``<=``, ``>``, ``>=`` (numbers),
``matches`` (a regular expression found in a string, :func:`re.search`). A missing
argument, or one of the wrong type, never meets a condition.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Literal

from ._secrets import redacted, scrub, secret_field

RULE = "rule"
"""Who a rule's decision is recorded as decided by (``decided_by``)."""
OPS = ("==", "!=", "in", "<", "<=", ">", ">=", "matches")
_ORDER = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}
_VERDICTS = {"allow": "approved", "approved": "approved", "deny": "denied", "denied": "denied"}

RuleVerdict = Literal["approved", "denied"]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Condition:
    """One argument condition of a :class:`Rule`: ``key op value``.

    Attributes:
        key: The argument's name.
        op: ``==``, ``!=``, ``in`` (``value`` is a list), ``<``, ``<=``, ``>``, ``>=``
            (``value`` is a number), or ``matches`` (``value`` is a regular expression,
            searched for in the argument's text).
        value: What the argument is compared with (JSON data).

    Raises:
        ValueError: An unknown ``op``, a value that does not fit it (a threshold that is
            not a number, ``in`` without a list, a regular expression that does not
            compile) or that is not JSON data.
    """

    key: str
    op: str
    value: Any
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"a condition's key must be an argument name, got {self.key!r}")
        if self.op not in OPS:
            raise ValueError(f"unknown condition operator {self.op!r} (one of: {', '.join(OPS)})")
        try:
            json.dumps(self.value, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(
                f"the value of condition {self.key} {self.op} must be JSON data (it is stored "
                f"with the chat), got {self._value_repr()}"
            ) from None
        if self.op in _ORDER and not _number(self.value):
            raise ValueError(f"{self.key} {self.op} needs a number, got {self._value_repr()}")
        if self.op == "in":
            if not isinstance(self.value, list | tuple):
                raise ValueError(f"{self.key} in needs a list of values, got {self._value_repr()}")
            object.__setattr__(self, "value", list(self.value))
        if self.op == "matches":
            if not isinstance(self.value, str):
                raise ValueError(f"{self.key} matches needs a regular expression (text)")
            try:
                object.__setattr__(self, "_pattern", re.compile(self.value))
            except re.error as exc:
                raise ValueError(f"{self.key} matches {self._value_repr()}: {exc}") from None

    def __hash__(self) -> int:
        return hash((self.key, self.op, json.dumps(self.value, sort_keys=True)))

    def holds(self, arguments: Mapping[str, Any] | None) -> bool:
        """Whether ``arguments`` meet the condition (a missing key never does)."""
        if not isinstance(arguments, Mapping) or self.key not in arguments:
            return False
        given = arguments[self.key]
        op = self.op
        if op == "==":
            return _same(given, self.value)
        if op == "!=":
            return not _same(given, self.value)
        if op == "in":
            return any(_same(given, v) for v in self.value)
        if op == "matches":
            assert self._pattern is not None
            return isinstance(given, str) and self._pattern.search(given) is not None
        return _number(given) and _ORDER[op](float(given), float(self.value))

    def __str__(self) -> str:
        return self.text()

    def text(self, secrets: Iterable[str] = ()) -> str:
        """The condition as text (``amount > 500``): a secret's value (``password == ...``)
        as ``***``, and in a value what looks like a key, URL credentials, a password or
        one of ``secrets`` (the chat's provider's key) too, hidden before a long value is
        cut."""
        value = "***" if secret_field(self.key) else _shown(self.value, tuple(secrets))
        return f"{self.key} {self.op} {value}"

    def __repr__(self) -> str:
        return f"Condition(key={self.key!r}, op={self.op!r}, value={self._value_repr()})"

    def _value_repr(self) -> str:
        """The value as its repr, a secret's (``password == ...``) as ``'***'`` and what
        looks like a key hidden: for reprs and errors, which reach the screen."""
        return "'***'" if secret_field(self.key) else repr(redacted(self.value))

    def as_dict(self) -> dict[str, Any]:
        """The condition as stored: ``{"key": ..., "op": ..., "value": ...}``."""
        return {"key": self.key, "op": self.op, "value": self.value}


def _same(given: Any, value: Any) -> bool:
    """Equal as JSON data: ``True`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(given, bool) or isinstance(value, bool):
        return isinstance(given, bool) and isinstance(value, bool) and given is value
    return bool(given == value)


def _shown(value: Any, secrets: tuple[str, ...] = ()) -> str:
    """A condition's value as its text (the rule's, so its decisions' reason, which the model
    reads with a denial): what looks like a key, URL credentials or a password, and each of
    ``secrets``, as ``***``, hidden before a long text is cut (a cut key keeps no shape to be
    found by, and no whole key to be replaced)."""
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    if isinstance(value, str):
        text = json.dumps(scrub(value, secrets), ensure_ascii=False)
        return text if len(text) <= 62 else text[:60] + '…"'
    return scrub(json.dumps(value, ensure_ascii=False), secrets)


@dataclass(frozen=True)
class Rule:
    """Always allow, or always deny, a tool's calls (optionally only those whose arguments
    meet every condition). Data: a chat's store keeps the rules added to it.

    Example::

        chat.add_rule(nbagent.Rule.deny("refund", nbagent.Condition("amount", ">", 500)))
        chat.add_rule(nbagent.Rule.allow("refund", ("amount", "<=", 50)))

    Attributes:
        tool: The tool it decides.
        verdict: ``"approved"`` (always allow) or ``"denied"`` (always deny).
        conditions: The argument conditions, all of which must hold; empty: every call.
    """

    tool: str
    verdict: RuleVerdict
    conditions: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool:
            raise ValueError(f"a rule's tool must be a tool name, got {self.tool!r}")
        verdict = _VERDICTS.get(self.verdict)
        if verdict is None:
            raise ValueError(f"a rule's verdict is 'approved' or 'denied', got {self.verdict!r}")
        object.__setattr__(self, "verdict", verdict)
        object.__setattr__(self, "conditions", _conditions(self.conditions))

    @classmethod
    def allow(cls, tool: Any, *conditions: Condition | tuple[str, str, Any]) -> Rule:
        """Always allow ``tool``'s calls meeting ``conditions`` (``Condition`` s or
        ``(key, op, value)`` triples)."""
        return cls(_tool_name(tool), "approved", _conditions(conditions))

    @classmethod
    def deny(cls, tool: Any, *conditions: Condition | tuple[str, str, Any]) -> Rule:
        """Always deny ``tool``'s calls meeting ``conditions`` (``Condition`` s or
        ``(key, op, value)`` triples)."""
        return cls(_tool_name(tool), "denied", _conditions(conditions))

    def matches(self, call: Any) -> bool:
        """Whether the rule decides ``call`` (a :class:`~nbagent.ToolCall` or a call record):
        its tool, and every condition holds on its arguments."""
        name = getattr(call, "name", None) or getattr(call, "tool", None)
        if name != self.tool:
            return False
        arguments = getattr(call, "arguments", None)
        return all(c.holds(arguments) for c in self.conditions)

    @property
    def reason(self) -> str:
        """What a decision by the rule says: ``Denied by rule: tool refund, amount > 500``
        (a secret in a condition as ``***``: see :meth:`Condition.text`; the chat hides
        its provider's key too: :meth:`reason_hiding`)."""
        return self.reason_hiding()

    def reason_hiding(self, secrets: Iterable[str] = ()) -> str:
        """:attr:`reason` with ``secrets`` (a chat's provider's key) hidden in its conditions'
        values before a long one is cut, so no part of one is left."""
        verdict = "Allowed" if self.verdict == "approved" else "Denied"
        return f"{verdict} by rule: {self.text(secrets)}"

    def __str__(self) -> str:
        return self.text()

    def text(self, secrets: Iterable[str] = ()) -> str:
        """The rule as text, ``tool refund, amount > 500`` (see :meth:`Condition.text`)."""
        hidden = tuple(secrets)
        return ", ".join([f"tool {self.tool}", *(c.text(hidden) for c in self.conditions)])

    def as_dict(self) -> dict[str, Any]:
        """The rule as a store keeps it (JSON data; :meth:`from_dict` reads it back)."""
        return {
            "tool": self.tool,
            "verdict": self.verdict,
            "conditions": [c.as_dict() for c in self.conditions],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Rule:
        """A rule from :meth:`as_dict`'s form.

        Raises:
            ValueError: ``data`` is not a rule in that form (the message says what is wrong).
        """
        if not isinstance(data, Mapping) or not isinstance(data.get("conditions", []), list):
            raise ValueError(
                f"a rule is {{'tool': ..., 'verdict': ..., 'conditions': [...]}}, got {data!r}"
            )
        conditions = []
        for c in data.get("conditions", []):
            if not isinstance(c, Mapping) or set(c) != {"key", "op", "value"}:
                raise ValueError(f"a condition is {{'key', 'op', 'value'}}, got {c!r}")
            conditions.append(Condition(c["key"], c["op"], c["value"]))
        return cls(data.get("tool"), data.get("verdict"), tuple(conditions))  # type: ignore[arg-type]


def _tool_name(tool: Any) -> str:
    name = tool if isinstance(tool, str) else getattr(tool, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"a rule's tool is a tool or its name, got {tool!r}")
    return name


def _conditions(given: Iterable[Any]) -> tuple[Condition, ...]:
    out: list[Condition] = []
    for c in given:
        if isinstance(c, Condition):
            out.append(c)
        elif isinstance(c, tuple | list) and len(c) == 3:
            out.append(Condition(*c))
        else:
            raise ValueError(f"a condition is a Condition or (key, op, value), got {c!r}")
    return tuple(out)


def first_match(rules: Iterable[Rule], call: Any, verdict: RuleVerdict) -> Rule | None:
    """The first of ``rules`` with ``verdict`` that matches ``call``."""
    for rule in rules:
        if rule.verdict == verdict and rule.matches(call):
            return rule
    return None


def denied_edit(
    rules: Iterable[Rule], call: Any, arguments: Mapping[str, Any], secrets: Iterable[str] = ()
) -> str | None:
    """Why an edit of ``call`` to ``arguments`` cannot be approved (a deny rule matches the
    call as edited: a call one matches never runs, with the model's arguments or a
    person's), else ``None``. The rule's reason is made hiding ``secrets`` (a chat's
    provider's key: :meth:`Rule.reason_hiding`) before a long value is cut."""
    edited = SimpleNamespace(name=call.name, arguments=arguments)
    rule = first_match(rules, edited, "denied")
    if rule is None:
        return None
    return (
        f"{call.name}({call.id}) cannot be approved with these arguments: "
        f"{rule.reason_hiding(secrets)} (a call a deny rule matches never runs)"
    )
