"""Which pending calls a filter covers: by tool, by server, by argument values, by text.

One :class:`Filter` value serves the Python API (``inbox.filter(tool=..., where=...)``,
``inbox.approve({"tool": ...})``) and the widget's controls (a tool and a server
picked from lists, and a text box of ``key=pattern`` terms, see :func:`parse_text`).

Patterns are shell globs (``fnmatch``, case-sensitive) matched against a value
as text; a callable is a predicate; any other value must be equal. An argument
key may be a dotted path into nested objects (``"options.force"``). The text box
also compares numbers (``order_id<1030``, ``amount>=50``, ``order_id=1029``), and
a term it cannot read is named in :attr:`Filter.problems` (such a filter matches
nothing, and the Python API refuses it).
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

Pattern = str | Callable[[Any], bool] | Iterable[str] | None
"""A tool or server pattern: a glob, a list of globs (any matches), a predicate, or None (any)."""

_MISSING = object()

Term = tuple[str | None, str, str]
"""One term of the text box: ``(key, operator, pattern)``; a free word is ``(None, "", word)``."""

_COMPARISON = re.compile(r"^(?P<key>[^<>=!]*)(?P<op><=|>=|==|!=|=<|=>|<|>|=)(?P<value>.*)$", re.S)
_ORDER = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _number(value: Any) -> float | None:
    """``value`` as a number: an int or float argument, or text that reads as one; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _name_matches(pattern: Pattern, name: str | None) -> bool:
    if pattern is None:
        return True
    if callable(pattern):
        return bool(pattern(name))
    if isinstance(pattern, str):
        return name is not None and fnmatch.fnmatchcase(name, pattern)
    return any(_name_matches(p, name) for p in pattern)


def lookup(arguments: Mapping[str, Any], key: str) -> Any:
    """``arguments[key]``, following dots into nested objects; a missing key is ``_MISSING``."""
    if key in arguments:
        return arguments[key]
    value: Any = arguments
    for part in key.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def _value_matches(expected: Any, value: Any) -> bool:
    if value is _MISSING:
        return False
    if callable(expected):
        return bool(expected(value))
    if isinstance(expected, str):
        return fnmatch.fnmatchcase(_as_text(value), expected)
    return bool(value == expected)


@dataclass(frozen=True)
class Filter:
    """What a filter asks for; every part given must hold.

    Attributes:
        tool: A glob (``"write_*"``), a list of globs, or a predicate on the tool's name.
        server: The same, on the MCP server's label (a local tool has none: only a
            predicate, or no server filter, matches it).
        where: Argument values: ``{"path": "/tmp/*", "force": True, "size": lambda n: n < 10}``
            (globs match the value as text; dotted keys reach nested objects), or one
            predicate on the whole arguments dict.
        text: The widget's text box: ``key=pattern`` terms and free words (see
            :func:`parse_text`).
    """

    tool: Pattern = None
    server: Pattern = None
    where: Mapping[str, Any] | Callable[[dict[str, Any]], bool] | None = None
    text: str = ""
    _terms: tuple[Term, ...] = field(default=(), repr=False, compare=False)
    _problems: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.where is not None and not (callable(self.where) or isinstance(self.where, Mapping)):
            raise TypeError(
                f"where= takes a dict of argument patterns or a predicate, "
                f"got {type(self.where).__name__}"
            )
        if isinstance(self.where, Mapping):
            for key in self.where:
                if not isinstance(key, str):
                    raise TypeError(f"where= keys are argument names, got {key!r}")
        terms, problems = read_text(self.text)
        object.__setattr__(self, "_terms", terms)
        object.__setattr__(self, "_problems", problems)

    @property
    def empty(self) -> bool:
        return (
            self.tool is None
            and self.server is None
            and not self.where
            and not self._terms
            and not self._problems
        )

    @property
    def problems(self) -> tuple[str, ...]:
        """What the text box says that the filter cannot read, one sentence per term.

        A filter with problems matches nothing (so "approve all matching" never
        covers calls it was not meant to); :meth:`check` raises them.
        """
        return self._problems

    def check(self) -> Filter:
        """This filter, or ``ValueError`` naming every term it cannot read."""
        if self._problems:
            raise ValueError("the filter " + "; ".join(self._problems))
        return self

    def with_ui(self, tool: str, server: str, text: str) -> Filter:
        """This filter with the widget's controls (``""``: any) replacing tool, server and text."""
        return replace(self, tool=tool or None, server=server or None, text=text)

    def matches(self, tool: str, server: str | None, arguments: dict[str, Any]) -> bool:
        if not (_name_matches(self.tool, tool) and _name_matches(self.server, server)):
            return False
        if callable(self.where):
            if not self.where(arguments):
                return False
        elif self.where:
            for key, expected in self.where.items():
                if not _value_matches(expected, lookup(arguments, key)):
                    return False
        if self._problems:
            return False
        if self._terms:
            blob: str | None = None
            for name, op, pattern in self._terms:
                if name is None:
                    if blob is None:
                        blob = f"{tool} {server or ''} {_as_text(arguments)}".casefold()
                    if pattern.casefold() not in blob:
                        return False
                elif not _term_matches(op, pattern, lookup(arguments, name)):
                    return False
        return True

    def describe(self) -> str:
        """The filter in words (what the widget's preview says it covers)."""
        parts = []
        for label, pattern in (("tool", self.tool), ("server", self.server)):
            if pattern is None:
                continue
            if callable(pattern):
                parts.append(f"{label} by a predicate")
            elif isinstance(pattern, str):
                parts.append(f"{label} {pattern}")
            else:
                parts.append(f"{label} in {', '.join(pattern)}")
        if callable(self.where):
            parts.append("arguments by a predicate")
        elif self.where:
            for key, value in self.where.items():
                shown = "a predicate" if callable(value) else _as_text(value)
                parts.append(f"{key}={shown}")
        if self.text.strip():
            parts.append(self.text.strip())
        if self._problems:
            return "nothing: the filter " + "; ".join(self._problems)
        return ", ".join(parts) if parts else "everything"


def _term_matches(op: str, pattern: str, value: Any) -> bool:
    if value is _MISSING:
        return False
    if op == "=":
        wanted = _number(pattern)
        have = _number(value) if not isinstance(value, str) else None
        if wanted is not None and have is not None:  # order_id=1029 matches 1029 and 1029.0
            return have == wanted
        return _value_matches(pattern, value)
    have = _number(value)
    wanted = _number(pattern)
    return have is not None and wanted is not None and bool(_ORDER[op](have, wanted))


def read_text(text: str) -> tuple[tuple[Term, ...], tuple[str, ...]]:
    """The widget's filter text as terms, and what in it cannot be read.

    Terms are split like a shell line (quote a pattern with spaces:
    ``path="/my dir/*"``). ``key=pattern`` matches an argument (a glob on its text,
    or equal numbers when both are numbers); ``key<n``, ``key<=n``, ``key>n``,
    ``key>=n`` compare a numeric argument (a number, or text that reads as one)
    with the number ``n``; a word with no operator must appear (case-insensitive)
    in the tool, server or arguments. Unbalanced quotes fall back to splitting on
    spaces.

    Returns:
        ``(terms, problems)``: each problem is a sentence naming one term that
        has an operator but no key, a comparison with no number, or an operator
        the box does not know (``!=``, ``==``, ``=<``).
    """
    if not text or not text.strip():
        return (), ()
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    terms: list[Term] = []
    problems: list[str] = []
    for word in words:
        m = _COMPARISON.match(word)
        if m is None:
            terms.append((None, "", word))
            continue
        key, op, value = m.group("key"), m.group("op"), m.group("value")
        if op in ("==", "!=", "=<", "=>"):
            known = {"==": "=", "=<": "<=", "=>": ">="}.get(op)
            problems.append(
                f"does not understand {word!r}: {op} is not an operator here"
                + (f" (write {key}{known}{value})" if known else " (use =, <, <=, >, >=)")
            )
        elif not key:
            problems.append(
                f"does not understand {word!r}: name the argument before {op} (order_id{op}1030)"
            )
        elif op != "=" and _number(value) is None:
            problems.append(
                f"does not understand {word!r}: {op} compares numbers, "
                f"and {value!r} is not one ({key}{op}1030)"
            )
        else:
            terms.append((key, op, value))
    return tuple(terms), tuple(problems)


def parse_text(text: str) -> tuple[Term, ...]:
    """The terms of the widget's filter text (see :func:`read_text`); problems dropped."""
    return read_text(text)[0]


def as_filter(spec: Filter | Mapping[str, Any]) -> Filter:
    """A :class:`Filter` from itself or from a dict of its fields (``tool``, ``where``...)."""
    if isinstance(spec, Filter):
        return spec
    unknown = set(spec) - {"tool", "server", "where", "text"}
    if unknown:
        raise TypeError(
            f"a filter takes tool, server, where and text; got {', '.join(sorted(unknown))} "
            "(argument values go in where={...})"
        )
    return Filter(**spec).check()
