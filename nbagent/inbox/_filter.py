"""Which pending calls a filter covers: by tool, by server, by argument values, by text.

One :class:`Filter` value serves the Python API (``inbox.filter(tool=..., where=...)``,
``inbox.approve({"tool": ...})``) and the widget's controls (a tool and a server
picked from lists, and a text box of ``key=pattern`` terms, see :func:`parse_text`).

Patterns are shell globs (``fnmatch``, case-sensitive) matched against a value
as text; a callable is a predicate; any other value must be equal. An argument
key may be a dotted path into nested objects (``"options.force"``).
"""

from __future__ import annotations

import fnmatch
import json
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

Pattern = str | Callable[[Any], bool] | Iterable[str] | None
"""A tool or server pattern: a glob, a list of globs (any matches), a predicate, or None (any)."""

_MISSING = object()


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
    _terms: tuple[tuple[str | None, str], ...] = field(default=(), repr=False, compare=False)

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
        object.__setattr__(self, "_terms", parse_text(self.text))

    @property
    def empty(self) -> bool:
        return self.tool is None and self.server is None and not self.where and not self._terms

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
        if self._terms:
            blob: str | None = None
            for name, pattern in self._terms:
                if name is None:
                    if blob is None:
                        blob = f"{tool} {server or ''} {_as_text(arguments)}".casefold()
                    if pattern.casefold() not in blob:
                        return False
                elif not _value_matches(pattern, lookup(arguments, name)):
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
        return ", ".join(parts) if parts else "everything"


def parse_text(text: str) -> tuple[tuple[str | None, str], ...]:
    """The widget's filter text: ``path=/tmp/* mode=w`` and free words.

    Terms are split like a shell line (quote a pattern with spaces:
    ``path="/my dir/*"``); ``key=pattern`` matches an argument, a word with no
    ``=`` must appear (case-insensitive) in the tool, server or arguments.
    Unbalanced quotes fall back to splitting on spaces.
    """
    if not text or not text.strip():
        return ()
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    terms: list[tuple[str | None, str]] = []
    for word in words:
        key, sep, pattern = word.partition("=")
        if sep and key:
            terms.append((key, pattern))
        else:
            terms.append((None, word))
    return tuple(terms)


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
    return Filter(**spec)
